package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

// rowBook is what reads of a table have shown: per record, its row as first read, and
// by which read. What a user saw stays: every later read of the record (a live load's
// tail, any committed snapshot, after assembly) reads the same, and a column the first
// read did not have (added since) null.
type rowBook struct {
	first map[regKey]map[string]any
	by    map[regKey]string
	reads int
}

func newRowBook() *rowBook {
	return &rowBook{first: map[regKey]map[string]any{}, by: map[regKey]string{}}
}

// observe books the rows of a read (what) and returns how they differ from earlier
// reads of the same records.
func (b *rowBook) observe(what string, rows map[regKey]map[string]any) []string {
	b.reads++
	keys := make([]regKey, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].p < keys[j].p || keys[i].p == keys[j].p && keys[i].o < keys[j].o })
	var diffs []string
	for _, k := range keys {
		was, ok := b.first[k]
		if !ok {
			b.first[k], b.by[k] = rows[k], what
			continue
		}
		if d := rowDiff(was, rows[k]); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s: row %v: %s (first read by %s)", what, k, d, b.by[k]))
		}
	}
	return diffs
}

// rowDiff says how two reads of a row differ ("" when they do not): a column one of
// them lacks reads null there.
func rowDiff(a, b map[string]any) string {
	cols := map[string]bool{}
	for c := range a {
		cols[c] = true
	}
	for c := range b {
		cols[c] = true
	}
	names := make([]string, 0, len(cols))
	for c := range cols {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		if !sameCell(a[c], b[c]) {
			return fmt.Sprintf("column %s read %#v, then %#v", c, a[c], b[c])
		}
	}
	return ""
}

// sameCell reports whether two reads of a cell are the same, a struct field one of them
// lacks (added since, as a column is) reading null.
func sameCell(a, b any) bool {
	if al, ok := a.([]any); ok {
		bl, ok := b.([]any)
		if !ok || len(al) != len(bl) {
			return false
		}
		for i := range al {
			if !sameCell(al[i], bl[i]) {
				return false
			}
		}
		return true
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		return reflect.DeepEqual(a, b)
	}
	for k, v := range am {
		if !sameCell(v, bm[k]) {
			return false
		}
	}
	for k, v := range bm {
		if _, ok := am[k]; !ok && v != nil {
			return false
		}
	}
	return true
}

// snapshotRows reads every row of one snapshot of tbl.
func snapshotRows(tbl *table.Table, id int64) (regScan, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return regScanOf(ctx, tbl, tbl.Scan(table.WithSnapshotID(id)))
}

// observeSnapshots reads every snapshot of the table as a fresh load lists it (live
// ones included) that the book has not read yet, and books them; it returns the
// differences and the snapshots read.
func (rc *regCluster) observeSnapshots(t *testing.T, b *rowBook, name string, done map[int64]bool) ([]string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tbl, err := regLoad(ctx, rc.catalog, name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	var diffs []string
	n := 0
	for _, s := range tbl.Metadata().Snapshots() {
		if done[s.SnapshotID] {
			continue
		}
		done[s.SnapshotID] = true
		sc, err := snapshotRows(tbl, s.SnapshotID)
		if err != nil {
			t.Fatalf("scan %s snapshot %d (%s): %v", name, s.SnapshotID, s.Summary.Operation, err)
		}
		if len(sc.dups) > 0 {
			diffs = append(diffs, fmt.Sprintf("%s snapshot %d: rows read twice %v", name, s.SnapshotID, sc.dups))
		}
		kind := string(s.Summary.Operation)
		if s.Summary.Properties["mink.live"] == "true" {
			kind = "live"
		}
		diffs = append(diffs, b.observe(fmt.Sprintf("%s snapshot %d (%s)", name, s.SnapshotID, kind), sc.rows)...)
		n++
	}
	return diffs, n
}

// alterAdd adds a string column reading a JSON key, through node via's admin API.
func (rc *regCluster) alterAdd(via, name, column, key string) {
	rc.T.Helper()
	_, err := rc.Node(via).Admin().AlterTable(context.Background(), &adminv1.AlterTableRequest{Name: name, Changes: []*adminv1.ColumnChange{
		{Change: &adminv1.ColumnChange_Add{Add: &adminv1.Column{Name: column, Type: "string", JsonPath: key}}}}})
	if err != nil {
		rc.T.Fatalf("AlterTable %s add %s: %v", name, column, err)
	}
}

// TestAlterValueStays is issue 26's first defect, as a user met it: `minkctl table alter
// clicks --add src:string:source` while the indexer has a range open, then a record with
// that key. A live load right away shows its value; once the range is committed, and
// after assembly, every snapshot shows the same (the alter takes effect after every
// record Kafka held when it ran: the record before it reads null, in every read).
func TestAlterValueStays(t *testing.T) {
	t.Parallel()
	rc := newRegCluster(t, true)
	rc.Kafka.CreateTopic("clicks", 1, nil)
	rc.createTable(&adminv1.CreateTableRequest{Name: "clicks", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		Columns: []*adminv1.Column{{Name: "id", Type: "long", Required: true}},
		Properties: regProps("mink.range.max-age", "5s", "mink.live.reuse-ms", "0", "mink.maintenance.interval", "300ms",
			"mink.assembly.target-bytes", "1048576", "mink.assembly.tier-files", "2", "mink.history.max-snapshots", "100000")})
	value := func(id int, source string) *kgo.Record {
		return &kgo.Record{Topic: "clicks", Value: fmt.Appendf(nil, `{"id":%d,"source":%q}`, id, source)}
	}
	want := regRows{}
	first := rc.produce(value(1, "first"))
	want.add(t, first, map[string]any{"id": int64(1)})
	// Once it is committed, the indexer has stored its range and opened the next.
	rc.waitCommitted("clicks", want.ends())

	before := rc.produce(value(100, "before-alter"))
	rc.alterAdd("wr-1", "clicks", "src", "source")
	after := rc.produce(value(101, "after-alter"))
	want.add(t, before, map[string]any{"id": int64(100), "src": nil})
	want.add(t, after, map[string]any{"id": int64(101), "src": "after-alter"})

	book := newRowBook()
	live := regScanTable(t, rc.catalog, "clicks")
	if p := live.tbl.CurrentSnapshot().Summary.Properties; p["mink.live"] != "true" || p["mink.live.tail-files"] == "0" {
		t.Fatalf("the load right after the record is not a live load with a tail: %v", p)
	}
	live.check(t, want)
	if diffs := book.observe("the live load", live.rows); len(diffs) > 0 {
		t.Fatal(diffs)
	}

	// Committed: the range the indexer had open when the alter ran is cut where the
	// alter takes effect, and reads as the load did.
	rc.waitCommitted("clicks", want.ends())
	done := map[int64]bool{}
	diffs, _ := rc.observeSnapshots(t, book, "clicks", done)
	committed := regScanTable(t, rc.catalog, "clicks")
	committed.check(t, want)
	diffs = append(diffs, book.observe("the load once committed", committed.rows)...)

	// More ranges of the new version, merged by assembly (never across the version
	// change): every snapshot, old and new, still reads the same rows.
	if _, err := rc.Node("wr-1").Admin().AlterTable(context.Background(), &adminv1.AlterTableRequest{Name: "clicks",
		SetProperties: map[string]string{"mink.range.max-age": "200ms"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		recs := rc.produce(value(200+i, fmt.Sprintf("later-%d", i)))
		want.add(t, recs, map[string]any{"id": int64(200 + i), "src": fmt.Sprintf("later-%d", i)})
		rc.waitCommitted("clicks", want.ends())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitAssembled(ctx, t, rc.catalog, "clicks", 2*time.Minute)
	more, n := rc.observeSnapshots(t, book, "clicks", done)
	diffs = append(diffs, more...)
	regScanTable(t, rc.catalog, "clicks").check(t, want)
	for _, d := range diffs {
		t.Error(d)
	}
	t.Logf("%d reads checked, the last %d of them snapshots after assembly", book.reads, n)
}

// pointsConfig reads the property run's seed and length: MINK_POINTS_SEED (default: the
// time) and MINK_POINTS_STEPS (default 24).
func pointsConfig(t *testing.T) (uint64, int) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MINK_POINTS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MINK_POINTS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	steps := 24
	if s := os.Getenv("MINK_POINTS_STEPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 8 {
			t.Fatalf("MINK_POINTS_STEPS=%q: want a number of steps, at least 8", s)
		}
		steps = v
	}
	return seed, steps
}

// TestRowsStayUnderSchemaChanges is the invariant itself, property-style: on two append
// tables (JSON with alters adding columns that read keys later records have; Avro in
// latest mode, its subject gaining versions), a random run of produces, live loads,
// alters, registry versions, indexer crashes and clean handoffs, commits and assembly.
// Every row any load returned (live tails included) reads the same in every later load
// and in every snapshot the metadata lists at the end; each record is one row. The seed
// is logged (MINK_POINTS_SEED repeats a run).
func TestRowsStayUnderSchemaChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("a random run of real processes")
	}
	seed, steps := pointsConfig(t)
	t.Logf("seed %d, %d steps (MINK_POINTS_SEED=%d MINK_POINTS_STEPS=%d repeat this run)", seed, steps, seed, steps)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed with seed %d: MINK_POINTS_SEED=%d MINK_POINTS_STEPS=%d go test -run TestRowsStayUnderSchemaChanges ./test/e2e", seed, seed, steps)
		}
	})
	rng := rand.New(rand.NewPCG(seed, 26))

	rc := newRegCluster(t, false)
	for _, id := range []string{"idx-1", "idx-2"} {
		rc.startRole("indexer", id)
	}
	rc.startRole("writer", "wr-1")
	rc.startFileServer("fs-1")
	props := regProps("mink.range.max-age", "1500ms", "mink.commit.interval", "300ms", "mink.live.reuse-ms", "0",
		"mink.maintenance.interval", "500ms", "mink.assembly.target-bytes", "1048576", "mink.assembly.tier-files", "2",
		"mink.history.max-snapshots", "100000")
	const jparts, aparts = 3, 2
	rc.Kafka.CreateTopic("jprop", jparts, nil)
	rc.Kafka.CreateTopic("aprop", aparts, nil)
	rc.createTable(&adminv1.CreateTableRequest{Name: "jprop", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		Columns: []*adminv1.Column{{Name: "id", Type: "long", Required: true}}, Properties: props})
	avroFields := `{"name":"id","type":"long"}`
	avroSchema := func() string { return `{"type":"record","name":"Event","fields":[` + avroFields + `]}` }
	rc.reg.register("aprop-value", sr.Schema{Schema: avroSchema(), Type: sr.TypeAvro})
	rc.createTable(&adminv1.CreateTableRequest{Name: "aprop", Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO,
		ValueSchemaMode: adminv1.SchemaMode_SCHEMA_MODE_LATEST, Properties: props})

	// Loadable once their writer has stored the first metadata.
	rc.waitCommitted("jprop", nil)
	rc.waitCommitted("aprop", nil)

	const keys = 6 // JSON keys k0..k5 in every record; alters add columns reading them
	columns, versions := 0, 1
	writer := avro.MustParse(avroSchema())
	ends := map[string]map[int32]int64{"jprop": {}, "aprop": {}}
	produced := 0
	n := 0
	produce := func() {
		var recs []*kgo.Record
		for p := range int32(jparts) {
			for range 1 + rng.IntN(4) {
				n++
				v := fmt.Sprintf(`{"id":%d`, n)
				for k := range keys {
					v += fmt.Sprintf(`,"k%d":"v%d-%d"`, k, k, n)
				}
				recs = append(recs, &kgo.Record{Topic: "jprop", Partition: p, Value: []byte(v + "}")})
			}
		}
		for p := range int32(aparts) {
			for range 1 + rng.IntN(4) {
				n++
				val := map[string]any{"id": int64(n)}
				for f := 1; f < versions; f++ {
					val[fmt.Sprintf("f%d", f)] = fmt.Sprintf("f%d-%d", f, n)
				}
				b, err := avro.Marshal(writer, val)
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, &kgo.Record{Topic: "aprop", Partition: p, Value: b})
			}
		}
		for _, r := range rc.produce(recs...) {
			ends[r.Topic][r.Partition] = max(ends[r.Topic][r.Partition], r.Offset+1)
		}
		produced += len(recs)
	}
	books := map[string]*rowBook{"jprop": newRowBook(), "aprop": newRowBook()}
	reported := 0
	report := func(diffs ...string) { // at once: a later fatal wait keeps them
		for _, d := range diffs {
			if reported++; reported <= 20 {
				t.Errorf("seed %d: %s", seed, d)
			}
		}
	}
	load := func(step int) {
		for _, name := range []string{"jprop", "aprop"} {
			s := regScanTable(t, rc.catalog, name)
			if len(s.dups) > 0 {
				report(fmt.Sprintf("step %d: load of %s read rows twice: %v", step, name, s.dups))
			}
			report(books[name].observe(fmt.Sprintf("step %d: load of %s", step, name), s.rows)...)
		}
	}
	down := map[string]bool{}
	handoff := func(step int) {
		id := []string{"idx-1", "idx-2"}[rng.IntN(2)]
		n := rc.Node(id)
		switch {
		case down[id]:
			n.Restart()
			down[id] = false
			t.Logf("step %d: %s started again", step, id)
		case rng.IntN(2) == 0 && !down["idx-1"] && !down["idx-2"]:
			n.Kill()
			down[id] = true
			t.Logf("step %d: %s killed", step, id)
		default:
			rc.restart("indexer", id)
			t.Logf("step %d: %s stopped cleanly and started again", step, id)
		}
	}
	ops := map[string]int{}
	for step := range steps {
		op := rng.IntN(10)
		switch step { // each kind at least once, at a random moment of its own third
		case steps/6 + rng.IntN(2):
			op = 6
		case steps/3 + rng.IntN(2):
			op = 7
		case steps / 2:
			op = 8
		}
		switch {
		case op <= 3:
			ops["produce"]++
			produce()
			if rng.IntN(2) == 0 {
				load(step) // right away: the records are in the tail
			}
		case op <= 5:
			ops["load"]++
			load(step)
		case op == 6 && columns < keys:
			ops["alter"]++
			rc.alterAdd("wr-1", "jprop", fmt.Sprintf("c%d", columns), fmt.Sprintf("k%d", columns))
			t.Logf("step %d: jprop gains column c%d (key k%d)", step, columns, columns)
			columns++
		case op == 7:
			ops["registry version"]++
			avroFields += fmt.Sprintf(`,{"name":"f%d","type":"string","default":""}`, versions)
			rc.reg.register("aprop-value", sr.Schema{Schema: avroSchema(), Type: sr.TypeAvro})
			writer = avro.MustParse(avroSchema())
			t.Logf("step %d: aprop-value gains f%d", step, versions)
			versions++
		case op == 8:
			ops["handoff"]++
			handoff(step)
		default:
			ops["commit"]++
			rc.waitCommitted("jprop", ends["jprop"])
			rc.waitCommitted("aprop", ends["aprop"])
			load(step)
		}
	}
	for id, isDown := range down {
		if isDown {
			rc.Node(id).Restart()
		}
	}
	// A few ranges of the last versions, each committed, for assembly to merge.
	for range 3 {
		produce()
		load(steps)
		rc.waitCommitted("jprop", ends["jprop"])
		rc.waitCommitted("aprop", ends["aprop"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	snaps := 0
	for _, name := range []string{"jprop", "aprop"} {
		waitAssembled(ctx, t, rc.catalog, name, 3*time.Minute)
		d, n := rc.observeSnapshots(t, books[name], name, map[int64]bool{})
		report(d...)
		snaps += n
	}
	// Every record exactly once in the end, each as the book has it.
	total := 0
	for _, name := range []string{"jprop", "aprop"} {
		s := regScanTable(t, rc.catalog, name)
		total += len(s.rows)
		if len(s.dups) > 0 {
			t.Errorf("%s: rows read twice: %v", name, s.dups)
		}
		var want int64
		for _, e := range ends[name] {
			want += e
		}
		if int64(len(s.rows)) != want {
			t.Errorf("%s: %d rows, %d records produced", name, len(s.rows), want)
		}
	}
	if total != produced {
		t.Errorf("%d rows in the end, %d records produced", total, produced)
	}
	if reported > 20 {
		t.Errorf("... and %d more differences", reported-20)
	}
	t.Logf("seed %d: %v; %d reads of %d records checked, %d snapshots at the end", seed, ops, books["jprop"].reads+books["aprop"].reads, produced, snaps)
}
