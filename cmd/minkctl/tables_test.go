package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

// fakeAdmin is an AdminService on a loopback port that records the requests it gets
// and answers with what the test set: the whole command (flags, the call, the output)
// short of a real node.
type fakeAdmin struct {
	adminv1.UnimplementedAdminServiceServer
	mu       sync.Mutex
	requests []proto.Message
	table    *adminv1.Table
	describe *adminv1.DescribeTableResponse
	status   *adminv1.GetStatusResponse
	nodes    []*adminv1.Node
	topics   []*adminv1.Topic
	err      error
}

func (f *fakeAdmin) GetStatus(_ context.Context, req *adminv1.GetStatusRequest) (*adminv1.GetStatusResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return f.status, nil
}

func (f *fakeAdmin) ListNodes(_ context.Context, req *adminv1.ListNodesRequest) (*adminv1.ListNodesResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &adminv1.ListNodesResponse{Nodes: f.nodes}, nil
}

func (f *fakeAdmin) CreateTopic(_ context.Context, req *adminv1.CreateTopicRequest) (*adminv1.CreateTopicResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &adminv1.CreateTopicResponse{Topic: &adminv1.Topic{Name: req.GetName(), Partitions: max(req.GetPartitions(), 1)}}, nil
}

func (f *fakeAdmin) ListTopics(_ context.Context, req *adminv1.ListTopicsRequest) (*adminv1.ListTopicsResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &adminv1.ListTopicsResponse{Topics: f.topics}, nil
}

func (f *fakeAdmin) record(req proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	return f.err
}

func (f *fakeAdmin) last(t *testing.T) proto.Message {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		t.Fatal("no request reached the server")
	}
	return f.requests[len(f.requests)-1]
}

func (f *fakeAdmin) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeAdmin) CreateTable(_ context.Context, req *adminv1.CreateTableRequest) (*adminv1.CreateTableResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &adminv1.CreateTableResponse{Table: f.table}, nil
}

func (f *fakeAdmin) AlterTable(_ context.Context, req *adminv1.AlterTableRequest) (*adminv1.AlterTableResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &adminv1.AlterTableResponse{Table: f.table}, nil
}

func (f *fakeAdmin) DescribeTable(_ context.Context, req *adminv1.DescribeTableRequest) (*adminv1.DescribeTableResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return f.describe, nil
}

func (f *fakeAdmin) ListTables(_ context.Context, req *adminv1.ListTablesRequest) (*adminv1.ListTablesResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &adminv1.ListTablesResponse{Tables: []*adminv1.Table{f.table}}, nil
}

// startFake serves f and returns a minkctl runner dialing it.
func startFake(t *testing.T, f *fakeAdmin) func(args ...string) (string, string, int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	adminv1.RegisterAdminServiceServer(gs, f)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	addr := lis.Addr().String()
	return func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"--addr", addr}, args...), &stdout, &stderr, func(string) (string, bool) { return "", false })
		return stdout.String(), stderr.String(), code
	}
}

var created = timestamppb.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))

// avroTable is a registry table as a node answers it: values and keys decoded, a
// nested schema.
func avroTable() *adminv1.Table {
	return &adminv1.Table{Id: 7, Namespace: "shop", Name: "orders", Topic: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO,
		Partitions: 3, CreatedAt: created, Properties: map[string]string{"mink.commit.interval": "1s"},
		Value:         &adminv1.RegistryDecoding{Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO, Subject: "orders-value", Mode: adminv1.SchemaMode_SCHEMA_MODE_PREFIX},
		Key:           &adminv1.RegistryDecoding{Format: adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF, Subject: "order-keys", Mode: adminv1.SchemaMode_SCHEMA_MODE_LATEST, Message: "acme.OrderKey"},
		SchemaVersion: 2, SchemaId: 1,
		Schema: []*adminv1.SchemaColumn{
			{FieldId: 1, Name: "id", Type: "long"},
			{FieldId: 2, Name: "ship_to", Type: "struct<10: zip: required string>"},
			{FieldId: 3, Name: "attrs", Type: "map<string, int>"},
			{FieldId: 4, Name: "_kafka_partition", Type: "int"},
			{FieldId: 5, Name: "_kafka_key_decoded", Type: "struct<13: order_id: optional long>"},
		},
		PartitionSpec: []*adminv1.PartitionField{{Column: "_kafka_partition", Transform: "identity", Name: "_kafka_partition"}}}
}

// jsonTable is a JSON table after an alter: a renamed column reads its old key.
func jsonTable() *adminv1.Table {
	return &adminv1.Table{Id: 3, Namespace: "default", Name: "events", Topic: "events", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		Partitions: 1, CreatedAt: created, SchemaVersion: 1, SchemaId: 1,
		Columns: []*adminv1.Column{{Name: "id", Type: "long", Required: true}, {Name: "customer", Type: "string", JsonPath: "name"},
			{Name: "note", Type: "string"}},
		Schema: []*adminv1.SchemaColumn{{FieldId: 1, Name: "id", Type: "long"}, {FieldId: 2, Name: "customer", Type: "string"},
			{FieldId: 15, Name: "note", Type: "string"}, {FieldId: 3, Name: "_kafka_partition", Type: "int"}}}
}

func TestTableCreateRegistryFlags(t *testing.T) {
	f := &fakeAdmin{table: avroTable()}
	minkctl := startFake(t, f)
	out, errOut, code := minkctl("table", "create", "shop.orders", "--format", "avro", "--value-subject", "orders-value",
		"--value-schema-mode", "prefix", "--key-format", "protobuf", "--key-subject", "order-keys", "--key-message", "acme.OrderKey",
		"--key-schema-mode", "latest", "--property", "mink.commit.interval=1s", "--node", "idx-2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := &adminv1.CreateTableRequest{Node: "idx-2", Namespace: "shop", Name: "orders", Topic: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO,
		ValueSubject: "orders-value", ValueSchemaMode: adminv1.SchemaMode_SCHEMA_MODE_PREFIX,
		KeyFormat: adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF, KeySubject: "order-keys", KeyMessage: "acme.OrderKey",
		KeySchemaMode: adminv1.SchemaMode_SCHEMA_MODE_LATEST, Properties: map[string]string{"mink.commit.interval": "1s"}}
	if got := f.last(t); !proto.Equal(got, want) {
		t.Errorf("request:\n%v\nwant:\n%v", got, want)
	}
	// The table as created: how it decodes, and the columns the registry gave it.
	wantOut := `TABLE       shop.orders (id 7)
TOPIC       orders (3 partitions)
FORMAT      avro
VALUES      avro, subject orders-value, prefix mode
KEYS        protobuf, subject order-keys, latest mode, message acme.OrderKey (column _kafka_key_decoded)
SCHEMA      table version 2 (Iceberg schema id 1)
PARTITION   identity(_kafka_partition)
PROPERTIES  mink.commit.interval=1s
CREATED     2026-12-01T12:00:00.000Z

FIELD ID  COLUMN              TYPE
1         id                  long
2         ship_to             struct<10: zip: required string>
3         attrs               map<string, int>
4         _kafka_partition    int
5         _kafka_key_decoded  struct<13: order_id: optional long>
`
	if out != wantOut {
		t.Errorf("output:\n%s\nwant:\n%s", out, wantOut)
	}

	// Protobuf values with a message; the defaults are left to the server.
	if _, errOut, code := minkctl("table", "create", "payments", "--format", "PROTOBUF", "--message", "shop.Payment"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want = &adminv1.CreateTableRequest{Name: "payments", Topic: "payments", Format: adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF, Message: "shop.Payment"}
	if got := f.last(t); !proto.Equal(got, want) {
		t.Errorf("request:\n%v\nwant:\n%v", got, want)
	}
	if _, _, code := minkctl("table", "create", "signups", "--format", "json_schema", "--value-schema-mode", "latest"); code != 0 {
		t.Fatal("json_schema")
	}
	if got := f.last(t).(*adminv1.CreateTableRequest); got.GetFormat() != adminv1.RecordFormat_RECORD_FORMAT_JSON_SCHEMA ||
		got.GetValueSchemaMode() != adminv1.SchemaMode_SCHEMA_MODE_LATEST {
		t.Errorf("json_schema request: %v", got)
	}

	// -o json is the response, whole.
	out, _, code = minkctl("-o", "json", "table", "create", "shop.orders", "--format", "avro")
	var resp adminv1.CreateTableResponse
	if code != 0 || protojson.Unmarshal([]byte(out), &resp) != nil || !proto.Equal(resp.GetTable(), avroTable()) {
		t.Errorf("-o json: exit %d:\n%s", code, out)
	}

	// Bad values are usage errors naming the flag, and call nothing.
	before := f.count()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "xml"}, `--format: want json, raw, avro, protobuf or json_schema, got "xml"`},
		{[]string{"--format", "avro", "--value-schema-mode", "sometimes"}, `--value-schema-mode: want prefix or latest, got "sometimes"`},
		{[]string{"--format", "avro", "--key-format", "json"}, `--key-format: want avro, protobuf or json_schema`},
		{[]string{"--key-format", "avro", "--key-schema-mode", "first"}, `--key-schema-mode: want prefix or latest, got "first"`},
		{[]string{"--column", "id"}, `--column "id": want NAME:TYPE`},
		{[]string{"--property", "=1"}, `--property "=1": want KEY=VALUE`},
		{[]string{"--mode", "merge"}, `--mode: want append or upsert, got "merge"`},
	} {
		_, errOut, code := minkctl(append([]string{"table", "create", "orders"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 with %q", tc.args, code, errOut, tc.want)
		}
	}
	if f.count() != before {
		t.Errorf("a usage error made a call")
	}

	// The server's own error comes back as the code and message, exit 1.
	f.err = status.Error(codes.InvalidArgument, `columns: format avro takes its columns from the schema registry; declare none`)
	_, errOut, code = minkctl("table", "create", "orders", "--format", "avro", "--column", "id:long")
	if code != exitRPC || !strings.Contains(errOut, "InvalidArgument: columns: format avro takes its columns") {
		t.Errorf("server error: exit %d: %s", code, errOut)
	}
}

func TestTableCreateSpecAndFlags(t *testing.T) {
	f := &fakeAdmin{table: avroTable()}
	minkctl := startFake(t, f)
	spec := filepath.Join(t.TempDir(), "orders.json")
	if err := os.WriteFile(spec, []byte(`{"name":"ignored","topic":"orders","format":"RECORD_FORMAT_PROTOBUF","message":"acme.Order",
		"keyFormat":"RECORD_FORMAT_AVRO","keySubject":"k"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The spec's format stays unless --format is given; flags given override the spec.
	if _, errOut, code := minkctl("table", "create", "orders", "--spec", spec, "--key-subject", "orders-key"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := &adminv1.CreateTableRequest{Name: "orders", Topic: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF, Message: "acme.Order",
		KeyFormat: adminv1.RecordFormat_RECORD_FORMAT_AVRO, KeySubject: "orders-key"}
	if got := f.last(t); !proto.Equal(got, want) {
		t.Errorf("request:\n%v\nwant:\n%v", got, want)
	}
	if _, errOut, code := minkctl("table", "create", "orders", "--spec", spec, "--format", "json", "--message", ""); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := f.last(t).(*adminv1.CreateTableRequest); got.GetFormat() != adminv1.RecordFormat_RECORD_FORMAT_JSON || got.GetMessage() != "" {
		t.Errorf("--format json and --message '' over the spec: %v", got)
	}
}

func TestTableAlter(t *testing.T) {
	f := &fakeAdmin{table: jsonTable()}
	minkctl := startFake(t, f)
	out, errOut, code := minkctl("table", "alter", "events", "--rename", "name:customer", "--add", "note:string",
		"--widen", "id:long", "--set", "mink.range.max-age=2s", "--add", "city:string:required:addr.city", "--optional", "id",
		"--unset", "owner", "--set", "team=data", "--widen", "tags:list<long>")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The column changes in the order given, whichever flag each came from.
	want := &adminv1.AlterTableRequest{Name: "events", Changes: []*adminv1.ColumnChange{
		{Change: &adminv1.ColumnChange_Rename{Rename: &adminv1.RenameColumn{Name: "name", NewName: "customer"}}},
		{Change: &adminv1.ColumnChange_Add{Add: &adminv1.Column{Name: "note", Type: "string"}}},
		{Change: &adminv1.ColumnChange_Widen{Widen: &adminv1.WidenColumn{Name: "id", Type: "long"}}},
		{Change: &adminv1.ColumnChange_Add{Add: &adminv1.Column{Name: "city", Type: "string", Required: true, JsonPath: "addr.city"}}},
		{Change: &adminv1.ColumnChange_MakeOptional{MakeOptional: "id"}},
		{Change: &adminv1.ColumnChange_Widen{Widen: &adminv1.WidenColumn{Name: "tags", Type: "list<long>"}}},
	}, SetProperties: map[string]string{"mink.range.max-age": "2s", "team": "data"}, RemoveProperties: []string{"owner"}}
	if got := f.last(t); !proto.Equal(got, want) {
		t.Errorf("request:\n%v\nwant:\n%v", got, want)
	}
	// The table afterwards, with how each declared column is read.
	wantOut := `TABLE       default.events (id 3)
TOPIC       events (1 partition)
FORMAT      json
SCHEMA      table version 1 (Iceberg schema id 1)
PROPERTIES  -
CREATED     2026-12-01T12:00:00.000Z

FIELD ID  COLUMN            TYPE    REQUIRED  JSON PATH
1         id                long    true      id
2         customer          string  false     name
15        note              string  false     note
3         _kafka_partition  int     -         -
`
	if out != wantOut {
		t.Errorf("output:\n%s\nwant:\n%s", out, wantOut)
	}

	// Properties only, through another node, in JSON.
	out, errOut, code = minkctl("table", "alter", "shop.orders", "--unset", "a", "--unset", "b", "--node", "wr-1", "-o", "json")
	var resp adminv1.AlterTableResponse
	if code != 0 || protojson.Unmarshal([]byte(out), &resp) != nil || resp.GetTable().GetName() != "events" {
		t.Fatalf("-o json: exit %d %s:\n%s", code, errOut, out)
	}
	want = &adminv1.AlterTableRequest{Node: "wr-1", Namespace: "shop", Name: "orders", RemoveProperties: []string{"a", "b"}}
	if got := f.last(t); !proto.Equal(got, want) {
		t.Errorf("request:\n%v\nwant:\n%v", got, want)
	}

	before := f.count()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "nothing to change (give --add, --widen, --optional, --rename, --set or --unset)"},
		{[]string{"--add", "note"}, `--add "note": want NAME:TYPE[:required][:JSON_PATH]`},
		{[]string{"--widen", "id"}, `--widen "id": want NAME:TYPE`},
		{[]string{"--widen", ":long"}, `--widen ":long": want NAME:TYPE`},
		{[]string{"--rename", "a"}, `--rename "a": want OLD:NEW`},
		{[]string{"--rename", "a:"}, `--rename "a:": want OLD:NEW`},
		{[]string{"--optional", ""}, `--optional "": want a column NAME`},
		{[]string{"--set", "team"}, `--set "team": want KEY=VALUE`},
		{[]string{"--unset", "team=data"}, `--unset "team=data": want a property KEY`},
		{[]string{"--drop", "x"}, "flag provided but not defined: -drop"},
	} {
		_, errOut, code := minkctl(append([]string{"table", "alter", "events"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 with %q", tc.args, code, errOut, tc.want)
		}
	}
	if _, errOut, code := minkctl("table", "alter", "--add", "x:int"); code != exitUsage || !strings.Contains(errOut, "NAME") {
		t.Errorf("no table: exit %d: %s", code, errOut)
	}
	if f.count() != before {
		t.Errorf("a usage error made a call")
	}

	// A change the server refuses: its InvalidArgument, naming the change, exit 1.
	f.err = status.Error(codes.InvalidArgument, `changes[0]: widen "name": string cannot become long (Iceberg widens int to long, float to double, decimal(P,S) to decimal(P2,S) with P2 >= P)`)
	_, errOut, code = minkctl("table", "alter", "events", "--widen", "name:long")
	if code != exitRPC || !strings.Contains(errOut, `minkctl: InvalidArgument: changes[0]: widen "name": string cannot become long`) {
		t.Errorf("refused: exit %d: %s", code, errOut)
	}
	// Its help names every flag.
	out, _, _ = minkctl("table", "alter", "--help")
	for _, fl := range []string{"-add", "-widen", "-optional", "-rename", "-set", "-unset", "usage: minkctl table alter NAME"} {
		if !strings.Contains(out, fl) {
			t.Errorf("table alter --help does not show %s:\n%s", fl, out)
		}
	}
}

func TestTableDescribe(t *testing.T) {
	tbl := avroTable()
	since := timestamppb.New(time.Date(2026, 12, 1, 12, 5, 0, 0, time.UTC))
	f := &fakeAdmin{table: tbl, describe: &adminv1.DescribeTableResponse{Table: tbl, Partitions: []*adminv1.PartitionStatus{
		{Partition: 0, IndexedEndOffset: 10, HighWatermark: 12, LagRecords: 2, RangeCount: 1, LastRangeTime: since, Holder: "idx-a", Epoch: 3},
		{Partition: 1, IndexedEndOffset: 4, HighWatermark: 9, LagRecords: 5, RangeCount: 1, Holder: "idx-a", Epoch: 3,
			IndexError: "schema registry http://sr:8081 is unreachable:\tdial tcp: connection refused", IndexErrorSince: since},
		{Partition: 2, HighWatermark: -1, LagRecords: -1},
	}}}
	minkctl := startFake(t, f)
	out, errOut, code := minkctl("table", "describe", "shop.orders")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"VALUES      avro, subject orders-value, prefix mode\n",
		"KEYS        protobuf, subject order-keys, latest mode, message acme.OrderKey (column _kafka_key_decoded)\n",
		"SCHEMA      table version 2 (Iceberg schema id 1)\n",
		"2         ship_to             struct<10: zip: required string>\n",
		"PARTITION  INDEXED END  HIGH WATERMARK  LAG  RANGES  LAST RANGE                HOLDER  EPOCH  INDEXING\n",
		"0          10           12              2    1       2026-12-01T12:05:00.000Z  idx-a   3      ok\n",
		"1          4            9               5    1       -                         idx-a   3      paused\n",
		"2          0            ?               ?    0       -                         -       0      ok\n",
		"TOTAL LAG  7 records and more (Kafka did not answer for every partition)\n",
		"PAUSED PARTITION  SINCE                     INDEX ERROR\n",
		"1                 2026-12-01T12:05:00.000Z  schema registry http://sr:8081 is unreachable: dial tcp: connection refused\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe does not show %q:\n%s", want, out)
		}
	}
	if got := f.last(t); !proto.Equal(got, &adminv1.DescribeTableRequest{Namespace: "shop", Name: "orders"}) {
		t.Errorf("request: %v", got)
	}
	// No paused partition, no section for them.
	f.describe.Partitions = f.describe.Partitions[:1]
	if out, _, _ := minkctl("table", "describe", "shop.orders"); strings.Contains(out, "PAUSED") || !strings.Contains(out, "TOTAL LAG  2 records\n") {
		t.Errorf("describe without paused partitions:\n%s", out)
	}
	// -o json has every field: decodings, schema, index errors.
	f.describe.Partitions = []*adminv1.PartitionStatus{{Partition: 1, IndexError: "paused", IndexErrorSince: since}}
	out, _, _ = minkctl("-o", "json", "table", "describe", "shop.orders")
	var d adminv1.DescribeTableResponse
	if err := protojson.Unmarshal([]byte(out), &d); err != nil || !proto.Equal(&d, f.describe) {
		t.Errorf("describe -o json: %v\n%s", err, out)
	}

	// list counts each table's own columns and shows its schema version.
	out, _, _ = minkctl("table", "list")
	if !strings.Contains(out, "COLUMNS  TABLE VERSION") || !strings.Contains(out, "avro    3           3        2 ") {
		t.Errorf("list:\n%s", out)
	}
}

// status --cluster shows a paused partition's reason beside its lag, and the indexer's
// count of paused partitions.
func TestOverviewShowsPausedPartitions(t *testing.T) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printOverview(tw, []*adminv1.GetStatusResponse{{NodeId: "ix-1", Roles: []adminv1.Role{adminv1.Role_ROLE_INDEXER},
		Acting: true, Figures: map[string]string{"partitions_paused": "1", "partition_leases": "2"}}}, nil,
		[]*adminv1.DescribeTableResponse{{Table: &adminv1.Table{Namespace: "default", Name: "orders"}, Partitions: []*adminv1.PartitionStatus{
			{Partition: 0, IndexError: "schema registry http://sr:8081 is unreachable"}, {Partition: 1}}}})
	tw.Flush()
	out := b.String()
	for _, want := range []string{"partitions_paused=1", "paused: schema registry http://sr:8081 is unreachable", "INDEXING"} {
		if !strings.Contains(out, want) {
			t.Errorf("overview lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, " ok") < 1 {
		t.Errorf("a partition that indexes is not shown ok:\n%s", out)
	}
}

// TestPartitionSpecText writes a spec as the Iceberg spec writes its fields, naming a field
// only where its name is not the one Iceberg gives it.
func TestPartitionSpecText(t *testing.T) {
	got := partitionSpec([]*adminv1.PartitionField{{Column: "_kafka_partition", Transform: "identity", Name: "_kafka_partition"},
		{Column: "customer_id", Transform: "bucket[16]", Name: "customer_id_bucket"},
		{Column: "user.geo", Transform: "truncate[2]", Name: "user_geo_trunc"},
		{Column: "ts", Transform: "day", Name: "day"}, {Column: "kp", Transform: "identity", Name: "p"}})
	if want := "identity(_kafka_partition), bucket[16](customer_id), truncate[2](user.geo), day(ts) AS day, identity(kp) AS p"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// An inferred table's describe shows each column's JSON key and the record that showed it.
func TestTableDescribeInferred(t *testing.T) {
	tbl := &adminv1.Table{Namespace: "default", Name: "events", Topic: "events", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON, Partitions: 1,
		SchemaVersion: 2, Columns: []*adminv1.Column{
			{Name: "id", Type: "long", InferredSince: "partition 0 offset 0"},
			{Name: "user_id", Type: "long", JsonPath: "user-id", InferredSince: "partition 0 offset 7"},
		},
		Schema: []*adminv1.SchemaColumn{{FieldId: 1, Name: "id", Type: "long"}, {FieldId: 9, Name: "user_id", Type: "long"},
			{FieldId: 2, Name: "_mink_unfit", Type: "string"}}}
	f := &fakeAdmin{table: tbl, describe: &adminv1.DescribeTableResponse{Table: tbl}}
	minkctl := startFake(t, f)
	out, errOut, code := minkctl("table", "describe", "events")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"FIELD ID  COLUMN       TYPE    JSON PATH  INFERRED FROM\n",
		"1         id           long    id         partition 0 offset 0\n",
		"9         user_id      long    user-id    partition 0 offset 7\n",
		"2         _mink_unfit  string  -          -\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe does not show %q:\n%s", want, out)
		}
	}
}

// TestTableCreatePartitionBy: --partition-by, repeated, is the request's partition spec
// in order, in any of the forms partition.Parse reads; a field it cannot read is a usage
// error naming the flag, and calls nothing; it replaces a --spec file's spec.
func TestTableCreatePartitionBy(t *testing.T) {
	f := &fakeAdmin{table: avroTable()}
	minkctl := startFake(t, f)
	if _, errOut, code := minkctl("table", "create", "clicks", "--column", "ts:timestamptz", "--column", "user_id:long",
		"--partition-by", "day(event_ts)", "--partition-by", "bucket(8, user_id) AS ub", "--partition-by", "_kafka_partition",
		"--partition-by", "truncate[4](user.name)"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := []*adminv1.PartitionField{{Column: "event_ts", Transform: "day"}, {Column: "user_id", Transform: "bucket[8]", Name: "ub"},
		{Column: "_kafka_partition", Transform: "identity"}, {Column: "user.name", Transform: "truncate[4]"}}
	got := f.last(t).(*adminv1.CreateTableRequest).GetPartitionSpec()
	if len(got) != len(want) {
		t.Fatalf("partition spec %v, want %v", got, want)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("field %d: %v, want %v", i, got[i], want[i])
		}
	}

	spec := filepath.Join(t.TempDir(), "clicks.json")
	if err := os.WriteFile(spec, []byte(`{"partitionSpec":[{"column":"ts","transform":"hour"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := minkctl("table", "create", "clicks", "--spec", spec); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := f.last(t).(*adminv1.CreateTableRequest).GetPartitionSpec(); len(got) != 1 || got[0].GetTransform() != "hour" {
		t.Errorf("the --spec file's spec: %v", got)
	}
	if _, errOut, code := minkctl("table", "create", "clicks", "--spec", spec, "--partition-by", "month(ts)"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := f.last(t).(*adminv1.CreateTableRequest).GetPartitionSpec(); len(got) != 1 || got[0].GetTransform() != "month" {
		t.Errorf("--partition-by over the --spec file's spec: %v", got)
	}

	before := f.count()
	for _, bad := range []string{"weekly(ts)", "bucket[](id)", "day(ts", "day(ts) AS"} {
		_, errOut, code := minkctl("table", "create", "clicks", "--partition-by", bad)
		if code != exitUsage || !strings.Contains(errOut, fmt.Sprintf("--partition-by %q", bad)) {
			t.Errorf("%q: exit %d, %q; want exit 2 naming the flag", bad, code, errOut)
		}
	}
	if f.count() != before {
		t.Errorf("a usage error made a call")
	}
}
