package indexer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/services/indexer/internal/indexer"
)

func TestMain(m *testing.M) {
	if os.Getenv("MINK_TEST_REBUILD") != "" {
		rebuildMain()
		return
	}
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

var spec = tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
	{Name: "id", Type: "long", Required: true}, {Name: "msg", Type: "string"}, {Name: "amount", Type: "decimal(10,2)"}}}

type env struct {
	db    *pgxpool.Pool
	url   string
	kafka *kafkatest.Cluster
	kc    *kafkasrc.Client
	prod  *kgo.Client
}

func newEnv(t testing.TB) *env {
	db, url := pgtest.DB(t)
	if err := pgschema.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	k := kafkatest.New(t, kafkatest.Brokers(1))
	kc, err := kafkasrc.New(k.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return &env{db: db, url: url, kafka: k, kc: kc, prod: k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))}
}

// startIndexer runs one indexer node in this process: a lease manager whose partition
// workers are the real indexer.
func (e *env) startIndexer(t *testing.T, id string) (stop func()) {
	return e.startIndexerWith(t, id, noop.NewMeterProvider().Meter("test"))
}

// startIndexerWith is startIndexer reporting its metrics to meter.
func (e *env) startIndexerWith(t *testing.T, id string, meter metric.Meter) (stop func()) {
	stop, _ = e.startIndexerOpts(t, id, indexer.Options{Meter: meter}, nil)
	return stop
}

// startIndexerOpts is startIndexer with o (its DB, Kafka and Logger set here) and tune
// applied to the indexer before it runs; it returns the indexer too.
func (e *env) startIndexerOpts(t testing.TB, id string, o indexer.Options, tune func(*indexer.Indexer)) (stop func(), ix *indexer.Indexer) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o.DB, o.Kafka, o.Logger = e.db, e.kc, log
	if o.Meter == nil {
		o.Meter = noop.NewMeterProvider().Meter("test")
	}
	ix, err := indexer.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ix.GrowthCheck = 200 * time.Millisecond
	if tune != nil {
		tune(ix)
	}
	m, err := lease.NewManager(e.db, lease.Config{NodeID: id, Roles: []lease.Role{lease.RoleIndexer}, GRPCAddr: id, TTL: 1500 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m.OnLease(lease.KindPartition, ix.Work)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop, ix
}

func (e *env) createTable(t *testing.T, name string, partitions int32, props map[string]string) tables.Table {
	e.kafka.CreateTopic(name, partitions, nil)
	if props == nil {
		props = map[string]string{}
	}
	if _, ok := props[tables.PropRangeMaxAge]; !ok {
		props[tables.PropRangeMaxAge] = "200ms"
	}
	tbl, err := tables.Create(context.Background(), e.db, tables.Table{Name: name, Spec: spec, Properties: props}, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func (e *env) produce(t *testing.T, topic string, p int32, values ...string) {
	kafkatest.Produce(t, e.prod, valueRecords(topic, p, values)...)
}

// produceErr is produce for a goroutine other than the test's, which must not call
// t.Fatal.
func (e *env) produceErr(ctx context.Context, topic string, p int32, values ...string) error {
	return e.prod.ProduceSync(ctx, valueRecords(topic, p, values)...).FirstErr()
}

func valueRecords(topic string, p int32, values []string) []*kgo.Record {
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
	}
	return recs
}

// committed returns the offsets of every committed data record of a partition, read
// straight from Kafka: what the index must cover exactly once.
func (e *env) committed(t testing.TB, topic string, p int32) (offs []int64, hwm int64) {
	o, err := e.kc.Offsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	err = e.kc.ReadRange(context.Background(), topic, p, o[p].LogStart, o[p].LastStable, func(r record.Record) error {
		offs = append(offs, r.Offset)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return offs, o[p].LastStable
}

// checkTiling: the ranges of partition p tile [first, end) with no gap or overlap, end is
// the last stable offset, and their record counts add up to the committed records there.
func (e *env) checkTiling(t *testing.T, tbl tables.Table, p int32) []ranges.Range {
	t.Helper()
	offs, lso := e.committed(t, tbl.Topic, p)
	var rs []ranges.Range
	leasetest.Eventually(t, 20*time.Second, fmt.Sprintf("partition %d indexed up to %d", p, lso), func() bool {
		st, err := ranges.State(context.Background(), e.db, tbl.ID, p)
		return err == nil && st.Indexed && st.IndexedEnd == lso
	})
	rs, err := ranges.List(context.Background(), e.db, tbl.ID, p, -1)
	if err != nil {
		t.Fatal(err)
	}
	var records int64
	for i, r := range rs {
		if i > 0 && r.Start != rs[i-1].End {
			t.Fatalf("partition %d: range %d starts at %d, previous ended at %d", p, i, r.Start, rs[i-1].End)
		}
		records += r.Records
	}
	if records != int64(len(offs)) {
		t.Fatalf("partition %d: ranges hold %d records, Kafka has %d committed", p, records, len(offs))
	}
	if len(rs) > 0 && rs[len(rs)-1].End != lso {
		t.Fatalf("partition %d: index ends at %d, last stable offset %d", p, rs[len(rs)-1].End, lso)
	}
	return rs
}

func jsonEvents(from, n int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf(`{"id":%d,"msg":"event %d","amount":"%d.25"}`, i, i, i))
	}
	return out
}

func TestIndexTilesEveryPartition(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := e.createTable(t, "events", 3, nil)
	for p := int32(0); p < 3; p++ {
		e.produce(t, "events", p, jsonEvents(0, 50)...)
	}
	e.startIndexer(t, "idx-a")
	for p := int32(0); p < 3; p++ {
		e.produce(t, "events", p, jsonEvents(50, 30)...)
	}
	for p := int32(0); p < 3; p++ {
		e.checkTiling(t, tbl, p)
	}
	// Every range rebuilds byte for byte from Kafka.
	rs, _ := ranges.List(context.Background(), e.db, tbl.ID, 1, -1)
	for _, r := range rs {
		if _, err := rangefile.Build(context.Background(), e.kc, tablecodec.New(e.db, nil), tbl, r, io.Discard); err != nil {
			t.Fatalf("rebuild [%d, %d): %v", r.Start, r.End, err)
		}
	}
}

// Transactions (committed and aborted), compaction gaps and deleted records: the index
// still tiles the partition, counting only committed, surviving records.
func TestIndexTransactionsCompactionDeletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.kafka.CreateTopic("tx", 1, map[string]string{"cleanup.policy": "compact"})
	tbl, err := tables.Create(context.Background(), e.db, tables.Table{Name: "tx", Spec: spec,
		Properties: map[string]string{tables.PropRangeMaxAge: "200ms"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.produce(t, "tx", 0, jsonEvents(0, 10)...)
	for i, commit := range []bool{true, false, true, false} {
		txc := e.kafka.Client(kgo.TransactionalID(fmt.Sprintf("txid-%d", i)), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx := context.Background()
		if err := txc.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range jsonEvents(100*(i+1), 5) {
			if err := txc.ProduceSync(ctx, &kgo.Record{Topic: "tx", Partition: 0, Value: []byte(v), Key: []byte("k" + v[6:9])}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		end := kgo.TryCommit
		if !commit {
			end = kgo.TryAbort
		}
		if err := txc.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	// Keyed overwrites, then compaction, all before indexing: the index tiles across the
	// holes compaction leaves.
	var keyed []*kgo.Record
	for i := 0; i < 20; i++ {
		keyed = append(keyed, &kgo.Record{Topic: "tx", Partition: 0, Key: []byte(fmt.Sprintf("key-%d", i%4)), Value: []byte(jsonEvents(1000+i, 1)[0])})
	}
	kafkatest.Produce(t, e.prod, keyed...)
	e.produce(t, "tx", 0, jsonEvents(2000, 5)...)
	e.kafka.Compact()
	offs, _ := e.committed(t, "tx", 0)
	survivors := 0
	for _, o := range offs {
		if o >= keyed[0].Offset && o <= keyed[len(keyed)-1].Offset {
			survivors++
		}
	}
	if survivors >= len(keyed) {
		t.Fatalf("compaction left all %d keyed records: no holes to test", survivors)
	}
	e.startIndexer(t, "idx-a")
	e.checkTiling(t, tbl, 0)
	// More records while indexing: the index goes on from where it is.
	e.produce(t, "tx", 0, jsonEvents(3000, 5)...)
	e.checkTiling(t, tbl, 0)
}

// Kafka deletes records before they are indexed: the index records the lost offsets as an
// empty range and goes on from the log start, never stalling.
func TestIndexSkipsDeletedOffsets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := e.createTable(t, "del", 1, nil)
	e.produce(t, "del", 0, jsonEvents(0, 20)...)
	// Index a first part, then stop, then Kafka deletes past the index.
	stop := e.startIndexer(t, "idx-a")
	e.checkTiling(t, tbl, 0)
	stop()
	e.produce(t, "del", 0, jsonEvents(20, 20)...)
	adm := kadm.NewClient(e.kafka.Client())
	offs := kadm.Offsets{}
	offs.AddOffset("del", 0, 30, -1)
	if _, err := adm.DeleteRecords(context.Background(), offs); err != nil {
		t.Fatal(err)
	}
	e.produce(t, "del", 0, jsonEvents(40, 5)...)
	e.startIndexer(t, "idx-b")
	leasetest.Eventually(t, 20*time.Second, "indexed to 45", func() bool {
		st, _ := ranges.State(context.Background(), e.db, tbl.ID, 0)
		return st.IndexedEnd == 45
	})
	rs, _ := ranges.List(context.Background(), e.db, tbl.ID, 0, -1)
	var sawGone bool
	for i, r := range rs {
		if i > 0 && r.Start != rs[i-1].End {
			t.Fatalf("gap at %d", r.Start)
		}
		if r.Start == 20 && r.End == 30 && r.Records == 0 {
			sawGone = true
		}
	}
	if !sawGone {
		t.Fatalf("no empty range for the deleted offsets [20, 30): %+v", rs)
	}
}

// The lease moves mid-stream from one indexer to another: no gap, no overlap. Records
// keep coming until the new holder has indexed under its own epoch on both partitions.
func TestHandoffMidStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := e.createTable(t, "hand", 2, nil)
	stopA := e.startIndexer(t, "idx-a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; ctx.Err() == nil && i < 2000; i++ {
			for p := int32(0); p < 2; p++ {
				if err := e.produceErr(ctx, "hand", p, jsonEvents(i*10, 10)...); err != nil && ctx.Err() == nil {
					t.Errorf("produce: %v", err)
					return
				}
			}
			time.Sleep(15 * time.Millisecond) // the pace of the stream, not a wait
		}
	}()
	epochs := func(p int32) map[int64]bool {
		rs, _ := ranges.List(context.Background(), e.db, tbl.ID, p, -1)
		out := map[int64]bool{}
		for _, r := range rs {
			out[r.Epoch] = true
		}
		return out
	}
	leasetest.Eventually(t, 10*time.Second, "some ranges stored", func() bool {
		st, _ := ranges.State(context.Background(), e.db, tbl.ID, 0)
		st1, _ := ranges.State(context.Background(), e.db, tbl.ID, 1)
		return st.Ranges >= 2 && st1.Ranges >= 2
	})
	e.startIndexer(t, "idx-b") // shares drop: idx-a hands one partition over
	leasetest.Eventually(t, 10*time.Second, "idx-b to hold a partition", func() bool {
		ls, err := lease.ListLeases(context.Background(), e.db, tbl.ID)
		if err != nil {
			return false
		}
		for _, l := range ls {
			if l.Holder == "idx-b" {
				return true
			}
		}
		return false
	})
	stopA() // clean leave mid-stream: idx-b takes the rest
	leasetest.Eventually(t, 20*time.Second, "both partitions indexed under a second epoch while records keep coming", func() bool {
		return len(epochs(0)) >= 2 && len(epochs(1)) >= 2
	})
	select {
	case <-produced:
		t.Fatal("production ended before the handoff: it did not happen mid-stream")
	default:
	}
	cancel()
	<-produced
	for p := int32(0); p < 2; p++ {
		e.checkTiling(t, tbl, p)
	}
}

// Records that do not fit the schema are still rows, with _mink_error set; a huge
// record and a tombstone too. The partition never stalls.
func TestBadRecordsAreRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := e.createTable(t, "bad", 1, nil)
	bad := []string{
		`{"id":1,"msg":"ok","amount":"1.00"}`,
		`{not json`,
		`{"id":"two"}`,
		`{"msg":"no id"}`,
		`[1,2,3]`,
		`{"id":4,"amount":"1234567890123.45"}`,
		`{"id":5,"msg":"` + strings.Repeat("x", 900<<10) + `"}`,
		`{"id":6}`,
	}
	e.produce(t, "bad", 0, bad...)
	kafkatest.Produce(t, e.prod, &kgo.Record{Topic: "bad", Partition: 0, Value: nil}) // tombstone
	e.startIndexer(t, "idx-a")
	rs := e.checkTiling(t, tbl, 0)
	var rows, errs int64
	for _, r := range rs {
		rows += r.Records
		errs += r.DecodeErrors
	}
	if rows != 9 {
		t.Fatalf("%d rows, want 9 (every record is a row)", rows)
	}
	// Malformed, wrong type, missing required, not an object, out of range, tombstone.
	if errs != 6 {
		t.Fatalf("%d decode errors, want 6", errs)
	}
}

// The file of a range rebuilt in another process has the same size and checksum.
func TestRebuildInAnotherProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := e.createTable(t, "det", 1, nil)
	e.produce(t, "det", 0, jsonEvents(0, 500)...)
	e.startIndexer(t, "idx-a")
	rs := e.checkTiling(t, tbl, 0)
	r := rs[len(rs)-1]
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MINK_TEST_REBUILD=1", "MINK_TEST_DB="+e.url, "MINK_TEST_BROKERS="+strings.Join(e.kafka.Addrs(), ","),
		"MINK_TEST_RANGE="+fmt.Sprintf("%d/%d/%d", tbl.ID, r.Partition, r.Start))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("rebuild process: %v: %s", err, out.String())
	}
	var got struct {
		Size   int64
		SHA256 string
	}
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &got); err != nil {
		t.Fatalf("rebuild output %q: %v", out.String(), err)
	}
	if got.Size != r.Size || got.SHA256 != r.SHA256 {
		t.Fatalf("other process built %d bytes %s, index has %d bytes %s", got.Size, got.SHA256, r.Size, r.SHA256)
	}
}

// rebuildMain is the other process of TestRebuildInAnotherProcess.
func rebuildMain() {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, os.Getenv("MINK_TEST_DB"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	parts := strings.Split(os.Getenv("MINK_TEST_RANGE"), "/")
	id, _ := strconv.ParseInt(parts[0], 10, 64)
	p, _ := strconv.Atoi(parts[1])
	start, _ := strconv.ParseInt(parts[2], 10, 64)
	tbl, err := tables.GetByID(ctx, db, id)
	if err != nil {
		panic(err)
	}
	rs, err := ranges.List(ctx, db, id, int32(p), start)
	if err != nil || len(rs) == 0 {
		panic(fmt.Sprint("no range: ", err))
	}
	kc, err := kafkasrc.New(strings.Split(os.Getenv("MINK_TEST_BROKERS"), ","))
	if err != nil {
		panic(err)
	}
	defer kc.Close()
	fs, err := rangefile.Build(ctx, kc, tablecodec.New(db, nil), tbl, rs[0], io.Discard)
	if err != nil {
		panic(err)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"Size": fs.Size, "SHA256": fs.SHA256})
}

// gauges are the values of an int64 gauge of table by partition, as a scrape would read
// them now.
func gauges(t *testing.T, r *sdkmetric.ManualReader, name, table string) map[int64]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[int64]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, d := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				p, _ := d.Attributes.Value(attribute.Key("partition"))
				if tbl, _ := d.Attributes.Value(attribute.Key("table")); tbl.AsString() == table {
					out[p.AsInt64()] = d.Value
				}
			}
		}
	}
	return out
}

// Lag and pause figures are those of the partitions the node holds now: measured after
// each poll, and gone with the lease, so a partition handed to another node is never
// reported by two (one of them frozen at its last value).
func TestLagFollowsTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createTable(t, "lagged", 2, nil)
	for p := int32(0); p < 2; p++ {
		e.produce(t, "lagged", p, jsonEvents(0, 40)...)
	}
	ra, rb := sdkmetric.NewManualReader(), sdkmetric.NewManualReader()
	meter := func(r sdkmetric.Reader) metric.Meter {
		return sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)).Meter("test")
	}
	caughtUp := func(r *sdkmetric.ManualReader) func() bool {
		return func() bool {
			lag, paused := gauges(t, r, "mink.indexer.lag", "default.lagged"), gauges(t, r, "mink.indexer.paused", "default.lagged")
			return len(lag) == 2 && lag[0] == 0 && lag[1] == 0 && len(paused) == 2 && paused[0] == 0 && paused[1] == 0
		}
	}
	// A table of 2 partitions over a topic of 1: partition 1 cannot be indexed.
	e.kafka.CreateTopic("ghost", 1, nil)
	if _, err := tables.Create(context.Background(), e.db, tables.Table{Name: "ghost", Spec: spec}, 2); err != nil {
		t.Fatal(err)
	}
	stopA := e.startIndexerWith(t, "idx-a", meter(ra))
	leasetest.Eventually(t, 20*time.Second, "idx-a to report both partitions caught up, none paused", caughtUp(ra))
	leasetest.Eventually(t, 20*time.Second, "idx-a to report partition 1 of ghost paused, not 0", func() bool {
		p := gauges(t, ra, "mink.indexer.paused", "default.ghost")
		return len(p) == 2 && p[0] == 0 && p[1] == 1
	})
	stopA()
	for _, tbl := range []string{"default.lagged", "default.ghost"} {
		if lag, paused := gauges(t, ra, "mink.indexer.lag", tbl), gauges(t, ra, "mink.indexer.paused", tbl); len(lag)+len(paused) != 0 {
			t.Fatalf("idx-a holds nothing and still reports %s: lag %v, paused %v", tbl, lag, paused)
		}
	}
	e.startIndexerWith(t, "idx-b", meter(rb))
	for p := int32(0); p < 2; p++ {
		e.produce(t, "lagged", p, jsonEvents(40, 10)...)
	}
	leasetest.Eventually(t, 20*time.Second, "idx-b to report both partitions caught up", caughtUp(rb))
}
