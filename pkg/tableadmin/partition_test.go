package tableadmin_test

import (
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/sr"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

func pf(column, transform, name string) *adminv1.PartitionField {
	return &adminv1.PartitionField{Column: column, Transform: transform, Name: name}
}

// CreateTable checks a partition spec against the table's first schema (the declared
// columns, or the registry's), answering InvalidArgument naming the field at fault; a
// spec other than identity(_kafka_partition) is refused as not yet supported (the
// indexer does not yet build a file per tuple), and nothing is created.
func TestCreatePartitionSpec(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("events", 2, nil)
	f.kafka.CreateTopic("orders", 1, nil)
	f.register("orders-value", orderAvro, sr.TypeAvro)
	cols := []*adminv1.Column{{Name: "id", Type: "long"}, {Name: "ts", Type: "timestamptz"}, {Name: "msg", Type: "string"},
		{Name: "score", Type: "double"}}
	jsonReq := func(spec ...*adminv1.PartitionField) *adminv1.CreateTableRequest {
		return &adminv1.CreateTableRequest{Name: "events", Format: jsonFormat, Columns: cols, PartitionSpec: spec}
	}
	cases := []struct {
		name  string
		req   *adminv1.CreateTableRequest
		field string
		want  []string
	}{
		{"unknown column", jsonReq(pf("tz", "day", "")), `partition_spec[0] ("day(tz)")`, []string{"no column tz", "did you mean ts?"}},
		{"hour of a string", jsonReq(pf("ts", "day", ""), pf("msg", "hour", "")), `partition_spec[1] ("hour(msg)")`, []string{"hour", "string"}},
		{"bucket of a double", jsonReq(pf("score", "bucket[4]", "")), `partition_spec[0] ("bucket[4](score)")`, []string{"bucket", "double"}},
		{"bucket[0]", jsonReq(pf("id", "bucket[0]", "")), "partition_spec[0]", []string{"bucket"}},
		{"truncate[-1]", jsonReq(pf("msg", "truncate[-1]", "")), "partition_spec[0]", []string{"truncate"}},
		{"unknown transform", jsonReq(pf("ts", "weekly", "")), "partition_spec[0]", []string{`"weekly"`}},
		{"two fields, one name", jsonReq(pf("ts", "day", "p"), pf("id", "bucket[4]", "P")), `partition_spec[1] ("bucket[4](id) AS P")`, []string{"taken"}},
		{"too many buckets", jsonReq(pf("id", "bucket[64]", ""), pf("msg", "bucket[64]", "")), `partition_spec[1] ("bucket[64](msg)")`, []string{"256"}},
		// The registry's schema is the one checked: item is a string there.
		{"hour of a registry string", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, PartitionSpec: []*adminv1.PartitionField{pf("item", "hour", "")}},
			`partition_spec[0] ("hour(item)")`, []string{"string"}},
		{"a registry column that is not there", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, PartitionSpec: []*adminv1.PartitionField{pf("ship_to.city", "identity", "")}},
			`partition_spec[0] ("ship_to.city")`, []string{"ship_to.city"}},
	}
	for _, tc := range cases {
		_, err := f.svc.CreateTable(f.ctx, tc.req)
		wantErr(t, tc.name, err, apierr.InvalidArgument, tc.field, tc.want...)
	}

	// Good specs, of declared and registry columns, Kafka columns and nested fields, are
	// refused until tables can be partitioned by them; so is one on an upsert table.
	for name, req := range map[string]*adminv1.CreateTableRequest{
		"day and bucket":          jsonReq(pf("ts", "day", ""), pf("id", "bucket[8]", "")),
		"hour of kafka timestamp": jsonReq(pf("_kafka_timestamp", "hour", "")),
		"a nested registry field": {Name: "orders", Format: avroFormat, PartitionSpec: []*adminv1.PartitionField{pf("ship_to.zip", "truncate[2]", "")}},
		"the default renamed":     jsonReq(pf("_kafka_partition", "identity", "kp")),
		"upsert":                  {Name: "events", Format: jsonFormat, Columns: cols, Mode: adminv1.TableMode_TABLE_MODE_UPSERT, PartitionSpec: []*adminv1.PartitionField{pf("ts", "day", "")}},
	} {
		_, err := f.svc.CreateTable(f.ctx, req)
		wantErr(t, name, err, apierr.Unimplemented, "", "partition_spec", "not supported yet", "identity(_kafka_partition)")
	}
	if l, err := f.svc.ListTables(f.ctx, &adminv1.ListTablesRequest{}); err != nil || len(l.GetTables()) != 0 {
		t.Fatalf("tables after only refused requests: %v %v", l, err)
	}

	// The default, asked for, is stored and shown.
	tbl := f.create(jsonReq(pf("_kafka_partition", "identity", "")))
	if s := tbl.GetPartitionSpec(); len(s) != 1 || s[0].GetColumn() != "_kafka_partition" || s[0].GetTransform() != "identity" || s[0].GetName() != "_kafka_partition" {
		t.Fatalf("created with the default spec: %v", s)
	}
	if st, _ := f.stored(tbl.GetId()); st.PartitionSpec == nil || len(st.PartitionSpec.Fields) != 1 {
		t.Fatalf("stored spec %+v, want the default stored", st.PartitionSpec)
	}
}

// DescribeTable shows the spec stored with the table's current version, with the
// columns as the current schema names them (here after a rename).
func TestDescribeStoredPartitionSpec(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("clicks", 1, nil)
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
		{Name: "ts", Type: "timestamptz"}, {Name: "user_id", Type: "long"}}}
	fields, err := spec.Fields()
	if err != nil {
		t.Fatal(err)
	}
	var by []partition.Field
	for _, s := range []string{"day(ts)", "bucket[8](user_id) AS user_b"} {
		p, err := partition.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		by = append(by, p)
	}
	// Stored through the store: the API refuses such a spec until indexing follows it.
	ps, err := partition.Build(iceberg.NewSchema(tableschema.SchemaID, fields...), by, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tables.Create(f.ctx, f.db, tables.Table{Name: "clicks", Spec: spec, PartitionSpec: &ps}, 1); err != nil {
		t.Fatal(err)
	}
	f.alter(&adminv1.AlterTableRequest{Name: "clicks", Changes: []*adminv1.ColumnChange{
		{Change: &adminv1.ColumnChange_Rename{Rename: &adminv1.RenameColumn{Name: "ts", NewName: "event_ts"}}}}})
	got := f.describe("clicks").GetTable().GetPartitionSpec()
	want := []*adminv1.PartitionField{pf("event_ts", "day", "ts_day"), pf("user_id", "bucket[8]", "user_b")}
	if len(got) != len(want) {
		t.Fatalf("described spec %v, want %v", got, want)
	}
	for i := range want {
		if got[i].GetColumn() != want[i].GetColumn() || got[i].GetTransform() != want[i].GetTransform() || got[i].GetName() != want[i].GetName() {
			t.Fatalf("described spec %v, want %v", got, want)
		}
	}
}
