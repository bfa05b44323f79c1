package ranges_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

func setup(t *testing.T) (*pgxpool.Pool, tables.Table) {
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tbl, err := tables.Create(ctx, db, tables.Table{Name: "events", Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl
}

// take gives node the partition lease (as a round would) and returns it.
func take(t *testing.T, db *pgxpool.Pool, table int64, p int32, node string) lease.Lease {
	return leasetest.Take(t, db, lease.PartitionScope(table, p), node)
}

func rng(tbl tables.Table, p int32, start, end int64) ranges.Range {
	return ranges.Range{Table: tbl.ID, Partition: p, Start: start, End: end, Records: end - start, Size: 100,
		SHA256: "00", Settings: []byte(`{}`), Stats: []byte(`[]`)}
}

func TestRangesTileWithoutGapOrOverlap(t *testing.T) {
	t.Parallel()
	db, tbl := setup(t)
	ctx := context.Background()
	l := take(t, db, tbl.ID, 0, "a")
	// The first range may start anywhere (the topic's earliest retained offset).
	for _, r := range [][2]int64{{5, 10}, {10, 11}, {11, 40}} {
		if err := ranges.Append(ctx, db, l, rng(tbl, 0, r[0], r[1])); err != nil {
			t.Fatalf("append %v: %v", r, err)
		}
	}
	for _, bad := range [][2]int64{{41, 50} /* gap */, {39, 50} /* overlap */, {10, 20} /* again */} {
		if err := ranges.Append(ctx, db, l, rng(tbl, 0, bad[0], bad[1])); !errors.Is(err, ranges.ErrNotContiguous) {
			t.Fatalf("append %v: %v, want ErrNotContiguous", bad, err)
		}
	}
	st, err := ranges.State(ctx, db, tbl.ID, 0)
	if err != nil || !st.Indexed || st.FirstOffset != 5 || st.IndexedEnd != 40 || st.Ranges != 3 {
		t.Fatalf("state %+v %v", st, err)
	}
	rs, err := ranges.List(ctx, db, tbl.ID, 0, 10)
	if err != nil || len(rs) != 2 || rs[0].Start != 10 || rs[1].End != 40 || rs[0].Epoch != l.Epoch {
		t.Fatalf("list from 10: %+v %v", rs, err)
	}
	ps, err := ranges.Partitions(ctx, db, tbl.ID)
	if err != nil || len(ps) != 2 || ps[1].Indexed {
		t.Fatalf("partitions %+v %v", ps, err)
	}
}

func TestStaleHolderStoresNothing(t *testing.T) {
	t.Parallel()
	db, tbl := setup(t)
	ctx := context.Background()
	old := take(t, db, tbl.ID, 1, "a")
	if err := ranges.Append(ctx, db, old, rng(tbl, 1, 0, 10)); err != nil {
		t.Fatal(err)
	}
	cur := take(t, db, tbl.ID, 1, "b")
	if err := ranges.Append(ctx, db, old, rng(tbl, 1, 10, 20)); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("stale append: %v, want ErrLeaseLost", err)
	}
	if err := ranges.Append(ctx, db, cur, rng(tbl, 1, 10, 20)); err != nil {
		t.Fatalf("current holder: %v", err)
	}
	// A lease of another partition covers nothing here.
	other := take(t, db, tbl.ID, 0, "b")
	if err := ranges.Append(ctx, db, other, rng(tbl, 1, 20, 30)); err == nil {
		t.Fatal("append under another partition's lease succeeded")
	}
	st, _ := ranges.State(ctx, db, tbl.ID, 1)
	if st.IndexedEnd != 20 || st.Ranges != 2 {
		t.Fatalf("state %+v", st)
	}
}

// Why indexing paused is recorded by the partition's holder only: a holder that lost the
// lease neither sets nor clears it.
func TestIndexErrorUnderTheLease(t *testing.T) {
	t.Parallel()
	db, tbl := setup(t)
	ctx := context.Background()
	old := take(t, db, tbl.ID, 1, "a")
	cur := take(t, db, tbl.ID, 1, "b")
	if err := ranges.SetIndexError(ctx, db, cur, "the registry is down"); err != nil {
		t.Fatal(err)
	}
	if err := ranges.SetIndexError(ctx, db, old, ""); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("a stale holder's clear: %v, want ErrLeaseLost", err)
	}
	if err := ranges.SetIndexError(ctx, db, old, "stale words"); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("a stale holder's error: %v, want ErrLeaseLost", err)
	}
	ps, err := ranges.Partitions(ctx, db, tbl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ps[1].IndexError != "the registry is down" || ps[1].IndexErrorAt.IsZero() || ps[0].IndexError != "" {
		t.Fatalf("partitions %+v", ps)
	}
}
