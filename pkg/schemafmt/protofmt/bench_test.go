package protofmt

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// benchProto is a typical 12-field event.
const benchProto = `
syntax = "proto3";
package acme.bench;
import "google/protobuf/timestamp.proto";

enum Status { STATUS_UNSPECIFIED = 0; PLACED = 1; PAID = 2; SHIPPED = 3; }

message Order {
  string id = 1;
  string customer_id = 2;
  int64 amount_cents = 3;
  int32 quantity = 4;
  double price = 5;
  string currency = 6;
  bool gift = 7;
  Status status = 8;
  Address ship_to = 9;
  repeated string tags = 10;
  map<string, string> attrs = 11;
  google.protobuf.Timestamp created = 12;
}

message Address {
  string street = 1;
  string city = 2;
  string zip = 3;
}
`

func benchData(b testing.TB) (*Schema, []byte) {
	s := compile(b, benchProto, "")
	m := newMsg(s)
	set(m, "id", "ord-7d1c9a2e-5f3b-4c8e")
	set(m, "customer_id", "cust-000123456")
	set(m, "amount_cents", int64(129900))
	set(m, "quantity", int32(3))
	set(m, "price", 433.0)
	set(m, "currency", "EUR")
	set(m, "gift", true)
	set(m, "status", protoreflect.EnumNumber(2))
	set(m, "ship_to.street", "12 Rue de la Paix")
	set(m, "ship_to.city", "Paris")
	set(m, "ship_to.zip", "75002")
	appendList(m, "tags", "priority", "eu", "web")
	setMap(m, "attrs", "channel", "mobile")
	setMap(m, "attrs", "campaign", "spring")
	set(m, "created.seconds", int64(1718000000))
	set(m, "created.nanos", int32(123456789))
	return s, marshal(b, m)
}

// BenchmarkDynamicpb is the baseline: dynamicpb's Unmarshal into a reused message.
func BenchmarkDynamicpb(b *testing.B) {
	s, data := benchData(b)
	m := newMsg(s)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := proto.Unmarshal(data, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	s, data := benchData(b)
	dec, _ := bind(b, s)
	var v rowcodec.Value
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if r := dec.Decode(data, &v); r != "" {
			b.Fatal(r)
		}
	}
}

// BenchmarkDecodeMerged is the rare path of a message whose singular message fields
// occur twice.
func BenchmarkDecodeMerged(b *testing.B) {
	s, data := benchData(b)
	dec, _ := bind(b, s)
	data = cat(data, data)
	var v rowcodec.Value
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if r := dec.Decode(data, &v); r != "" {
			b.Fatal(r)
		}
	}
}

func BenchmarkDecodeStructJSON(b *testing.B) {
	s := compile(b, allProto, "acme.test.v1.Known")
	j := jsonBuilder{s}
	m := newMsg(s)
	set(m, "st", j.object(map[string]any{
		"user": map[string]any{"id": 12345.0, "name": "Ada", "tags": []any{"a", "b"}},
		"ok":   true, "score": 0.75, "note": nil, "zone": "eu-west-1",
	}))
	data := marshal(b, m)
	dec, _ := bind(b, s)
	var v rowcodec.Value
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if r := dec.Decode(data, &v); r != "" {
			b.Fatal(r)
		}
	}
}
