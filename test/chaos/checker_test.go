package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the S3 FileIO, as engines load it
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/test/cluster"
)

// tableInfo is one table as Postgres defines it.
type tableInfo struct {
	id         int64
	namespace  string
	name       string
	topic      string
	partitions int32
}

func (c *chaosCluster) tables() []tableInfo {
	c.T.Helper()
	rows, err := c.DB.Query(context.Background(), `SELECT id, namespace, name, topic, partitions FROM mink_tables ORDER BY id`)
	if err != nil {
		c.T.Fatal(err)
	}
	defer rows.Close()
	var out []tableInfo
	for rows.Next() {
		var ti tableInfo
		if err := rows.Scan(&ti.id, &ti.namespace, &ti.name, &ti.topic, &ti.partitions); err != nil {
			c.T.Fatal(err)
		}
		out = append(out, ti)
	}
	if err := rows.Err(); err != nil {
		c.T.Fatal(err)
	}
	return out
}

// settle waits until the cluster has caught up with Kafka: every partition lease is held
// by a live node and every partition is indexed up to Kafka's last stable offset.
func (c *chaosCluster) settle(timeout time.Duration) {
	c.T.Helper()
	start := time.Now()
	waitFor(c.T, timeout, "every partition leased and indexed to Kafka's last stable offset", func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ls, err := c.Leases(ctx)
		if err != nil {
			return err.Error(), false
		}
		for _, l := range ls {
			if l.Kind == "partition" && !l.Live {
				return "free: " + l.String(), false
			}
		}
		for _, ti := range c.tables() {
			offs, err := c.kc.Offsets(ctx, ti.topic)
			if err != nil {
				return err.Error(), false
			}
			for p := range ti.partitions {
				st, err := ranges.State(ctx, c.DB, ti.id, p)
				if err != nil {
					return err.Error(), false
				}
				o := offs[p]
				if st.Indexed && st.IndexedEnd == o.LastStable || !st.Indexed && o.LastStable == o.LogStart {
					continue
				}
				return fmt.Sprintf("%s/%d indexed to %d (indexed %v), last stable offset %d", ti.name, p, st.IndexedEnd, st.Indexed, o.LastStable), false
			}
		}
		return "", true
	})
	c.T.Logf("settled in %v", time.Since(start).Round(time.Millisecond))
}

// truth is what Kafka holds of one partition: its committed records in the retained
// range [logStart, lastStable).
type truth struct {
	logStart, lastStable int64
	offsets              []int64
}

// check settles the cluster, then compares every table with Kafka: the index always,
// and the tables as iceberg-go scans them through the REST catalog once the writer and
// the file server are wired. It reports every discrepancy with t.Errorf.
func (c *chaosCluster) check() {
	c.T.Helper()
	c.settle(60 * time.Second)
	truths := map[int64]map[int32]truth{}
	for _, ti := range c.tables() {
		truths[ti.id] = c.checkIndex(ti)
	}
	for _, ti := range c.tables() {
		c.checkCatalog(ti, truths[ti.id])
	}
}

// checkIndex: per partition, the ranges tile [first offset, indexed end) with no gap and
// no overlap, the index starts at or before Kafka's log start and ends at its last stable
// offset, every range's record count is what Kafka holds in it, and epochs never go back
// along the offsets (each epoch's ranges are one contiguous run: no two holders ever
// indexed the partition at once).
func (c *chaosCluster) checkIndex(ti tableInfo) map[int32]truth {
	t := c.T
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	offs, err := c.kc.Offsets(ctx, ti.topic)
	if err != nil {
		t.Fatalf("offsets of %s: %v", ti.topic, err)
	}
	out := map[int32]truth{}
	var total, nranges int64
	epochs := 0
	for p := range ti.partitions {
		o := offs[p]
		tr := truth{logStart: o.LogStart, lastStable: o.LastStable}
		if err := c.kc.ReadRange(ctx, ti.topic, p, o.LogStart, o.LastStable, func(r record.Record) error {
			tr.offsets = append(tr.offsets, r.Offset)
			return nil
		}); err != nil {
			t.Fatalf("read %s/%d [%d, %d): %v", ti.topic, p, o.LogStart, o.LastStable, err)
		}
		out[p] = tr
		rs, err := ranges.List(ctx, c.DB, ti.id, p, -1)
		if err != nil {
			t.Fatal(err)
		}
		bad := func(format string, args ...any) {
			t.Errorf("index of %s partition %d: %s", ti.name, p, fmt.Sprintf(format, args...))
		}
		if len(rs) == 0 {
			if o.LastStable > o.LogStart {
				bad("no range, Kafka holds [%d, %d)", o.LogStart, o.LastStable)
			}
			continue
		}
		if rs[0].Start > o.LogStart {
			bad("starts at %d, after Kafka's log start %d", rs[0].Start, o.LogStart)
		}
		if end := rs[len(rs)-1].End; end != o.LastStable {
			bad("ends at %d, Kafka's last stable offset is %d", end, o.LastStable)
		}
		seen := map[int64]bool{}
		for i, r := range rs {
			if i > 0 {
				prev := rs[i-1]
				if r.Start != prev.End {
					bad("range [%d, %d) follows [%d, %d): a gap or an overlap", r.Start, r.End, prev.Start, prev.End)
				}
				if r.Epoch < prev.Epoch {
					bad("range [%d, %d) under epoch %d follows one under epoch %d: two holders interleaved", r.Start, r.End, r.Epoch, prev.Epoch)
				}
			}
			if !seen[r.Epoch] {
				epochs++
			}
			seen[r.Epoch] = true
		}
		// Records per range, as Kafka holds them.
		counts := make([]int64, len(rs))
		i := 0
		for _, off := range tr.offsets {
			for i < len(rs) && rs[i].End <= off {
				i++
			}
			if i == len(rs) || off < rs[i].Start {
				bad("Kafka record at offset %d is in no range", off)
				break
			}
			counts[i]++
		}
		for i, r := range rs {
			if r.Start < o.LogStart {
				continue // partly deleted by Kafka since: its count cannot be compared
			}
			if counts[i] != r.Records {
				bad("range [%d, %d) under epoch %d records %d rows, Kafka holds %d records there", r.Start, r.End, r.Epoch, r.Records, counts[i])
			}
		}
		total += int64(len(tr.offsets))
		nranges += int64(len(rs))
	}
	t.Logf("checker: %s: %d records in %d partitions, %d ranges under %d epochs: index exact", ti.name, total, ti.partitions, nranges, epochs)
	return out
}

// row is one scanned row: its Kafka position, its error column, its id column, and its
// other string columns that are not null, by name.
type row struct {
	partition int32
	offset    int64
	minkErr   string // "" when the record decoded
	id        int64
	idValid   bool
	strs      map[string]string
}

// fileServer returns a running, unpaused file server, or nil.
func (c *chaosCluster) fileServer() *cluster.Node {
	for _, n := range c.Nodes("fileserver") {
		if n.Running() && !n.Paused() {
			return n
		}
	}
	return nil
}

// scan loads a table through the REST catalog of file server n and reads every row with
// iceberg-go, as an engine does.
func (c *chaosCluster) scan(n *cluster.Node, namespace, name string) ([]row, error) {
	catURL, _, err := n.Endpoints()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cat, err := rest.NewCatalog(ctx, "mink", catURL)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{namespace, name})
	if err != nil {
		return nil, err
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		return nil, err
	}
	defer at.Release()
	return rowsOf(at)
}

type stringColumn interface {
	IsNull(int) bool
	Value(int) string
}

func rowsOf(at arrow.Table) ([]row, error) {
	col := func(name string) int {
		idx := at.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return -1
		}
		return idx[0]
	}
	pi, oi, ei, ii := col(tableschema.ColumnKafkaPartition), col(tableschema.ColumnKafkaOffset), col(tableschema.ColumnMinkError), col("id")
	if pi < 0 || oi < 0 || ei < 0 {
		return nil, fmt.Errorf("scan has no %s, %s or %s column: %v", tableschema.ColumnKafkaPartition,
			tableschema.ColumnKafkaOffset, tableschema.ColumnMinkError, at.Schema())
	}
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	var out []row
	for tr.Next() {
		rec := tr.RecordBatch()
		ps, ok1 := rec.Column(pi).(*array.Int32)
		os, ok2 := rec.Column(oi).(*array.Int64)
		es, ok3 := rec.Column(ei).(stringColumn)
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("unexpected column types %T %T %T", rec.Column(pi), rec.Column(oi), rec.Column(ei))
		}
		var ids *array.Int64
		if ii >= 0 {
			ids, _ = rec.Column(ii).(*array.Int64)
		}
		strs := map[string]stringColumn{}
		for c := range int(rec.NumCols()) {
			if sc, ok := rec.Column(c).(stringColumn); ok && c != ei {
				strs[rec.ColumnName(c)] = sc
			}
		}
		for i := range int(rec.NumRows()) {
			r := row{partition: ps.Value(i), offset: os.Value(i)}
			if !es.IsNull(i) {
				r.minkErr = es.Value(i)
			}
			if ids != nil && !ids.IsNull(i) {
				r.id, r.idValid = ids.Value(i), true
			}
			for name, sc := range strs {
				if !sc.IsNull(i) {
					if r.strs == nil {
						r.strs = map[string]string{}
					}
					r.strs[name] = sc.Value(i)
				}
			}
			out = append(out, r)
		}
	}
	if err := tr.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].partition != out[j].partition {
			return out[i].partition < out[j].partition
		}
		return out[i].offset < out[j].offset
	})
	return out, nil
}

// compare says how a scan differs from what Kafka holds: every committed record exactly
// once, nothing from outside the retained range, per partition the committed offsets
// contiguous. "" when they agree.
func compare(rows []row, truths map[int32]truth) string {
	got := map[int32][]int64{}
	for _, r := range rows {
		got[r.partition] = append(got[r.partition], r.offset)
	}
	var probs []string
	for p, offs := range got {
		if _, ok := truths[p]; !ok {
			probs = append(probs, fmt.Sprintf("partition %d: %d rows of a partition the topic does not have", p, len(offs)))
		}
	}
	for p, tr := range truths {
		g := got[p]
		if slices.Equal(g, tr.offsets) {
			continue
		}
		var dups, outside []int64
		for i, o := range g {
			if i > 0 && g[i-1] == o {
				dups = append(dups, o)
			}
			if o < tr.logStart || o >= tr.lastStable {
				outside = append(outside, o)
			}
		}
		want := map[int64]bool{}
		for _, o := range tr.offsets {
			want[o] = true
		}
		have := map[int64]bool{}
		var extra []int64
		for _, o := range g {
			have[o] = true
			if !want[o] {
				extra = append(extra, o)
			}
		}
		var missing []int64
		for _, o := range tr.offsets {
			if !have[o] {
				missing = append(missing, o)
			}
		}
		probs = append(probs, fmt.Sprintf("partition %d: %d rows, Kafka holds %d records in [%d, %d): %d twice %v, %d missing %v, %d not in Kafka %v, %d outside the retained range %v",
			p, len(g), len(tr.offsets), tr.logStart, tr.lastStable, len(dups), head(dups), len(missing), head(missing), len(extra), head(extra), len(outside), head(outside)))
	}
	sort.Strings(probs)
	return strings.Join(probs, "; ")
}

func head(s []int64) []int64 { return s[:min(len(s), 5)] }

// checkCatalog waits (the writer commits every mink.commit.interval) until the table as
// iceberg-go scans it equals what Kafka holds, and reports the difference if it never
// does.
func (c *chaosCluster) checkCatalog(ti tableInfo, truths map[int32]truth) {
	t := c.T
	t.Helper()
	fs := c.fileServer()
	if fs == nil {
		t.Errorf("checker: no running file server to scan %s through", ti.name)
		return
	}
	// Checked every 250ms: the writer commits every 500ms.
	rows := 0
	last, ok := await.Within(60*time.Second, 250*time.Millisecond, func() (string, bool) {
		got, err := c.scan(fs, ti.namespace, ti.name)
		if err != nil {
			return "scan: " + err.Error(), false
		}
		rows = len(got)
		diff := compare(got, truths)
		return diff, diff == ""
	})
	if !ok {
		t.Errorf("checker: %s as iceberg-go reads it never matched Kafka within 60s: %s", ti.name, last)
		return
	}
	t.Logf("checker: %s through the catalog of %s: %d rows, every Kafka record exactly once", ti.name, fs.ID, rows)
}

// isUnavailable reports whether an iceberg-go catalog error is a 503.
func isUnavailable(err error) bool { return errors.Is(err, rest.ErrServiceUnavailable) }
