package tableadmin_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/tables"
)

func add(name, typ, path string) *adminv1.ColumnChange {
	return &adminv1.ColumnChange{Change: &adminv1.ColumnChange_Add{Add: &adminv1.Column{Name: name, Type: typ, JsonPath: path}}}
}

func widen(name, typ string) *adminv1.ColumnChange {
	return &adminv1.ColumnChange{Change: &adminv1.ColumnChange_Widen{Widen: &adminv1.WidenColumn{Name: name, Type: typ}}}
}

func optional(name string) *adminv1.ColumnChange {
	return &adminv1.ColumnChange{Change: &adminv1.ColumnChange_MakeOptional{MakeOptional: name}}
}

func rename(name, newName string) *adminv1.ColumnChange {
	return &adminv1.ColumnChange{Change: &adminv1.ColumnChange_Rename{Rename: &adminv1.RenameColumn{Name: name, NewName: newName}}}
}

// jsonTable creates the JSON table "events" over a one-partition topic.
func jsonTable(f *fixture) *adminv1.Table {
	f.t.Helper()
	f.kafka.CreateTopic("events", 1, nil)
	return f.create(&adminv1.CreateTableRequest{Name: "events", Format: jsonFormat, Columns: []*adminv1.Column{
		{Name: "id", Type: "int", Required: true},
		{Name: "name", Type: "string"},
		{Name: "tags", Type: "list<int>"},
		{Name: "amount", Type: "decimal(10,2)"},
	}, Properties: map[string]string{"owner": "growth"}})
}

func declared(t *adminv1.Table) map[string]*adminv1.Column {
	m := map[string]*adminv1.Column{}
	for _, c := range t.GetColumns() {
		m[c.GetName()] = c
	}
	return m
}

func TestAlterJSONTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := jsonTable(f)
	v0 := ids(before)

	// Every kind of change at once, in order: the rename comes after a widen of the
	// same column's old name, and the new column reads a nested key.
	after := f.alter(&adminv1.AlterTableRequest{Name: "events", Changes: []*adminv1.ColumnChange{
		add("note", "string", "meta.note"),
		widen("id", "long"),
		widen("tags", "list<long>"),
		widen("amount", "decimal(12,2)"),
		optional("id"),
		widen("name", "string"), // the same type: allowed, nothing changes
		rename("name", "customer"),
	}})
	if after.GetSchemaVersion() != 1 || after.GetSchemaId() != 1 {
		t.Errorf("after the alter: version %d, schema id %d; want 1 and 1", after.GetSchemaVersion(), after.GetSchemaId())
	}
	want := append([]string{"id", "customer", "tags", "amount", "note"}, kafkaColumns...)
	if got := names(after); !slices.Equal(got, want) {
		t.Errorf("columns %v, want %v", got, want)
	}
	cols := columns(after)
	for name, typ := range map[string]string{"id": "long", "customer": "string", "tags": "list<long>", "amount": "decimal(12, 2)", "note": "string"} {
		if cols[name] != typ {
			t.Errorf("column %s: type %q, want %q", name, cols[name], typ)
		}
	}
	// Every field keeps its id (so every file written before still reads); the renamed
	// column keeps name's; the new one gets an id above every id used so far (14: the
	// list element and header fields come after the top-level ones).
	got := ids(after)
	for name, id := range v0 {
		n := name
		if name == "name" {
			n = "customer"
		}
		if got[n] != id {
			t.Errorf("column %s: field id %d, was %d", n, got[n], id)
		}
	}
	if got["note"] != 15 {
		t.Errorf("note: field id %d, want 15", got["note"])
	}
	d := declared(after)
	if c := d["customer"]; c == nil || c.GetJsonPath() != "name" || c.GetType() != "string" {
		t.Errorf("renamed column: %v (it must still read the key %q)", c, "name")
	}
	if c := d["id"]; c == nil || c.GetRequired() || c.GetType() != "long" {
		t.Errorf("id: %v", c)
	}
	if c := d["note"]; c == nil || c.GetJsonPath() != "meta.note" {
		t.Errorf("note: %v", c)
	}
	if after.GetProperties()["owner"] != "growth" {
		t.Errorf("properties: %v", after.GetProperties())
	}

	// Stored: two versions; version 0 is untouched, for the files built with it.
	tbl, n := f.stored(after.GetId())
	if n != 2 || tbl.Version != 1 {
		t.Errorf("stored: version %d, %d versions", tbl.Version, n)
	}
	v, err := tables.GetVersion(f.ctx, f.db, after.GetId(), 0)
	if err != nil || len(v.Spec.Columns) != 4 || v.Spec.Columns[1].Name != "name" || v.Schema.ID != 0 {
		t.Errorf("version 0: %+v %v", v.Spec, err)
	}

	// A required column added, then made optional: the schema is the same as before the
	// second change, so the third version shares the second's Iceberg schema id.
	v2 := f.alter(&adminv1.AlterTableRequest{Name: "events", Changes: []*adminv1.ColumnChange{
		{Change: &adminv1.ColumnChange_Add{Add: &adminv1.Column{Name: "flag", Type: "boolean", Required: true}}}}})
	if v2.GetSchemaVersion() != 2 || v2.GetSchemaId() != 2 || !declared(v2)["flag"].GetRequired() {
		t.Errorf("version 2: %d, schema id %d, flag %v", v2.GetSchemaVersion(), v2.GetSchemaId(), declared(v2)["flag"])
	}
	v3 := f.alter(&adminv1.AlterTableRequest{Name: "events", Changes: []*adminv1.ColumnChange{optional("flag")}})
	if v3.GetSchemaVersion() != 3 || v3.GetSchemaId() != 2 || declared(v3)["flag"].GetRequired() {
		t.Errorf("version 3: %d, schema id %d, flag %v", v3.GetSchemaVersion(), v3.GetSchemaId(), declared(v3)["flag"])
	}
	if !maps.Equal(ids(v2), ids(v3)) {
		t.Errorf("ids changed: %v -> %v", ids(v2), ids(v3))
	}
}

// TestAlterErrors: each bad change is InvalidArgument naming it, and changes nothing,
// also when it comes after good changes and with good property changes beside it.
func TestAlterErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tbl := jsonTable(f)
	cases := []struct {
		name    string
		changes []*adminv1.ColumnChange
		field   string
		want    []string
	}{
		{"widen string to long", []*adminv1.ColumnChange{widen("name", "long")}, "changes[0]",
			[]string{`widen "name": string cannot become long`, "Iceberg widens int to long"}},
		{"narrow", []*adminv1.ColumnChange{widen("amount", "decimal(8,2)")}, "changes[0]", []string{"cannot become"}},
		{"widen a list to a scalar", []*adminv1.ColumnChange{widen("tags", "long")}, "changes[0]", []string{"list<int> cannot become long"}},
		{"widen an unknown column", []*adminv1.ColumnChange{widen("nope", "long")}, "changes[0]", []string{`widen: no column "nope"`}},
		{"widen to no type", []*adminv1.ColumnChange{widen("id", "lon")}, "changes[0]", []string{`widen "id"`, `"lon"`}},
		{"rename onto an existing name", []*adminv1.ColumnChange{rename("name", "id")}, "changes[0]", []string{"duplicate name"}},
		{"rename onto an existing name in another case", []*adminv1.ColumnChange{rename("name", "ID")}, "changes[0]", []string{"duplicate name", "ignoring case"}},
		{"rename an unknown column", []*adminv1.ColumnChange{rename("nope", "yes")}, "changes[0]", []string{`rename: no column "nope"`}},
		{"rename to a reserved name", []*adminv1.ColumnChange{rename("name", "_kafka_name")}, "changes[0]", []string{"reserved"}},
		{"make an unknown column optional", []*adminv1.ColumnChange{optional("nope")}, "changes[0]", []string{`optional: no column "nope"`}},
		{"make no column optional", []*adminv1.ColumnChange{optional("")}, "changes[0]", []string{"empty column name"}},
		{"add an existing name", []*adminv1.ColumnChange{add("name", "string", "other")}, "changes[0]", []string{"duplicate name"}},
		{"add a column reading a key already read", []*adminv1.ColumnChange{add("name2", "string", "name")}, "changes[0]", []string{"already read"}},
		{"add a bad type", []*adminv1.ColumnChange{add("x", "strng", "")}, "changes[0]", []string{`add "x"`, `"strng"`}},
		{"add a json_path that is no path", []*adminv1.ColumnChange{add("x", "string", "$$[[[((")}, "changes[0]",
			[]string{`columns[4] ("x")`, `json_path "$$[[[(("`, "JSONPath"}},
		{"add a wildcard json_path", []*adminv1.ColumnChange{add("x", "string", "user.*")}, "changes[0]", []string{`("x")`, `key "*"`}},
		{"an empty change", []*adminv1.ColumnChange{{}}, "changes[0]", []string{"empty change"}},
		// The first changes are good; the third is not: none is applied.
		{"a bad change after good ones", []*adminv1.ColumnChange{add("note", "string", ""), widen("id", "long"), widen("name", "long")},
			"changes[2]", []string{`widen "name"`}},
		// The rename takes "name" away before the widen looks for it.
		{"a change of a name renamed before", []*adminv1.ColumnChange{rename("name", "customer"), widen("name", "string")},
			"changes[1]", []string{`no column "name"`}},
	}
	for _, tc := range cases {
		_, err := f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "events", Changes: tc.changes,
			SetProperties: map[string]string{"mink.commit.interval": "1s"}, RemoveProperties: []string{"owner"}})
		wantErr(t, tc.name, err, apierr.InvalidArgument, tc.field, tc.want...)
	}
	_, err := f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "events"})
	wantErr(t, "nothing to change", err, apierr.InvalidArgument, "changes", "nothing to change")
	_, err = f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Changes: []*adminv1.ColumnChange{optional("id")}})
	wantErr(t, "no name", err, apierr.InvalidArgument, "name")
	_, err = f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "nope", Changes: []*adminv1.ColumnChange{optional("id")}})
	wantErr(t, "unknown table", err, apierr.NotFound, "", "default.nope")
	_, err = f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Namespace: "other", Name: "events", Changes: []*adminv1.ColumnChange{optional("id")}})
	wantErr(t, "table in another namespace", err, apierr.NotFound, "", "other.events")

	// Nothing was half-applied: the same version, columns and properties.
	now, n := f.stored(tbl.GetId())
	if now.Version != 0 || n != 1 || len(now.Spec.Columns) != 4 || now.Spec.Columns[0].Type != "int" ||
		!maps.Equal(now.Properties, map[string]string{"owner": "growth"}) {
		t.Errorf("after only bad alters: version %d (%d stored), columns %+v, properties %v", now.Version, n, now.Spec.Columns, now.Properties)
	}
	if d := f.describe("events"); d.GetTable().GetSchemaVersion() != 0 || columns(d.GetTable())["id"] != "int" {
		t.Errorf("described: %v", d.GetTable())
	}
}

func TestAlterRegistryTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("orders", 1, nil)
	f.register("orders-value", orderAvro, sr.TypeAvro)
	tbl := f.create(&adminv1.CreateTableRequest{Name: "orders", Format: avroFormat})
	for _, ch := range []*adminv1.ColumnChange{add("note", "string", ""), widen("id", "long"), optional("id"), rename("item", "product")} {
		_, err := f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "orders", Changes: []*adminv1.ColumnChange{ch}})
		wantErr(t, "column change of an Avro table", err, apierr.InvalidArgument, "changes", "only JSON tables", "avro", "schema registry subject")
	}
	// Its properties can change.
	got := f.alter(&adminv1.AlterTableRequest{Name: "orders", SetProperties: map[string]string{"mink.live-load": "false"}})
	if got.GetProperties()["mink.live-load"] != "false" || got.GetSchemaVersion() != 0 || !slices.Equal(names(got), names(tbl)) {
		t.Errorf("after a property change: %v", got)
	}
}

func TestAlterProperties(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tbl := jsonTable(f)

	got := f.alter(&adminv1.AlterTableRequest{Name: "events", SetProperties: map[string]string{
		"mink.range.max-age": "2s", "history.expire.min-snapshots-to-keep": "3", "team": "data"}})
	want := map[string]string{"owner": "growth", "mink.range.max-age": "2s", "history.expire.min-snapshots-to-keep": "3", "team": "data"}
	if !maps.Equal(got.GetProperties(), want) || got.GetSchemaVersion() != 0 {
		t.Errorf("after set: %v (version %d), want %v", got.GetProperties(), got.GetSchemaVersion(), want)
	}
	// Set and remove in one call; removing a key the table lacks is no error.
	got = f.alter(&adminv1.AlterTableRequest{Name: "events", SetProperties: map[string]string{"mink.range.max-age": "5s"},
		RemoveProperties: []string{"owner", "team", "never-set"}})
	want = map[string]string{"mink.range.max-age": "5s", "history.expire.min-snapshots-to-keep": "3"}
	if !maps.Equal(got.GetProperties(), want) {
		t.Errorf("after set and remove: %v, want %v", got.GetProperties(), want)
	}

	cases := []struct {
		name   string
		set    map[string]string
		remove []string
		field  string
		want   []string
	}{
		{"assembly target below its range", map[string]string{"mink.assembly.target-bytes": "-1"}, nil,
			`properties["mink.assembly.target-bytes"]`, []string{"a byte count from 1024", `"-1"`}},
		{"negative snapshots to keep", map[string]string{"history.expire.min-snapshots-to-keep": "-5"}, nil,
			`properties["history.expire.min-snapshots-to-keep"]`, []string{"a snapshot count", `"-5"`}},
		{"unknown mink key", map[string]string{"mink.range.target-byte": "1048576"}, nil,
			`properties["mink.range.target-byte"]`, []string{"unknown Mink property"}},
		{"not a duration", map[string]string{"mink.live.ttl": "15"}, nil, `properties["mink.live.ttl"]`, []string{"duration"}},
		{"not a boolean", map[string]string{"mink.live-load": "nope"}, nil, `properties["mink.live-load"]`, []string{`"true" or "false"`}},
		{"a key both set and removed", map[string]string{"team": "x"}, []string{"team"}, "remove_properties", []string{`"team"`, "set_properties"}},
	}
	for _, tc := range cases {
		// A good column change beside a bad property: neither is applied.
		_, err := f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "events", Changes: []*adminv1.ColumnChange{widen("id", "long")},
			SetProperties: tc.set, RemoveProperties: tc.remove})
		wantErr(t, tc.name, err, apierr.InvalidArgument, tc.field, tc.want...)
	}
	now, n := f.stored(tbl.GetId())
	if now.Version != 0 || n != 1 || !maps.Equal(now.Properties, want) {
		t.Errorf("after bad property changes: version %d (%d stored), properties %v, want %v", now.Version, n, now.Properties, want)
	}
}

// TestAlterConcurrently: alters of one table from many callers at once (through
// different nodes, say) each apply to what the one before left: no property set by one
// is lost to another, and every column change lands in its own version.
func TestAlterConcurrently(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tbl := jsonTable(f)
	const n = 8
	errs := make(chan error, 2*n)
	for i := range n {
		go func() {
			_, err := f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "events",
				SetProperties: map[string]string{fmt.Sprintf("k%d", i): "v"}})
			errs <- err
		}()
		go func() {
			_, err := f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "events",
				Changes: []*adminv1.ColumnChange{add(fmt.Sprintf("c%d", i), "string", "")}})
			errs <- err
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	now, versions := f.stored(tbl.GetId())
	for i := range n {
		if now.Properties[fmt.Sprintf("k%d", i)] != "v" {
			t.Errorf("property k%d was lost: %v", i, now.Properties)
		}
	}
	if now.Version != n || versions != n+1 || len(now.Spec.Columns) != 4+n {
		t.Errorf("version %d (%d stored), %d columns; want %d, %d, %d", now.Version, versions, len(now.Spec.Columns), n, n+1, 4+n)
	}
}
