package indexer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/upsert"
	"github.com/minkhq/mink/services/indexer/internal/indexer"
)

// produceKeyed produces n records of keys key(i) with values of about size bytes to
// partition 0 of topic, every 97th a tombstone and every 5th with a header.
func produceKeyed(t testing.TB, e *env, topic string, n, size int, key func(i int) string) {
	t.Helper()
	pad := strings.Repeat("x", size)
	var recs []*kgo.Record
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key(i)),
			Value: fmt.Appendf(nil, `{"id":%d,"msg":"%s %d","amount":"%d.25"}`, i, pad, i, i)}
		if i%97 == 96 {
			r.Value = nil
		}
		if i%5 == 0 {
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}}
		}
		recs = append(recs, r)
		if len(recs) == 200 {
			kafkatest.Produce(t, e.prod, recs...)
			recs = nil
		}
	}
	kafkatest.Produce(t, e.prod, recs...)
}

// inMemory builds range r's file the way every upsert file was built before records had
// a bound: every latest record held, then built in offset order.
func inMemory(t *testing.T, e *env, tbl tables.Table, r ranges.Range) parquetbuild.FileStats {
	t.Helper()
	ctx := context.Background()
	var s parquetbuild.Settings
	if err := json.Unmarshal(r.Settings, &s); err != nil {
		t.Fatal(err)
	}
	dec, err := tablecodec.New(e.db, nil).Decoder(ctx, tbl, s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := parquetbuild.NewBuilderFor(io.Discard, dec, s)
	if err != nil {
		t.Fatal(err)
	}
	l := upsert.NewLatest(dec.KeyHash)
	if err := e.kc.ReadRange(ctx, tbl.Topic, r.Partition, r.Start, r.End, func(rec record.Record) error { l.Add(rec); return nil }); err != nil {
		t.Fatal(err)
	}
	rows, _ := l.Finish()
	for _, row := range rows {
		if err := b.Add(row); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := b.Close()
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// indexedUpsert waits until partition 0 of tbl is indexed to the last stable offset
// and returns its ranges, checked to tile it.
func indexedUpsert(t testing.TB, e *env, tbl tables.Table) []ranges.Range {
	t.Helper()
	ctx := context.Background()
	_, lso := e.committed(t, tbl.Topic, 0)
	leasetest.Eventually(t, 60*time.Second, fmt.Sprintf("indexed up to %d", lso), func() bool {
		st, err := ranges.State(ctx, e.db, tbl.ID, 0)
		return err == nil && st.Indexed && st.IndexedEnd == lso
	})
	rs, err := ranges.List(ctx, e.db, tbl.ID, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if i > 0 && r.Start != rs[i-1].End {
			t.Fatalf("range %d starts at %d, previous ended at %d", i, r.Start, rs[i-1].End)
		}
	}
	return rs
}

// counter is the sum of an int64 counter over its attributes, as a scrape reads it now.
func counter(t *testing.T, r *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				for _, d := range m.Data.(metricdata.Sum[int64]).DataPoints {
					n += d.Value
				}
			}
		}
	}
	return n
}

// An upsert partition of many distinct keys with large values: its open range holds at
// most UpsertHold bytes of records (then each key's latest offset), whatever
// mink.range.target-bytes is; the range is read again from Kafka to be stored, and its
// file is byte for byte the one that holding every record builds, rebuilt alike by
// the file server's path (rangefile.Build, whose own bound is passed too).
func TestUpsertRangeHoldsABoundedBuffer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// 2,500 keys of 2 KiB values, 3,000 records: 5 MiB of latest records, more than the
	// file server's bound (upsert.DefaultHold) and far more than this indexer's.
	e.kafka.CreateTopic("wide", 1, nil)
	produceKeyed(t, e, "wide", 3000, 2048, func(i int) string { return fmt.Sprintf("key-%d", i%2500) })
	tbl, err := tables.Create(ctx, e.db, tables.Table{Name: "wide", Spec: spec, Mode: tables.ModeUpsert,
		Properties: map[string]string{tables.PropRangeTargetBytes: "1073741824", tables.PropRangeMaxAge: "3s"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	const hold = 64 << 10
	reader := sdkmetric.NewManualReader()
	_, ix := e.startIndexerOpts(t, "idx-up", indexer.Options{Meter: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")},
		func(ix *indexer.Indexer) { ix.UpsertHold = hold })
	rs := indexedUpsert(t, e, tbl)
	// One record of the topic is at most its value, key, header and overhead.
	if peak, most := ix.UpsertPeak(), int64(hold+2048+200+160); peak == 0 || peak > most {
		t.Errorf("an upsert range held %d bytes of records at most, want 1..%d (UpsertHold and one record)", peak, most)
	}
	if n := counter(t, reader, "mink.indexer.upsert_rereads"); n == 0 {
		t.Errorf("no range was read again: the ranges never held more than %d bytes, the test shows nothing", hold)
	}
	var latest int
	for _, r := range rs {
		want := inMemory(t, e, tbl, r)
		if r.Size != want.Size || r.SHA256 != want.SHA256 || r.Records != want.RowCount {
			t.Fatalf("range [%d, %d) stored %d bytes sha256 %s (%d rows); holding every record builds %d bytes sha256 %s (%d rows)",
				r.Start, r.End, r.Size, r.SHA256, r.Records, want.Size, want.SHA256, want.RowCount)
		}
		if _, err := rangefile.Build(ctx, e.kc, tablecodec.New(e.db, nil), tbl, r, io.Discard); err != nil {
			t.Fatalf("rebuild [%d, %d): %v", r.Start, r.End, err)
		}
		latest = max(latest, int(want.RowCount))
	}
	// The biggest range passes the file server's own bound too, so its rebuild read it twice.
	if latest*2048 <= upsert.DefaultHold {
		t.Errorf("no range has more than %d bytes of latest records (%d rows at most): the rebuilds held them all", upsert.DefaultHold, latest)
	}
}

// An upsert range is closed at UpsertMaxKeys distinct keys, so the offsets it keeps are
// bounded too; the ranges still tile the partition, each rebuilds byte for byte, and
// their keys merged are the partition's latest keys.
func TestUpsertRangeKeysAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.kafka.CreateTopic("many", 1, nil)
	const keys, maxKeys = 1000, 300
	produceKeyed(t, e, "many", 2000, 16, func(i int) string { return fmt.Sprintf("key-%d", (i*7)%keys) })
	tbl, err := tables.Create(ctx, e.db, tables.Table{Name: "many", Spec: spec, Mode: tables.ModeUpsert,
		Properties: map[string]string{tables.PropRangeTargetBytes: "1073741824", tables.PropRangeMaxAge: "3s"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.startIndexerOpts(t, "idx-keys", indexer.Options{}, func(ix *indexer.Indexer) { ix.UpsertMaxKeys = maxKeys })
	rs := indexedUpsert(t, e, tbl)
	if len(rs) < 2000/maxKeys {
		t.Fatalf("%d ranges over 2,000 records of %d keys, want %d at least (%d keys each at most)", len(rs), keys, 2000/maxKeys, maxKeys)
	}
	stored, err := ranges.KeysOf(ctx, e.db, tbl.ID, 0, rs[0].Start, rs[len(rs)-1].End)
	if err != nil {
		t.Fatal(err)
	}
	krs, err := rangefile.DecodeKeys(stored)
	if err != nil {
		t.Fatal(err)
	}
	var all []upsert.Keys
	for i, r := range rs {
		k := krs[i].Keys
		if n := len(k.Live) + len(k.Dead); n > maxKeys {
			t.Errorf("range [%d, %d) has %d keys, more than %d", r.Start, r.End, n, maxKeys)
		}
		if _, err := rangefile.Build(ctx, e.kc, tablecodec.New(e.db, nil), tbl, r, io.Discard); err != nil {
			t.Fatalf("rebuild [%d, %d): %v", r.Start, r.End, err)
		}
		all = append(all, k)
	}
	// The model: the partition's latest record per key, from Kafka.
	whole := upsert.NewLatest(upsert.KeyHash) // the table has no key format: keys are bytes
	if err := e.kc.ReadRange(ctx, "many", 0, rs[0].Start, rs[len(rs)-1].End, func(r record.Record) error { whole.Add(r); return nil }); err != nil {
		t.Fatal(err)
	}
	_, want := whole.Finish()
	got := upsert.Merge(all)
	if fmt.Sprint(got.Live) != fmt.Sprint(want.Live) || fmt.Sprint(got.Dead) != fmt.Sprint(want.Dead) {
		t.Fatalf("the ranges' keys merged: %d live, %d dead; the partition's: %d live, %d dead", len(got.Live), len(got.Dead), len(want.Live), len(want.Dead))
	}
}

// BenchmarkUpsertIndexing is what reading a range twice costs: a topic of distinct
// keys with 1 KiB values, indexed as one range by an indexer that holds every latest
// record (held), by one that holds upsert.DefaultHold of them and reads the range again
// to store it (reread), and as an append table (append), interleaved so that load from
// elsewhere hits all three alike. It reports each one's records per second from the
// lease's acquisition to the range's store (database clock), best of the iterations,
// and reread/held; run with -benchtime=5x.
func BenchmarkUpsertIndexing(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	const n = 90_000
	e.kafka.CreateTopic("bench", 1, nil)
	produceKeyed(b, e, "bench", n, 1024, func(i int) string { return fmt.Sprintf("key-%d", i) })
	// The range target is the topic's record bytes: one range, cut by size at its end.
	var total int64
	if err := e.kc.ReadRange(ctx, "bench", 0, 0, n, func(r record.Record) error {
		total += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			total += int64(len(h.Key) + len(h.Value))
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		mode tables.Mode
		hold int64
	}{{"append", tables.ModeAppend, upsert.DefaultHold}, {"held", tables.ModeUpsert, 1 << 40}, {"reread", tables.ModeUpsert, upsert.DefaultHold}}
	best := make([]time.Duration, len(cases))
	cpu := make([]time.Duration, len(cases)) // the least CPU time of this process (indexer and kfake) an indexing took
	seq := 0
	for b.Loop() {
		for i, c := range cases {
			seq++
			stop, _ := e.startIndexerOpts(b, fmt.Sprintf("idx-%s-%d", c.name, seq), indexer.Options{}, func(ix *indexer.Indexer) { ix.UpsertHold = c.hold })
			used := cpuTime(b)
			tbl, err := tables.Create(ctx, e.db, tables.Table{Name: fmt.Sprintf("%s-%d", c.name, seq), Topic: "bench", Spec: spec, Mode: c.mode,
				Properties: map[string]string{tables.PropRangeTargetBytes: fmt.Sprint(total), tables.PropRangeMaxAge: "1h"}}, 1)
			if err != nil {
				b.Fatal(err)
			}
			rs := indexedUpsert(b, e, tbl)
			if used = cpuTime(b) - used; cpu[i] == 0 || used < cpu[i] {
				cpu[i] = used
			}
			stop()
			var acquired time.Time
			if err := e.db.QueryRow(ctx, `SELECT acquired_at FROM mink_leases WHERE kind = 'partition' AND table_id = $1`, tbl.ID).Scan(&acquired); err != nil {
				b.Fatal(err)
			}
			if len(rs) != 1 {
				b.Fatalf("%s: %d ranges, want 1", c.name, len(rs))
			}
			if took := rs[0].CreatedAt.Sub(acquired); best[i] == 0 || took < best[i] {
				best[i] = took
			}
		}
	}
	for i, c := range cases {
		b.ReportMetric(float64(n)/best[i].Seconds(), c.name+"-rec/s")
		b.ReportMetric(float64(cpu[i].Microseconds())/n, c.name+"-cpu-µs/rec")
	}
	b.ReportMetric(best[1].Seconds()/best[2].Seconds(), "reread/held")
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
