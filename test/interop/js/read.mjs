// Reads a Mink table with clients written elsewhere and prints what each saw as one JSON
// object on stdout, for the Go test (../interop_test.go) to compare with what was
// produced. Each section runs on its own: one client failing does not hide another's
// result.
//
//   - iceberg-js: the REST catalog (OAuth2 client credentials, namespaces, tables,
//     existence, load, schema, snapshot ids as JavaScript parses them);
//   - rest: the REST spec's read side a client relies on, with fetch (config endpoints,
//     pagination, snapshots=refs, ETag and 304, 406, server-side scan planning);
//   - icebird: the whole table from the metadata the catalog loaded, its manifests and
//     data files read over Mink's S3 (icebird has no REST catalog or S3 endpoint setting:
//     its s3:// reads are routed to Mink's endpoint, signed by @aws-sdk/client-s3);
//   - icebirdUpsert: an upsert table with icebird, which applies its position deletes;
//   - hyparquet: every data file read with ranged S3 GETs;
//   - s3: @aws-sdk/client-s3 GET, HEAD, ranges, conditionals, errors, listing;
//   - duckdb: read_parquet over the data files fetched through S3 to local disk.
//
// Input: the JSON file named by INTEROP_INPUT (see interop_test.go, readInput).
import { readFile, writeFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  S3Client, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, ListBucketsCommand, HeadBucketCommand,
} from '@aws-sdk/client-s3'
import { IcebergRestCatalog } from 'iceberg-js'
import { icebergRead } from 'icebird'
import { parquetMetadataAsync, parquetReadObjects } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'
import { DuckDBInstance } from '@duckdb/node-api'

const input = JSON.parse(await readFile(process.env.INTEROP_INPUT, 'utf8'))
const [namespace, tableName] = input.table.split('.')
const out = {}

// A section's result: what it returns, or the error that stopped it.
async function section(name, fn) {
  try {
    out[name] = { ok: true, ...(await fn()) }
  } catch (err) {
    out[name] = { ok: false, error: String(err?.stack || err) }
  }
}

// check records one expectation of a section: the Go test fails on every false one.
function checker() {
  const checks = []
  const check = (name, ok, detail) => checks.push({ name, ok: Boolean(ok), detail: ok ? undefined : detail })
  return {
    checks,
    check,
    // attempt is a check whose calls may throw: a throw fails that check alone.
    async attempt(name, fn) {
      try {
        const [ok, detail] = await fn()
        check(name, ok, detail)
      } catch (err) {
        check(name, false, { threw: `${err.name}: ${err.message}`, status: err.$metadata?.httpStatusCode })
      }
    },
  }
}

// A row as every reader reports it: the Kafka position and each column, numbers that
// need 64 bits as decimal strings, the instant in microseconds since 1970.
function canonical(r) {
  const num = (v) => (v === null || v === undefined ? null : Number(v))
  const micros = (v) => {
    if (v === null || v === undefined) return null
    if (v instanceof Date) return (BigInt(v.getTime()) * 1000n).toString()
    return BigInt(v).toString()
  }
  return {
    p: Number(r._kafka_partition),
    o: String(r._kafka_offset),
    id: r.id === null || r.id === undefined ? null : String(r.id),
    name: r.name ?? null,
    price: num(r.price),
    active: r.active ?? null,
    qty: num(r.qty),
    city: r.city ?? null,
    ts: micros(r.ts),
  }
}

const s3 = new S3Client({
  endpoint: input.s3URL, forcePathStyle: true, region: 'us-east-1',
  credentials: { accessKeyId: input.readerID, secretAccessKey: input.readerSecret },
  // No CRC checks on GET: Mink serves no checksum headers, and ranges have none.
  responseChecksumValidation: 'WHEN_REQUIRED', requestChecksumCalculation: 'WHEN_REQUIRED',
})

// s3Location splits s3://bucket/key.
function s3Location(uri) {
  const m = /^s3a?:\/\/([^/]+)\/(.+)$/.exec(uri)
  if (!m) throw new Error(`not an s3:// location: ${uri}`)
  return { Bucket: m[1], Key: m[2] }
}

async function getBytes(loc, extra = {}) {
  const res = await s3.send(new GetObjectCommand({ ...loc, ...extra }))
  return { res, bytes: Buffer.from(await res.Body.transformToByteArray()) }
}

// What an S3 error looks like to the SDK: its HTTP status and code.
async function s3Error(cmd) {
  try {
    const res = await s3.send(cmd)
    if (res.Body) await res.Body.transformToByteArray()
    return { status: res.$metadata.httpStatusCode, code: '' }
  } catch (err) {
    return { status: err.$metadata?.httpStatusCode, code: err.name, message: err.message,
      contentRange: err.$response?.headers?.['content-range'] }
  }
}

// --- The catalog ---

let token
let metadata
await section('token', async () => {
  // OAuth2 client credentials, as Spark's credential=id:secret does.
  const res = await fetch(`${input.catalogURL}/v1/oauth/tokens`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials', client_id: input.readerID, client_secret: input.readerSecret, scope: 'catalog',
    }),
  })
  const body = await res.json()
  if (res.status !== 200 || !body.access_token) throw new Error(`token: ${res.status} ${JSON.stringify(body)}`)
  token = body.access_token
  return { tokenType: body.token_type }
})

await section('icebergjs', async () => {
  const catalog = new IcebergRestCatalog({ baseUrl: input.catalogURL, auth: { type: 'bearer', token } })
  const namespaces = await catalog.listNamespaces()
  const tables = await catalog.listTables({ namespace: [namespace] })
  const nsExists = await catalog.namespaceExists({ namespace: [namespace] })
  const nsMissing = await catalog.namespaceExists({ namespace: ['no_such_namespace'] })
  const exists = await catalog.tableExists({ namespace: [namespace], name: tableName })
  const missing = await catalog.tableExists({ namespace: [namespace], name: 'no_such_table' })
  metadata = await catalog.loadTable({ namespace: [namespace], name: tableName })
  const schema = metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id'])
  // The ids exactly as the server wrote them, beside what JSON.parse made of them.
  const raw = await (await fetch(`${input.catalogURL}/v1/namespaces/${namespace}/tables/${tableName}`, {
    headers: { Authorization: `Bearer ${token}` },
  })).text()
  const rawIds = [...raw.matchAll(/"snapshot-id"\s*:\s*(-?\d+)/g)].map((m) => m[1])
  return {
    namespaces: namespaces.map((n) => n.namespace),
    tables: tables.map((t) => [...t.namespace, t.name].join('.')),
    nsExists, nsMissing, exists, missing,
    formatVersion: metadata['format-version'],
    location: metadata.location,
    fields: schema.fields.map((f) => ({ id: f.id, name: f.name, type: typeof f.type === 'string' ? f.type : f.type.type, required: f.required })),
    currentSnapshotId: String(metadata['current-snapshot-id']),
    snapshotIds: (metadata.snapshots || []).map((s) => String(s['snapshot-id'])),
    rawSnapshotIds: [...new Set(rawIds)],
  }
})

await section('rest', async () => {
  const { checks, check } = checker()
  const auth = { Authorization: `Bearer ${token}` }
  const get = (path, headers = {}) => fetch(`${input.catalogURL}${path}`, { headers: { ...auth, ...headers } })
  const tablePath = `/v1/namespaces/${namespace}/tables/${tableName}`

  const config = await (await get('/v1/config')).json()
  const endpoints = config.endpoints || []
  for (const e of ['GET /v1/{prefix}/namespaces', 'GET /v1/{prefix}/namespaces/{namespace}/tables',
    'GET /v1/{prefix}/namespaces/{namespace}/tables/{table}', 'HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}',
    'POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan']) {
    check(`config advertises ${e}`, endpoints.includes(e), endpoints)
  }

  // Pagination: one table a page, following next-page-token to the end. The spec: a
  // client starts paging with an empty pageToken; without one the list comes whole.
  const whole = await (await get(`/v1/namespaces/${namespace}/tables?pageSize=1`)).json()
  check('without pageToken the list comes whole', whole.identifiers?.length === input.tables.length && !whole['next-page-token'], whole)
  const seen = []
  let page = await (await get(`/v1/namespaces/${namespace}/tables?pageSize=1&pageToken=`)).json()
  check('pageSize=1 gives one table a page', page.identifiers?.length === 1, page)
  for (let i = 0; i < 10 && page.identifiers; i++) {
    seen.push(...page.identifiers.map((t) => t.name))
    if (!page['next-page-token']) break
    page = await (await get(`/v1/namespaces/${namespace}/tables?pageSize=1&pageToken=${encodeURIComponent(page['next-page-token'])}`)).json()
  }
  check('the pages list every table once', JSON.stringify([...seen].sort()) === JSON.stringify([...input.tables].sort()),
    { seen, want: input.tables })

  // snapshots=refs: only the snapshots a branch or tag names; a bad value is a 400.
  const refs = await (await get(`${tablePath}?snapshots=refs`)).json()
  const refIds = new Set(Object.values(refs.metadata?.refs || {}).map((r) => String(r['snapshot-id'])))
  const refSnaps = (refs.metadata?.snapshots || []).map((s) => String(s['snapshot-id']))
  check('snapshots=refs returns only referenced snapshots', refSnaps.length === refIds.size && refSnaps.every((id) => refIds.has(id)),
    { refs: [...refIds], snapshots: refSnaps.length })
  const bogus = await get(`${tablePath}?snapshots=bogus`)
  const bogusBody = await bogus.json().catch(() => ({}))
  check('snapshots=bogus is a 400 in the error envelope', bogus.status === 400 && bogusBody.error?.code === 400,
    { status: bogus.status, body: bogusBody })

  // ETag: a second load with If-None-Match is a 304 while nothing changed.
  const first = await get(tablePath)
  await first.arrayBuffer()
  const etag = first.headers.get('etag')
  check('a table load has an ETag', Boolean(etag), Object.fromEntries(first.headers))
  if (etag) {
    const again = await get(tablePath, { 'If-None-Match': etag })
    check('If-None-Match with the ETag is a 304', again.status === 304, { status: again.status })
  }

  // A write the catalog does not do: 406 UnsupportedOperationException, as the spec says.
  const create = await fetch(`${input.catalogURL}/v1/namespaces`, {
    method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ namespace: ['made_here'] }),
  })
  const createBody = await create.json().catch(() => ({}))
  check('an unsupported write is a 406 UnsupportedOperationException',
    create.status === 406 && createBody.error?.type === 'UnsupportedOperationException', { status: create.status, body: createBody })

  // Server-side scan planning: every data file of the snapshot, in one round trip.
  const plan = await fetch(`${input.catalogURL}${tablePath}/plan`, {
    method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({}),
  })
  const planBody = await plan.json().catch(() => ({}))
  const planned = (planBody['file-scan-tasks'] || []).map((t) => t['data-file']?.['file-path']).sort()
  check('a plan without a filter completes with every data file', plan.status === 200 && planBody.status === 'completed' &&
    JSON.stringify(planned) === JSON.stringify([...input.dataFiles.map((f) => f.path)].sort()),
    { status: plan.status, planStatus: planBody.status, planned: planned.length, want: input.dataFiles.length, error: planBody.error })
  return { checks }
})

// --- icebird, over Mink's S3 ---

// icebird fetches https://<bucket>.s3.amazonaws.com/<key> for s3://<bucket>/<key>: route
// those to Mink's endpoint through the SDK, which signs them (SigV4) as the reader.
const realFetch = globalThis.fetch
globalThis.fetch = async (url, init = {}) => {
  const m = /^https:\/\/([^/.]+)\.s3\.amazonaws\.com\/(.+)$/.exec(String(url))
  if (!m) return realFetch(url, init)
  const loc = { Bucket: m[1], Key: decodeURIComponent(m[2]) }
  const range = new Headers(init.headers).get('range') || undefined
  if ((init.method || 'GET') === 'HEAD') {
    const h = await s3.send(new HeadObjectCommand(loc))
    return new Response(null, { status: 200, headers: { 'Content-Length': String(h.ContentLength) } })
  }
  const { res, bytes } = await getBytes(loc, range ? { Range: range } : {})
  return new Response(bytes, { status: res.$metadata.httpStatusCode, headers: { 'Content-Length': String(bytes.length) } })
}

await section('icebird', async () => {
  if (!metadata) throw new Error('no table metadata: the iceberg-js load failed')
  const rows = await icebergRead({ tableUrl: metadata.location, metadata })
  return { rows: rows.map(canonical) }
})

// The upsert table: icebird applies the current snapshot's position delete files (from
// its delete manifests) to the data files it reads. Keys and values are bytes (a raw
// table), reported in base64.
await section('icebirdUpsert', async () => {
  const catalog = new IcebergRestCatalog({ baseUrl: input.catalogURL, auth: { type: 'bearer', token } })
  const md = await catalog.loadTable({ namespace: [namespace], name: input.upsertTable })
  const snap = (md.snapshots || []).find((s) => s['snapshot-id'] === md['current-snapshot-id'])
  if (!snap) throw new Error(`${input.upsertTable}: no current snapshot`)
  const b64 = (v) => (v === null || v === undefined ? null : Buffer.from(v).toString('base64'))
  const rows = await icebergRead({ tableUrl: md.location, metadata: md })
  return {
    snapshotId: String(snap['snapshot-id']),
    summary: Object.fromEntries(Object.entries(snap.summary || {}).map(([k, v]) => [k, String(v)])),
    rows: rows.map((r) => ({ p: Number(r._kafka_partition), o: String(r._kafka_offset), key: b64(r._kafka_key), value: b64(r.value) })),
  }
})

await section('hyparquet', async () => {
  const rows = []
  for (const f of input.dataFiles) {
    const loc = s3Location(f.path)
    const file = {
      byteLength: f.size,
      async slice(start, end) {
        const { res, bytes } = await getBytes(loc, { Range: `bytes=${start}-${(end ?? f.size) - 1}` })
        if (res.$metadata.httpStatusCode !== 206) throw new Error(`range GET of ${f.path}: ${res.$metadata.httpStatusCode}`)
        return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)
      },
    }
    const md = await parquetMetadataAsync(file)
    const got = await parquetReadObjects({ file, metadata: md, compressors })
    if (got.length !== f.records) throw new Error(`${f.path}: ${got.length} rows, the manifest says ${f.records}`)
    rows.push(...got.map(canonical))
  }
  return { rows }
})

// --- @aws-sdk/client-s3 ---

await section('s3', async () => {
  const { checks, check, attempt } = checker()
  const f = input.dataFiles[0]
  const loc = s3Location(f.path)
  const whole = await getBytes(loc)
  check('GET returns the whole file', whole.res.$metadata.httpStatusCode === 200 && whole.bytes.length === f.size,
    { status: whole.res.$metadata.httpStatusCode, size: whole.bytes.length, want: f.size })
  check('GET carries PAR1 at both ends', whole.bytes.subarray(0, 4).toString() === 'PAR1' && whole.bytes.subarray(-4).toString() === 'PAR1', {})
  const head = await s3.send(new HeadObjectCommand(loc))
  check('HEAD gives the size, ETag and Last-Modified', head.ContentLength === f.size && head.ETag === whole.res.ETag && head.LastModified instanceof Date,
    { length: head.ContentLength, etag: head.ETag, getEtag: whole.res.ETag, lastModified: String(head.LastModified) })

  await attempt('Range bytes=4-99 is a 206 of those bytes', async () => {
    const part = await getBytes(loc, { Range: 'bytes=4-99' })
    return [part.res.$metadata.httpStatusCode === 206 && part.bytes.equals(whole.bytes.subarray(4, 100)) &&
      part.res.ContentRange === `bytes 4-99/${f.size}`,
    { status: part.res.$metadata.httpStatusCode, range: part.res.ContentRange, size: part.bytes.length }]
  })
  await attempt('Range bytes=-8 is the last 8 bytes', async () => {
    const suffix = await getBytes(loc, { Range: 'bytes=-8' })
    return [suffix.res.$metadata.httpStatusCode === 206 && suffix.bytes.equals(whole.bytes.subarray(-8)),
      { status: suffix.res.$metadata.httpStatusCode, range: suffix.res.ContentRange }]
  })
  await attempt('Range bytes=<n>- runs to the end', async () => {
    const open = await getBytes(loc, { Range: `bytes=${f.size - 10}-` })
    return [open.res.$metadata.httpStatusCode === 206 && open.bytes.equals(whole.bytes.subarray(-10)),
      { status: open.res.$metadata.httpStatusCode, range: open.res.ContentRange }]
  })
  for (const r of ['bytes=5-2', 'bytes=0-1,5-6', 'items=0-5']) {
    await attempt(`an invalid or multiple Range (${r}) is ignored: 200 with the whole file`, async () => {
      const ignored = await getBytes(loc, { Range: r })
      return [ignored.res.$metadata.httpStatusCode === 200 && ignored.bytes.equals(whole.bytes),
        { status: ignored.res.$metadata.httpStatusCode, size: ignored.bytes.length }]
    })
  }
  const beyond = await s3Error(new GetObjectCommand({ ...loc, Range: `bytes=${f.size + 10}-` }))
  check('a Range past the end is 416 InvalidRange', beyond.status === 416 && beyond.code === 'InvalidRange', beyond)
  check('a 416 says Content-Range: bytes */<size>', beyond.contentRange === `bytes */${f.size}`, beyond)

  const etag = whole.res.ETag
  const future = new Date(Date.now() + 3600e3)
  const past = new Date(Date.UTC(2000, 0, 1))
  const cond = [
    ['If-None-Match with its ETag is 304', { IfNoneMatch: etag }, 304],
    ['If-Match with another ETag is 412', { IfMatch: '"not-the-etag"' }, 412],
    ['If-Match with its ETag is 200', { IfMatch: etag }, 200],
    ['If-Modified-Since after it changed is 304', { IfModifiedSince: future }, 304],
    ['If-Unmodified-Since before it changed is 412', { IfUnmodifiedSince: past }, 412],
  ]
  for (const [name, extra, status] of cond) {
    const r = await s3Error(new GetObjectCommand({ ...loc, ...extra }))
    check(name, r.status === status, r)
  }
  const none = await s3Error(new GetObjectCommand({ Bucket: loc.Bucket, Key: loc.Key + '.missing' }))
  check('a key that is not there is 404 NoSuchKey', none.status === 404 && none.code === 'NoSuchKey', none)
  const wrong = new S3Client({
    endpoint: input.s3URL, forcePathStyle: true, region: 'us-east-1',
    credentials: { accessKeyId: input.readerID, secretAccessKey: 'x' + input.readerSecret },
  })
  let bad
  try {
    await wrong.send(new HeadObjectCommand(loc))
    bad = { status: 200 }
  } catch (err) {
    bad = { status: err.$metadata?.httpStatusCode, code: err.name }
  }
  check('a wrong secret is refused (403)', bad.status === 403, bad)

  // Listing: the bucket, the table's folders, every data file, one key a page.
  await attempt('ListBuckets names the bucket', async () => {
    const b = await s3.send(new ListBucketsCommand({}))
    return [(b.Buckets || []).some((x) => x.Name === loc.Bucket), b.Buckets]
  })
  const hb = await s3Error(new HeadBucketCommand({ Bucket: loc.Bucket }))
  check('HeadBucket is 200', hb.status === 200, hb)
  const prefix = loc.Key.slice(0, loc.Key.lastIndexOf('/') + 1)
  const listed = []
  let token_
  let pages = 0
  try {
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: loc.Bucket, Prefix: prefix, MaxKeys: 1, ContinuationToken: token_ }))
      pages++
      listed.push(...(page.Contents || []).map((c) => ({ key: c.Key, size: c.Size })))
      token_ = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (token_ && pages < 1000)
    const want = input.dataFiles.filter((d) => s3Location(d.path).Key.startsWith(prefix))
    check('ListObjectsV2 pages (MaxKeys=1) list every data file of the folder with its size',
      want.every((d) => listed.some((l) => l.key === s3Location(d.path).Key && l.size === d.size)) && pages >= want.length,
      { pages, listed: listed.length, want: want.length })
    const tableKey = s3Location(input.dataFiles[0].path).Key.split('/')[0] + '/'
    const folders = await s3.send(new ListObjectsV2Command({ Bucket: loc.Bucket, Prefix: tableKey, Delimiter: '/' }))
    check('ListObjectsV2 with a delimiter gives the table\'s folders', (folders.CommonPrefixes || []).length > 0,
      { prefixes: folders.CommonPrefixes, keys: (folders.Contents || []).length })
    const after = await s3.send(new ListObjectsV2Command({ Bucket: loc.Bucket, Prefix: prefix, StartAfter: listed[0]?.key }))
    check('StartAfter skips the keys up to it', !(after.Contents || []).some((c) => c.Key <= listed[0]?.key), after.Contents?.length)
  } catch (err) {
    check('ListObjectsV2 answers', false, { code: err.name, status: err.$metadata?.httpStatusCode, message: err.message })
  }
  return { checks }
})

// --- DuckDB ---

await section('duckdb', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'mink-interop-duckdb-'))
  try {
    const paths = []
    for (const [i, f] of input.dataFiles.entries()) {
      const { bytes } = await getBytes(s3Location(f.path))
      const p = join(dir, `f${i}.parquet`)
      await writeFile(p, bytes)
      paths.push(p)
    }
    const db = await DuckDBInstance.create(':memory:')
    const conn = await db.connect()
    const list = paths.map((p) => `'${p}'`).join(', ')
    const reader = await conn.runAndReadAll(`SELECT _kafka_partition::INTEGER AS _kafka_partition,
        _kafka_offset::VARCHAR AS _kafka_offset, id::VARCHAR AS id, name, price, active, qty, city,
        epoch_us(ts)::VARCHAR AS ts
      FROM read_parquet([${list}]) ORDER BY _kafka_partition, _kafka_offset`)
    const rows = reader.getRowObjectsJS().map(canonical)
    conn.closeSync?.()
    return { rows }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
})

process.stdout.write(JSON.stringify(out) + '\n')
