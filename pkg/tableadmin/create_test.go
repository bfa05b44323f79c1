package tableadmin_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/tableadmin"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

const (
	orderAvro = `{"type":"record","name":"Order","namespace":"acme","fields":[
		{"name":"id","type":"long"},
		{"name":"item","type":"string"},
		{"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
		{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"attrs","type":{"type":"map","values":"int"}},
		{"name":"ship_to","type":["null",{"type":"record","name":"Address","fields":[{"name":"zip","type":"string"}]}],"default":null}]}`
	// order2Avro adds a field: a table created after it was registered starts from it.
	order2Avro = `{"type":"record","name":"Order","namespace":"acme","fields":[
		{"name":"id","type":"long"},{"name":"item","type":"string"},
		{"name":"note","type":["null","string"],"default":null}]}`
	keyAvro = `{"type":"record","name":"OrderKey","namespace":"acme","fields":[{"name":"order_id","type":"long"}]}`

	paymentsProto = `syntax = "proto3"; package shop;
		message Payment { string id = 1; int64 cents = 2; }
		message Refund { string payment_id = 1; int64 cents = 2; bool full = 3; }`

	signupJSON = `{"type":"object","properties":{"email":{"type":"string"},"age":{"type":"integer"}},"required":["email"]}`
	keyJSON    = `{"type":"object","properties":{"user":{"type":"string"}}}`

	reservedAvro = `{"type":"record","name":"Bad","fields":[{"name":"_kafka_offset","type":"long"}]}`
)

// userColumns is a table's schema without the Kafka columns, in order.
func userColumns(t *adminv1.Table) []string {
	var out []string
	for _, n := range names(t) {
		if !tableschema.IsKafkaColumn(n) {
			out = append(out, n)
		}
	}
	return out
}

func TestCreateAvroTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("orders", 2, nil)
	id := f.register("orders-value", orderAvro, sr.TypeAvro)

	tbl := f.create(&adminv1.CreateTableRequest{Name: "orders", Format: avroFormat})
	if tbl.GetFormat() != avroFormat || tbl.GetPartitions() != 2 || tbl.GetTopic() != "orders" || len(tbl.GetColumns()) != 0 {
		t.Errorf("table: %v", tbl)
	}
	// The subject defaults to <topic>-value (TopicNameStrategy), the mode to prefix.
	if v := tbl.GetValue(); v.GetSubject() != "orders-value" || v.GetMode() != adminv1.SchemaMode_SCHEMA_MODE_PREFIX ||
		v.GetFormat() != avroFormat || v.GetMessage() != "" {
		t.Errorf("value decoding: %v", v)
	}
	if tbl.GetKey() != nil {
		t.Errorf("key decoding without a key_format: %v", tbl.GetKey())
	}
	if tbl.GetSchemaVersion() != 0 || tbl.GetSchemaId() != 0 {
		t.Errorf("schema version %d, id %d; want 0 and 0", tbl.GetSchemaVersion(), tbl.GetSchemaId())
	}
	// The spec the metadata is written with: every table's, identity on the Kafka partition.
	if s := tbl.GetPartitionSpec(); len(s) != 1 || s[0].GetColumn() != "_kafka_partition" || s[0].GetTransform() != "identity" || s[0].GetName() != "_kafka_partition" {
		t.Errorf("partition spec %v, want identity(_kafka_partition)", s)
	}
	// The registry's fields are the columns, in order, before the Kafka columns, with
	// top-level field ids 1..n.
	want := append([]string{"id", "item", "price", "tags", "attrs", "ship_to"}, kafkaColumns...)
	if got := names(tbl); !slices.Equal(got, want) {
		t.Errorf("columns %v, want %v", got, want)
	}
	for i, c := range tbl.GetSchema() {
		if c.GetFieldId() != int32(i+1) {
			t.Errorf("column %s has field id %d, want %d", c.GetName(), c.GetFieldId(), i+1)
		}
	}
	cols := columns(tbl)
	for name, typ := range map[string]string{"id": "long", "item": "string", "price": "decimal(10, 2)",
		"tags": "list<string>", "attrs": "map<string, int>", "_kafka_key": "binary"} {
		if cols[name] != typ {
			t.Errorf("column %s: type %q, want %q", name, cols[name], typ)
		}
	}
	if !strings.HasPrefix(cols["ship_to"], "struct<") || !strings.Contains(cols["ship_to"], "zip") {
		t.Errorf("ship_to: %q, want a struct with zip", cols["ship_to"])
	}

	// The registry schema the first version came from is stored with the table, so
	// nothing later needs the registry to read what it describes.
	stored, err := tables.RegistrySchemas(f.ctx, f.db, tbl.GetId())
	if err != nil || len(stored) != 1 || stored[0].ID != id || stored[0].Subject != "orders-value" || stored[0].Version != 1 || !stored[0].Found {
		t.Errorf("stored registry schemas: %+v %v", stored, err)
	}
	st, _ := f.stored(tbl.GetId())
	if st.Spec.Value == nil || st.Spec.Value.Subject != "orders-value" || st.Spec.Value.Mode != tableschema.ModePrefix {
		t.Errorf("stored spec: %+v", st.Spec)
	}

	// A table made after the subject's next version starts from that one; latest mode
	// and an explicit subject are kept.
	f.register("orders-value", order2Avro, sr.TypeAvro)
	b := f.create(&adminv1.CreateTableRequest{Name: "orders_latest", Topic: "orders", Format: avroFormat,
		ValueSubject: "orders-value", ValueSchemaMode: adminv1.SchemaMode_SCHEMA_MODE_LATEST})
	if got := userColumns(b); !slices.Equal(got, []string{"id", "item", "note"}) {
		t.Errorf("table from the latest version: columns %v", got)
	}
	if b.GetValue().GetMode() != adminv1.SchemaMode_SCHEMA_MODE_LATEST {
		t.Errorf("mode: %v", b.GetValue())
	}
}

func TestCreateProtobufTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("payments", 1, nil)
	f.register("payments-value", paymentsProto, sr.TypeProtobuf)

	// No message: the schema's first, named in the table so it never changes meaning.
	tbl := f.create(&adminv1.CreateTableRequest{Name: "payments", Format: protoFormat})
	if got := tbl.GetValue().GetMessage(); got != "shop.Payment" {
		t.Errorf("message %q, want the first, shop.Payment", got)
	}
	if got := userColumns(tbl); !slices.Equal(got, []string{"id", "cents"}) {
		t.Errorf("columns %v", got)
	}
	if cols := columns(tbl); cols["id"] != "string" || cols["cents"] != "long" {
		t.Errorf("types: %v", cols)
	}
	st, _ := f.stored(tbl.GetId())
	if st.Spec.Value.Message != "shop.Payment" {
		t.Errorf("stored message %q", st.Spec.Value.Message)
	}
	if d := f.describe("payments"); d.GetTable().GetValue().GetMessage() != "shop.Payment" {
		t.Errorf("described message: %v", d.GetTable().GetValue())
	}

	refunds := f.create(&adminv1.CreateTableRequest{Name: "refunds", Topic: "payments", Format: protoFormat, Message: "shop.Refund"})
	if got := userColumns(refunds); !slices.Equal(got, []string{"payment_id", "cents", "full"}) || refunds.GetValue().GetMessage() != "shop.Refund" {
		t.Errorf("refunds: columns %v, message %q", got, refunds.GetValue().GetMessage())
	}

	_, err := f.svc.CreateTable(f.ctx, &adminv1.CreateTableRequest{Name: "chargebacks", Topic: "payments", Format: protoFormat, Message: "shop.Chargeback"})
	wantErr(t, "a message the schema lacks", err, apierr.InvalidArgument, "", `"shop.Chargeback"`, "shop.Payment, shop.Refund")
	_, err = f.svc.CreateTable(f.ctx, &adminv1.CreateTableRequest{Name: "odd", Topic: "payments", Format: protoFormat, Message: "shop Refund"})
	wantErr(t, "a malformed message name", err, apierr.InvalidArgument, "message", "fully qualified")
}

func TestCreateJSONSchemaTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("signups", 3, nil)
	f.register("signups-value", signupJSON, sr.TypeJSON)
	tbl := f.create(&adminv1.CreateTableRequest{Namespace: "web", Name: "signups", Format: jsonSchemaFormat})
	if tbl.GetNamespace() != "web" || tbl.GetPartitions() != 3 || tbl.GetValue().GetSubject() != "signups-value" ||
		tbl.GetValue().GetFormat() != jsonSchemaFormat {
		t.Errorf("table: %v", tbl)
	}
	got := userColumns(tbl)
	slices.Sort(got)
	if !slices.Equal(got, []string{"age", "email"}) {
		t.Errorf("columns %v", got)
	}
	if cols := columns(tbl); cols["email"] != "string" || cols["age"] != "long" {
		t.Errorf("types: %v", cols)
	}
}

func TestCreateWithKeyFormat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("orders", 1, nil)
	f.kafka.CreateTopic("clicks", 1, nil)
	f.register("orders-value", order2Avro, sr.TypeAvro)
	keyID := f.register("orders-key", keyAvro, sr.TypeAvro)
	f.register("click-keys", keyJSON, sr.TypeJSON)

	// Key subject defaults to <topic>-key; the decoded key is a column after _kafka_key.
	tbl := f.create(&adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, KeyFormat: avroFormat})
	if k := tbl.GetKey(); k.GetSubject() != "orders-key" || k.GetFormat() != avroFormat || k.GetMode() != adminv1.SchemaMode_SCHEMA_MODE_PREFIX {
		t.Errorf("key decoding: %v", k)
	}
	want := []string{"id", "item", "note", "_kafka_partition", "_kafka_offset", "_kafka_timestamp", "_kafka_key",
		tableschema.ColumnKafkaKeyDecoded, "_kafka_headers", "_mink_error"}
	if got := names(tbl); !slices.Equal(got, want) {
		t.Errorf("columns %v, want %v", got, want)
	}
	if typ := columns(tbl)[tableschema.ColumnKafkaKeyDecoded]; !strings.HasPrefix(typ, "struct<") || !strings.Contains(typ, "order_id: optional long") && !strings.Contains(typ, "order_id: required long") {
		t.Errorf("decoded key type %q", typ)
	}
	stored, err := tables.RegistrySchemas(f.ctx, f.db, tbl.GetId())
	if err != nil || len(stored) != 2 || !slices.ContainsFunc(stored, func(s tables.RegistrySchema) bool { return s.ID == keyID && s.Subject == "orders-key" }) {
		t.Errorf("stored registry schemas: %+v %v", stored, err)
	}

	// A JSON table may decode its keys too: an explicit subject, latest mode.
	clicks := f.create(&adminv1.CreateTableRequest{Name: "clicks", Format: jsonFormat,
		Columns:   []*adminv1.Column{{Name: "page", Type: "string"}},
		KeyFormat: jsonSchemaFormat, KeySubject: "click-keys", KeySchemaMode: adminv1.SchemaMode_SCHEMA_MODE_LATEST})
	if k := clicks.GetKey(); k.GetSubject() != "click-keys" || k.GetMode() != adminv1.SchemaMode_SCHEMA_MODE_LATEST || clicks.GetValue() != nil {
		t.Errorf("clicks: value %v, key %v", clicks.GetValue(), k)
	}
	if got := names(clicks); !slices.Contains(got, tableschema.ColumnKafkaKeyDecoded) || got[0] != "page" || len(clicks.GetColumns()) != 1 {
		t.Errorf("clicks columns %v, declared %v", got, clicks.GetColumns())
	}
}

// TestCreateInvalid: every bad request is InvalidArgument naming its field, and creates
// nothing.
func TestCreateInvalid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("orders", 1, nil)
	f.kafka.CreateTopic("bad", 1, nil)
	f.register("orders-value", orderAvro, sr.TypeAvro)
	f.register("orders-key", keyAvro, sr.TypeAvro)
	f.register("protos", paymentsProto, sr.TypeProtobuf)
	f.register("bad-value", reservedAvro, sr.TypeAvro)
	cols := []*adminv1.Column{{Name: "id", Type: "long"}}
	cases := []struct {
		name  string
		req   *adminv1.CreateTableRequest
		field string
		want  []string
	}{
		{"columns given for a registry format", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, Columns: cols},
			"columns", []string{"schema registry"}},
		{"key_subject without key_format", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, KeySubject: "orders-key"},
			"key_format", []string{"key_subject"}},
		{"key_schema_mode without key_format", &adminv1.CreateTableRequest{Name: "orders", Format: jsonFormat, Columns: cols,
			KeySchemaMode: adminv1.SchemaMode_SCHEMA_MODE_LATEST}, "key_format", nil},
		{"unknown value mode", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, ValueSchemaMode: adminv1.SchemaMode(7)},
			"value_schema_mode", []string{"unknown schema mode"}},
		{"unknown key mode", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, KeyFormat: avroFormat, KeySchemaMode: adminv1.SchemaMode(9)},
			"key_schema_mode", []string{"unknown schema mode"}},
		{"a raw key format", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, KeyFormat: adminv1.RecordFormat_RECORD_FORMAT_RAW},
			"key_format", []string{"RECORD_FORMAT_AVRO"}},
		{"no format", &adminv1.CreateTableRequest{Name: "orders"}, "format", nil},
		{"topic missing", &adminv1.CreateTableRequest{Name: "ghost", Format: avroFormat}, "topic",
			[]string{`"ghost"`, "does not exist", "minkctl topic create ghost --partitions N", "CreateTopic", "on first produce"}},
		{"bad property", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, Properties: map[string]string{"mink.range.max-age": "forever"}},
			`properties["mink.range.max-age"]`, []string{`"forever"`, "duration"}},
		{"unknown mink property", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, Properties: map[string]string{"mink.range.max-agee": "1s"}},
			`properties["mink.range.max-agee"]`, []string{"unknown Mink property"}},
		{"value_subject for json", &adminv1.CreateTableRequest{Name: "orders", Format: jsonFormat, Columns: cols, ValueSubject: "orders-value"},
			"value_subject", nil},
		{"message for json", &adminv1.CreateTableRequest{Name: "orders", Format: jsonFormat, Columns: cols, Message: "acme.Order"},
			"message", nil},
		{"value mode for raw", &adminv1.CreateTableRequest{Name: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
			ValueSchemaMode: adminv1.SchemaMode_SCHEMA_MODE_PREFIX}, "value_schema_mode", nil},
		{"message for avro", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, Message: "acme.Order"},
			"message", []string{"only Protobuf"}},
		{"key_message for an avro key", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, KeyFormat: avroFormat, KeyMessage: "acme.OrderKey"},
			"key_message", []string{"only Protobuf"}},
		{"subject of another format", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, ValueSubject: "protos"},
			"format", []string{`"protos"`, "PROTOBUF"}},
		{"key subject of another format", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, KeyFormat: jsonSchemaFormat},
			"key_format", []string{`"orders-key"`, "AVRO"}},
		{"a schema with a reserved column", &adminv1.CreateTableRequest{Name: "bad", Format: avroFormat},
			"value_subject", []string{"_kafka_offset", "reserved"}},
		{"a type of another system", &adminv1.CreateTableRequest{Name: "orders", Format: jsonFormat, Columns: []*adminv1.Column{{Name: "id", Type: "integer"}}},
			`columns[0] ("id")`, []string{`unknown type "integer" (did you mean int or long?)`, "the types are boolean, int, long"}},
		{"bad table name", &adminv1.CreateTableRequest{Name: "9lives", Topic: "orders", Format: avroFormat}, "name", nil},
		{"a json_path that is no path", &adminv1.CreateTableRequest{Name: "orders", Format: jsonFormat,
			Columns: []*adminv1.Column{{Name: "id", Type: "long"}, {Name: "x", Type: "string", JsonPath: "$$[[[(("}}},
			`columns[1] ("x")`, []string{`json_path "$$[[[(("`, `holds '['`, "JSONPath"}},
		{"a JSONPath for a json_path", &adminv1.CreateTableRequest{Name: "orders", Format: jsonFormat,
			Columns: []*adminv1.Column{{Name: "uid", Type: "string", JsonPath: "$.user.id"}}},
			`columns[0] ("uid")`, []string{`leave out the leading "$"`}},
		{"a list index in a json_path", &adminv1.CreateTableRequest{Name: "orders", Format: jsonFormat,
			Columns: []*adminv1.Column{{Name: "first", Type: "string", JsonPath: "items[0].sku"}}},
			`columns[0] ("first")`, []string{`key "items[0]"`, "list<T>"}},
		{"unknown table mode", &adminv1.CreateTableRequest{Name: "orders", Format: avroFormat, Mode: adminv1.TableMode(7)},
			"mode", []string{"TABLE_MODE_UPSERT"}},
	}
	for _, tc := range cases {
		_, err := f.svc.CreateTable(f.ctx, tc.req)
		wantErr(t, tc.name, err, apierr.InvalidArgument, tc.field, tc.want...)
	}
	if l, err := f.svc.ListTables(f.ctx, &adminv1.ListTablesRequest{}); err != nil || len(l.GetTables()) != 0 {
		t.Errorf("tables after only bad requests: %v %v", l, err)
	}
}

// TestCreateRegistryErrors: the registry's answers (or its silence, or its absence)
// become errors a client can act on, and nothing is created.
func TestCreateRegistryErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("ghost", 1, nil)
	f.register("ghost-value", orderAvro, sr.TypeAvro)

	// The registry has no such subject: NotFound naming it.
	_, err := f.svc.CreateTable(f.ctx, &adminv1.CreateTableRequest{Name: "ghost", Format: avroFormat, ValueSubject: "phantom-value"})
	wantErr(t, "unknown value subject", err, apierr.NotFound, "", `subject "phantom-value"`, f.reg.URL())
	_, err = f.svc.CreateTable(f.ctx, &adminv1.CreateTableRequest{Name: "ghost", Format: avroFormat, KeyFormat: avroFormat})
	wantErr(t, "unknown key subject", err, apierr.NotFound, "", `subject "ghost-key"`)

	// No registry configured: FailedPrecondition saying which flag; JSON tables need none.
	noReg := &tableadmin.Service{DB: f.db, Kafka: f.svc.Kafka, Codecs: tablecodec.New(f.db, nil)}
	_, err = noReg.CreateTable(f.ctx, &adminv1.CreateTableRequest{Name: "ghost", Format: avroFormat})
	wantErr(t, "no registry", err, apierr.FailedPrecondition, "", "--schema-registry-url", "avro")
	_, err = noReg.CreateTable(f.ctx, &adminv1.CreateTableRequest{Name: "ghost", Format: jsonFormat,
		Columns: []*adminv1.Column{{Name: "id", Type: "long"}}, KeyFormat: protoFormat})
	wantErr(t, "no registry for a key format", err, apierr.FailedPrecondition, "", "--schema-registry-url", "protobuf")
	if _, err := noReg.CreateTable(f.ctx, &adminv1.CreateTableRequest{Name: "plain", Topic: "ghost", Format: jsonFormat,
		Columns: []*adminv1.Column{{Name: "id", Type: "long"}}}); err != nil {
		t.Errorf("a JSON table without a registry: %v", err)
	}

	// The registry does not answer: Unavailable naming its URL.
	down := srfake.New()
	url := down.URL()
	down.Close()
	client, err := registry.New(registry.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	unreachable := &tableadmin.Service{DB: f.db, Kafka: f.svc.Kafka, Codecs: tablecodec.New(f.db, client)}
	_, err = unreachable.CreateTable(f.ctx, &adminv1.CreateTableRequest{Name: "ghost", Format: avroFormat})
	wantErr(t, "registry down", err, apierr.Unavailable, "", url, "unreachable")

	l, err := f.svc.ListTables(f.ctx, &adminv1.ListTablesRequest{})
	if err != nil || len(l.GetTables()) != 1 || l.GetTables()[0].GetName() != "plain" {
		t.Errorf("tables: %v %v", l, err)
	}
}

// A JSON table created without columns infers them from a bounded sample of the
// records in its topic; an empty topic starts with the Kafka columns alone.
func TestCreateInferredTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("clicks", 2, nil)
	f.kafka.CreateTopic("quiet", 1, nil)
	cl := f.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	kafkatest.Produce(t, cl,
		&kgo.Record{Topic: "clicks", Partition: 0, Value: []byte(`{"id": 1, "page": "/a", "user-agent": "x", "at": null}`)},
		&kgo.Record{Topic: "clicks", Partition: 1, Value: []byte(`{"id": 2, "ms": 1.5, "tags": ["t"], "geo": {"cc": "nl"}}`)},
		&kgo.Record{Topic: "clicks", Partition: 1, Value: []byte(`not json`)})
	tbl := f.create(&adminv1.CreateTableRequest{Name: "clicks", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON})
	v, err := f.svc.Codecs.Version(f.ctx, tables.Table{ID: tbl.GetId()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fl := range v.Schema.Fields() {
		got = append(got, fl.Name+" "+fl.Type.String())
	}
	want := []string{"id long", "page string", "user_agent string", "ms double", "tags list<string>", "geo struct<", "_mink_unfit string", "_kafka_partition int"}
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no %q in\n%s", w, all)
		}
	}
	if strings.Contains(all, "\nat ") {
		t.Errorf("a field seen only as null has a column:\n%s", all)
	}
	if v.Spec.Infer == nil || v.Spec.Infer.Keys[v.Schema.Fields()[2].ID] != "user-agent" {
		t.Errorf("inference %+v", v.Spec.Infer)
	}
	// The table shows its columns as inferred, from where the data showed them.
	since := map[string]string{}
	for _, c := range tbl.GetColumns() {
		since[c.GetName()] = c.GetInferredSince() + " " + c.GetJsonPath()
	}
	if since["id"] != "partition 0 offset 0 " || since["ms"] != "partition 1 offset 0 " || since["user_agent"] != "partition 0 offset 0 user-agent" {
		t.Errorf("columns %v", since)
	}
	// AlterTable renames (the key read stays), pins a type, and stops inference.
	alt, err := f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "clicks", Changes: []*adminv1.ColumnChange{
		{Change: &adminv1.ColumnChange_Rename{Rename: &adminv1.RenameColumn{Name: "user_agent", NewName: "ua"}}},
		{Change: &adminv1.ColumnChange_Add{Add: &adminv1.Column{Name: "score", Type: "double"}}},
	}, SetProperties: map[string]string{tables.PropSchemaInfer: "false"}})
	if err != nil {
		t.Fatal(err)
	}
	since = map[string]string{}
	for _, c := range alt.GetTable().GetColumns() {
		since[c.GetName()] = c.GetInferredSince() + " " + c.GetJsonPath()
	}
	if since["ua"] != "partition 0 offset 0 user-agent" || since["score"] != "alter " || alt.GetTable().GetSchemaVersion() != 1 {
		t.Errorf("after the alter: %v", since)
	}
	quiet := f.create(&adminv1.CreateTableRequest{Name: "quiet", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON})
	if v, err := f.svc.Codecs.Version(f.ctx, tables.Table{ID: quiet.GetId()}, 0); err != nil || len(v.Schema.Fields()) != 7 {
		t.Errorf("an empty topic's table: %v %v", v.Schema, err)
	}
	_, err = f.svc.CreateTable(f.ctx, &adminv1.CreateTableRequest{Name: "keyed", Topic: "quiet", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		KeyFormat: adminv1.RecordFormat_RECORD_FORMAT_AVRO})
	if apierr.Classify(err) != apierr.InvalidArgument || !strings.Contains(err.Error(), "key_format") {
		t.Errorf("an inferred table with a key format: %v", err)
	}
}
