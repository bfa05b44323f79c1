// The Mink console: one page over the node's JSON gateway (api/...), every URL relative
// so it works under any path prefix. Values from the cluster are put in the page as
// text, never as markup.
"use strict";

const REFRESH_MS = 5000;
const PAGE = 50;
let session = null;
let timer = null;
let generation = 0; // of route(): a view's refresh loop ends when another view is shown
let tablesPage = { tokens: [""], i: 0 };
let nodesPage = 0;
let fsPage = 0;
const rowsOpts = { limit: "50", from: "end" };
const charts = {};

// --- helpers ---

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat(Infinity)) {
    if (k === undefined || k === null) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function request(method, url, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") {
    opts.headers["Content-Type"] = "application/json";
    if (session) opts.headers["X-CSRF-Token"] = session.csrf;
    opts.body = JSON.stringify(body || {});
  }
  const r = await fetch(url, opts);
  let data = null;
  try { data = await r.json(); } catch (e) { /* no body */ }
  if (!r.ok) {
    if (r.status === 401 && url !== "api/login") showSignIn();
    throw new APIError(r.status, data && data.code || String(r.status), data && data.message || r.statusText);
  }
  return data;
}

// call is one admin API method through the gateway, as grpcurl would call it.
const call = (method, req) => request("POST", "api/call/" + method, req);

function fmtNum(n) {
  if (n === undefined || n === null || n === "") return "";
  const v = Number(n);
  return Number.isFinite(v) ? v.toLocaleString("en-US") : String(n);
}
function seconds(d) { // a protobuf JSON Duration ("1.5s")
  if (d === undefined || d === null) return null;
  return parseFloat(String(d));
}
function fmtDur(d) {
  const s = seconds(d);
  if (s === null) return "";
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function fmtTime(t) { return t ? new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : ""; }
function fmtBytes(b) {
  let v = Number(b); const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  if (!Number.isFinite(v)) return String(b || "");
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + u[i];
}
const short = (s) => String(s || "").replace(/^(ROLE|RECORD_FORMAT|TABLE_MODE|LEASE_KIND|SCHEMA_MODE|TOPIC_STATE)_/, "").toLowerCase();
const badge = (text, cls) => el("span", { class: "badge" + (cls ? " " + cls : "") }, text);
// partitionSpec writes a spec as minkctl table describe does: transform(column), with the
// field's name where it is not the one Iceberg gives it (partition.DefaultName).
function partitionSpec(fields) {
  if (!fields || fields.length === 0) return "-";
  const suffix = { year: "_year", month: "_month", day: "_day", hour: "_hour", bucket: "_bucket", truncate: "_trunc", void: "_null" };
  const defaultName = (f) => f.column.replace(/[^A-Za-z0-9_]/gu, "_").replace(/^[0-9]/, "_$&") + (suffix[f.transform.replace(/\[.*$/, "")] || "");
  return fields.map((f) => `${f.transform}(${f.column})` + (f.name !== defaultName(f) ? ` AS ${f.name}` : "")).join(", ");
}
function errorBox(e) { return el("p", { class: "error", "data-code": e.code || "" }, (e.code ? e.code + ": " : "") + e.message); }
function table(head, rows, cls) {
  return el("table", { class: cls }, el("thead", {}, el("tr", {}, head.map((h) =>
    typeof h === "string" ? el("th", {}, h) : el("th", { class: h.cls }, h.text, h.sub ? el("span", { class: "type" }, h.sub) : null)))),
    el("tbody", {}, rows));
}
const td = (v, cls) => el("td", { class: cls }, v);
const num = (v) => td(fmtNum(v), "num");

function pager(total, page, size, go) {
  const pages = Math.max(1, Math.ceil(total / size));
  return el("div", { class: "pager" },
    el("button", { type: "button", disabled: page <= 0, onclick: () => go(page - 1) }, "‹ Prev"),
    el("span", { class: "muted" }, `page ${page + 1} of ${pages} (${total})`),
    el("button", { type: "button", disabled: page >= pages - 1, onclick: () => go(page + 1) }, "Next ›"));
}

// --- session ---

function showSignIn() {
  session = null;
  stopRefresh();
  document.getElementById("signin").hidden = false;
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  document.getElementById("who").textContent = "";
  document.getElementById("view").replaceChildren();
}

function signedIn(s) {
  session = s;
  document.getElementById("signin").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = !s.auth;
  document.getElementById("who").textContent = `${s.principal} (${s.role})` + (s.auth ? "" : " · auth off") + ` · node ${s.node}`;
  const banner = document.getElementById("banner");
  banner.hidden = s.auth;
  banner.textContent = s.auth ? "" : "Auth is off on this cluster: anyone who reaches this console may do everything.";
  route();
}

async function start() {
  document.getElementById("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const body = f.get("token") ? { token: f.get("token") } : { client_id: f.get("client_id"), client_secret: f.get("client_secret") };
    const out = document.getElementById("signin-error");
    out.textContent = "";
    try {
      signedIn(await request("POST", "api/login", body));
      ev.target.reset();
    } catch (e) { out.textContent = e.code + ": " + e.message; }
  });
  document.getElementById("signout").addEventListener("click", async () => {
    try { await request("POST", "api/logout"); } catch (e) { /* signed out anyway */ }
    showSignIn();
  });
  window.addEventListener("hashchange", route);
  try { signedIn(await request("GET", "api/session")); } catch (e) { if (e.status !== 401) document.getElementById("view").append(errorBox(e)); }
}

// --- routing and refresh ---

function stopRefresh() { if (timer) { clearTimeout(timer); timer = null; } }

function route() {
  if (!session) return;
  stopRefresh();
  const gen = ++generation;
  const [view, arg] = (location.hash.slice(1) || "cluster").split("/");
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.view === view || (view === "table" || view === "rows") && a.dataset.view === "tables");
  const views = { cluster: viewCluster, tables: viewTables, table: viewTable, rows: viewRows, fileservers: viewFileServers, charts: viewCharts };
  const fn = views[view] || viewCluster;
  const root = document.getElementById("view");
  root.replaceChildren();
  for (const k of Object.keys(charts)) { charts[k].destroy(); delete charts[k]; }
  // Each view draws into a container of its own, swapped in only while it is still the
  // one shown: a refresh in flight when the view changes is dropped.
  const tick = async () => {
    // A form being filled in is not redrawn under the user's hands.
    if (!root.querySelector("form.editing")) {
      const into = document.createElement("section");
      try { await fn(into, decodeURIComponent(arg || "")); } catch (e) { into.replaceChildren(errorBox(e)); }
      if (gen !== generation) return;
      root.replaceChildren(...into.childNodes);
      for (const k of Object.keys(charts)) if (!root.contains(charts[k].root)) { charts[k].destroy(); delete charts[k]; }
      document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    }
    if (gen === generation && fn.refresh !== false) timer = setTimeout(tick, REFRESH_MS);
  };
  tick();
}

// draw fills a view's container.
function draw(root, ...kids) {
  root.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined));
}

// --- cluster ---

async function viewCluster(root) {
  const [nodes, leases] = await Promise.all([call("ListNodes", {}), call("ListLeases", {})]);
  const list = (nodes.nodes || []).sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  const byNode = {};
  for (const l of leases.leases || []) {
    if (!l.holder) continue;
    const n = byNode[l.holder] = byNode[l.holder] || { partition: 0, writer: 0, tables: {} };
    const kind = short(l.kind);
    n[kind] = (n[kind] || 0) + 1;
    const t = n.tables[l.tableName] = n.tables[l.tableName] || { partition: 0, writer: 0 };
    t[kind]++;
  }
  // Staleness by the database's clock: a node whose last renewal trails the newest by
  // more than half a lease_ttl stopped renewing.
  const newest = Math.max(...list.map((n) => Date.parse(n.renewedAt) || 0));
  const free = (leases.leases || []).filter((l) => !l.holder).length;
  const rows = list.slice(nodesPage * PAGE, (nodesPage + 1) * PAGE).map((n) => {
    const ttl = (Date.parse(n.expiresAt) - Date.parse(n.renewedAt)) / 1000;
    const behind = (newest - Date.parse(n.renewedAt)) / 1000;
    const stale = ttl > 0 && behind > ttl / 2;
    const held = byNode[n.nodeId] || { partition: 0, writer: 0, tables: {} };
    const perTable = Object.entries(held.tables).sort().map(([t, c]) =>
      el("div", {}, t + ": " + [c.partition ? c.partition + " partition" + (c.partition > 1 ? "s" : "") : "", c.writer ? "writer" : ""].filter(Boolean).join(", ")));
    const actions = session.admin ? td(n.draining
      ? el("button", { type: "button", "data-action": "undrain", onclick: () => drain(n.nodeId, false) }, "Undrain")
      : el("button", { type: "button", "data-action": "drain", onclick: () => drain(n.nodeId, true) }, "Drain")) : null;
    return el("tr", { class: stale ? "stale" : null, "data-node": n.nodeId },
      td(n.nodeId), td((n.roles || []).map((r) => badge(short(r)))),
      td(stale ? badge("not renewing: " + behind.toFixed(0) + " s behind", "bad") : badge("renewing", "ok")),
      td(n.draining ? badge("draining", "warn") : ""),
      num(held.partition), num(held.writer), td(perTable),
      td(fmtTime(n.expiresAt)), td(n.version), td(fmtTime(n.startedAt)), actions);
  });
  draw(root, el("h1", {}, "Cluster"),
    el("p", { class: "muted" }, `${list.length} live node${list.length === 1 ? "" : "s"} · ${(leases.leases || []).length} leases, ${free} free`),
    el("p", { class: "error", id: "action-error" }),
    table(["Node", "Roles", "Health", "Drain", { text: "Partitions", cls: "num" }, { text: "Writers", cls: "num" }, "Leases per table", "Lease expiry", "Version", "Started"].concat(session.admin ? ["Action"] : []), rows, "nodes"),
    list.length > PAGE ? pager(list.length, nodesPage, PAGE, (p) => { nodesPage = p; route(); }) : null);
}

async function drain(node, on) {
  const out = document.getElementById("action-error");
  try {
    await call(on ? "DrainNode" : "UndrainNode", { node });
    route();
  } catch (e) { if (out) out.textContent = e.code + ": " + e.message; }
}

// --- tables ---

async function viewTables(root) {
  const resp = await call("ListTables", { pageSize: PAGE, pageToken: tablesPage.tokens[tablesPage.i], withSummary: true });
  const rows = (resp.tables || []).map((t) => {
    const s = t.summary || {};
    const name = t.namespace + "." + t.name;
    return el("tr", { class: s.pausedPartitions > 0 ? "paused" : null, "data-table": name },
      td(el("a", { href: "#table/" + encodeURIComponent(name) }, name)), td(t.topic), td(short(t.format)), td(short(t.mode)),
      num(t.partitions), num(t.schemaVersion),
      num(s.lagRecords < 0 ? "?" : s.lagRecords), td(fmtDur(s.lag), "num"),
      td(s.pausedPartitions > 0 ? badge(s.pausedPartitions + " paused", "warn") : ""),
      td(s.unheldPartitions > 0 ? badge(s.unheldPartitions + " unheld", "bad") : ""),
      td(fmtTime(s.committedAt)), td(el("a", { href: "#rows/" + encodeURIComponent(name) }, "rows")));
  });
  const nav = el("div", { class: "pager" },
    el("button", { type: "button", disabled: tablesPage.i === 0, onclick: () => { tablesPage.i--; route(); } }, "‹ Prev"),
    el("span", { class: "muted" }, `page ${tablesPage.i + 1}`),
    el("button", { type: "button", disabled: !resp.nextPageToken, onclick: () => { tablesPage.tokens[tablesPage.i + 1] = resp.nextPageToken; tablesPage.i++; route(); } }, "Next ›"));
  draw(root, el("h1", {}, "Tables"),
    table(["Table", "Topic", "Format", "Mode", { text: "Partitions", cls: "num" }, { text: "Schema version", cls: "num" },
      { text: "Lag (records)", cls: "num" }, { text: "Lag", cls: "num" }, "Paused", "Unheld", "Last commit", ""], rows, "tables"),
    nav, session.admin ? el("div", { "data-slot": "create" }) : null);
  if (session.admin) root.querySelector('[data-slot="create"]').replaceWith(createForm());
}

// Forms show the API's answer as it is: its code and message.
function apiForm(id, title, fields, submit) {
  const out = el("p", { class: "error", "data-error": id });
  const f = el("form", { id, class: "card" }, el("h2", {}, title), fields, el("button", { type: "submit", class: "primary" }, title), out);
  f.addEventListener("focusin", () => f.classList.add("editing"));
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    out.textContent = "";
    try {
      await submit(new FormData(f));
      f.reset(); f.classList.remove("editing"); out.textContent = "";
      route();
    } catch (e) { out.textContent = e.code + ": " + e.message; }
  });
  return f;
}

function columnsOf(text) {
  return String(text || "").split(",").map((c) => c.trim()).filter(Boolean).map((c) => {
    const [name, type] = c.split(":").map((x) => x.trim());
    return { name, type: type || "" };
  });
}

function createForm() {
  const formats = ["RECORD_FORMAT_JSON", "RECORD_FORMAT_RAW", "RECORD_FORMAT_AVRO", "RECORD_FORMAT_PROTOBUF", "RECORD_FORMAT_JSON_SCHEMA"];
  return apiForm("create-table", "Create table", [
    el("label", {}, "Namespace ", el("input", { name: "namespace", placeholder: "default" })),
    el("label", {}, "Name ", el("input", { name: "name" })),
    el("label", {}, "Topic ", el("input", { name: "topic" })),
    el("label", {}, "Format ", el("select", { name: "format" }, formats.map((f) => el("option", { value: f }, short(f))))),
    el("label", {}, "Columns (JSON tables) ", el("input", { name: "columns", placeholder: "id:long, page:string" })),
  ], async (f) => {
    await call("CreateTable", { namespace: f.get("namespace"), name: f.get("name"), topic: f.get("topic"), format: f.get("format"), columns: columnsOf(f.get("columns")) });
  });
}

function alterForm(t) {
  return apiForm("alter-table", "Alter table", [
    el("label", {}, "Add column (name:type) ", el("input", { name: "add", placeholder: "note:string" })),
    el("label", {}, "Set property (key=value) ", el("input", { name: "prop", placeholder: "mink.commit.interval=5s" })),
  ], async (f) => {
    const req = { namespace: t.namespace, name: t.name, changes: columnsOf(f.get("add")).map((c) => ({ add: c })) };
    const prop = String(f.get("prop") || "");
    if (prop) { const i = prop.indexOf("="); req.setProperties = { [prop.slice(0, i < 0 ? prop.length : i)]: i < 0 ? "" : prop.slice(i + 1) }; }
    await call("AlterTable", req);
  });
}

async function viewTable(root, name) {
  const i = name.indexOf(".");
  const d = await call("DescribeTable", { namespace: name.slice(0, i), name: name.slice(i + 1) });
  const t = d.table;
  const parts = d.partitions || [];
  const hwm = parts.reduce((a, p) => a + Math.max(0, Number(p.highWatermark)), 0);
  const lag = parts.reduce((a, p) => a + Math.max(0, Number(p.lagRecords)), 0);
  const committedBehind = parts.reduce((a, p) => a + Math.max(0, Number(p.highWatermark) - Number(p.committedEndOffset)), 0);
  const props = t.properties || {};
  const live = props["mink.live-load"] !== "false";
  const topicState = d.topicState && d.topicState !== "TOPIC_STATE_OK" && d.topicState !== "TOPIC_STATE_UNSPECIFIED"
    ? [badge(short(d.topicState), "bad"), " " + (d.topicError || "")] : "";
  const facts = [["Topic", [t.topic, " ", topicState]], ["Format", short(t.format)], ["Mode", short(t.mode)], ["Partitions", t.partitions],
    ["Schema version", `${t.schemaVersion} (Iceberg schema id ${t.schemaId})`],
    ["Partitioned by", partitionSpec(t.partitionSpec)], ["Created", fmtTime(t.createdAt)],
    ["Indexed", `${fmtNum(hwm - lag)} of ${fmtNum(hwm)} records (lag ${fmtNum(lag)})`],
    ["Committed freshness", d.committedAt ? `last commit ${fmtTime(d.committedAt)}; ${fmtNum(committedBehind)} records past it` : "no commit yet"],
    ["Live freshness", live ? "loads include the tail up to the high watermark (mink.live-load)" : "off: loads see the last commit only"]];
  if (t.value) facts.push(["Value subject", `${t.value.subject} (${short(t.value.mode)})`]);
  if (t.key) facts.push(["Key subject", `${t.key.subject} (${short(t.key.mode)})`]);
  const partRows = parts.map((p) => el("tr", { class: p.indexError ? "paused" : null, "data-partition": p.partition },
    num(p.partition), num(p.indexedEndOffset), num(p.highWatermark < 0 ? "?" : p.highWatermark), num(p.lagRecords < 0 ? "?" : p.lagRecords),
    td(fmtDur(p.lag), "num"), num(p.rangeCount), td(fmtTime(p.lastRangeTime)), td(p.holder ? `${p.holder} (epoch ${p.epoch})` : badge("unheld", "bad")),
    num(p.committedFiles), num(p.committedEndOffset),
    td(p.indexError ? [badge("paused", "warn"), " " + p.indexError + " (since " + fmtTime(p.indexErrorSince) + ")"] : "")));
  const schemaRows = (t.schema || []).map((c) => el("tr", {}, num(c.fieldId), td(c.name), td(c.type)));
  const versions = (d.schemaVersions || []).map((v) => el("tr", {}, num(v.version), num(v.schemaId),
    td((v.added || []).map((c) => c.name + " " + c.type).join(", ") || (v.version === 0 ? "(created)" : "(no new column)"))));
  const snaps = d.snapshots || [];
  const snapRows = snaps.slice(-20).reverse().map((s) => el("tr", {}, td(fmtTime(s.committedAt)), td(s.snapshotId), td(s.operation),
    num(s.addedRecords), num(s.totalRecords), num(s.addedFiles), num(s.totalFiles)));
  draw(root, el("h1", {}, "Table " + name + " ", el("a", { href: "#rows/" + encodeURIComponent(name) }, "rows")),
    el("div", { class: "grid" },
      el("div", { class: "card" }, el("dl", { class: "facts" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v)]))),
      el("div", { class: "card" }, el("h2", {}, "Snapshots over time (total records)"), el("div", { id: "snapchart" }))),
    el("h2", {}, "Partitions"),
    table([{ text: "Partition", cls: "num" }, { text: "Indexed end", cls: "num" }, { text: "High watermark", cls: "num" }, { text: "Lag (records)", cls: "num" },
      { text: "Lag", cls: "num" }, { text: "Ranges", cls: "num" }, "Last range", "Indexer", { text: "Files", cls: "num" }, { text: "Committed end", cls: "num" }, "Paused"], partRows, "partitions"),
    el("div", { class: "grid" },
      el("div", {}, el("h2", {}, "Schema"), table([{ text: "Field id", cls: "num" }, "Column", "Type"], schemaRows, "schema")),
      el("div", {}, el("h2", {}, "Schema versions"), table([{ text: "Version", cls: "num" }, { text: "Schema id", cls: "num" }, "Added"], versions, "versions"))),
    el("h2", {}, "Snapshots"), table(["Committed", "Snapshot", "Operation", { text: "Added records", cls: "num" }, { text: "Records", cls: "num" },
      { text: "Added files", cls: "num" }, { text: "Files", cls: "num" }], snapRows, "snapshots"),
    session.admin ? el("div", { "data-slot": "alter-table" }) : null);
  if (session.admin) root.querySelector('[data-slot="alter-table"]').replaceWith(alterForm(t));
  if (snaps.length > 0 && window.uPlot) {
    lineChart("snap", root.querySelector("#snapchart"), [snaps.map((s) => Date.parse(s.committedAt) / 1000), snaps.map((s) => Number(s.totalRecords))], ["records"]);
  }
}

// --- rows ---

async function viewRows(root, name) {
  const { limit, from } = rowsOpts;
  const r = await request("GET", `api/rows?table=${encodeURIComponent(name)}&limit=${limit}&from=${from}`);
  const head = r.columns.map((c) => ({ text: c.name, sub: c.type }));
  const rows = r.rows.map((row) => el("tr", {}, row.map((v) => v === null ? td("NULL", "null") : td(v))));
  const pick = (what, opts) => el("select", { "data-pick": what, onchange: (ev) => { rowsOpts[what] = ev.target.value; route(); } },
    opts.map(([v, t]) => el("option", { value: v, selected: rowsOpts[what] === v }, t)));
  draw(root, el("h1", {}, "Rows of " + name), el("div", { class: "toolbar" },
    el("a", { href: "#table/" + encodeURIComponent(name) }, "table"),
    pick("limit", [["20", "20 rows"], ["50", "50 rows"], ["200", "200 rows"]]),
    pick("from", [["end", "newest"], ["start", "oldest"]]),
    el("span", { class: "muted" }, `${r.rows.length} row${r.rows.length === 1 ? "" : "s"} by Kafka timestamp, as minkctl scan shows them · snapshot ${r.snapshot === null ? "none yet" : r.snapshot} · live tail included · catalog ${r.catalog}`)),
  table(head, rows, "rows"));
}
viewRows.refresh = true;

// --- file servers ---

async function viewFileServers(root) {
  const r = await request("GET", "api/fileservers?page=" + fsPage);
  const rows = r.nodes.map((n) => {
    if (n.error) return el("tr", { "data-node": n.node }, td(n.node), el("td", { colspan: 9, class: "error" }, n.error.code + ": " + n.error.message));
    const f = n.status.figures || {};
    const rate = f.cache_hit_rate === "n/a" ? "n/a" : (Number(f.cache_hit_rate) * 100).toFixed(1) + " %";
    const errs = Number(f.build_failures || 0) + Number(f.live_load_failures || 0);
    return el("tr", { "data-node": n.node }, td(n.node), td(`${fmtBytes(f.cache_bytes)} of ${fmtBytes(f.cache_bytes_limit)} (${fmtNum(f.cache_files)} files)`),
      td(rate, "num"), num(f.builds_running), num(f.builds), num(f.forwarded_reads), num(f.live_loads),
      td(errs > 0 ? badge(`${fmtNum(f.build_failures)} builds, ${fmtNum(f.live_load_failures)} loads`, "bad") : "0"),
      td(f.catalog_addr), td(f.s3_endpoint));
  });
  draw(root, el("h1", {}, "File servers"),
    table(["Node", "Cache", { text: "Hit ratio", cls: "num" }, { text: "Builds running", cls: "num" }, { text: "Builds", cls: "num" },
      { text: "Forwarded reads", cls: "num" }, { text: "Live loads", cls: "num" }, "Errors", "Catalog", "S3"], rows, "fileservers"),
    r.total > r.size ? pager(r.total, r.page, r.size, (p) => { fsPage = p; route(); }) : null);
}

// --- charts ---

function lineChart(id, into, data, labels) {
  // Drawn before its container is shown: as wide as a card of the two-column grid.
  const width = Math.max(320, Math.floor((document.getElementById("view").clientWidth - 16) / 2) - 26);
  const colors = ["#2f5bd3", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#1098ad", "#e67700", "#495057"];
  const opts = { width, height: 220, scales: { x: { time: true } }, legend: { live: false },
    series: [{}].concat(labels.map((l, i) => ({ label: l, stroke: colors[i % colors.length], width: 1.5, spanGaps: true }))) };
  if (charts[id]) { charts[id].destroy(); }
  into.replaceChildren();
  charts[id] = new window.uPlot(opts, data, into);
}

async function viewCharts(root) {
  const r = await request("GET", "api/charts");
  const tables = Object.keys(r.tables).sort();
  const fss = Object.keys(r.fileservers).sort();
  const series = (src, keys, field) => keys.map((k) => (src[k][field] || []).map((v) => v));
  const boxes = [["rate", "Records indexed per second, per table"], ["lag", "Records not yet read from Kafka, per table"],
    ["table_loads", "Table loads per second, per file server"], ["s3_gets", "S3 GETs per second, per file server"]];
  root.replaceChildren(el("h1", {}, "Charts"), el("p", { class: "muted", id: "charts-about" }), el("p", { class: "error", id: "charts-errors" }),
    el("div", { class: "grid" }, boxes.map(([id, title]) => el("div", { class: "card" }, el("h2", {}, title), el("div", { id: "chart-" + id })))));
  root.querySelector("#charts-about").textContent = `The last 15 minutes from each node's own counters, sampled every ${r.interval} s` +
    (tables.length ? `; the ${tables.length} busiest table${tables.length === 1 ? "" : "s"}.` : ".");
  root.querySelector("#charts-errors").textContent = Object.entries(r.errors || {}).map(([n, e]) => `${n}: ${e.code}: ${e.message}`).join("\n");
  if (!window.uPlot) return;
  const draw1 = (id, keys, src) => {
    const into = root.querySelector("#chart-" + id);
    if (keys.length === 0) { into.replaceChildren(el("p", { class: "muted" }, "no samples yet")); return; }
    lineChart(id, into, [r.times].concat(series(src, keys, id)), keys);
  };
  draw1("rate", tables, r.tables);
  draw1("lag", tables, r.tables);
  draw1("table_loads", fss, r.fileservers);
  draw1("s3_gets", fss, r.fileservers);
}

document.addEventListener("DOMContentLoaded", start);
