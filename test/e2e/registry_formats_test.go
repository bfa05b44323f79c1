package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/schemafmt/protofmt"
)

const (
	regCommonProto = `syntax = "proto3";
package common;

message Money {
  string currency = 1;
  int64 units = 2;
}

enum Status {
  STATUS_UNKNOWN = 0;
  STATUS_NEW = 1;
  STATUS_PAID = 2;
}
`
	// The table reads shop.Order, the file's second message: records name it with the
	// message index [1].
	regOrderProto = `syntax = "proto3";
package shop;

import "common.proto";
import "google/protobuf/timestamp.proto";

message Ping {
  string note = 1;
}

message Order {
  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
  int64 id = 1;
  common.Money price = 2;
  repeated Line lines = 3;
  repeated string tags = 4;
  map<string, int64> counts = 5;
  common.Status status = 6;
  google.protobuf.Timestamp created_at = 7;
  string customer = 8;
}
`
)

// regOrderProtoV2 is the next version: Order gains a field.
var regOrderProtoV2 = strings.Replace(regOrderProto, "  string customer = 8;\n", "  string customer = 8;\n  string channel = 9;\n", 1)

// regPBOrder is what one test record holds; its message is built over the schema's
// descriptors with dynamicpb, as a producer without generated code writes it.
type regPBOrder struct {
	id       int64
	price    *[2]any // currency, units; nil: unset
	lines    [][2]any
	tags     []string
	counts   map[string]int64
	status   int32 // enum number
	created  *time.Time
	customer string
}

var regPBStatusNames = []string{"STATUS_UNKNOWN", "STATUS_NEW", "STATUS_PAID"}

func (o regPBOrder) message(md protoreflect.MessageDescriptor) *dynamicpb.Message {
	m := dynamicpb.NewMessage(md)
	f := md.Fields().ByName
	m.Set(f("id"), protoreflect.ValueOfInt64(o.id))
	if o.price != nil {
		pm := m.Mutable(f("price")).Message()
		pf := f("price").Message().Fields().ByName
		pm.Set(pf("currency"), protoreflect.ValueOfString(o.price[0].(string)))
		pm.Set(pf("units"), protoreflect.ValueOfInt64(o.price[1].(int64)))
	}
	lines := m.Mutable(f("lines")).List()
	lf := f("lines").Message().Fields().ByName
	for _, l := range o.lines {
		e := lines.NewElement()
		e.Message().Set(lf("sku"), protoreflect.ValueOfString(l[0].(string)))
		e.Message().Set(lf("quantity"), protoreflect.ValueOfInt32(l[1].(int32)))
		lines.Append(e)
	}
	tags := m.Mutable(f("tags")).List()
	for _, s := range o.tags {
		tags.Append(protoreflect.ValueOfString(s))
	}
	counts := m.Mutable(f("counts")).Map()
	for k, v := range o.counts {
		counts.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfInt64(v))
	}
	m.Set(f("status"), protoreflect.ValueOfEnum(protoreflect.EnumNumber(o.status)))
	if o.created != nil {
		ts := m.Mutable(f("created_at")).Message()
		tf := f("created_at").Message().Fields().ByName
		ts.Set(tf("seconds"), protoreflect.ValueOfInt64(o.created.Unix()))
		ts.Set(tf("nanos"), protoreflect.ValueOfInt32(int32(o.created.Nanosecond())))
	}
	m.Set(f("customer"), protoreflect.ValueOfString(o.customer))
	return m
}

// row is the order as it reads back: absent messages are null, absent repeated fields
// and maps empty, proto3 scalars their defaults, Timestamps floored to microseconds.
func (o regPBOrder) row() map[string]any {
	r := map[string]any{"id": o.id, "price": nil, "status": regPBStatusNames[o.status], "created_at": nil, "customer": o.customer}
	if o.price != nil {
		r["price"] = map[string]any{"currency": o.price[0], "units": o.price[1]}
	}
	lines := []any{}
	for _, l := range o.lines {
		lines = append(lines, map[string]any{"sku": l[0], "quantity": int64(l[1].(int32))})
	}
	r["lines"] = lines
	r["tags"] = regStrings(o.tags)
	counts := map[string]any{}
	for k, v := range o.counts {
		counts[k] = v
	}
	r["counts"] = counts
	if o.created != nil {
		r["created_at"] = regTS(o.created.Truncate(time.Microsecond))
	}
	return r
}

// TestRegistryProtobufWithReference: a Protobuf value schema that imports common.proto
// (its own subject, a registry reference) and uses its message and enum; the table reads
// the message named by CreateTable's message, not the file's first. Records written with
// sr.Serde and sr.Index read back once each with their values: a message from the
// import, a nested message in a repeated field, a map, an enum, a Timestamp.
func TestRegistryProtobufWithReference(t *testing.T) {
	t.Parallel()
	rc := newRegCluster(t, true)
	rc.Kafka.CreateTopic("pb-orders", 1, nil)
	rc.reg.register("common.proto", sr.Schema{Schema: regCommonProto, Type: sr.TypeProtobuf})
	refs := []sr.SchemaReference{{Name: "common.proto", Subject: "common.proto", Version: 1}}
	id := rc.reg.register("pb-orders-value", sr.Schema{Schema: regOrderProto, Type: sr.TypeProtobuf, References: refs})
	tb := rc.createTable(&adminv1.CreateTableRequest{Name: "pb-orders", Format: adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF,
		Message: "shop.Order", Properties: regProps()})
	if tb.GetValue().GetMessage() != "shop.Order" {
		t.Errorf("CreateTable: value decoding %v", tb.GetValue())
	}

	// The producer's descriptors, compiled from the same schema text and reference.
	sch, err := protofmt.Compile(schemafmt.Source{Text: regOrderProto, References: []schemafmt.Reference{
		{Name: "common.proto", Subject: "common.proto", Version: 1, Source: schemafmt.Source{Text: regCommonProto}}}}, "shop.Order")
	if err != nil {
		t.Fatal(err)
	}
	md := sch.Descriptor()
	serde := sr.NewSerde()
	serde.Register(id, dynamicpb.NewMessage(md), sr.Index(1),
		sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }))

	created := time.Date(2026, 3, 1, 10, 20, 30, 123456789, time.UTC)
	orders := []regPBOrder{
		{id: 1, price: &[2]any{"EUR", int64(1999)}, lines: [][2]any{{"sku-1", int32(2)}, {"sku-2", int32(1)}},
			tags: []string{"gift", "express"}, counts: map[string]int64{"views": 10, "clicks": 3}, status: 2, created: &created, customer: "ada"},
		{id: 2, price: &[2]any{"USD", int64(-5)}, lines: [][2]any{{"sku-3", int32(-7)}}, tags: []string{"x"},
			counts: map[string]int64{"a": 1}, status: 1, customer: "bob"},
		{id: 3}, // nothing else set: nulls, empties and defaults
	}
	want := regRows{}
	for i, o := range orders {
		c := created.Add(time.Duration(i) * time.Hour)
		if o.created != nil {
			o.created = &c
		}
		recs := rc.produce(&kgo.Record{Topic: "pb-orders", Value: serde.MustEncode(o.message(md))})
		want.add(t, recs, o.row())
	}
	for _, r := range want {
		r["channel"] = nil // a field of v2 only: null in v1 rows
	}
	rc.waitCommitted("pb-orders", want.ends())

	// v2 adds a field: its records evolve the table; a v2 record without it reads the
	// proto3 default, a v1 record null.
	id2 := rc.reg.register("pb-orders-value", sr.Schema{Schema: regOrderProtoV2, Type: sr.TypeProtobuf, References: refs})
	sch2, err := protofmt.Compile(schemafmt.Source{Text: regOrderProtoV2, References: []schemafmt.Reference{
		{Name: "common.proto", Subject: "common.proto", Version: 1, Source: schemafmt.Source{Text: regCommonProto}}}}, "shop.Order")
	if err != nil {
		t.Fatal(err)
	}
	md2 := sch2.Descriptor()
	serde2 := sr.NewSerde()
	serde2.Register(id2, dynamicpb.NewMessage(md2), sr.Index(1),
		sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }))
	for i, channel := range []string{"web", ""} {
		o := regPBOrder{id: int64(10 + i), tags: []string{"v2"}, status: 1, customer: "eve"}
		m := o.message(md2)
		m.Set(md2.Fields().ByName("channel"), protoreflect.ValueOfString(channel))
		recs := rc.produce(&kgo.Record{Topic: "pb-orders", Value: serde2.MustEncode(m)})
		row := o.row()
		row["channel"] = channel
		want.add(t, recs, row)
	}
	// A record of the schema's other message (index [0]) is not an Order: an error row.
	ping := dynamicpb.NewMessage(sch2.Descriptor().ParentFile().Messages().ByName("Ping"))
	ping.Set(ping.Descriptor().Fields().ByName("note"), protoreflect.ValueOfString("hello"))
	pingSerde := sr.NewSerde()
	pingSerde.Register(id2, dynamicpb.NewMessage(ping.Descriptor()), sr.Index(0),
		sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }))
	want.add(t, rc.produce(&kgo.Record{Topic: "pb-orders", Value: pingSerde.MustEncode(ping)}),
		map[string]any{"id": nil, "_mink_error": regContains{"message index [0]", "shop.Order"}})
	rc.waitCommitted("pb-orders", want.ends())
	s := regScanTable(t, rc.catalog, "pb-orders")
	s.check(t, want)
	for col, typ := range map[string]string{"price": "struct<", "lines": "list<struct<", "counts": "map<string, long>",
		"status": "string", "created_at": "timestamptz"} {
		if got := regColumnType(s.tbl, col); len(got) < len(typ) || got[:len(typ)] != typ {
			t.Errorf("column %s is %s, want %s...", col, got, typ)
		}
	}
	if got := regColumnType(s.tbl, "channel"); got != "string" || len(s.tbl.Metadata().Schemas()) != 2 {
		t.Errorf("after v2: channel is %s; %d schemas", got, len(s.tbl.Metadata().Schemas()))
	}
	if _, ok := s.tbl.Schema().FindFieldByName("note"); ok {
		t.Errorf("the table has shop.Ping's field: %v", s.tbl.Schema())
	}
}

// A JSON Schema with a nested object, an array, a date-time, an integer and a number.
const regReadingSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "Reading",
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "sensor": {"type": "object", "properties": {
      "name": {"type": "string"},
      "floor": {"type": "integer"}
    }},
    "samples": {"type": "array", "items": {"type": "number"}},
    "at": {"type": "string", "format": "date-time"},
    "temp": {"type": "number"},
    "ok": {"type": "boolean"}
  }
}`

type regSensor struct {
	Name  string `json:"name"`
	Floor int64  `json:"floor"`
}

type regReading struct {
	ID      int64      `json:"id"`
	Sensor  *regSensor `json:"sensor,omitempty"`
	Samples []float64  `json:"samples,omitempty"`
	At      string     `json:"at,omitempty"`
	Temp    *float64   `json:"temp,omitempty"`
	OK      *bool      `json:"ok,omitempty"`
}

// TestRegistryJSONSchema: JSON Schema values written with sr.Serde and encoding/json
// read back once each with their values; date-times with offsets are instants.
func TestRegistryJSONSchema(t *testing.T) {
	t.Parallel()
	rc := newRegCluster(t, true)
	rc.Kafka.CreateTopic("readings", 1, nil)
	id := rc.reg.register("readings-value", sr.Schema{Schema: regReadingSchema, Type: sr.TypeJSON})
	rc.createTable(&adminv1.CreateTableRequest{Name: "readings", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON_SCHEMA,
		Properties: regProps()})
	serde := sr.NewSerde()
	serde.Register(id, regReading{}, sr.EncodeFn(json.Marshal))

	temp, yes := 21.5, true
	reads := []struct {
		r    regReading
		want map[string]any
	}{
		{regReading{ID: 1, Sensor: &regSensor{"hall", 2}, Samples: []float64{1.5, -2, 3e10}, At: "2026-03-01T10:00:00.123456+02:00", Temp: &temp, OK: &yes},
			map[string]any{"id": int64(1), "sensor": map[string]any{"name": "hall", "floor": int64(2)}, "samples": []any{1.5, -2.0, 3e10},
				"at": "2026-03-01T08:00:00.123456Z", "temp": 21.5, "ok": true}},
		{regReading{ID: 1 << 53, Sensor: &regSensor{Name: "roof"}, Samples: []float64{0}, At: "2026-03-01T23:59:59Z"},
			map[string]any{"id": int64(1 << 53), "sensor": map[string]any{"name": "roof", "floor": int64(0)}, "samples": []any{0.0},
				"at": "2026-03-01T23:59:59.000000Z", "temp": nil, "ok": nil}},
		{regReading{ID: 3}, map[string]any{"id": int64(3), "sensor": nil, "samples": nil, "at": nil, "temp": nil, "ok": nil}},
	}
	want := regRows{}
	for _, r := range reads {
		recs := rc.produce(&kgo.Record{Topic: "readings", Value: serde.MustEncode(r.r)})
		want.add(t, recs, r.want)
	}
	rc.waitCommitted("readings", want.ends())
	s := regScanTable(t, rc.catalog, "readings")
	s.check(t, want)
	for col, typ := range map[string]string{"id": "long", "samples": "list<double>", "at": "timestamptz", "temp": "double", "ok": "boolean"} {
		if got := regColumnType(s.tbl, col); got != typ {
			t.Errorf("column %s is %s, want %s", col, got, typ)
		}
	}
	if got := regColumnType(s.tbl, "sensor"); len(got) < 7 || got[:7] != "struct<" {
		t.Errorf("column sensor is %s", got)
	}
}
