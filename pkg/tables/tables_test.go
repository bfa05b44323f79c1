package tables_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/apierr"
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

var jsonSpec = tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
	{Name: "id", Type: "long", Required: true}, {Name: "msg", Type: "string"}}}

func TestCreateGetListDrop(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tbl, err := tables.Create(ctx, db, tables.Table{Name: "events", Spec: jsonSpec,
		Properties: map[string]string{tables.PropRangeMaxAge: "2s", "owner": "data-eng"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Namespace != "default" || tbl.Topic != "events" || tbl.Partitions != 3 {
		t.Fatalf("created %+v", tbl)
	}
	got, err := tables.Get(ctx, db, "", "events")
	if err != nil || got.ID != tbl.ID || len(got.Spec.Columns) != 2 || got.Properties["owner"] != "data-eng" || got.Props().RangeMaxAge.Seconds() != 2 {
		t.Fatalf("get %+v %v", got, err)
	}
	ls, err := lease.ListLeases(ctx, db, tbl.ID)
	if err != nil || len(ls) != 4 {
		t.Fatalf("leases of a 3-partition table: %d %v, want 3 partition + 1 writer", len(ls), err)
	}
	ps, err := ranges.Partitions(ctx, db, tbl.ID)
	if err != nil || len(ps) != 3 {
		t.Fatalf("index rows %v %v", ps, err)
	}
	if _, err := tables.Create(ctx, db, tables.Table{Name: "events", Spec: jsonSpec}, 3); apierr.Classify(err) != apierr.AlreadyExists {
		t.Fatalf("duplicate: %v", err)
	}
	// Growth is written under the partition-0 lease: a holder that lost it changes nothing.
	stale := leasetest.Take(t, db, lease.PartitionScope(tbl.ID, 0), "idx-old")
	p0 := leasetest.Take(t, db, lease.PartitionScope(tbl.ID, 0), "idx-new")
	if grew, err := tables.Grow(ctx, db, stale, 9); !errors.Is(err, lease.ErrLeaseLost) || grew {
		t.Fatalf("grow under a lost lease: %v %v, want ErrLeaseLost", grew, err)
	}
	if _, err := tables.Grow(ctx, db, leasetest.Take(t, db, lease.PartitionScope(tbl.ID, 1), "idx-new"), 9); err == nil {
		t.Fatal("grow under another partition's lease: no error")
	}
	if grew, err := tables.Grow(ctx, db, p0, 5); err != nil || !grew {
		t.Fatalf("grow: %v %v", grew, err)
	}
	if grew, err := tables.Grow(ctx, db, p0, 4); err != nil || grew {
		t.Fatalf("shrink must change nothing: %v %v", grew, err)
	}
	if ls, _ := lease.ListLeases(ctx, db, tbl.ID); len(ls) != 6 {
		t.Fatalf("leases after growth to 5: %d", len(ls))
	}
	all, err := tables.List(ctx, db, "")
	if err != nil || len(all) != 1 || all[0].Partitions != 5 {
		t.Fatalf("list %+v %v", all, err)
	}
	if err := tables.Drop(ctx, db, "default", "events"); err != nil {
		t.Fatal(err)
	}
	if err := tables.Drop(ctx, db, "default", "events"); apierr.Classify(err) != apierr.NotFound {
		t.Fatalf("drop again: %v", err)
	}
	if ls, _ := lease.ListLeases(ctx, db, 0); len(ls) != 0 {
		t.Fatalf("leases left after drop: %v", ls)
	}
}

func TestCreateRejectsBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		t     tables.Table
		field string
	}{
		{tables.Table{Name: "", Spec: jsonSpec}, "name"},
		{tables.Table{Name: "a b", Spec: jsonSpec}, "name"},
		{tables.Table{Namespace: "x/y", Name: "t", Spec: jsonSpec}, "namespace"},
		{tables.Table{Name: "t", Topic: "bad topic", Spec: jsonSpec}, "topic"},
		{tables.Table{Name: "t", Spec: tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "x", Type: "strng"}}}}, "columns[0]"},
		{tables.Table{Name: "t", Spec: jsonSpec, Properties: map[string]string{tables.PropRangeMaxAge: "soon"}}, "properties"},
	}
	for _, c := range cases {
		_, err := tables.Create(ctx, db, c.t, 1)
		if apierr.Classify(err) != apierr.InvalidArgument || !strings.Contains(err.Error(), c.field) {
			t.Errorf("create %+v: %v, want InvalidArgument naming %s", c.t, err, c.field)
		}
	}
	if all, _ := tables.List(ctx, db, ""); len(all) != 0 {
		t.Fatalf("bad input half-created %d tables", len(all))
	}
}
