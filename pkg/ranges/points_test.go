package ranges_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/schemapoints"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

type fixture struct {
	t   *testing.T
	ctx context.Context
	db  *pgxpool.Pool
	tbl tables.Table
}

func newFixture(t *testing.T, partitions int32) *fixture {
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tbl, err := tables.Create(ctx, db, tables.Table{Name: "events", Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, db: db, tbl: tbl}
}

func v(n int) schemapoints.Decoding { return schemapoints.Decoding{Version: n} }

// settings are the recorded settings of a file decoded with d.
func settings(d schemapoints.Decoding) []byte {
	s := parquetbuild.DefaultSettings()
	s.TableVersion, s.ValueSchemaID, s.KeySchemaID = d.Version, d.ValueSchemaID, d.KeySchemaID
	b, _ := json.Marshal(s)
	return b
}

func (f *fixture) points(p int32) schemapoints.Points {
	f.t.Helper()
	ps, err := ranges.Points(f.ctx, f.db, f.tbl.ID, p)
	if err != nil {
		f.t.Fatal(err)
	}
	return ps
}

// add is an alter's Add: version n from offset from on partition p.
func (f *fixture) add(db pg.DB, p int32, from int64, first schemapoints.Decoding, n int) schemapoints.Point {
	f.t.Helper()
	var pt schemapoints.Point
	err := pgx.BeginFunc(f.ctx, db, func(tx pgx.Tx) error {
		out, err := ranges.AddPoints(f.ctx, tx, f.tbl.ID, map[int32]int64{p: from}, first, func(d schemapoints.Decoding) schemapoints.Decoding {
			d.Version = n
			return d
		}, objects.RecordedEnds)
		pt = out[p]
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return pt
}

func (f *fixture) appendRange(l lease.Lease, start, end int64, d schemapoints.Decoding) error {
	return ranges.Append(f.ctx, f.db, l, ranges.Range{Table: f.tbl.ID, Partition: l.Partition, Start: start, End: end,
		Records: end - start, Size: 1, SHA256: "00", Settings: settings(d), Stats: []byte(`[]`)})
}

func (f *fixture) recordTail(db pg.DB, p int32, start, end, rows int64, d schemapoints.Decoding) error {
	_, _, _, err := objects.RecordTail(f.ctx, db, objects.Tail{Table: f.tbl.ID, Key: fmt.Sprintf("t/%d/%d-%d-%v", p, start, end, d),
		Partition: p, Start: start, End: end, Records: rows, Size: 1, SHA256: "00", Settings: settings(d), Stats: []byte(`[]`)},
		time.Minute, time.Minute)
	return err
}

func TestAtAndNext(t *testing.T) {
	ps := schemapoints.Points{{From: 0, Decoding: v(0)}, {From: 10, Decoding: v(1)}, {From: 25, Decoding: v(2)}}
	for _, c := range []struct {
		o    int64
		at   int
		next int64
	}{{0, 0, 10}, {9, 0, 10}, {10, 1, 25}, {24, 1, 25}, {25, 2, math.MaxInt64}, {1 << 40, 2, math.MaxInt64}} {
		d, ok := ps.At(c.o)
		if !ok || d != v(c.at) || ps.Next(c.o) != c.next {
			t.Errorf("offset %d: in force %v (%v), next %d; want version %d, next %d", c.o, d, ok, ps.Next(c.o), c.at, c.next)
		}
	}
	if _, ok := (schemapoints.Points{{From: 5, Decoding: v(0)}}).At(4); ok {
		t.Error("a decoding in force before the first point")
	}
}

// Of reads what parquetbuild.Settings records.
func TestOfRecordedSettings(t *testing.T) {
	want := schemapoints.Decoding{Version: 3, ValueSchemaID: 17, KeySchemaID: 4}
	got, err := schemapoints.Of(settings(want))
	if err != nil || got != want {
		t.Fatalf("Of: %v %v, want %v", got, err, want)
	}
	if got, err := schemapoints.Of([]byte(`{"version":1,"compression":"zstd"}`)); err != nil || got != (schemapoints.Decoding{}) {
		t.Fatalf("Of of settings from before versions: %v %v", got, err)
	}
}

// Concurrent builds of a partition without points: one first point, the same for all.
func TestEnsureFirstWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	var wg sync.WaitGroup
	got := make([]schemapoints.Points, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = ranges.EnsurePoints(f.ctx, f.db, f.tbl.ID, 0, v(i)) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || len(got[i]) != 1 || got[i][0].From != 0 || !slices.Equal(got[i], got[0]) {
			t.Fatalf("Ensure %d: %v %v (first answer %v)", i, got[i], errs[i], got[0])
		}
	}
	if _, err := ranges.EnsurePoints(f.ctx, f.db, f.tbl.ID, 7, v(0)); err == nil {
		t.Fatal("Ensure of a partition the table lacks")
	}
}

// Add puts a point past every record a build has recorded: the indexed end, the ends of
// tail files, the last point.
func TestAddPastRecordedFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	l0 := leasetest.Take(t, f.db, lease.PartitionScope(f.tbl.ID, 0), "idx")
	if err := f.appendRange(l0, 0, 10, v(0)); err != nil {
		t.Fatal(err)
	}
	if err := f.recordTail(f.db, 1, 0, 25, 25, v(0)); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(f.ctx, f.db, func(tx pgx.Tx) error {
		_, err := ranges.AddPoints(f.ctx, tx, f.tbl.ID, map[int32]int64{0: 5, 1: 20, 2: 7}, v(0), func(d schemapoints.Decoding) schemapoints.Decoding {
			d.Version = 1
			return d
		}, objects.RecordedEnds)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]schemapoints.Points{
		0: {{From: 0, Decoding: v(0)}, {From: 10, Decoding: v(1)}}, // the indexed end
		1: {{From: 0, Decoding: v(0)}, {From: 25, Decoding: v(1)}}, // a tail file's end
		2: {{From: 0, Decoding: v(0)}, {From: 7, Decoding: v(1)}},  // Kafka's end
	} {
		if got := f.points(p); !slices.Equal(got, want) {
			t.Errorf("partition %d: points %v, want %v", p, got, want)
		}
	}
	// Nothing recorded past the point since: a second change replaces it; one that
	// changes nothing adds nothing; a change from before the point lands on it.
	if pt := f.add(f.db, 2, 0, v(0), 2); pt.From != 7 || pt.Version != 2 {
		t.Errorf("second change: %+v", pt)
	}
	if pt := f.add(f.db, 2, 9, v(0), 2); pt.From != 7 || pt.Version != 2 {
		t.Errorf("a change to the same decoding: %+v", pt)
	}
	if got, want := f.points(2), (schemapoints.Points{{From: 0, Decoding: v(0)}, {From: 7, Decoding: v(2)}}); !slices.Equal(got, want) {
		t.Errorf("partition 2: points %v, want %v", got, want)
	}
	// A point at 0 of a partition without any: no base point.
	g := newFixture(t, 1)
	if pt := g.add(g.db, 0, 0, v(0), 1); pt.From != 0 || pt.Version != 1 {
		t.Errorf("a first change at 0: %+v", pt)
	}
	if got := g.points(0); len(got) != 1 {
		t.Errorf("points %v, want one", got)
	}
}

// Check refuses a range or tail file that decodes otherwise than the point in force at its
// start, or spans a point, and stores nothing of it.
func TestCheckRefusesStaleAndSpanning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	if _, err := ranges.EnsurePoints(f.ctx, f.db, f.tbl.ID, 0, v(0)); err != nil {
		t.Fatal(err)
	}
	f.add(f.db, 0, 10, v(0), 1)
	l := leasetest.Take(t, f.db, lease.PartitionScope(f.tbl.ID, 0), "idx")
	moved := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, schemapoints.ErrDecodingMoved) {
			t.Errorf("%s: %v, want ErrDecodingMoved", what, err)
		}
	}
	moved("range [0, 15) across the point at 10", f.appendRange(l, 0, 15, v(0)))
	moved("range [0, 10) decoded with the later version", f.appendRange(l, 0, 10, v(1)))
	if err := f.appendRange(l, 0, 10, v(0)); err != nil {
		t.Fatal(err)
	}
	moved("range [10, 15) decoded with the version before the point", f.appendRange(l, 10, 15, v(0)))
	if st, _ := ranges.State(f.ctx, f.db, f.tbl.ID, 0); st.IndexedEnd != 10 {
		t.Errorf("a refused range moved the indexed end to %d", st.IndexedEnd)
	}
	if err := f.appendRange(l, 10, 15, v(1)); err != nil {
		t.Fatal(err)
	}
	// Tail files: a point at 20 (past the indexed end 15 and the tails so far).
	if err := f.recordTail(f.db, 0, 15, 18, 3, v(1)); err != nil {
		t.Fatal(err)
	}
	if pt := f.add(f.db, 0, 0, v(0), 2); pt.From != 18 {
		t.Fatalf("point at %d, want 18 (the tail's end)", pt.From)
	}
	moved("tail [15, 30) across the point at 18", f.recordTail(f.db, 0, 15, 30, 15, v(1)))
	moved("tail [18, 30) with the version before the point", f.recordTail(f.db, 0, 18, 30, 12, v(1)))
	for _, ok := range []error{
		f.recordTail(f.db, 0, 18, 30, 12, v(2)),
		f.recordTail(f.db, 0, 15, 30, 0, v(7)), // no rows: decodes nothing
		f.recordTail(f.db, 1, 0, 30, 30, v(5)), // a partition without points (a node from before them)
	} {
		if ok != nil {
			t.Error(ok)
		}
	}
	var n int
	if err := f.db.QueryRow(f.ctx, `SELECT count(*) FROM mink_data_files WHERE table_id = $1`, f.tbl.ID).Scan(&n); err != nil || n != 4 {
		t.Errorf("%d tail rows (%v), want the 4 accepted", n, err)
	}
}

// A point added while a tail file is being recorded: the tail waits for it and is
// refused (its span now holds the point), never recorded across it.
func TestCheckWaitsForAdd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	if _, err := ranges.EnsurePoints(f.ctx, f.db, f.tbl.ID, 0, v(0)); err != nil {
		t.Fatal(err)
	}
	tx, err := f.db.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx)
	if _, err := ranges.AddPoints(f.ctx, tx, f.tbl.ID, map[int32]int64{0: 10}, v(0), func(d schemapoints.Decoding) schemapoints.Decoding {
		d.Version = 1
		return d
	}, objects.RecordedEnds); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.recordTail(f.db, 0, 5, 20, 15, v(0)) }()
	pgtest.WaitLockWaiter(t, f.db)
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, schemapoints.ErrDecodingMoved) {
		t.Fatalf("a tail recorded while the point at 10 was added: %v, want ErrDecodingMoved", err)
	}
}
