package writer

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	if code == 0 {
		// Everything a test starts (writers, assembly builds, clients) has stopped.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const topic = "events"

// fixture is one table over a kfake topic, with partition leases taken in SQL so the
// test indexes ranges itself (real builds, real sizes and checksums).
type fixture struct {
	t      *testing.T
	ctx    context.Context
	db     *pgxpool.Pool
	kafka  *kafkatest.Cluster
	src    *kafkasrc.Client
	prod   *kgo.Client
	tbl    tables.Table
	leases map[int32]lease.Lease
}

func newFixture(t *testing.T, partitions int32, props map[string]string) *fixture {
	t.Helper()
	db, _ := pgtest.DB(t)
	return newFixtureDB(t, db, partitions, props)
}

// privateDB is a database on a Postgres of the test's own, which it may stop and start.
func privateDB(t *testing.T) (*pgtest.Cluster, *pgxpool.Pool) {
	t.Helper()
	c := pgtest.Start(t)
	url, err := c.CreateDB(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return c, db
}

// newFixtureDB is newFixture on a given database.
func newFixtureDB(t *testing.T, db *pgxpool.Pool, partitions int32, props map[string]string) *fixture {
	t.Helper()
	return newFixtureSpec(t, db, partitions, props, nil)
}

// newFixtureSpec is newFixtureDB of a table stored with partition spec ps (nil: none).
func newFixtureSpec(t *testing.T, db *pgxpool.Pool, partitions int32, props map[string]string, ps *partition.Spec) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	kc := kafkatest.New(t, kafkatest.Brokers(1))
	kc.CreateTopic(topic, partitions, nil)
	src, err := kafkasrc.New(kc.Addrs(), kafkasrc.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	// Assembly merges 64 ranges of a tier at the fewest: none unless a test sets fewer,
	// so the data files are the ranges.
	base := map[string]string{tables.PropCommitInterval: "30ms", PropMaintenanceInterval: "30ms", PropAssemblyTierFiles: "64"}
	for k, v := range props {
		base[k] = v
	}
	tbl, err := tables.Create(ctx, db, tables.Table{
		Name: "events", Topic: topic,
		Spec:       tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "id", Type: "long"}, {Name: "msg", Type: "string"}}},
		Properties: base, PartitionSpec: ps,
	}, partitions)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, db: db, kafka: kc, src: src, tbl: tbl, leases: map[int32]lease.Lease{},
		prod: kc.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))}
	for p := range partitions {
		f.leases[p] = f.take(lease.KindPartition, p, "indexer")
	}
	return f
}

// take gives holder the lease in SQL, with a new epoch, as a lease round would.
func (f *fixture) take(kind lease.Kind, partition int32, holder string) lease.Lease {
	f.t.Helper()
	return leasetest.Take(f.t, f.db, lease.Scope{Kind: kind, Table: f.tbl.ID, Partition: partition}, holder)
}

// produce writes n JSON records to a partition.
func (f *fixture) produce(p int32, n int) {
	f.t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i),
			Value: fmt.Appendf(nil, `{"id":%d,"msg":"message %d of partition %d"}`, i, i, p)}
	}
	kafkatest.Produce(f.t, f.prod, recs...)
}

// abortedTxn writes n records to a partition in a transaction that aborts: offsets that
// hold no row.
func (f *fixture) abortedTxn(p int32, n int) {
	f.t.Helper()
	tx := f.kafka.Client(kgo.TransactionalID(fmt.Sprintf("tx-%d", p)), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := tx.BeginTransaction(); err != nil {
		f.t.Fatal(err)
	}
	for i := range n {
		kafkatest.Produce(f.t, tx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, `{"id":%d}`, -i)})
	}
	if err := tx.EndTransaction(f.ctx, kgo.TryAbort); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) offsets(p int32) kafkasrc.PartitionOffsets {
	f.t.Helper()
	offs, err := f.src.Offsets(f.ctx, topic)
	if err != nil {
		f.t.Fatal(err)
	}
	return offs[p]
}

// index cuts ranges of every step offsets from the partition's indexed end to its last
// stable offset, each built once to measure it, as the indexer does.
func (f *fixture) index(p int32, step int64) {
	f.t.Helper()
	st, err := ranges.State(f.ctx, f.db, f.tbl.ID, p)
	if err != nil {
		f.t.Fatal(err)
	}
	po := f.offsets(p)
	start := st.IndexedEnd
	if !st.Indexed {
		start = po.LogStart
	}
	settings, _ := json.Marshal(parquetbuild.DefaultSettings())
	for start < po.LastStable {
		end := min(start+step, po.LastStable)
		fs, err := rangefile.BuildOffsets(f.ctx, f.src, tablecodec.New(f.db, nil), f.tbl, parquetbuild.DefaultSettings(), p, start, end, io.Discard)
		if err != nil {
			f.t.Fatal(err)
		}
		stats, _ := json.Marshal(fs.Columns)
		err = ranges.Append(f.ctx, f.db, f.leases[p], ranges.Range{Table: f.tbl.ID, Partition: p, Start: start, End: end,
			Records: fs.RowCount, DecodeErrors: fs.DecodeErrors, Size: fs.Size, SHA256: fs.SHA256, Settings: settings, Stats: stats})
		if err != nil {
			f.t.Fatal(err)
		}
		start = end
	}
}

// deleteRecords moves partitions' log starts, in one request, as retention would.
func (f *fixture) deleteRecords(at map[int32]int64) {
	f.t.Helper()
	os := kadm.Offsets{topic: {}}
	for p, o := range at {
		os[topic][p] = kadm.Offset{Topic: topic, Partition: p, At: o}
	}
	resp, err := kadm.NewClient(f.kafka.Client()).DeleteRecords(f.ctx, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// testLog writes a writer's log lines to the test's output.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func (f *fixture) newWriter() *Writer {
	f.t.Helper()
	w, err := New(Options{DB: f.db, Kafka: f.src, Logger: slog.New(slog.NewTextHandler(testLog{f.t}, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

// run runs w's lease worker under l until the returned stop is called (also at the end
// of the test); done closes when Work returns.
func (f *fixture) run(w *Writer, l lease.Lease) (stop func(), done <-chan struct{}) {
	ctx, cancel := context.WithCancel(f.ctx)
	ch := make(chan struct{})
	go func() { defer close(ch); w.Work(ctx, l) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-ch }) }
	f.t.Cleanup(stop)
	return stop, ch
}

// view is a table's committed state, read in one consistent database snapshot.
type view struct {
	version  int64
	key      string
	md       table.Metadata
	cover    map[int32]icebergmeta.Coverage
	files    map[int32][]file // the current snapshot's, by start
	metaRows map[string][]byte
	dataRows map[string]file
	ranges   map[int32][]ranges.Range
}

type file struct {
	key                       string
	partition                 int32
	start, end, records, size int64
	df                        iceberg.DataFile
}

func (f *fixture) view() view {
	f.t.Helper()
	v, err := f.viewE()
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

// viewE reads the view; it never fails the test itself, so any goroutine may call it.
func (f *fixture) viewE() (view, error) {
	v := view{cover: map[int32]icebergmeta.Coverage{}, files: map[int32][]file{}, metaRows: map[string][]byte{}, dataRows: map[string]file{}, ranges: map[int32][]ranges.Range{}}
	err := pgx.BeginTxFunc(f.ctx, f.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		err := tx.QueryRow(f.ctx, `SELECT metadata_key, version FROM mink_table_meta WHERE table_id = $1`, f.tbl.ID).Scan(&v.key, &v.version)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no metadata yet: version 0
			return err
		}
		rows, _ := tx.Query(f.ctx, `SELECT key, content FROM mink_meta_files WHERE table_id = $1`, f.tbl.ID)
		var k string
		var c []byte
		if _, err := pgx.ForEachRow(rows, []any{&k, &c}, func() error { v.metaRows[k] = c; return nil }); err != nil {
			return err
		}
		rows, _ = tx.Query(f.ctx, `SELECT key, partition, start_offset, end_offset, record_count, file_size FROM mink_data_files WHERE table_id = $1`, f.tbl.ID)
		var x file
		if _, err := pgx.ForEachRow(rows, []any{&x.key, &x.partition, &x.start, &x.end, &x.records, &x.size}, func() error { v.dataRows[x.key] = x; return nil }); err != nil {
			return err
		}
		for p := range f.leases {
			rs, err := ranges.List(f.ctx, tx, f.tbl.ID, p, -1)
			if err != nil {
				return err
			}
			v.ranges[p] = rs
		}
		return nil
	})
	if err != nil {
		return v, err
	}
	if v.version == 0 {
		return v, nil
	}
	if v.md, err = table.ParseMetadataBytes(v.metaRows[v.key]); err != nil {
		return v, fmt.Errorf("current metadata %s: %w", v.key, err)
	}
	snap := v.md.CurrentSnapshot()
	if snap == nil {
		return v, nil
	}
	if v.cover, err = icebergmeta.ParseCoverage(snap.Summary); err != nil {
		return v, err
	}
	es, err := v.entries(snap)
	if err != nil {
		return v, err
	}
	for _, e := range es {
		key, _ := layout.KeyOf(e.DataFile().FilePath())
		row, ok := v.dataRows[key]
		if !ok {
			return v, fmt.Errorf("current snapshot names %s, which has no mink_data_files row", key)
		}
		row.df = e.DataFile()
		v.files[row.partition] = append(v.files[row.partition], row)
	}
	for p := range v.files {
		slices.SortFunc(v.files[p], func(a, b file) int { return cmp.Compare(a.start, b.start) })
	}
	return v, nil
}

// entries reads the live entries of a snapshot from the stored manifest list and
// manifests, as any Iceberg reader would.
func (v view) entries(s *table.Snapshot) ([]iceberg.ManifestEntry, error) {
	ms, err := v.manifests(s)
	if err != nil {
		return nil, err
	}
	var out []iceberg.ManifestEntry
	for _, m := range ms {
		mk, _ := layout.KeyOf(m.FilePath())
		b, ok := v.metaRows[mk]
		if !ok {
			return nil, fmt.Errorf("snapshot %d lists manifest %s, which is not stored", s.SnapshotID, mk)
		}
		es, err := iceberg.ReadManifest(m, bytes.NewReader(b), true)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

func (v view) manifests(s *table.Snapshot) ([]iceberg.ManifestFile, error) {
	lk, _ := layout.KeyOf(s.ManifestList)
	b, ok := v.metaRows[lk]
	if !ok {
		return nil, fmt.Errorf("snapshot %d's manifest list %s is not stored", s.SnapshotID, lk)
	}
	return iceberg.ReadManifestList(bytes.NewReader(b))
}

func (v view) nfiles() int {
	n := 0
	for _, fs := range v.files {
		n += len(fs)
	}
	return n
}

func (v view) summary(k string) string { return v.md.CurrentSnapshot().Summary.Properties[k] }

// covers reports whether the current snapshot covers every partition up to its indexed
// end.
func (f *fixture) covers(v view) bool {
	parts, err := ranges.Partitions(f.ctx, f.db, f.tbl.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, p := range parts {
		if p.Indexed && v.cover[p.Partition].End != p.IndexedEnd {
			return false
		}
	}
	return true
}

// waitCovered waits until the current snapshot covers every indexed offset.
func (f *fixture) waitCovered() view {
	f.t.Helper()
	var v view
	leasetest.Eventually(f.t, 20*time.Second, "the snapshot covers the index", func() bool {
		v = f.view()
		return v.md != nil && v.md.CurrentSnapshot() != nil && f.covers(v)
	})
	return v
}

// kafkaRows counts the committed records Kafka holds in [start, end) of a partition
// and returns their offsets.
func (f *fixture) kafkaRows(p int32, start, end int64) []int64 {
	f.t.Helper()
	var offs []int64
	if err := f.src.ReadRange(f.ctx, topic, p, start, end, func(r record.Record) error {
		offs = append(offs, r.Offset)
		return nil
	}); err != nil {
		f.t.Fatalf("read [%d, %d) of partition %d: %v", start, end, p, err)
	}
	return offs
}

// checkExact checks invariant 2 on the current snapshot: per partition, its files lie
// inside the covered offsets without overlapping, each holds exactly the Kafka records
// of its offsets, and together they hold every record of the covered offsets (so any
// gap between files holds no record); the summary's totals add up; and every file
// carries column statistics that match its rows.
func (f *fixture) checkExact(v view) {
	f.t.Helper()
	sc := v.md.CurrentSchema()
	offsetField, _ := sc.FindFieldByName(tableschema.ColumnKafkaOffset)
	idField, _ := sc.FindFieldByName("id")
	var total, nfiles int64
	for p, c := range v.cover {
		pos := c.Start
		var rows int64
		for _, fl := range v.files[p] {
			if fl.start < pos || fl.end > c.End {
				f.t.Fatalf("partition %d: file [%d, %d) overlaps or leaves the covered [%d, %d) at %d", p, fl.start, fl.end, c.Start, c.End, pos)
			}
			offs := f.kafkaRows(p, fl.start, fl.end)
			if int64(len(offs)) != fl.records || fl.df.Count() != fl.records || fl.df.FileSizeBytes() != fl.size {
				f.t.Fatalf("partition %d file [%d, %d): %d rows in Kafka, manifest says %d rows %d bytes, row says %d rows %d bytes",
					p, fl.start, fl.end, len(offs), fl.df.Count(), fl.df.FileSizeBytes(), fl.records, fl.size)
			}
			if fl.df.Partition()[1000] != p {
				f.t.Fatalf("file %s has partition value %v", fl.key, fl.df.Partition())
			}
			if fl.df.ValueCounts()[offsetField.ID] != fl.records || fl.df.ValueCounts()[idField.ID] != fl.records ||
				le64(fl.df.LowerBoundValues()[offsetField.ID]) != offs[0] || le64(fl.df.UpperBoundValues()[offsetField.ID]) != offs[len(offs)-1] {
				f.t.Fatalf("file %s: column statistics %v %v %v do not match its rows", fl.key, fl.df.ValueCounts(), fl.df.LowerBoundValues(), fl.df.UpperBoundValues())
			}
			rows += fl.records
			pos = fl.end
		}
		if want := int64(len(f.kafkaRows(p, c.Start, c.End))); rows != want {
			f.t.Fatalf("partition %d: files hold %d rows, Kafka has %d in the covered [%d, %d)", p, rows, want, c.Start, c.End)
		}
		total += rows
		nfiles += int64(len(v.files[p]))
	}
	for p := range v.files {
		if _, ok := v.cover[p]; !ok {
			f.t.Fatalf("partition %d has files but no coverage", p)
		}
	}
	if got := v.summary("total-records"); got != strconv.FormatInt(total, 10) {
		f.t.Fatalf("total-records %s, files hold %d", got, total)
	}
	if got := v.summary("total-data-files"); got != strconv.FormatInt(nfiles, 10) {
		f.t.Fatalf("total-data-files %s, %d files", got, nfiles)
	}
}

func le64(b []byte) int64 {
	if len(b) != 8 {
		return -1
	}
	return int64(binary.LittleEndian.Uint64(b))
}

// errOrphans: rows no live snapshot names are left (collection has not caught up).
var errOrphans = errors.New("rows no live snapshot names are left")

// checkCollected checks that what every live snapshot names exists (data file rows,
// manifest lists, manifests, the metadata JSON and its log), and, when exact, that
// nothing else is left (else errOrphans). It never fails the test itself.
func checkCollected(v view, exact bool) error {
	if v.md == nil {
		return nil
	}
	namedMeta := map[string]bool{v.key: true}
	for e := range v.md.PreviousFiles() {
		k, _ := layout.KeyOf(e.MetadataFile)
		namedMeta[k] = true
	}
	namedData := map[string]bool{}
	for _, s := range v.md.Snapshots() {
		lk, _ := layout.KeyOf(s.ManifestList)
		namedMeta[lk] = true
		ms, err := v.manifests(&s)
		if err != nil {
			return err
		}
		for _, m := range ms {
			mk, _ := layout.KeyOf(m.FilePath())
			namedMeta[mk] = true
		}
		es, err := v.entries(&s)
		if err != nil {
			return err
		}
		for _, e := range es {
			k, _ := layout.KeyOf(e.DataFile().FilePath())
			namedData[k] = true
		}
	}
	for k := range namedMeta {
		if _, ok := v.metaRows[k]; !ok {
			return fmt.Errorf("version %d names metadata file %s, which was removed", v.version, k)
		}
	}
	for k := range namedData {
		if _, ok := v.dataRows[k]; !ok {
			return fmt.Errorf("a live snapshot of version %d names data file %s, whose row was removed", v.version, k)
		}
	}
	if !exact {
		return nil
	}
	for k := range v.metaRows {
		if !namedMeta[k] {
			return fmt.Errorf("%w: metadata file %s", errOrphans, k)
		}
	}
	for k := range v.dataRows {
		if !namedData[k] {
			return fmt.Errorf("%w: data file %s", errOrphans, k)
		}
	}
	return nil
}

// version reads the commit pointer.
func (f *fixture) version() (int64, string) {
	f.t.Helper()
	var v int64
	var k string
	if err := f.db.QueryRow(f.ctx, `SELECT version, metadata_key FROM mink_table_meta WHERE table_id = $1`, f.tbl.ID).Scan(&v, &k); err != nil {
		f.t.Fatal(err)
	}
	return v, k
}

func (f *fixture) count(sql string) int {
	f.t.Helper()
	var n int
	if err := f.db.QueryRow(f.ctx, sql, f.tbl.ID).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}
