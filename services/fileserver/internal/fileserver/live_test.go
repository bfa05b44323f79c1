package fileserver_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/live"
)

// liveEnv is a table whose writer has stored its first (empty) metadata and nothing
// else: what a table is a moment after its writer took the lease. The test plays
// producer, indexer and writer (the writer's role cannot be imported here: it commits
// with pkg/icebergmeta and the writer's own statements, as below).
type liveEnv struct {
	*env
	name   string
	prod   *kgo.Client
	nextID int64
	leases map[int32]lease.Lease
	meta   icebergmeta.Table
	base   icebergmeta.Base // the committed metadata
}

const livePartitions = 2

// noReuse makes every load read Kafka's offsets (mink.live.reuse-ms 0): the tests of a
// tail's exactness load right after producing and want all of it; reuse within the
// bound is live_reuse_test.go's.
var noReuse = map[string]string{tables.PropLiveReuseMs: "0"}

func newLiveEnv(t testing.TB, props map[string]string, persistentKafka bool) *liveEnv {
	t.Helper()
	return newLiveEnvMode(t, props, persistentKafka, tables.ModeAppend)
}

// newLiveEnvMode is newLiveEnv of a table of mode.
func newLiveEnvMode(t testing.TB, props map[string]string, persistentKafka bool, mode tables.Mode) *liveEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx}
	e.db, _ = pgtest.DB(t)
	if err := pgschema.Migrate(ctx, e.db); err != nil {
		t.Fatal(err)
	}
	kopts := []kafkatest.Option{kafkatest.Brokers(1)}
	if persistentKafka {
		kopts = append(kopts, kafkatest.Persistent())
	}
	e.kafka = kafkatest.New(t, kopts...)
	le := &liveEnv{env: e, name: "clicks", leases: map[int32]lease.Lease{}}
	e.kafka.CreateTopic(le.name, livePartitions, nil)
	var err error
	if e.kc, err = kafkasrc.New(e.kafka.Addrs(), kafkasrc.WithTimeout(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.kc.Close)
	e.spans = tracetest.NewSpanRecorder()
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() { e.tp.Shutdown(context.Background()) })
	le.prod = e.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	t.Cleanup(le.prod.Close)

	if e.table, err = tables.Create(ctx, e.db, tables.Table{Namespace: ns, Name: le.name, Topic: le.name, Spec: spec, Mode: mode, Properties: props}, livePartitions); err != nil {
		t.Fatal(err)
	}
	schema, err := spec.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	le.meta = icebergmeta.Table{Namespace: ns, Name: le.name, Schema: schema, Properties: e.table.Properties}
	// The writer's first metadata: no snapshot.
	res, err := icebergmeta.Create(le.meta)
	if err != nil {
		t.Fatal(err)
	}
	e.storeMeta(res)
	if _, err := e.db.Exec(ctx, `INSERT INTO mink_table_meta (table_id, metadata_key, version) VALUES ($1, $2, 1)`, e.table.ID, res.Key); err != nil {
		t.Fatal(err)
	}
	le.base = icebergmeta.Base{Version: 1, Key: res.Key, Metadata: res.Metadata}
	e.metaKey = res.Key
	return le
}

// produce writes n records to each partition and remembers them.
func (le *liveEnv) produce(n int) {
	le.t.Helper()
	for p := range int32(livePartitions) {
		var recs []*kgo.Record
		for range n {
			id := le.nextID
			le.nextID++
			recs = append(recs, &kgo.Record{Topic: le.name, Partition: p, Key: fmt.Appendf(nil, "u-%d", id),
				Value: fmt.Appendf(nil, `{"id": %d, "msg": "click %d"}`, id, id)})
		}
		for _, r := range kafkatest.Produce(le.t, le.prod, recs...) {
			id, _ := strconv.ParseInt(strings.TrimPrefix(string(r.Key), "u-"), 10, 64)
			le.rows = append(le.rows, row{r.Partition, r.Offset, id, fmt.Sprintf("click %d", id)})
		}
	}
	sortRows(le.rows)
}

// rowsBelow are the produced rows of each partition below its offset in ends.
func (le *liveEnv) rowsBelow(ends map[int32]int64) []row {
	var out []row
	for _, r := range le.rows {
		if r.offset < ends[r.partition] {
			out = append(out, r)
		}
	}
	return out
}

// index plays the indexer: one range per partition from its indexed end up to Kafka's
// last stable offset (or to upTo, if lower), measured as the indexer does.
func (le *liveEnv) index(upTo int64) {
	t, ctx := le.t, le.ctx
	t.Helper()
	offs, err := le.kc.Offsets(ctx, le.name)
	if err != nil {
		t.Fatal(err)
	}
	settings, _ := json.Marshal(parquetbuild.DefaultSettings())
	for _, o := range offs {
		p := o.Partition
		l, ok := le.leases[p]
		if !ok {
			l = leasetest.Take(t, le.db, lease.PartitionScope(le.table.ID, p), "indexer")
			le.leases[p] = l
		}
		st, err := ranges.State(ctx, le.db, le.table.ID, p)
		if err != nil {
			t.Fatal(err)
		}
		start := st.IndexedEnd
		if !st.Indexed {
			start = o.LogStart
		}
		end := min(o.LastStable, upTo)
		if end <= start {
			continue
		}
		fs, err := rangefile.BuildOffsets(ctx, le.kc, tablecodec.New(le.db, nil), le.table, parquetbuild.DefaultSettings(), p, start, end, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		stats, _ := json.Marshal(fs.Columns)
		if err := ranges.Append(ctx, le.db, l, ranges.Range{Table: le.table.ID, Partition: p, Start: start, End: end,
			Records: fs.RowCount, DecodeErrors: fs.DecodeErrors, Size: fs.Size, SHA256: fs.SHA256, Settings: settings, Stats: stats}); err != nil {
			t.Fatal(err)
		}
	}
}

// commit plays the writer: the ranges indexed beyond the current snapshot become an
// append snapshot, stored with the writer's statements (a tail file of the same key
// loses its expiry).
func (le *liveEnv) commit() {
	t, ctx := le.t, le.ctx
	t.Helper()
	var cov map[int32]icebergmeta.Coverage
	var summary *table.Summary
	if s := le.base.Metadata.CurrentSnapshot(); s != nil {
		summary = s.Summary
	}
	cov, err := icebergmeta.ParseCoverage(summary)
	if err != nil {
		t.Fatal(err)
	}
	var add []icebergmeta.DataFile
	newCov := map[int32]icebergmeta.Coverage{}
	for p := range int32(livePartitions) {
		c, has := cov[p]
		from := int64(-1)
		if has {
			from = c.End
		}
		rs, err := ranges.List(ctx, le.db, le.table.ID, p, from)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			continue
		}
		nc := icebergmeta.Coverage{Start: rs[0].Start}
		if has {
			nc.Start = c.Start
		}
		for _, r := range rs {
			if r.Records > 0 {
				add = append(add, icebergmeta.DataFile{Key: layout.DataKey(ns, le.name, p, r.Start, r.End, r.SHA256), Partition: p,
					Start: r.Start, End: r.End, Records: r.Records, Size: r.Size, SHA256: r.SHA256, Settings: r.Settings, Stats: r.Stats})
			}
			nc.End = r.End
		}
		newCov[p] = nc
	}
	store := icebergmeta.StoreFunc(func(ctx context.Context, key string) ([]byte, error) {
		var b []byte
		err := le.db.QueryRow(ctx, `SELECT content FROM mink_meta_files WHERE key = $1`, key).Scan(&b)
		return b, err
	})
	res, err := icebergmeta.Commit(ctx, icebergmeta.NewReader(store), le.meta, le.base,
		icebergmeta.Change{Operation: table.OpAppend, Add: add, Coverage: newCov, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range add {
		if _, err := le.db.Exec(ctx, `INSERT INTO mink_data_files (table_id, key, partition, start_offset, end_offset, record_count,
				file_size, sha256, settings, stats)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (key) DO UPDATE SET expires_at = NULL, live = false`, // as the writer commits
			le.table.ID, f.Key, f.Partition, f.Start, f.End, f.Records, f.Size, f.SHA256, f.Settings, f.Stats); err != nil {
			t.Fatal(err)
		}
	}
	le.storeMeta(res)
	tag, err := le.db.Exec(ctx, `UPDATE mink_table_meta SET metadata_key = $2, version = $3, snapshot_id = $4, committed_at = now()
		WHERE table_id = $1 AND version = $3 - 1`, le.table.ID, res.Key, res.Version, res.Snapshot.SnapshotID)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("commit: %v (%d rows)", err, tag.RowsAffected())
	}
	le.base = icebergmeta.Base{Version: res.Version, Key: res.Key, Metadata: res.Metadata}
	le.metaKey = res.Key
}

// loaded is what a load through iceberg-go gave: the table and its rows.
type loaded struct {
	tbl  *table.Table
	rows []row
}

func (l loaded) summary(k string) string {
	s := l.tbl.Metadata().CurrentSnapshot()
	if s == nil || s.Summary == nil {
		return ""
	}
	return s.Summary.Properties[k]
}

func (l loaded) live() bool { return l.summary(live.SummaryLive) == "true" }

func (l loaded) tailFiles() int {
	n, _ := strconv.Atoi(l.summary(live.SummaryTailFiles))
	return n
}

// scanLive loads the table through n's catalog with iceberg-go and reads every row
// through n's S3 endpoint.
func (le *liveEnv) scanLive(n *node) (loaded, error) {
	cat, err := rest.NewCatalog(le.ctx, "mink", n.catalog)
	if err != nil {
		return loaded{}, err
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		return loaded{}, err
	}
	at, err := tbl.Scan().ToArrowTable(le.ctx)
	if err != nil {
		return loaded{}, err
	}
	defer at.Release()
	return loaded{tbl: tbl, rows: rowsOf(le.t, at)}, nil
}

func (le *liveEnv) mustScan(n *node) loaded {
	le.t.Helper()
	l, err := le.scanLive(n)
	if err != nil {
		le.t.Fatalf("scan through %s: %v", n.id, err)
	}
	return l
}

// loadURL is the REST load of the table at n.
func (le *liveEnv) loadURL(n *node) string {
	return n.catalog + "/v1/namespaces/" + ns + "/tables/" + le.name
}

func tailBuilds(nodes ...*node) int64 {
	var n int64
	for _, x := range nodes {
		st, _ := x.srv.Stats()
		n += st.TailBuilds
	}
	return n
}

func sameRows(t testing.TB, what string, got, want []row) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %d rows, want the %d produced:\n got %v\nwant %v", what, len(got), len(want), got, want)
	}
}

// A load sees every record Kafka holds, before any commit and between commits: the
// tail beyond the committed snapshot is in a load snapshot whose parent is the current
// one, built once by each tail file's owner. As commits catch up, the tail shrinks to
// what they have not covered: the same rows in fewer tail files.
func TestLiveLoadSeesEveryRecord(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, noReuse, false)
	nodes := le.startNodes(2)
	a, b := nodes[0], nodes[1]

	// Produced, nothing indexed nor committed: the writer's empty metadata plus the tail.
	le.produce(30)
	start := time.Now()
	l := le.mustScan(a)
	t.Logf("first load and scan: %v", time.Since(start))
	sameRows(t, "load before any commit", l.rows, le.rows)
	if !l.live() || l.tailFiles() != 2 || l.tbl.Metadata().CurrentSnapshot().ParentSnapshotID != nil {
		t.Fatalf("first load: live %v, %d tail files, parent %v", l.live(), l.tailFiles(), l.tbl.Metadata().CurrentSnapshot().ParentSnapshotID)
	}
	if !strings.Contains(l.tbl.MetadataLocation(), "/metadata/live/") || l.tbl.Metadata().TableUUID() != le.base.Metadata.TableUUID() {
		t.Errorf("load metadata %s of table %s, want under metadata/live/ and table %s", l.tbl.MetadataLocation(), l.tbl.Metadata().TableUUID(), le.base.Metadata.TableUUID())
	}
	for p := range int32(livePartitions) {
		if got := l.summary(live.PartitionKey(p, live.SuffixCommittedEnd)) + " " + l.summary(live.PartitionKey(p, live.SuffixTailStart)) + " " +
			l.summary(live.PartitionKey(p, live.SuffixTailEnd)) + " " + l.summary(live.PartitionKey(p, live.SuffixLastStable)); got != "0 0 30 30" {
			t.Errorf("partition %d: committed end, tail start, tail end, last stable = %s, want 0 0 30 30", p, got)
		}
	}
	if got := tailBuilds(a, b); got != 2 {
		t.Errorf("%d tail builds, want 2 (one per partition)", got)
	}
	// The scan read the tail files from their owners' caches: no data file was built
	// for a read.
	for _, n := range nodes {
		if got := counter(t, n, "mink.fileserver.builds", map[string]string{"kind": "data"}); got != 0 {
			t.Errorf("%s built %d data files for reads, want 0: tail files are cached where they were measured", n.id, got)
		}
	}

	// More records: the next load (through the other node) has them. The tail of the
	// last load is reused; only the new records are built.
	le.produce(20)
	l = le.mustScan(b)
	sameRows(t, "second load", l.rows, le.rows)
	if l.tailFiles() != 4 || tailBuilds(a, b) != 4 {
		t.Fatalf("second load: %d tail files, %d tail builds; want 4 and 4 (the first load's reused)", l.tailFiles(), tailBuilds(a, b))
	}

	// The writer commits [0, 40) of each partition: the same rows, the tail now
	// [40, 50) in one new file per partition.
	le.index(40)
	le.commit()
	committed := le.base.Metadata.CurrentSnapshot().SnapshotID
	l = le.mustScan(a)
	sameRows(t, "load after a commit", l.rows, le.rows)
	if !l.live() || l.tailFiles() != 2 || *l.tbl.Metadata().CurrentSnapshot().ParentSnapshotID != committed ||
		l.summary(live.SummaryBaseSnapshot) != strconv.FormatInt(committed, 10) {
		t.Fatalf("load after a commit: live %v, %d tail files, parent %v; want 2 tail files on snapshot %d",
			l.live(), l.tailFiles(), l.tbl.Metadata().CurrentSnapshot().ParentSnapshotID, committed)
	}
	if got := l.summary(live.PartitionKey(0, live.SuffixCommittedEnd)) + " " + l.summary(live.PartitionKey(0, live.SuffixTailEnd)); got != "40 50" {
		t.Errorf("partition 0: committed end, tail end = %s, want 40 50", got)
	}

	// Indexed but not committed: the tail is the indexed range [40, 60) as it is (longer
	// than the last load's tail file [40, 50)), with no build, and the very file the
	// next commit names.
	le.produce(10)
	le.index(1 << 62)
	builds := tailBuilds(a, b)
	l = le.mustScan(b)
	sameRows(t, "load with indexed ranges", l.rows, le.rows)
	if got := tailBuilds(a, b) - builds; got != 0 || l.tailFiles() != 2 {
		t.Errorf("load over indexed ranges: %d builds, %d tail files; want 0 and 2", got, l.tailFiles())
	}
	tailKeys := dataFileKeys(t, l.tbl)
	// A listing names no live load's file, tail data or load metadata; the commit names
	// the tail files, and then a listing does.
	for _, k := range listedKeys(t, a) {
		if slices.Contains(tailKeys, k) || strings.Contains(k, "/metadata/live/") {
			t.Errorf("before the commit, the listing names %s, a live load's", k)
		}
	}
	le.commit()
	if listed := listedKeys(t, b); !isSubset(tailKeys, listed) {
		t.Errorf("after the commit, the listing %v does not name the committed tail files %v", listed, tailKeys)
	}
	for _, k := range tailKeys {
		if !strings.Contains(k, "00000000000000000040-00000000000000000060") {
			t.Errorf("tail file %s is not the indexed range [40, 60)", k)
		}
	}

	// Everything committed: the load is the committed metadata itself, and it names the
	// files the load before named.
	l = le.mustScan(a)
	sameRows(t, "load with everything committed", l.rows, le.rows)
	if l.live() || l.tbl.MetadataLocation() != layout.URI(le.metaKey) {
		t.Errorf("load with no tail: live %v, metadata %s, want the committed %s", l.live(), l.tbl.MetadataLocation(), le.metaKey)
	}
	if committed := dataFileKeys(t, l.tbl); !isSubset(tailKeys, committed) {
		t.Errorf("the commit names %v, not the tail files %v", committed, tailKeys)
	}

	// Every file a load named is recorded with an expiry, readable through any node.
	var n int
	if err := le.db.QueryRow(le.ctx, `SELECT count(*) FROM mink_meta_files WHERE key LIKE '%/metadata/live/%' AND expires_at > now() + interval '14 minutes'`).Scan(&n); err != nil || n == 0 {
		t.Errorf("%d live metadata files recorded with the 15m TTL (%v)", n, err)
	}
}

// Kafka stopped: a load answers 503 ServiceUnavailableException naming Kafka, in the
// Iceberg envelope, and iceberg-go sees it as such; the files an earlier load named are
// still served from the cache. Kafka back: loads work again, nothing restarted.
func TestLiveLoadKafkaOutage(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, noReuse, true)
	nodes := le.startNodes(2)
	le.produce(20)
	before := le.mustScan(nodes[0])
	sameRows(t, "load before the outage", before.rows, le.rows)

	le.kafka.Stop()
	for _, n := range nodes {
		start := time.Now()
		resp, body := get(t, "GET", le.loadURL(n), nil)
		ie := icebergError(t, body)
		if resp.StatusCode != 503 || ie.Code != 503 || ie.Type != "ServiceUnavailableException" || !strings.Contains(ie.Message, "kafka is unavailable") ||
			!strings.Contains(ie.Message, tables.PropLiveLoad) {
			t.Errorf("%s: load while Kafka is down: %d %+v", n.id, resp.StatusCode, ie)
		}
		t.Logf("%s: 503 after %v: %s", n.id, time.Since(start), ie.Message)
		cat, err := rest.NewCatalog(le.ctx, "mink", n.catalog)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cat.LoadTable(le.ctx, table.Identifier{ns, le.name}); !errors.Is(err, rest.ErrServiceUnavailable) || !strings.Contains(err.Error(), "kafka") {
			t.Errorf("%s: iceberg-go load while Kafka is down: %v", n.id, err)
		}
		cat.Close()
		// What the earlier load named is still served, from the cache.
		for _, k := range []string{metadataKey(t, before.tbl)} {
			if resp, _ := get(t, "GET", objectURL(n, k), nil); resp.StatusCode != 200 {
				t.Errorf("%s: %s while Kafka is down: %d", n.id, k, resp.StatusCode)
			}
		}
	}
	// The earlier load's scan still works: its tail files are cached at their owners.
	at, err := before.tbl.Scan().ToArrowTable(le.ctx)
	if err != nil {
		t.Fatalf("scan of the earlier load while Kafka is down: %v", err)
	}
	sameRows(t, "earlier load while Kafka is down", rowsOf(t, at), le.rows)
	at.Release()

	le.kafka.Restart()
	leasetest.Eventually(t, 20*time.Second, "loads to work again", func() bool {
		resp, _ := get(t, "GET", le.loadURL(nodes[1]), nil)
		return resp.StatusCode == 200
	})
	le.produce(5)
	for _, n := range nodes {
		l := le.mustScan(n)
		sameRows(t, "load after Kafka is back", l.rows, le.rows)
	}
}

// dataFileKeys are the keys of the data files a load's current snapshot adds (the tail
// of a live load).
func dataFileKeys(t testing.TB, tbl *table.Table) []string {
	t.Helper()
	snap := tbl.Metadata().CurrentSnapshot()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := snap.Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if m.SnapshotID() != snap.SnapshotID {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				t.Fatal(err)
			}
			k, _ := layout.KeyOf(e.DataFile().FilePath())
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// listedKeys lists the whole bucket through n's S3 API, ListObjectsV2 page by page.
func listedKeys(t testing.TB, n *node) []string {
	t.Helper()
	var keys []string
	token := ""
	for {
		u := n.s3 + "/mink?list-type=2&max-keys=3"
		if token != "" {
			u += "&continuation-token=" + url.QueryEscape(token)
		}
		resp, body := get(t, "GET", u, nil)
		var page struct {
			Contents              []struct{ Key string }
			IsTruncated           bool
			NextContinuationToken string
		}
		if err := xml.Unmarshal(body, &page); err != nil || resp.StatusCode != 200 {
			t.Fatalf("listing: %d %v %s", resp.StatusCode, err, body)
		}
		for _, c := range page.Contents {
			keys = append(keys, c.Key)
		}
		if !page.IsTruncated {
			return keys
		}
		token = page.NextContinuationToken
	}
}

func isSubset(sub, of []string) bool {
	for _, k := range sub {
		if !slices.Contains(of, k) {
			return false
		}
	}
	return true
}

func metadataKey(t testing.TB, tbl *table.Table) string {
	t.Helper()
	k, err := layout.KeyOf(tbl.MetadataLocation())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// mink.live-load=false: a load is the committed snapshot, whatever Kafka holds, and it
// works with Kafka down.
func TestLiveLoadOff(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, map[string]string{tables.PropLiveLoad: "false"}, true)
	n := le.startNodes(1)[0]
	le.produce(10)
	le.index(1 << 62)
	le.commit()
	le.produce(10) // not committed: not in a load
	committed := le.rowsBelow(map[int32]int64{0: 10, 1: 10})
	l := le.mustScan(n)
	sameRows(t, "load with live loads off", l.rows, committed)
	if l.live() || l.tbl.MetadataLocation() != layout.URI(le.metaKey) {
		t.Fatalf("load with live loads off: live %v, metadata %s, want the committed %s", l.live(), l.tbl.MetadataLocation(), le.metaKey)
	}

	le.kafka.Stop()
	l = le.mustScan(n) // the committed files were cached by the first scan
	sameRows(t, "load with live loads off, Kafka down", l.rows, committed)
	if st := n.srv.LiveStats(); st.Disabled != 2 || st.Loads != 0 || st.Failed != 0 {
		t.Errorf("live stats %+v, want 2 loads counted as disabled", st)
	}
	le.kafka.Restart()
}

// A tail longer than mink.live.max-records is cut there, and a load reads at most
// mink.live.max-bytes of records per partition: the summary says where and why.
func TestLiveLoadTailLimits(t *testing.T) {
	t.Parallel()
	t.Run("records", func(t *testing.T) {
		le := newLiveEnv(t, map[string]string{tables.PropLiveReuseMs: "0", tables.PropLiveMaxRecords: "15"}, false)
		n := le.startNodes(1)[0]
		le.produce(40)
		l := le.mustScan(n)
		sameRows(t, "load cut at 15 records", l.rows, le.rowsBelow(map[int32]int64{0: 15, 1: 15}))
		for p := range int32(livePartitions) {
			if got := l.summary(live.PartitionKey(p, live.SuffixCut)) + " " + l.summary(live.PartitionKey(p, live.SuffixTailEnd)) + " " +
				l.summary(live.PartitionKey(p, live.SuffixLastStable)); got != "max-records 15 40" {
				t.Errorf("partition %d: cut, tail end, last stable = %q, want max-records 15 40", p, got)
			}
		}
		cov, err := icebergmeta.ParseCoverage(l.tbl.Metadata().CurrentSnapshot().Summary)
		if err != nil || cov[0] != (icebergmeta.Coverage{Start: 0, End: 15}) {
			t.Errorf("coverage %v %v, want [0, 15)", cov, err)
		}
		if l.summary(live.SummaryCutPartitions) != "2" {
			t.Errorf("cut partitions %q", l.summary(live.SummaryCutPartitions))
		}
		// The commit catches up: the next tail starts at the committed end.
		le.index(30)
		le.commit()
		l = le.mustScan(n)
		sameRows(t, "load cut after a commit", l.rows, le.rowsBelow(map[int32]int64{0: 40, 1: 40}))
		if l.summary(live.PartitionKey(0, live.SuffixCut)) != "" {
			t.Errorf("tail [30, 40) was cut: %q", l.summary(live.PartitionKey(0, live.SuffixCut)))
		}
	})
	t.Run("bytes", func(t *testing.T) {
		const budget = 400
		le := newLiveEnv(t, map[string]string{tables.PropLiveReuseMs: "0", tables.PropLiveMaxBytes: strconv.Itoa(budget)}, false)
		n := le.startNodes(1)[0]
		le.produce(40)
		// Where the budget ends: before the first record that would pass it.
		want := map[int32]int64{}
		for p := range int32(livePartitions) {
			var sum int64
			want[p] = -1
			le.kc.ReadRange(le.ctx, le.name, p, 0, 40, func(r record.Record) error {
				if sum += int64(len(r.Key) + len(r.Value)); sum > budget && want[p] < 0 {
					want[p] = r.Offset
				}
				return nil
			})
		}
		l := le.mustScan(n)
		for p := range int32(livePartitions) {
			if got := l.summary(live.PartitionKey(p, live.SuffixCut)) + " " + l.summary(live.PartitionKey(p, live.SuffixTailEnd)); got != "max-bytes "+strconv.FormatInt(want[p], 10) {
				t.Errorf("partition %d: cut, tail end = %q, want max-bytes %d", p, got, want[p])
			}
		}
		sameRows(t, "load cut at max-bytes", l.rows, le.rowsBelow(want))
		// A load reads at most the budget; the next one goes on from where it stopped.
		le.produce(1) // a new tail: not the last load's metadata
		l = le.mustScan(n)
		for p := range int32(livePartitions) {
			end, _ := strconv.ParseInt(l.summary(live.PartitionKey(p, live.SuffixTailEnd)), 10, 64)
			if end <= want[p] || l.tailFiles() != 4 {
				t.Errorf("partition %d: the next load ends at %d with %d tail files, want past %d, two files per partition", p, end, l.tailFiles(), want[p])
			}
		}
	})
}

// Concurrent loads of one tail, through both nodes, share its builds: each partition's
// tail file is measured once, by its owner; and the two nodes share one load snapshot,
// recorded by one of them and found in Postgres by the other.
func TestLiveLoadConcurrentLoadsShareBuilds(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, noReuse, false)
	nodes := le.startNodes(2)
	le.produce(500)
	var wg sync.WaitGroup
	keys := make([]string, 16)
	for i := range keys {
		n := nodes[i%2]
		wg.Go(func() {
			resp, err := http.Get(le.loadURL(n))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var out struct {
				Location string `json:"metadata-location"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
				t.Errorf("concurrent load through %s: %d %v", n.id, resp.StatusCode, err)
			}
			keys[i] = out.Location
		})
	}
	wg.Wait()
	if got := tailBuilds(nodes...); got != livePartitions {
		t.Errorf("16 concurrent loads made %d tail builds, want %d (one per partition)", got, livePartitions)
	}
	var made, reused, found int64
	for _, n := range nodes {
		st := n.srv.LiveStats()
		made, reused, found = made+st.Loads, reused+st.Reused, found+st.Found
	}
	if made != 1 || reused != 15 || found != 1 {
		t.Errorf("live stats: %d load snapshots made, %d loads reusing one, %d found in Postgres; want 1, 15 and 1", made, reused, found)
	}
	slices.Sort(keys)
	if keys = slices.Compact(keys); len(keys) != 1 {
		t.Errorf("load snapshots %v, want one for both nodes", keys)
	}
	// Either node's load reads the same rows.
	for _, n := range nodes {
		sameRows(t, "after concurrent loads", le.mustScan(n).rows, le.rows)
	}
	if got := tailBuilds(nodes...); got != livePartitions {
		t.Errorf("scans made tail builds: %d, want %d", got, livePartitions)
	}
}

// BenchmarkLiveLoad measures a table load's latency with a tail of about 10 MB of
// records (two partitions of 40,000 records of about 125 bytes, nothing committed):
//   - cold: every load builds the whole tail from Kafka (earlier tail files forgotten);
//   - incremental: one record more per partition each load (the tail files of the last
//     load reused, the new records built);
//   - repeat: nothing new (the last load's metadata reused).
//
// Run it with: go test -run '^$' -bench BenchmarkLiveLoad ./services/fileserver/internal/fileserver
func BenchmarkLiveLoad(b *testing.B) {
	le := newLiveEnv(b, nil, false)
	n := le.startNodes(1)[0]
	const perPartition = 40_000
	pad := strings.Repeat("x", 80)
	for p := range int32(livePartitions) {
		for i := 0; i < perPartition; i += 5000 {
			var recs []*kgo.Record
			for j := range 5000 {
				id := int64(p)*perPartition + int64(i+j)
				recs = append(recs, &kgo.Record{Topic: le.name, Partition: p, Key: fmt.Appendf(nil, "u-%d", id),
					Value: fmt.Appendf(nil, `{"id": %d, "msg": "click %d %s"}`, id, id, pad)})
			}
			kafkatest.Produce(b, le.prod, recs...)
		}
	}
	client := &http.Client{}
	defer client.CloseIdleConnections()
	load := func(b *testing.B) []byte {
		resp, err := client.Get(le.loadURL(n))
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("load: %d %v", resp.StatusCode, err)
		}
		return body
	}
	// The tail is whole: every record produced, nothing cut.
	var first struct {
		Metadata struct {
			Snapshots []struct {
				Summary map[string]string `json:"summary"`
			} `json:"snapshots"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(load(b), &first); err != nil || len(first.Metadata.Snapshots) != 1 ||
		first.Metadata.Snapshots[0].Summary[live.SummaryTailRecords] != strconv.Itoa(livePartitions*perPartition) ||
		first.Metadata.Snapshots[0].Summary[live.SummaryCutPartitions] != "0" {
		b.Fatalf("the first load's snapshots: %+v %v", first.Metadata.Snapshots, err)
	}
	one := func(p int32) {
		kafkatest.Produce(b, le.prod, &kgo.Record{Topic: le.name, Partition: p, Value: []byte(`{"id": -1, "msg": "one more"}`)})
	}
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(10 << 20)
		for b.Loop() {
			b.StopTimer()
			// A new record in each partition (new spans: nothing an owner measured
			// before), and no earlier tail file to reuse: the whole tail is built.
			one(0)
			one(1)
			if _, err := le.db.Exec(le.ctx, `DELETE FROM mink_data_files WHERE expires_at IS NOT NULL`); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			load(b)
		}
	})
	b.Run("incremental", func(b *testing.B) {
		load(b)
		for b.Loop() {
			b.StopTimer()
			one(0)
			one(1)
			b.StartTimer()
			load(b)
		}
	})
	b.Run("repeat", func(b *testing.B) {
		load(b)
		for b.Loop() {
			load(b)
		}
	})
}
