package tableadmin_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/tableadmin"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

// fixture is the Service over a private Postgres, an in-process Kafka-protocol broker
// and an srfake Schema Registry, all real and all the test's own.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	db    *pgxpool.Pool
	kafka *kafkatest.Cluster
	reg   *srfake.Registry
	svc   *tableadmin.Service
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	// What the node's gRPC door hands handlers when auth is off.
	ctx := auth.WithPrincipal(context.Background(), auth.Anonymous)
	db, _ := pgtest.DB(t)
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	kc := kafkatest.New(t, kafkatest.Brokers(1))
	kafka, err := kafkasrc.New(kc.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	reg := srfake.New()
	t.Cleanup(reg.Close)
	client, err := registry.New(registry.Config{URL: reg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return &fixture{t: t, ctx: ctx, db: db, kafka: kc, reg: reg,
		svc: &tableadmin.Service{DB: db, Kafka: kafka, Codecs: tablecodec.New(db, client)}}
}

// register adds a version to subject and returns its schema id.
func (f *fixture) register(subject, text string, typ sr.SchemaType) int {
	f.t.Helper()
	id, _, err := f.reg.RegisterSchema(subject, sr.Schema{Schema: text, Type: typ})
	if err != nil {
		f.t.Fatalf("register %s: %v", subject, err)
	}
	return id
}

func (f *fixture) create(req *adminv1.CreateTableRequest) *adminv1.Table {
	f.t.Helper()
	resp, err := f.svc.CreateTable(f.ctx, req)
	if err != nil {
		f.t.Fatalf("CreateTable %s: %v", req.GetName(), err)
	}
	return resp.GetTable()
}

func (f *fixture) alter(req *adminv1.AlterTableRequest) *adminv1.Table {
	f.t.Helper()
	resp, err := f.svc.AlterTable(f.ctx, req)
	if err != nil {
		f.t.Fatalf("AlterTable %s: %v", req.GetName(), err)
	}
	return resp.GetTable()
}

func (f *fixture) describe(name string) *adminv1.DescribeTableResponse {
	f.t.Helper()
	d, err := f.svc.DescribeTable(f.ctx, &adminv1.DescribeTableRequest{Name: name})
	if err != nil {
		f.t.Fatalf("DescribeTable %s: %v", name, err)
	}
	return d
}

// stored is the table as Postgres holds it, and every version of its schema.
func (f *fixture) stored(id int64) (tables.Table, int) {
	f.t.Helper()
	tbl, err := tables.GetByID(f.ctx, f.db, id)
	if err != nil {
		f.t.Fatal(err)
	}
	vs, err := tables.Versions(f.ctx, f.db, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return tbl, len(vs)
}

// wantErr checks that err is of kind, names field (when not ""), and that the message a
// gRPC client reads mentions every one of want.
func wantErr(t *testing.T, what string, err error, kind apierr.Kind, field string, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want %v", what, kind)
		return
	}
	if got := apierr.Classify(err); got != kind {
		t.Errorf("%s: %v (%v), want %v", what, got, err, kind)
		return
	}
	if field != "" {
		var e *apierr.Error
		if !errors.As(err, &e) || e.Field != field {
			t.Errorf("%s: field %q (%v), want %q", what, fieldOf(err), err, field)
		}
	}
	msg := status.Convert(apierr.GRPC(err)).Message()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: message %q does not mention %q", what, msg, w)
		}
	}
	if kind == apierr.InvalidArgument && status.Code(apierr.GRPC(err)) != codes.InvalidArgument {
		t.Errorf("%s: gRPC code %v", what, status.Code(apierr.GRPC(err)))
	}
}

func fieldOf(err error) string {
	var e *apierr.Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// columns shows a table's current schema as "name type" lines, Kafka columns included.
func columns(t *adminv1.Table) map[string]string {
	m := map[string]string{}
	for _, c := range t.GetSchema() {
		m[c.GetName()] = c.GetType()
	}
	return m
}

func names(t *adminv1.Table) []string {
	var out []string
	for _, c := range t.GetSchema() {
		out = append(out, c.GetName())
	}
	return out
}

func ids(t *adminv1.Table) map[string]int32 {
	m := map[string]int32{}
	for _, c := range t.GetSchema() {
		m[c.GetName()] = c.GetFieldId()
	}
	return m
}

var kafkaColumns = []string{"_kafka_partition", "_kafka_offset", "_kafka_timestamp", "_kafka_key", "_kafka_headers", "_mink_error"}

var jsonFormat = adminv1.RecordFormat_RECORD_FORMAT_JSON
var avroFormat = adminv1.RecordFormat_RECORD_FORMAT_AVRO
var protoFormat = adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF
var jsonSchemaFormat = adminv1.RecordFormat_RECORD_FORMAT_JSON_SCHEMA
