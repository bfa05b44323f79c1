package tables_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// A table's partition spec is stored with its first version, read back by every way a
// table is read, carried to the versions a schema change makes and to the table a reset
// makes; a table created without one has the default, identity(_kafka_partition).
func TestPartitionSpecStored(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
		{Name: "id", Type: "long", Required: true}, {Name: "ts", Type: "timestamptz"}, {Name: "msg", Type: "string"}}}
	fields, err := spec.Fields()
	if err != nil {
		t.Fatal(err)
	}
	schema := iceberg.NewSchema(tableschema.SchemaID, fields...)
	by := []partition.Field{mustParse(t, "day(ts)"), mustParse(t, "bucket[8](id) AS b"), mustParse(t, "truncate[2](msg)")}
	ps, err := partition.Build(schema, by, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := tables.Create(ctx, db, tables.Table{Name: "events", Spec: spec, PartitionSpec: &ps}, 2)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := tables.Create(ctx, db, tables.Table{Name: "plain", Spec: jsonSpec}, 1)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, got tables.Table) {
		t.Helper()
		if got.PartitionSpec == nil || !reflect.DeepEqual(*got.PartitionSpec, ps) {
			t.Fatalf("%s: partition spec %+v, want %+v", what, got.PartitionSpec, ps)
		}
	}
	got, err := tables.Get(ctx, db, "", "events")
	if err != nil {
		t.Fatal(err)
	}
	same("get", got)
	if got, err = tables.GetByID(ctx, db, tbl.ID); err != nil {
		t.Fatal(err)
	}
	same("get by id", got)
	for what, list := range map[string]func() ([]tables.Table, error){
		"list":       func() ([]tables.Table, error) { return tables.List(ctx, db, "") },
		"list page":  func() ([]tables.Table, error) { return tables.ListPage(ctx, db, "default", "", 0, false) },
		"list after": func() ([]tables.Table, error) { return tables.ListAfter(ctx, db, "", "", "", 0) },
	} {
		ts, err := list()
		if err != nil || len(ts) != 2 || ts[0].Name != "events" || ts[1].Name != "plain" {
			t.Fatalf("%s: %+v %v", what, ts, err)
		}
		same(what, ts[0])
		if ts[1].PartitionSpec != nil {
			t.Fatalf("%s: a table created without a spec has %+v stored", what, ts[1].PartitionSpec)
		}
	}

	// The default: no spec stored, identity(_kafka_partition) as spec 0.
	pv, err := tables.Versions(ctx, db, plain.ID)
	if err != nil {
		t.Fatal(err)
	}
	def, err := partition.KafkaPartitionSpec(pv[0].Schema)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := plain.Partitioning(pv[0].Schema); err != nil || !reflect.DeepEqual(got, def) || got.ID != 0 {
		t.Fatalf("default partitioning: %+v %v, want %+v", got, err, def)
	}
	if got, err := tables.PartitionSpecs(ctx, db, plain.ID); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], def) {
		t.Fatalf("specs of a table without one: %+v %v", got, err)
	}

	// A schema change keeps the spec: one spec, stored with both versions.
	if _, err := tables.Evolve(ctx, db, nil, tbl.ID, func(cur tableschema.Version, lastID int) (tableschema.Spec, []iceberg.NestedField, bool, error) {
		s, f, err := cur.Alter([]tableschema.ColumnChange{{Add: &tableschema.Column{Name: "src", Type: "string"}}}, lastID)
		return s, f, err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	if got, err = tables.Get(ctx, db, "", "events"); err != nil || got.Version != 1 {
		t.Fatalf("after evolving: %+v %v", got, err)
	}
	same("evolved", got)
	if got, err := tables.PartitionSpecs(ctx, db, tbl.ID); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], ps) {
		t.Fatalf("specs after a schema change: %+v %v, want [%+v]", got, err, ps)
	}

	// A reset table is indexed as the old one was.
	if _, err := tables.Reset(ctx, db, "", "events", "", 2); err != nil {
		t.Fatal(err)
	}
	if got, err = tables.Get(ctx, db, "", "events"); err != nil || got.ID == tbl.ID {
		t.Fatalf("after reset: %+v %v", got, err)
	}
	same("reset", got)

	// A spec that is not of the first schema is never stored.
	bad := partition.Spec{Fields: []partition.SpecField{{SourceID: 999, FieldID: 1000, Name: "x", Transform: partition.Transform{Kind: partition.Identity}}}}
	if _, err := tables.Create(ctx, db, tables.Table{Name: "bad", Spec: spec, PartitionSpec: &bad}, 1); err == nil {
		t.Fatal("a spec over a column the schema lacks was stored")
	}
	if _, err := tables.Get(ctx, db, "", "bad"); err == nil {
		t.Fatal("a table whose spec was refused exists")
	}
}

func mustParse(t *testing.T, s string) partition.Field {
	t.Helper()
	f, err := partition.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
