package bench

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"time"
	"unsafe"

	"github.com/apache/iceberg-go"
	"github.com/bufbuild/protocompile"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// The Schema Registry benchmark tables (items 9 and 10) hold the same clickstream event
// as EventSpec's JSON, written as Avro and as Protobuf with the Confluent wire format:
// ids, strings, a double, a decimal (Avro; Protobuf has none, so cents), a timestamp, an
// enum, a nested record, an array and an optional string, twelve fields in all.

// AvroEventSchema is the Avro table's value schema.
const AvroEventSchema = `{"type": "record", "name": "Event", "namespace": "bench", "fields": [
  {"name": "event_id", "type": {"type": "string", "logicalType": "uuid"}},
  {"name": "event_type", "type": {"type": "enum", "name": "EventType", "symbols": ["page_view", "click", "add_to_cart", "purchase", "search"]}},
  {"name": "user", "type": {"type": "record", "name": "User", "fields": [
    {"name": "id", "type": "long"},
    {"name": "country", "type": "string"}]}},
  {"name": "session_id", "type": "string"},
  {"name": "url", "type": "string"},
  {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
  {"name": "quantity", "type": "int"},
  {"name": "duration_ms", "type": "double"},
  {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "agent", "type": "string"},
  {"name": "referrer", "type": ["null", "string"], "default": null}
]}`

// ProtoEventSchema is the Protobuf table's value schema; the table reads bench.Event.
const ProtoEventSchema = `syntax = "proto3";
package bench;

import "google/protobuf/timestamp.proto";

message Event {
  string event_id = 1;
  EventType event_type = 2;
  User user = 3;
  string session_id = 4;
  string url = 5;
  int64 amount_cents = 6;
  int32 quantity = 7;
  double duration_ms = 8;
  google.protobuf.Timestamp ts = 9;
  repeated string tags = 10;
  string agent = 11;
  optional string referrer = 12;
}

message User {
  int64 id = 1;
  string country = 2;
}

enum EventType {
  PAGE_VIEW = 0;
  CLICK = 1;
  ADD_TO_CART = 2;
  PURCHASE = 3;
  SEARCH = 4;
}
`

// ProtoEventMessage is the message the Protobuf table reads.
const ProtoEventMessage = "bench.Event"

// regEvent is one event before encoding: the same stream for both formats.
type regEvent struct {
	id          string // a UUID's text
	kind        int    // index into eventTypes
	userID      int64
	country     string
	session     string
	url         string
	amountCents int64
	quantity    int32
	durationMs  float64
	ts          time.Time
	tags        []string
	agent       string
	referrer    *string
}

// regEventAt returns the key and the i-th event of a deterministic stream, with the
// values of the JSON benchmark's event (data.go).
func regEventAt(rng *rand.Rand, i int) ([]byte, regEvent) {
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	e := regEvent{
		id: fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x",
			rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()&(1<<48-1)),
		kind:        rng.IntN(len(eventTypes)),
		userID:      rng.Int64N(10_000_000),
		country:     countries[rng.IntN(len(countries))],
		session:     fmt.Sprintf("s-%016x", rng.Uint64()),
		url:         fmt.Sprintf("https://shop.example.com/products/%d?ref=campaign-%d", rng.IntN(50_000), rng.IntN(100)),
		amountCents: int64(rng.IntN(1000)*100 + rng.IntN(100)),
		quantity:    int32(1 + rng.IntN(5)),
		durationMs:  rng.ExpFloat64() * 800,
		ts:          base.Add(time.Duration(i) * 7 * time.Millisecond),
		tags:        []string{eventTypes[rng.IntN(len(eventTypes))], "v" + strconv.Itoa(rng.IntN(10))},
		agent:       "Mozilla/5.0 (X11; Linux x86_64)",
	}
	if rng.IntN(2) == 0 {
		r := fmt.Sprintf("https://www.example.org/search?q=term-%d", rng.IntN(10_000))
		e.referrer = &r
	}
	return []byte("user-" + strconv.Itoa(rng.IntN(1e6))), e
}

// RegFormat is one Schema Registry format of the benchmark: its schema, how the producer
// encodes events (sr.Serde, as a Kafka application does), and the bare loop's decoder.
type RegFormat struct {
	Name    string // "Avro", "Protobuf"
	Format  tableschema.Format
	Type    sr.SchemaType
	Schema  string
	Message string // Protobuf: the message the table reads
	// Encoder returns the producer's encoding of events under registry id id.
	Encoder func(id int) (func(regEvent) ([]byte, error), error)
	// Bare returns the bare loop's decoder of records of schema id id into rows of the
	// table's fields.
	Bare func(id int, fields []iceberg.NestedField) (rowcodec.RowDecoder, error)
}

// Spec is the table over subject in prefix mode (the Confluent wire format).
func (f RegFormat) Spec(subject string) tableschema.Spec {
	return tableschema.Spec{Format: f.Format, Value: &tableschema.Decoding{Format: f.Format, Subject: subject,
		Mode: tableschema.ModePrefix, Message: f.Message}}
}

// AvroFormat: hamba/avro through sr.Serde, into a struct shaped as avrogen generates
// them.
var AvroFormat = RegFormat{Name: "Avro", Format: tableschema.FormatAvro, Type: sr.TypeAvro, Schema: AvroEventSchema,
	Encoder: avroEncoder, Bare: newAvroRows}

// ProtoFormat: dynamicpb messages over a descriptor compiled from the schema text by
// protocompile, through sr.Serde.
var ProtoFormat = RegFormat{Name: "Protobuf", Format: tableschema.FormatProtobuf, Type: sr.TypeProtobuf,
	Schema: ProtoEventSchema, Message: ProtoEventMessage, Encoder: protoEncoder, Bare: newProtoRows}

// AvroEvent and AvroUser are the Avro event as hamba's avrogen writes its Go type:
// uuid as string, decimal as *big.Rat, timestamp-millis as time.Time, enum as string,
// a ["null", T] union as *T.
type AvroEvent struct {
	EventID    string    `avro:"event_id"`
	EventType  string    `avro:"event_type"`
	User       AvroUser  `avro:"user"`
	SessionID  string    `avro:"session_id"`
	URL        string    `avro:"url"`
	Amount     *big.Rat  `avro:"amount"`
	Quantity   int32     `avro:"quantity"`
	DurationMs float64   `avro:"duration_ms"`
	TS         time.Time `avro:"ts"`
	Tags       []string  `avro:"tags"`
	Agent      string    `avro:"agent"`
	Referrer   *string   `avro:"referrer"`
}

// AvroUser is the nested record of AvroEvent.
type AvroUser struct {
	ID      int64  `avro:"id"`
	Country string `avro:"country"`
}

func avroEncoder(id int) (func(regEvent) ([]byte, error), error) {
	schema, err := avro.Parse(AvroEventSchema)
	if err != nil {
		return nil, err
	}
	var serde sr.Serde
	serde.Register(id, AvroEvent{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }))
	return func(e regEvent) ([]byte, error) {
		return serde.Encode(AvroEvent{EventID: e.id, EventType: eventTypes[e.kind], User: AvroUser{ID: e.userID, Country: e.country},
			SessionID: e.session, URL: e.url, Amount: big.NewRat(e.amountCents, 100), Quantity: e.quantity,
			DurationMs: e.durationMs, TS: e.ts, Tags: e.tags, Agent: e.agent, Referrer: e.referrer})
	}, nil
}

// strBytes is s's bytes without a copy: the builder copies what it keeps and never
// writes to a value's bytes, so the bare loops hand it strings as they are.
func strBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func str(s string) rowcodec.Value { return rowcodec.Value{Valid: true, Bytes: strBytes(s)} }

// columns finds each name among fields: the position of its value in a row.
func columns(fields []iceberg.NestedField, names ...string) ([]int, error) {
	out := make([]int, len(names))
	for i, n := range names {
		out[i] = -1
		for j, f := range fields {
			if f.Name == n {
				out[i] = j
			}
		}
		if out[i] < 0 {
			return nil, fmt.Errorf("bench: the table has no column %q", n)
		}
	}
	return out, nil
}

// kafkaCols fills the Kafka columns of a row, as every decoder must.
type kafkaCols struct {
	part, off, ts, key, headers, err int
	user                             []int // the value's columns: null in an error row
}

// rowColumns finds a bare decoder's columns among fields: the value's, named in the
// decoder's order, and the Kafka columns.
func rowColumns(fields []iceberg.NestedField, names ...string) ([]int, kafkaCols, error) {
	c, err := columns(fields, names...)
	if err != nil {
		return nil, kafkaCols{}, err
	}
	k, err := newKafkaCols(fields, c)
	return c, k, err
}

func newKafkaCols(fields []iceberg.NestedField, user []int) (kafkaCols, error) {
	c, err := columns(fields, tableschema.ColumnKafkaPartition, tableschema.ColumnKafkaOffset, tableschema.ColumnKafkaTimestamp,
		tableschema.ColumnKafkaKey, tableschema.ColumnKafkaHeaders, tableschema.ColumnMinkError)
	if err != nil {
		return kafkaCols{}, err
	}
	if len(fields) != len(user)+len(c) {
		return kafkaCols{}, fmt.Errorf("bench: the table has %d columns, the bare decoder fills %d", len(fields), len(user)+len(c))
	}
	return kafkaCols{part: c[0], off: c[1], ts: c[2], key: c[3], headers: c[4], err: c[5], user: user}, nil
}

// finish fills r's Kafka columns and, when err is set, nulls the value's columns and
// says why in _mink_error. The benchmark's records all decode; nothing here is
// tuned for the error path.
func (k *kafkaCols) finish(r record.Record, v []rowcodec.Value, err error) bool {
	v[k.part] = rowcodec.Value{Valid: true, Int: int64(r.Partition)}
	v[k.off] = rowcodec.Value{Valid: true, Int: r.Offset}
	v[k.ts] = rowcodec.Value{Valid: true, Int: r.Timestamp.UnixMicro()}
	v[k.key] = rowcodec.Value{Valid: r.Key != nil, Bytes: r.Key}
	v[k.headers] = rowcodec.Value{Valid: true} // the benchmark's records have no headers
	v[k.err] = rowcodec.Value{}
	if err != nil {
		for _, c := range k.user {
			v[c] = rowcodec.Value{}
		}
		v[k.err] = str(err.Error())
	}
	return err == nil
}

func rowOf(row *rowcodec.Row, n int) []rowcodec.Value {
	if cap(row.Values) < n {
		row.Values = make([]rowcodec.Value, n)
	}
	row.Values = row.Values[:n]
	return row.Values
}

// avroRows is the Avro bare loop's decoder: sr.Serde finds the schema id, avro.Unmarshal
// decodes into an AvroEvent, and straightforward code turns its fields into the row.
type avroRows struct {
	fields []iceberg.NestedField
	schema avro.Schema
	serde  sr.Serde
	c      []int // the user columns, in AvroEvent's order
	k      kafkaCols

	ev    AvroEvent
	user  [2]rowcodec.Value
	tags  []rowcodec.Value
	id    uuid.UUID
	num   big.Int
	scale *big.Int // 10^scale of amount
}

func newAvroRows(id int, fields []iceberg.NestedField) (rowcodec.RowDecoder, error) {
	schema, err := avro.Parse(AvroEventSchema)
	if err != nil {
		return nil, err
	}
	d := &avroRows{fields: fields, schema: schema, scale: big.NewInt(100)}
	d.serde.Register(id, AvroEvent{}, sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }))
	if d.c, d.k, err = rowColumns(fields, "event_id", "event_type", "user", "session_id", "url", "amount", "quantity",
		"duration_ms", "ts", "tags", "agent", "referrer"); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *avroRows) Fields() []iceberg.NestedField { return d.fields }

func (d *avroRows) Decode(r record.Record, row *rowcodec.Row) bool {
	v := rowOf(row, len(d.fields))
	d.ev = AvroEvent{Tags: d.ev.Tags[:0]}
	if err := d.serde.Decode(r.Value, &d.ev); err != nil {
		return d.k.finish(r, v, err)
	}
	e, c := &d.ev, d.c
	var err error
	if d.id, err = uuid.Parse(e.EventID); err != nil {
		return d.k.finish(r, v, err)
	}
	v[c[0]] = rowcodec.Value{Valid: true, Bytes: d.id[:]}
	v[c[1]] = str(e.EventType)
	d.user[0] = rowcodec.Value{Valid: true, Int: e.User.ID}
	d.user[1] = str(e.User.Country)
	v[c[2]] = rowcodec.Value{Valid: true, Elems: d.user[:]}
	v[c[3]] = str(e.SessionID)
	v[c[4]] = str(e.URL)
	// decimal(12,2): the unscaled value, amount × 100.
	d.num.Mul(e.Amount.Num(), d.scale)
	d.num.Quo(&d.num, e.Amount.Denom())
	v[c[5]] = rowcodec.Value{Valid: true, Int: d.num.Int64()}
	v[c[6]] = rowcodec.Value{Valid: true, Int: int64(e.Quantity)}
	v[c[7]] = rowcodec.Value{Valid: true, Float: e.DurationMs}
	v[c[8]] = rowcodec.Value{Valid: true, Int: e.TS.UnixMicro()}
	d.tags = d.tags[:0]
	for _, t := range e.Tags {
		d.tags = append(d.tags, str(t))
	}
	v[c[9]] = rowcodec.Value{Valid: true, Elems: d.tags}
	v[c[10]] = str(e.Agent)
	v[c[11]] = rowcodec.Value{}
	if e.Referrer != nil {
		v[c[11]] = str(*e.Referrer)
	}
	return d.k.finish(r, v, nil)
}

// protoEventDescriptor compiles ProtoEventSchema with protocompile, as an application
// holding the schema's text (not generated code) does.
func protoEventDescriptor() (protoreflect.MessageDescriptor, error) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"event.proto": ProtoEventSchema})})}
	files, err := c.Compile(context.Background(), "event.proto")
	if err != nil {
		return nil, err
	}
	md := files[0].Messages().ByName("Event")
	if md == nil {
		return nil, errors.New("bench: event.proto has no message Event")
	}
	return md, nil
}

func protoEncoder(id int) (func(regEvent) ([]byte, error), error) {
	md, err := protoEventDescriptor()
	if err != nil {
		return nil, err
	}
	var serde sr.Serde
	serde.Register(id, &dynamicpb.Message{}, sr.Index(0), sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }))
	fs := md.Fields()
	field := func(name string) protoreflect.FieldDescriptor { return fs.ByName(protoreflect.Name(name)) }
	user, ts := field("user").Message(), field("ts").Message()
	return func(e regEvent) ([]byte, error) {
		m := dynamicpb.NewMessage(md)
		m.Set(field("event_id"), protoreflect.ValueOfString(e.id))
		m.Set(field("event_type"), protoreflect.ValueOfEnum(protoreflect.EnumNumber(e.kind)))
		u := dynamicpb.NewMessage(user)
		u.Set(user.Fields().ByName("id"), protoreflect.ValueOfInt64(e.userID))
		u.Set(user.Fields().ByName("country"), protoreflect.ValueOfString(e.country))
		m.Set(field("user"), protoreflect.ValueOfMessage(u))
		m.Set(field("session_id"), protoreflect.ValueOfString(e.session))
		m.Set(field("url"), protoreflect.ValueOfString(e.url))
		m.Set(field("amount_cents"), protoreflect.ValueOfInt64(e.amountCents))
		m.Set(field("quantity"), protoreflect.ValueOfInt32(e.quantity))
		m.Set(field("duration_ms"), protoreflect.ValueOfFloat64(e.durationMs))
		t := dynamicpb.NewMessage(ts)
		t.Set(ts.Fields().ByName("seconds"), protoreflect.ValueOfInt64(e.ts.Unix()))
		t.Set(ts.Fields().ByName("nanos"), protoreflect.ValueOfInt32(int32(e.ts.Nanosecond())))
		m.Set(field("ts"), protoreflect.ValueOfMessage(t))
		l := m.Mutable(field("tags")).List()
		for _, tag := range e.tags {
			l.Append(protoreflect.ValueOfString(tag))
		}
		m.Set(field("agent"), protoreflect.ValueOfString(e.agent))
		if e.referrer != nil {
			m.Set(field("referrer"), protoreflect.ValueOfString(*e.referrer))
		}
		return serde.Encode(m)
	}, nil
}

// protoRows is the Protobuf bare loop's decoder: sr.Serde finds the schema id and
// message index, proto.Unmarshal decodes into a reused dynamicpb message, and
// straightforward code turns its fields into the row.
type protoRows struct {
	fields []iceberg.NestedField
	serde  sr.Serde
	msg    *dynamicpb.Message
	c      []int // the user columns, in field-number order
	k      kafkaCols
	f      [12]protoreflect.FieldDescriptor
	kinds  protoreflect.EnumValueDescriptors
	// user.id, user.country, ts.seconds, ts.nanos
	userID, country, seconds, nanos protoreflect.FieldDescriptor

	user [2]rowcodec.Value
	tags []rowcodec.Value
}

func newProtoRows(id int, fields []iceberg.NestedField) (rowcodec.RowDecoder, error) {
	md, err := protoEventDescriptor()
	if err != nil {
		return nil, err
	}
	d := &protoRows{fields: fields, msg: dynamicpb.NewMessage(md)}
	d.serde.Register(id, &dynamicpb.Message{}, sr.Index(0), sr.DecodeFn(func(b []byte, v any) error { return proto.Unmarshal(b, v.(proto.Message)) }))
	names := []string{"event_id", "event_type", "user", "session_id", "url", "amount_cents", "quantity",
		"duration_ms", "ts", "tags", "agent", "referrer"}
	for i, n := range names {
		if d.f[i] = md.Fields().ByName(protoreflect.Name(n)); d.f[i] == nil {
			return nil, fmt.Errorf("bench: message Event has no field %s", n)
		}
	}
	d.kinds = d.f[1].Enum().Values()
	d.userID, d.country = d.f[2].Message().Fields().ByName("id"), d.f[2].Message().Fields().ByName("country")
	d.seconds, d.nanos = d.f[8].Message().Fields().ByName("seconds"), d.f[8].Message().Fields().ByName("nanos")
	if d.c, d.k, err = rowColumns(fields, names...); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *protoRows) Fields() []iceberg.NestedField { return d.fields }

func (d *protoRows) Decode(r record.Record, row *rowcodec.Row) bool {
	v := rowOf(row, len(d.fields))
	if err := d.serde.Decode(r.Value, d.msg); err != nil {
		return d.k.finish(r, v, err)
	}
	m, c, f := d.msg, d.c, &d.f
	v[c[0]] = str(m.Get(f[0]).String())
	if ev := d.kinds.ByNumber(m.Get(f[1]).Enum()); ev != nil {
		v[c[1]] = str(string(ev.Name()))
	} else {
		v[c[1]] = str(strconv.Itoa(int(m.Get(f[1]).Enum())))
	}
	v[c[2]] = rowcodec.Value{}
	if m.Has(f[2]) {
		u := m.Get(f[2]).Message()
		d.user[0] = rowcodec.Value{Valid: true, Int: u.Get(d.userID).Int()}
		d.user[1] = str(u.Get(d.country).String())
		v[c[2]] = rowcodec.Value{Valid: true, Elems: d.user[:]}
	}
	v[c[3]] = str(m.Get(f[3]).String())
	v[c[4]] = str(m.Get(f[4]).String())
	v[c[5]] = rowcodec.Value{Valid: true, Int: m.Get(f[5]).Int()}
	v[c[6]] = rowcodec.Value{Valid: true, Int: m.Get(f[6]).Int()}
	v[c[7]] = rowcodec.Value{Valid: true, Float: m.Get(f[7]).Float()}
	v[c[8]] = rowcodec.Value{}
	if m.Has(f[8]) {
		t := m.Get(f[8]).Message()
		// timestamptz in µs, the nanoseconds floored.
		nanos := t.Get(d.nanos).Int()
		us := nanos / 1000
		if nanos < 0 && nanos%1000 != 0 {
			us--
		}
		v[c[8]] = rowcodec.Value{Valid: true, Int: t.Get(d.seconds).Int()*1_000_000 + us}
	}
	l := m.Get(f[9]).List()
	d.tags = d.tags[:0]
	for i := range l.Len() {
		d.tags = append(d.tags, str(l.Get(i).String()))
	}
	v[c[9]] = rowcodec.Value{Valid: true, Elems: d.tags}
	v[c[10]] = str(m.Get(f[10]).String())
	v[c[11]] = rowcodec.Value{}
	if m.Has(f[11]) {
		v[c[11]] = str(m.Get(f[11]).String())
	}
	return d.k.finish(r, v, nil)
}
