package files

import (
	"context"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/schemapoints"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// evolve stores the table's next version (a column added, as AlterTable does) and
// returns the table with it current.
func (e *measureEnv) evolve(name string) tables.Table {
	e.t.Helper()
	if _, err := tables.Evolve(e.ctx, e.db, nil, e.table.ID, func(cur tableschema.Version, last int) (tableschema.Spec, []iceberg.NestedField, bool, error) {
		spec, fields, err := cur.Alter([]tableschema.ColumnChange{{Add: &tableschema.Column{Name: name, Type: "string"}}}, last)
		return spec, fields, true, err
	}); err != nil {
		e.t.Fatal(err)
	}
	t, err := tables.GetByID(e.ctx, e.db, e.table.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return t
}

// addPoint makes version take effect from offset from (or past what is recorded) in tx.
func addPoint(ctx context.Context, tx pgx.Tx, table int64, from int64, version int) (schemapoints.Point, error) {
	out, err := ranges.AddPoints(ctx, tx, table, map[int32]int64{0: from}, schemapoints.Decoding{}, func(d schemapoints.Decoding) schemapoints.Decoding {
		d.Version = version
		return d
	}, objects.RecordedEnds)
	return out[0], err
}

func (e *measureEnv) recorded(key string) schemapoints.Decoding {
	e.t.Helper()
	var settings []byte
	if err := e.db.QueryRow(e.ctx, `SELECT settings FROM mink_data_files WHERE key = $1`, key).Scan(&settings); err != nil {
		e.t.Fatalf("the row of %s: %v", key, err)
	}
	d, err := schemapoints.Of(settings)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// A tail decodes with the schema point in force at its start and ends at the next one;
// a point added while a tail is being recorded (an alter that commits during its build)
// refuses it, and it is built again with the point.
func TestTailAtSchemaPoints(t *testing.T) {
	t.Parallel()
	e := newMeasureEnv(t, "fs-1")
	s := e.stores["fs-1"]
	t1 := e.evolve("note")
	if err := pgx.BeginFunc(e.ctx, e.db, func(tx pgx.Tx) error { _, err := addPoint(e.ctx, tx, t1.ID, 4, 1); return err }); err != nil {
		t.Fatal(err)
	}
	measure := func(tbl tables.Table, start, end int64) Measured {
		t.Helper()
		m, err := s.Measure(e.ctx, MeasureRequest{Table: tbl, Partition: 0, Start: start, End: end, MaxBytes: measureMaxBytes, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := measure(t1, 0, 10); m.End != 4 || m.Cut != CutPoint || e.recorded(m.Key).Version != 0 {
		t.Errorf("tail from 0: ends at %d (cut %q), version %d; want 4, %q, 0", m.End, m.Cut, e.recorded(m.Key).Version, CutPoint)
	}
	if m := measure(t1, 4, 8); m.End != 8 || m.Cut != "" || e.recorded(m.Key).Version != 1 {
		t.Errorf("tail from 4: ends at %d (cut %q), version %d; want 8, none, 1", m.End, m.Cut, e.recorded(m.Key).Version)
	}

	// An alter's transaction has added a point at 8 (past the tails recorded) and not
	// committed when the tail [8, 10) is built with the points before it.
	t2 := e.evolve("extra")
	tx, err := e.db.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(e.ctx)
	if pt, err := addPoint(e.ctx, tx, t2.ID, 0, 2); err != nil || pt.From != 8 {
		t.Fatalf("point %+v %v, want at 8", pt, err)
	}
	type result struct {
		m   Measured
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := s.Measure(e.ctx, MeasureRequest{Table: t2, Partition: 0, Start: 8, End: 10, MaxBytes: measureMaxBytes, TTL: time.Minute})
		done <- result{m, err}
	}()
	pgtest.WaitLockWaiter(t, e.db)
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if m := r.m; m.End != 10 || e.recorded(m.Key).Version != 2 {
		t.Errorf("tail from 8 built across the alter: ends at %d, version %d; want 10, 2", m.End, e.recorded(m.Key).Version)
	}
	var stale int
	if err := e.db.QueryRow(e.ctx, `SELECT count(*) FROM mink_data_files WHERE start_offset = 8 AND settings->>'table_version' IS DISTINCT FROM '2'`).Scan(&stale); err != nil || stale != 0 {
		t.Errorf("%d tails of [8, 10) recorded with the version before the point (%v)", stale, err)
	}
}
