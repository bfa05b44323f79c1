package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/test/cluster"
)

// upsertLog is what a producer of an upsert topic had acknowledged: per partition, the
// records in offset order.
type upsertLog struct {
	mu      sync.Mutex
	recs    map[int32][]*kgo.Record
	changed chan struct{} // closed (and replaced) at each acknowledgement
}

// add records acknowledged records.
func (l *upsertLog) add(res kgo.ProduceResults) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range res {
		l.recs[r.Record.Partition] = append(l.recs[r.Record.Partition], r.Record)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// model is the table at ends: per partition, each key's last value below its end, with
// tombstoned keys removed. It waits (up to 10s) for acknowledgements that a snapshot
// can be ahead of (a record is indexed once the broker has it, acknowledged a little
// later); false if they never come.
func (l *upsertLog) model(ends map[int32]int64) (map[string]string, bool) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		changed := l.changed
		acked := true
		for p, end := range ends {
			rs := l.recs[p]
			acked = acked && (end == 0 || len(rs) > 0 && rs[len(rs)-1].Offset+1 >= end)
		}
		if acked {
			m := map[string]string{}
			for p, end := range ends {
				for _, r := range l.recs[p] {
					if r.Offset >= end {
						break
					}
					k := fmt.Sprintf("%d/%s", p, r.Key)
					if r.Value == nil {
						delete(m, k)
					} else {
						m[k] = string(r.Value)
					}
				}
			}
			l.mu.Unlock()
			return m, true
		}
		l.mu.Unlock()
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			return nil, false
		}
	}
}

// superseded is the keys with a record at or past their partition's end: Kafka's
// compaction may have deleted a key's last record below the end because of it, so a
// snapshot at ends whose files were rebuilt since (a repair) may lack the key.
func (l *upsertLog) superseded(ends map[int32]int64) map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]bool{}
	for p, end := range ends {
		for _, r := range l.recs[p] {
			if r.Offset >= end {
				out[fmt.Sprintf("%d/%s", p, r.Key)] = true
			}
		}
	}
	return out
}

// scanUpsert loads a raw upsert table through a catalog and reads one snapshot (0: the
// current one) with iceberg-go: its coverage ends and its rows, key "partition/key" to
// value.
func scanUpsert(ctx context.Context, catURL, name string, snapshot int64) (map[int32]int64, map[string]string, error) {
	cat, err := rest.NewCatalog(ctx, "mink", catURL)
	if err != nil {
		return nil, nil, err
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{"default", name})
	if err != nil {
		return nil, nil, err
	}
	snap := tbl.CurrentSnapshot()
	if snapshot != 0 {
		snap = tbl.Metadata().SnapshotByID(snapshot)
	}
	if snap == nil {
		return map[int32]int64{}, map[string]string{}, nil
	}
	cov, err := icebergmeta.ParseCoverage(snap.Summary)
	if err != nil {
		return nil, nil, err
	}
	ends := map[int32]int64{}
	for p, c := range cov {
		ends[p] = c.End
	}
	at, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).ToArrowTable(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer at.Release()
	rows := map[string]string{}
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		cols := map[string]int{}
		for c := range int(rec.NumCols()) {
			cols[rec.ColumnName(c)] = c
		}
		ps, ok1 := rec.Column(cols[tableschema.ColumnKafkaPartition]).(*array.Int32)
		ks, ok2 := rec.Column(cols[tableschema.ColumnKafkaKey]).(*array.Binary)
		vs, ok3 := rec.Column(cols["value"]).(*array.Binary)
		if !ok1 || !ok2 || !ok3 {
			return nil, nil, fmt.Errorf("unexpected columns %v", at.Schema())
		}
		for i := range int(rec.NumRows()) {
			k := fmt.Sprintf("%d/%s", ps.Value(i), ks.Value(i))
			if _, dup := rows[k]; dup {
				return nil, nil, fmt.Errorf("key %s read twice", k)
			}
			rows[k] = string(vs.Value(i))
		}
	}
	return ends, rows, tr.Err()
}

// diff says how rows differ from want, briefly; "" when equal. A key of mayMiss may be
// missing.
func diff(rows, want map[string]string, mayMiss map[string]bool) string {
	var missing, extra, other int
	var example string
	for k, v := range want {
		if g, ok := rows[k]; !ok && !mayMiss[k] {
			missing++
			example = fmt.Sprintf("%s missing (want %q)", k, v)
		} else if g != v {
			other++
			example = fmt.Sprintf("%s reads %q, want %q", k, g, v)
		}
	}
	for k := range rows {
		if _, ok := want[k]; !ok {
			extra++
			example = fmt.Sprintf("%s reads %q, deleted or never written", k, rows[k])
		}
	}
	if missing+extra+other == 0 {
		return ""
	}
	return fmt.Sprintf("%d keys missing, %d extra, %d with another value (%s)", missing, extra, other, example)
}

// TestCompactionUnderScans: Kafka compacts the topic of an upsert table again and again
// while records arrive and scans run throughout. A file built after its offsets were
// compacted differs from what was indexed: its reads answer 503 SlowDown (Retry-After)
// until the writer, told by the file server at once (its maintenance is an hour away),
// replaces it. No scan fails with anything but an answer clients retry, and every scan
// that succeeds reads exactly the latest value per key that Kafka had at its snapshot's
// coverage; afterwards every snapshot the metadata lists reads so too. A snapshot may
// lack a key whose last record at its coverage Kafka compacted away for a later one
// (past the coverage): a repair rebuilt the file from what Kafka holds now.
func TestCompactionUnderScans(t *testing.T) {
	c := newCluster(t)
	c.Join("indexer", "idx-a")
	c.Join("writer", "wr-1")
	// No warming: files are built when scans read them, many after a compaction.
	fs := c.Join("fileserver", "fs-1", "--warm-interval", "0")
	const name, parts = "balances", 2
	c.Kafka.CreateTopic(name, parts, map[string]string{"cleanup.policy": "compact"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := fs.Admin().CreateTable(ctx, &adminv1.CreateTableRequest{Name: name, Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
		Mode: adminv1.TableMode_TABLE_MODE_UPSERT, Properties: map[string]string{"mink.range.max-age": "300ms", "mink.commit.interval": "300ms",
			"mink.maintenance.interval": "1h", "mink.live-load": "false", "mink.assembly.tier-files": "2"}}); err != nil {
		t.Fatal(err)
	}
	catURL, _, err := fs.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the table's first metadata", func() (error, bool) {
		_, _, err := scanUpsert(ctx, catURL, name, 0)
		return err, err == nil
	})

	log := &upsertLog{recs: map[int32][]*kgo.Record{}, changed: make(chan struct{})}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// The producer's client is made here: Client may t.Fatal, which only the test's
	// goroutine may.
	cl := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	wg.Go(func() { // the producer: 30 keys per partition, one record in ten a tombstone
		defer cl.Close()
		rng := rand.New(rand.NewPCG(26, 6))
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			var recs []*kgo.Record
			for range 10 {
				r := &kgo.Record{Topic: name, Partition: int32(rng.IntN(parts)), Key: fmt.Appendf(nil, "k%d", rng.IntN(30)),
					Value: fmt.Appendf(nil, "v%d", n)}
				if rng.IntN(10) == 0 {
					r.Value = nil
				}
				recs = append(recs, r)
			}
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			res := cl.ProduceSync(pctx, recs...)
			pcancel()
			if err := res.FirstErr(); err != nil {
				t.Errorf("produce: %v", err) // the model would lack what Kafka may hold
				return
			}
			log.add(res)
		}
	})
	wg.Go(func() { // Kafka's log cleaner, every second
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			c.Kafka.Compact()
		}
	})
	type outcome struct {
		ok, retried int
		codes       map[string]int
		failures    []string
	}
	outcomes := make([]outcome, 2)
	for i := range outcomes {
		wg.Go(func() { // scans, as engines run them
			o := &outcomes[i]
			o.codes = map[string]int{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				sctx, scancel := context.WithTimeout(ctx, time.Minute)
				ends, rows, err := scanUpsert(sctx, catURL, name, 0)
				scancel()
				if err != nil {
					what, ok := cluster.Retryable(err)
					if !ok {
						o.failures = append(o.failures, what)
					} else {
						o.retried++
						f := strings.Fields(what)
						o.codes[strings.Join(f[:min(len(f), 3)], " ")]++
					}
					continue
				}
				want, acked := log.model(ends)
				if !acked {
					o.failures = append(o.failures, fmt.Sprintf("a snapshot covers %v, beyond what the producer had acknowledged", ends))
					continue
				}
				if d := diff(rows, want, log.superseded(ends)); d != "" {
					o.failures = append(o.failures, fmt.Sprintf("a scan covering %v: %s", ends, d))
					continue
				}
				o.ok++
			}
		})
	}
	// Scans run for a while, through compactions and the repairs they cause.
	repairs := func() int {
		var n int
		if err := c.DB.QueryRow(ctx, `SELECT count(*) FROM mink_meta_files m JOIN mink_tables t ON t.id = m.table_id
			WHERE t.name = $1 AND m.key LIKE '%.metadata.json'
			  AND position(convert_to('mink.repair.replaced-files', 'UTF8') in m.content) > 0`, name).Scan(&n); err != nil {
			t.Error(err)
		}
		return n
	}
	// At least 30 s, then until a repair was committed (a loaded machine may take longer
	// to index, measure and repair), at most 3 minutes.
	began := time.Now()
	for ctx.Err() == nil && time.Since(began) < 3*time.Minute && (time.Since(began) < 30*time.Second || repairs() == 0) {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
	close(stop)
	wg.Wait()
	total := outcome{codes: map[string]int{}}
	for _, o := range outcomes {
		total.ok += o.ok
		total.retried += o.retried
		for k, n := range o.codes {
			total.codes[k] += n
		}
		total.failures = append(total.failures, o.failures...)
	}
	t.Logf("scans: %d read the model, %d answered a retryable error %v; metadata versions naming a repair: %d", total.ok, total.retried, total.codes, repairs())
	for i, f := range total.failures {
		if i < 10 {
			t.Errorf("scan: %s", f)
		}
	}
	if total.ok == 0 || total.retried == 0 || repairs() == 0 {
		t.Errorf("the run did not exercise repairs under scans: %d scans read, %d retried, %d repairs", total.ok, total.retried, repairs())
	}

	// Settled: the table covers every record and reads the model.
	log.mu.Lock()
	ends := map[int32]int64{}
	for p, rs := range log.recs {
		ends[p] = rs[len(rs)-1].Offset + 1
	}
	log.mu.Unlock()
	waitFor(t, 90*time.Second, "the table to cover every record and read as the model", func() (string, bool) {
		got, rows, err := scanUpsert(ctx, catURL, name, 0)
		if err != nil {
			what, ok := cluster.Retryable(err)
			if !ok {
				t.Fatalf("settling: %s", what)
			}
			return what, false
		}
		if !maps.Equal(got, ends) {
			return fmt.Sprintf("covers %v, want %v", got, ends), false
		}
		want, _ := log.model(ends)
		d := diff(rows, want, nil) // nothing past the ends: exact
		return d, d == ""
	})
	// Every listed snapshot reads the model at its coverage too. Kafka announces no
	// compaction: one of files nobody read since is found by the read that builds them,
	// answered 503 until the writer's repair expires the snapshots naming them.
	waitFor(t, 90*time.Second, "every listed snapshot to read the model", func() (string, bool) {
		cat, err := rest.NewCatalog(ctx, "mink", catURL)
		if err != nil {
			return err.Error(), false
		}
		defer cat.Close()
		tbl, err := cat.LoadTable(ctx, table.Identifier{"default", name})
		if err != nil {
			return err.Error(), false
		}
		for _, s := range tbl.Metadata().Snapshots() {
			ends, rows, err := scanUpsert(ctx, catURL, name, s.SnapshotID)
			if err != nil {
				what, ok := cluster.Retryable(err)
				if !ok {
					t.Fatalf("listed snapshot %d (%s): %s", s.SnapshotID, s.Summary.Operation, what)
				}
				return fmt.Sprintf("snapshot %d: %s", s.SnapshotID, what), false
			}
			want, _ := log.model(ends)
			if d := diff(rows, want, log.superseded(ends)); d != "" {
				t.Fatalf("listed snapshot %d (%s, covering %v): %s", s.SnapshotID, s.Summary.Operation, ends, d)
			}
		}
		return "", true
	})
}
