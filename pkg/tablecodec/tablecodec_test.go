package tablecodec_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/schemafmt/protofmt"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

const (
	ordersV1 = `{"type":"record","name":"Order","namespace":"acme","fields":[
		{"name":"id","type":"int"},{"name":"item","type":"string"}]}`
	// v2 widens id and adds a field: a schema update.
	ordersV2 = `{"type":"record","name":"Order","namespace":"acme","fields":[
		{"name":"id","type":"long"},{"name":"item","type":"string"},
		{"name":"note","type":["null","string"],"default":null}]}`
	// v3 changes item to a type the table cannot widen to: error rows.
	ordersV3 = `{"type":"record","name":"Order","namespace":"acme","fields":[
		{"name":"id","type":"long"},{"name":"item","type":"int"}]}`
)

type fixture struct {
	t      testing.TB
	ctx    context.Context
	db     *pgxpool.Pool
	reg    *srfake.Registry
	client *registry.Client
	codecs *tablecodec.Codecs
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	reg := srfake.New()
	t.Cleanup(reg.Close)
	client, err := registry.New(registry.Config{URL: reg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, db: db, reg: reg, client: client, codecs: tablecodec.New(db, client)}
}

func (f *fixture) register(subject, text string, typ sr.SchemaType, refs ...sr.SchemaReference) int {
	f.t.Helper()
	id, _, err := f.reg.RegisterSchema(subject, sr.Schema{Schema: text, Type: typ, References: refs})
	if err != nil {
		f.t.Fatalf("register %s: %v", subject, err)
	}
	return id
}

// create makes a table the way CreateTable does: the subjects' latest schemas are its
// first version.
func (f *fixture) create(name string, spec tableschema.Spec) tables.Table {
	f.t.Helper()
	spec, fields, schemas, err := f.codecs.FirstVersion(f.ctx, spec)
	if err != nil {
		f.t.Fatalf("first version of %s: %v", name, err)
	}
	tbl, err := tables.CreateVersioned(f.ctx, f.db, tables.Table{Name: name, Spec: spec}, 1, fields, schemas)
	if err != nil {
		f.t.Fatal(err)
	}
	return tbl
}

func (f *fixture) table(id int64) tables.Table {
	f.t.Helper()
	tbl, err := tables.GetByID(f.ctx, f.db, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return tbl
}

func (f *fixture) decoder(codecs *tablecodec.Codecs, tbl tables.Table, s parquetbuild.Settings) *tablecodec.Decoder {
	f.t.Helper()
	d, err := codecs.Decoder(f.ctx, tbl, s)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// avroRecord encodes v with the schema as a producer does: sr.Serde and hamba/avro.
func avroRecord(t *testing.T, id int, text string, v any) []byte {
	t.Helper()
	schema := avro.MustParse(text)
	var serde sr.Serde
	serde.Register(id, v, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }))
	b, err := serde.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type orderV1 struct {
	ID   int32  `avro:"id"`
	Item string `avro:"item"`
}

type orderV2 struct {
	ID   int64   `avro:"id"`
	Item string  `avro:"item"`
	Note *string `avro:"note"`
}

type orderV3 struct {
	ID   int64 `avro:"id"`
	Item int32 `avro:"item"`
}

func rec(off int64, value []byte) record.Record {
	return record.Record{Offset: off, Timestamp: time.UnixMilli(1_700_000_000_000), Value: value}
}

// row decodes r and returns its values by column name, and its error column.
func row(t *testing.T, d rowcodec.RowDecoder, r record.Record) (map[string]rowcodec.Value, string) {
	t.Helper()
	var out rowcodec.Row
	d.Decode(r, &out)
	m := map[string]rowcodec.Value{}
	for i, f := range d.Fields() {
		m[f.Name] = out.Values[i]
	}
	e := m[tableschema.ColumnMinkError]
	if e.Valid {
		return m, string(e.Bytes)
	}
	return m, ""
}

func TestAvroLearnEvolveAndRebuildWithoutTheRegistry(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run beside parallel tests.
	f := newFixture(t)
	id1 := f.register("orders-value", ordersV1, sr.TypeAvro)
	tbl := f.create("orders", tableschema.Spec{Format: tableschema.FormatAvro,
		Value: &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: "orders-value", Mode: tableschema.ModePrefix}})
	d0 := f.decoder(f.codecs, tbl, tablecodec.NewSettings(0, 0, 0))

	r1 := rec(0, avroRecord(t, id1, ordersV1, orderV1{ID: 7, Item: "pen"}))
	if need := d0.Check(r1); need.Kind != tablecodec.NeedNothing {
		t.Fatalf("a record of the first version needs %+v", need)
	}
	vals, why := row(t, d0, r1)
	if why != "" || vals["id"].Int != 7 || string(vals["item"].Bytes) != "pen" || vals["_kafka_offset"].Int != 0 {
		t.Fatalf("row %v %q", vals, why)
	}
	var out rowcodec.Row
	if n := testing.AllocsPerRun(100, func() { d0.Check(r1); d0.Decode(r1, &out) }); n != 0 {
		t.Errorf("%v allocations per record", n)
	}

	// Version 2 of the subject, produced mid-stream: learned, then the table evolves.
	id2 := f.register("orders-value", ordersV2, sr.TypeAvro)
	note := "gift"
	r2 := rec(1, avroRecord(t, id2, ordersV2, orderV2{ID: 1 << 40, Item: "ink", Note: &note}))
	if need := d0.Check(r2); need.Kind != tablecodec.NeedSchema || need.ID != id2 || need.Key {
		t.Fatalf("new schema id: %+v", need)
	}
	if err := f.codecs.Learn(f.ctx, tbl, id2, false); err != nil {
		t.Fatal(err)
	}
	if need := d0.Check(r2); need.Kind != tablecodec.NeedVersion || need.ID != id2 {
		t.Fatalf("after learning: %+v", need)
	}
	v, err := f.codecs.Evolve(f.ctx, nil, tbl, id2, false)
	if err != nil || v.ID != 1 || v.Schema.ID != 1 {
		t.Fatalf("evolve: %+v %v", v, err)
	}
	// Evolving again changes nothing: the version covers the schema.
	if again, err := f.codecs.Evolve(f.ctx, nil, tbl, id2, false); err != nil || again.ID != 1 {
		t.Fatalf("evolve again: %+v %v", again, err)
	}
	tbl = f.table(tbl.ID)
	if tbl.Version != 1 {
		t.Fatalf("table version %d", tbl.Version)
	}
	old, _ := v.Schema.FindFieldByName("id")
	first, _ := tables.GetVersion(f.ctx, f.db, tbl.ID, 0)
	oldFirst, _ := first.Schema.FindFieldByName("id")
	if old.ID != oldFirst.ID || old.Type.String() != "long" {
		t.Fatalf("id field %+v, first %+v", old, oldFirst)
	}
	d1 := f.decoder(f.codecs, tbl, tablecodec.NewSettings(1, 0, 0))
	if need := d1.Check(r2); need.Kind != tablecodec.NeedNothing {
		t.Fatalf("version 1 still needs %+v", need)
	}
	vals, why = row(t, d1, r2)
	if why != "" || vals["id"].Int != 1<<40 || string(vals["note"].Bytes) != "gift" {
		t.Fatalf("v2 row %v %q", vals, why)
	}
	// An old record at the new version: id widened, note null.
	vals, why = row(t, d1, r1)
	if why != "" || vals["id"].Int != 7 || vals["note"].Valid {
		t.Fatalf("v1 record at version 1: %v %q", vals, why)
	}

	// A process without the registry decodes the same rows, from Postgres alone, even
	// once the subject is gone from the registry.
	if _, err := f.client.ByID(f.ctx, id2); err != nil {
		t.Fatal(err)
	}
	f.reg.Close()
	rebuild := tablecodec.New(f.db, nil)
	for _, c := range []struct {
		s parquetbuild.Settings
		r record.Record
	}{{tablecodec.NewSettings(0, 0, 0), r1}, {tablecodec.NewSettings(1, 0, 0), r1}, {tablecodec.NewSettings(1, 0, 0), r2}} {
		a, whyA := row(t, f.decoder(f.codecs, tbl, c.s), c.r)
		b, whyB := row(t, f.decoder(rebuild, tbl, c.s), c.r)
		if whyA != whyB || len(a) != len(b) {
			t.Fatalf("rebuild differs: %q vs %q", whyA, whyB)
		}
		for k := range a {
			if a[k].Valid != b[k].Valid || a[k].Int != b[k].Int || string(a[k].Bytes) != string(b[k].Bytes) {
				t.Errorf("column %s: %+v rebuilt as %+v", k, a[k], b[k])
			}
		}
	}
}

func TestAvroErrorRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id1 := f.register("orders-value", ordersV1, sr.TypeAvro)
	if err := f.reg.SetCompat("orders-value", sr.CompatNone); err != nil {
		t.Fatal(err)
	}
	tbl := f.create("orders", tableschema.Spec{Format: tableschema.FormatAvro,
		Value: &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: "orders-value", Mode: tableschema.ModePrefix}})
	d := f.decoder(f.codecs, tbl, tablecodec.NewSettings(0, 0, 0))

	// An incompatible version: the table keeps going, its records are error rows
	// naming the field and both types.
	id3 := f.register("orders-value", ordersV3, sr.TypeAvro)
	r3 := rec(5, avroRecord(t, id3, ordersV3, orderV3{ID: 1, Item: 2}))
	if err := f.codecs.Learn(f.ctx, tbl, id3, false); err != nil {
		t.Fatal(err)
	}
	if need := d.Check(r3); need.Kind == tablecodec.NeedVersion {
		// id widened: a new version, still with the conflict on item.
		if _, err := f.codecs.Evolve(f.ctx, nil, tbl, id3, false); err != nil {
			t.Fatal(err)
		}
		tbl = f.table(tbl.ID)
		d = f.decoder(f.codecs, tbl, tablecodec.NewSettings(tbl.Version, 0, 0))
	}
	if need := d.Check(r3); need.Kind != tablecodec.NeedNothing {
		t.Fatalf("incompatible schema needs %+v", need)
	}
	vals, why := row(t, d, r3)
	want := `value: schema id ` + itoa(id3) + `: field "item" is int in the writer schema but string in the table`
	if why != want || vals["id"].Valid || !vals["_kafka_offset"].Valid {
		t.Errorf("incompatible record: %q (id valid %v), want %q", why, vals["id"].Valid, want)
	}

	// An id the registry does not have: stored as missing, every record naming it an
	// error row, the same after a rebuild.
	bogus := rec(6, append([]byte{0, 0, 0, 0x30, 0x39}, 2, 'x'))
	need := d.Check(bogus)
	if need.Kind != tablecodec.NeedSchema || need.ID != 12345 {
		t.Fatalf("bogus id: %+v", need)
	}
	if err := f.codecs.Learn(f.ctx, tbl, 12345, false); err != nil {
		t.Fatal(err)
	}
	if need := d.Check(bogus); need.Kind != tablecodec.NeedNothing {
		t.Fatalf("after learning a missing id: %+v", need)
	}
	if _, why := row(t, d, bogus); why != "value: schema id 12345 is not in the schema registry" {
		t.Errorf("missing id: %q", why)
	}
	rs, ok, err := tables.GetRegistrySchema(f.ctx, f.db, tbl.ID, 12345)
	if err != nil || !ok || rs.Found {
		t.Errorf("stored marker %+v %v %v", rs, ok, err)
	}
	if _, why := row(t, f.decoder(tablecodec.New(f.db, nil), tbl, tablecodec.NewSettings(tbl.Version, 0, 0)), bogus); why != "value: schema id 12345 is not in the schema registry" {
		t.Errorf("missing id after a rebuild: %q", why)
	}

	for _, c := range []struct {
		value []byte
		want  string
	}{
		{[]byte(`{"id":1}`), "value: no schema id prefix (want magic byte 0 and a 4-byte schema id)"},
		{[]byte{0, 0, 0}, "value: no schema id prefix (want magic byte 0 and a 4-byte schema id)"},
		{nil, "null value (tombstone)"},
		{append(avroRecord(t, id1, ordersV1, orderV1{ID: 1, Item: "a"}), 0xff), "value: schema id " + itoa(id1) + ": extra bytes after the Avro value"},
		{avroRecord(t, id1, ordersV1, orderV1{ID: 1, Item: "a"})[:7], "value: schema id " + itoa(id1) + ": "},
	} {
		vals, why := row(t, d, rec(7, c.value))
		if !strings.HasPrefix(why, c.want) || vals["item"].Valid {
			t.Errorf("value %x: %q, want %q", c.value, why, c.want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func protoValueInt(n int64) protoreflect.Value     { return protoreflect.ValueOfInt64(n) }
func protoValueString(s string) protoreflect.Value { return protoreflect.ValueOfString(s) }
func protoValueMessage(m proto.Message) protoreflect.Value {
	return protoreflect.ValueOfMessage(m.ProtoReflect())
}

// A registry that cannot answer pauses: Learn fails Unavailable, nothing is stored, and
// once it answers the schema is learned.
func TestRegistryOutage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("orders-value", ordersV1, sr.TypeAvro)
	tbl := f.create("orders", tableschema.Spec{Format: tableschema.FormatAvro,
		Value: &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: "orders-value", Mode: tableschema.ModePrefix}})
	id2 := f.register("orders-value", ordersV2, sr.TypeAvro)
	var down atomic.Bool
	down.Store(true)
	f.reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() {
			http.Error(w, `{"error_code":50001,"message":"store down"}`, http.StatusInternalServerError)
			return true
		}
		return false
	})
	err := f.codecs.Learn(f.ctx, tbl, id2, false)
	if apierr.Classify(err) != apierr.Unavailable || !strings.Contains(err.Error(), f.reg.URL()) {
		t.Fatalf("learn with the registry down: %v", err)
	}
	if _, ok, _ := tables.GetRegistrySchema(f.ctx, f.db, tbl.ID, id2); ok {
		t.Fatal("a schema was stored while the registry was down")
	}
	if _, err := f.codecs.Latest(f.ctx, tbl, "orders-value", false); apierr.Classify(err) != apierr.Unavailable {
		t.Fatalf("latest with the registry down: %v", err)
	}
	down.Store(false)
	if err := f.codecs.Learn(f.ctx, tbl, id2, false); err != nil {
		t.Fatal(err)
	}
	if rs, ok, _ := tables.GetRegistrySchema(f.ctx, f.db, tbl.ID, id2); !ok || !rs.Found {
		t.Fatal("not stored once the registry answered")
	}
	// No registry configured at all: the table cannot learn, and says so.
	err = tablecodec.New(f.db, nil).Learn(f.ctx, tbl, 999, false)
	if !errors.Is(err, tablecodec.ErrUnknownSchema) || !strings.Contains(err.Error(), "--schema-registry-url") {
		t.Fatalf("learn without a registry: %v", err)
	}
}

func TestLatestModeAndDecodedKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("bare-value", ordersV1, sr.TypeAvro)
	keyID := f.register("bare-key", `{"type":"record","name":"K","fields":[{"name":"region","type":"string"}]}`, sr.TypeAvro)
	spec := tableschema.Spec{Format: tableschema.FormatAvro,
		Value: &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: "bare-value", Mode: tableschema.ModeLatest},
		Key:   &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: "bare-key", Mode: tableschema.ModePrefix}}
	tbl := f.create("bare", spec)
	id, err := f.codecs.Latest(f.ctx, tbl, "bare-value", false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.codecs.Current(f.ctx, tbl)
	if err != nil || s.ValueSchemaID != id || s.Version != 0 {
		t.Fatalf("current decoding %+v %v (latest %d)", s, err, id)
	}
	d := f.decoder(f.codecs, tbl, tablecodec.NewSettings(0, id, 0))
	bare, err := avro.Marshal(avro.MustParse(ordersV1), orderV1{ID: 3, Item: "cup"})
	if err != nil {
		t.Fatal(err)
	}
	r := rec(0, bare)
	r.Key = avroRecord(t, keyID, `{"type":"record","name":"K","fields":[{"name":"region","type":"string"}]}`, struct {
		Region string `avro:"region"`
	}{"eu"})
	if need := d.Check(r); need.Kind != tablecodec.NeedNothing {
		t.Fatalf("check %+v", need)
	}
	vals, why := row(t, d, r)
	k := vals[tableschema.ColumnKafkaKeyDecoded]
	if why != "" || vals["id"].Int != 3 || !k.Valid || len(k.Elems) != 1 || string(k.Elems[0].Bytes) != "eu" || string(vals["_kafka_key"].Bytes) != string(r.Key) {
		t.Fatalf("row %v %q", vals, why)
	}
	r.Key = []byte("not a key")
	if _, why := row(t, d, r); !strings.HasPrefix(why, "key: no schema id prefix") {
		t.Errorf("bad key: %q", why)
	}
	r.Key = nil
	if vals, why := row(t, d, r); why != "" || vals["id"].Int != 3 || vals[tableschema.ColumnKafkaKeyDecoded].Valid {
		t.Errorf("a record without a key: %q %v", why, vals)
	}
}

const ordersProto = `syntax = "proto3";
package acme.v1;
import "common.proto";
message Other { string x = 1; }
message Order {
  int64 id = 1;
  acme.common.Money price = 2;
  repeated string tags = 3;
}`

const commonProto = `syntax = "proto3";
package acme.common;
message Money { string currency = 1; int64 units = 2; }`

func TestProtobufWithReferenceAndMessageIndexes(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run beside parallel tests.
	f := newFixture(t)
	f.register("common.proto", commonProto, sr.TypeProtobuf)
	ref := sr.SchemaReference{Name: "common.proto", Subject: "common.proto", Version: 1}
	id := f.register("orders-value", ordersProto, sr.TypeProtobuf, ref)
	tbl := f.create("porders", tableschema.Spec{Format: tableschema.FormatProtobuf,
		Value: &tableschema.Decoding{Format: tableschema.FormatProtobuf, Subject: "orders-value", Mode: tableschema.ModePrefix, Message: "acme.v1.Order"}})
	if tbl.Spec.Value.Message != "acme.v1.Order" {
		t.Fatalf("message %q", tbl.Spec.Value.Message)
	}
	s, err := protofmt.Compile(schemafmt.Source{Text: ordersProto, References: []schemafmt.Reference{{Name: "common.proto", Subject: "common.proto", Version: 1, Source: schemafmt.Source{Text: commonProto}}}}, "acme.v1.Order")
	if err != nil {
		t.Fatal(err)
	}
	msg := dynamicpb.NewMessage(s.Descriptor())
	fd := s.Descriptor().Fields()
	msg.Set(fd.ByName("id"), protoValueInt(42))
	money := dynamicpb.NewMessage(fd.ByName("price").Message())
	money.Set(money.Descriptor().Fields().ByName("currency"), protoValueString("EUR"))
	money.Set(money.Descriptor().Fields().ByName("units"), protoValueInt(5))
	msg.Set(fd.ByName("price"), protoValueMessage(money))
	var serde sr.Serde
	serde.Register(id, msg, sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }), sr.Index(s.Indexes()...))
	payload, err := serde.Encode(msg)
	if err != nil {
		t.Fatal(err)
	}
	d := f.decoder(f.codecs, tbl, tablecodec.NewSettings(0, 0, 0))
	vals, why := row(t, d, rec(0, payload))
	price := vals["price"]
	if why != "" || vals["id"].Int != 42 || !price.Valid || string(price.Elems[0].Bytes) != "EUR" || price.Elems[1].Int != 5 {
		t.Fatalf("row %v %q", vals, why)
	}
	// Indexing and rebuilds decode every record so: no allocation per record.
	var out rowcodec.Row
	r := rec(0, payload)
	if n := testing.AllocsPerRun(100, func() { d.Check(r); d.Decode(r, &out) }); n != 0 {
		t.Errorf("%v allocations per record", n)
	}
	// The same bytes under another message index name another message: an error row.
	wrong := append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, 0)
	wrong = append(wrong, payload[6:]...)
	if _, why := row(t, d, rec(1, wrong)); !strings.Contains(why, "message index [0] of schema id") || !strings.Contains(why, "acme.v1.Order") {
		t.Errorf("wrong index: %q", why)
	}
}

// FirstVersion says exactly what is wrong with a subject that cannot be a table.
func TestFirstVersionErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("rec-value", `{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}`, sr.TypeAvro)
	f.register("proto-value", commonProto, sr.TypeProtobuf)
	f.register("clash-value", `{"type":"record","name":"C","fields":[{"name":"_kafka_offset","type":"long"}]}`, sr.TypeAvro)
	avroSpec := func(subject string) tableschema.Spec {
		return tableschema.Spec{Format: tableschema.FormatAvro, Value: &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: subject, Mode: tableschema.ModePrefix}}
	}
	for _, c := range []struct {
		spec  tableschema.Spec
		kind  apierr.Kind
		field string
		want  string
	}{
		{avroSpec("nope-value"), apierr.NotFound, "", `"nope-value"`},
		{avroSpec("rec-value"), apierr.InvalidArgument, "value_subject", `recursive type "Node"`},
		{avroSpec("proto-value"), apierr.InvalidArgument, "format", `subject "proto-value" holds PROTOBUF schemas, not avro`},
		{avroSpec("clash-value"), apierr.InvalidArgument, "value_subject", `reserved`},
	} {
		_, _, _, err := f.codecs.FirstVersion(f.ctx, c.spec)
		var ae *apierr.Error
		errors.As(err, &ae)
		if apierr.Classify(err) != c.kind || err == nil || !strings.Contains(err.Error(), c.want) || (c.field != "" && (ae == nil || ae.Field != c.field)) {
			t.Errorf("%s: %v, want %v %s %q", c.spec.Value.Subject, err, c.kind, c.field, c.want)
		}
	}
	// No registry configured.
	_, _, _, err := tablecodec.New(f.db, nil).FirstVersion(f.ctx, avroSpec("rec-value"))
	if apierr.Classify(err) != apierr.FailedPrecondition || !strings.Contains(err.Error(), "--schema-registry-url") {
		t.Errorf("no registry: %v", err)
	}
	// The registry down: Unavailable naming it.
	f.reg.Close()
	_, _, _, err = f.codecs.FirstVersion(f.ctx, avroSpec("rec-value"))
	if apierr.Classify(err) != apierr.Unavailable || !strings.Contains(err.Error(), f.client.URL()) {
		t.Errorf("registry down: %v", err)
	}
}
