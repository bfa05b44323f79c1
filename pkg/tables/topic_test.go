package tables_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// A table records the incarnation of its topic; why it lost it is recorded once, under a
// lease of the table; Reset starts it over under a new id with its definition, its
// current schema (field ids kept) included, and its old leases gone.
func TestTopicIncarnationAndReset(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tbl, err := tables.Create(ctx, db, tables.Table{Name: "clicks", Spec: jsonSpec, TopicID: "first-id",
		Properties: map[string]string{tables.PropRangeMaxAge: "2s"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tables.Get(ctx, db, "", "clicks")
	if got.TopicID != "first-id" || got.TopicLost != "" || !got.TopicLostAt.IsZero() {
		t.Fatalf("created: %+v", got)
	}
	// An evolved schema: the reset table keeps it, field ids and all.
	v1, err := tables.Evolve(ctx, db, nil, tbl.ID, func(cur tableschema.Version, lastID int) (tableschema.Spec, []iceberg.NestedField, bool, error) {
		spec := cur.Spec
		spec.Columns = append(append([]tableschema.Column(nil), spec.Columns...), tableschema.Column{Name: "src", Type: "string"})
		fields := append(cur.Schema.Fields(), iceberg.NestedField{ID: lastID + 1, Name: "src", Type: iceberg.PrimitiveTypes.String})
		return spec, fields, true, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	stale := leasetest.Take(t, db, lease.PartitionScope(tbl.ID, 1), "idx-old")
	p1 := leasetest.Take(t, db, lease.PartitionScope(tbl.ID, 1), "idx-new")
	if err := tables.MarkTopicLost(ctx, db, stale, "stale"); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("mark under a lost lease: %v", err)
	}
	if err := tables.MarkTopicLost(ctx, db, p1, `topic "clicks" was deleted and created again`); err != nil {
		t.Fatal(err)
	}
	if err := tables.MarkTopicLost(ctx, db, p1, "a later reason"); err != nil {
		t.Fatal(err)
	}
	got, _ = tables.Get(ctx, db, "", "clicks")
	if got.TopicLost != `topic "clicks" was deleted and created again` || got.TopicLostAt.IsZero() {
		t.Fatalf("after marking: %q at %v; want the first reason kept", got.TopicLost, got.TopicLostAt)
	}

	reset, err := tables.Reset(ctx, db, "", "clicks", "second-id", 3)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = tables.Get(ctx, db, "", "clicks")
	if got.ID == tbl.ID || got.ID != reset.ID || got.TopicID != "second-id" || got.TopicLost != "" || got.Partitions != 3 ||
		got.Props().RangeMaxAge.Seconds() != 2 || len(got.Spec.Columns) != 3 || got.Topic != "clicks" {
		t.Fatalf("after reset: %+v (was id %d)", got, tbl.ID)
	}
	v, err := tables.GetVersion(ctx, db, got.ID, got.Version)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := v.Schema.FindFieldByName("src"); !ok || f.ID != mustField(t, v1.Schema, "src").ID {
		t.Errorf("the reset table's schema %v lacks src with its field id", v.Schema)
	}
	if ls, _ := lease.ListLeases(ctx, db, tbl.ID); len(ls) != 0 {
		t.Errorf("the old table's leases are left: %v", ls)
	}
	if ls, _ := lease.ListLeases(ctx, db, got.ID); len(ls) != 4 {
		t.Errorf("the reset table has %d leases, want 3 partition + 1 writer", len(ls))
	}
	if err := tables.RecordTopicID(ctx, db, p1, "third-id"); !errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("a lease of the old table writes into the reset one: %v", err)
	}
	if _, err := tables.Reset(ctx, db, "", "nothing", "x", 1); apierr.Classify(err) != apierr.NotFound {
		t.Errorf("reset of a missing table: %v", err)
	}

	// A table without a recorded id (older than ids) takes the first one its indexer sees.
	old, err := tables.Create(ctx, db, tables.Table{Name: "legacy", Spec: jsonSpec}, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := leasetest.Take(t, db, lease.PartitionScope(old.ID, 0), "idx")
	for _, id := range []string{"seen-first", "seen-later"} {
		if err := tables.RecordTopicID(ctx, db, l, id); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := tables.Get(ctx, db, "", "legacy"); got.TopicID != "seen-first" {
		t.Errorf("recorded topic id %q, want the first", got.TopicID)
	}
}

func mustField(t *testing.T, s *iceberg.Schema, name string) iceberg.NestedField {
	t.Helper()
	f, ok := s.FindFieldByName(name)
	if !ok {
		t.Fatalf("no field %s in %v", name, s)
	}
	return f
}
