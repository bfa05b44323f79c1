package protofmt

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/minkhq/mink/pkg/schemafmt"
)

const geoProto = `
syntax = "proto3";
package acme.common.geo;
message Point { double lat = 1; double lng = 2; }
`

const addressProto = `
syntax = "proto3";
package acme.common;
import "common/geo.proto";
message Address {
  string street = 1;
  acme.common.geo.Point at = 2;
}
`

const ordersProto = `
syntax = "proto3";
package acme.orders.v1;
import "common/address.proto";
import "google/protobuf/timestamp.proto";

message Order {
  string id = 1;
  acme.common.Address ship_to = 2;
  google.protobuf.Timestamp placed = 3;
  repeated Line lines = 4;
  message Line {
    string sku = 1;
    int32 qty = 2;
    map<string, string> attrs = 3;
    message Note { string text = 1; }
    Note note = 4;
  }
}

message Refund {
  string order_id = 1;
}
`

// refs is the references of ordersProto as the registry gives them: address.proto is
// another subject's, which references a third.
func refs() []schemafmt.Reference {
	return []schemafmt.Reference{{
		Name: "common/address.proto", Subject: "acme.common.address", Version: 3,
		Source: schemafmt.Source{
			Text: addressProto,
			References: []schemafmt.Reference{{
				Name: "common/geo.proto", Subject: "acme.common.geo", Version: 1,
				Source: schemafmt.Source{Text: geoProto},
			}},
		},
	}}
}

func TestCompileReferences(t *testing.T) {
	s := compile(t, ordersProto, "", refs()...)
	if s.Message() != "acme.orders.v1.Order" || !slices.Equal(s.Indexes(), []int{0}) {
		t.Errorf("default: %s %v", s.Message(), s.Indexes())
	}
	want := "struct<0: id: optional string, " +
		"0: ship_to: optional struct<0: street: optional string, 0: at: optional struct<0: lat: optional double, 0: lng: optional double>>, " +
		"0: placed: optional timestamptz, " +
		"0: lines: optional list<struct<0: sku: optional string, 0: qty: optional int, 0: attrs: optional map<string, string>, " +
		"0: note: optional struct<0: text: optional string>>>>"
	if got := s.Root().String(); got != want {
		t.Errorf("Root:\n got %s\nwant %s", got, want)
	}

	dec, target := bind(t, s)
	m := newMsg(s)
	set(m, "id", "o-1")
	set(m, "ship_to.street", "Main St")
	set(m, "ship_to.at.lat", 48.85)
	set(m, "placed.seconds", int64(1))
	line := sub(m, "lines")
	set(line, "sku", "A")
	set(line, "note.text", "gift")
	setMap(line, "attrs", "color", "red")
	appendList(m, "lines", line)
	got := decode(t, dec, target, marshal(t, m))
	want = `{id: "o-1", ship_to: {street: "Main St", at: {lat: 48.85, lng: 0}}, placed: 1000000, ` +
		`lines: [{sku: "A", qty: 0, attrs: map["color": "red"], note: {text: "gift"}}]}`
	if got != want {
		t.Errorf("decode:\n got %s\nwant %s", got, want)
	}
}

func TestCompileSelect(t *testing.T) {
	cases := []struct {
		name    string
		indexes []int
	}{
		{"acme.orders.v1.Order", []int{0}},
		{"acme.orders.v1.Refund", []int{1}},
		{".acme.orders.v1.Refund", []int{1}},
		{"acme.orders.v1.Order.Line", []int{0, 0}},
		// Line's map<string,string> is its nested type 0, so Note is 1.
		{"acme.orders.v1.Order.Line.Note", []int{0, 0, 1}},
	}
	for _, c := range cases {
		s := compile(t, ordersProto, c.name, refs()...)
		if s.Message() != strings.TrimPrefix(c.name, ".") || !slices.Equal(s.Indexes(), c.indexes) {
			t.Errorf("%s: %s %v, want %v", c.name, s.Message(), s.Indexes(), c.indexes)
		}
	}
	s := compile(t, ordersProto, "acme.orders.v1.Refund", refs()...)
	if got, want := s.Root().String(), "struct<0: order_id: optional string>"; got != want {
		t.Errorf("Refund: %s", got)
	}

	_, err := Compile(schemafmt.Source{Text: ordersProto, References: refs()}, "acme.orders.v1.Missing")
	want := `message "acme.orders.v1.Missing" is not defined in the Protobuf schema, which defines: ` +
		`acme.orders.v1.Order, acme.orders.v1.Order.Line, acme.orders.v1.Order.Line.Note, acme.orders.v1.Refund`
	if err == nil || err.Error() != want {
		t.Errorf("unknown message: %v", err)
	}
	// A message of an imported file is not one the file's indexes can name.
	if _, err := Compile(schemafmt.Source{Text: ordersProto, References: refs()}, "acme.common.Address"); err == nil {
		t.Error("imported message accepted")
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name string
		src  schemafmt.Source
		want string
	}{
		{"syntax", schemafmt.Source{Text: `syntax = "proto3"; message { }`}, "compiling the Protobuf schema: schema.proto:1:28: syntax error"},
		{"missing reference", schemafmt.Source{Text: ordersProto}, `common/address.proto`},
		{"no message", schemafmt.Source{Text: `syntax = "proto3"; package a; enum E { X = 0; }`}, "the Protobuf schema defines no message"},
		{"conflicting references", schemafmt.Source{Text: ordersProto, References: append(refs(), schemafmt.Reference{
			Name: "common/geo.proto", Source: schemafmt.Source{Text: "syntax = \"proto3\";"},
		})}, `two different texts for "common/geo.proto"`},
	}
	for _, c := range cases {
		_, err := Compile(c.src, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	// The same reference reached twice, with the same text, is fine.
	r := refs()
	r = append(r, r[0].Source.References[0])
	compile(t, ordersProto, "", r...)
	// A reference named like the root file does not collide with it.
	compile(t, `syntax = "proto3"; import "schema.proto"; message A { B b = 1; }`, "", schemafmt.Reference{
		Name: "schema.proto", Source: schemafmt.Source{Text: `syntax = "proto3"; message B { int32 x = 1; }`},
	})
}

func TestCompileRecursive(t *testing.T) {
	cases := []struct {
		text, message, want string
	}{
		{`syntax = "proto3"; package t; message Node { Node next = 1; }`, "",
			"message t.Node is recursive (t.Node → t.Node)"},
		{`syntax = "proto3"; package t; message Tree { repeated Tree children = 1; }`, "",
			"message t.Tree is recursive (t.Tree → t.Tree)"},
		{`syntax = "proto3"; package t; message M { map<string, M> kids = 1; }`, "",
			"message t.M is recursive (t.M → t.M)"},
		{`syntax = "proto3"; package t; message Top { A a = 1; } message A { B b = 1; } message B { oneof x { A a = 1; } }`, "",
			"message t.A is recursive (t.A → t.B → t.A)"},
	}
	for _, c := range cases {
		_, err := Compile(schemafmt.Source{Text: c.text}, c.message)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	// Struct and Value contain each other, but read as JSON; an unused recursive
	// message is no obstacle.
	compile(t, `syntax = "proto3"; package t; import "google/protobuf/struct.proto";
		message Ok { google.protobuf.Struct s = 1; google.protobuf.Value v = 2; }
		message Node { Node next = 1; }`, "t.Ok")
}

func TestEditionsAndAliases(t *testing.T) {
	s := compile(t, `edition = "2023";
		package ed;
		enum E { option allow_alias = true; ZERO = 0; ONE = 1; UNO = 1; }
		message M {
		  int32 a = 1 [features.field_presence = IMPLICIT];
		  int32 b = 2;
		  Sub sub = 3 [features.message_encoding = DELIMITED];
		  repeated int32 r = 4;
		  E e = 5;
		}
		message Sub { string x = 1; }`, "")
	dec, target := bind(t, s)
	if got, want := decode(t, dec, target, nil), `{a: 0, b: null, sub: null, r: [], e: null}`; got != want {
		t.Errorf("empty:\n got %s\nwant %s", got, want)
	}
	m := newMsg(s)
	set(m, "b", int32(2))
	set(m, "sub.x", "g")
	appendList(m, "r", int32(1), int32(2))
	set(m, "e", protoreflect.EnumNumber(1))
	data := marshal(t, m)
	if got, want := decode(t, dec, target, data), `{a: 0, b: 2, sub: {x: "g"}, r: [1, 2], e: "ONE"}`; got != want {
		t.Errorf("set:\n got %s\nwant %s", got, want)
	}
	if data[len(data)-1] == 0 || !strings.Contains(string(data), "\x1b") { // field 3, start group
		t.Errorf("Sub is not delimited: %x", data)
	}
}
