package protofmt

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
)

const v1Proto = `
syntax = "proto3";
package acme.ev;
message Event {
  string id = 1;
  int32 count = 2;
  float score = 3;
  Meta meta = 4;
  repeated int32 codes = 5;
  map<string, int32> tallies = 6;
  uint64 big = 7;
  string dropped = 8;
}
message Meta { string source = 1; }
`

// v2 widens count, score, codes and tallies, adds fields at two levels, drops one.
const v2Proto = `
syntax = "proto3";
package acme.ev;
message Event {
  string id = 1;
  int64 count = 2;
  double score = 3;
  Meta meta = 4;
  repeated int64 codes = 5;
  map<string, int64> tallies = 6;
  uint64 big = 7;
  string region = 9;
}
message Meta { string source = 1; int32 shard = 2; }
`

// merged is the table's type after v1 then v2: v2's fields, then v1's dropped one.
func merged(t *testing.T) *iceberg.StructType {
	v2 := compile(t, v2Proto, "").Root().(*iceberg.StructType)
	v1 := compile(t, v1Proto, "").Root().(*iceberg.StructType)
	st := &iceberg.StructType{FieldList: append([]iceberg.NestedField{}, v2.FieldList...)}
	for _, f := range v1.FieldList {
		if f.Name == "dropped" {
			st.FieldList = append(st.FieldList, f)
		}
	}
	// The table widened big's decimal too.
	for i, f := range st.FieldList {
		if f.Name == "big" {
			st.FieldList[i].Type = iceberg.DecimalTypeOf(38, 0)
		}
	}
	return withIDs(st).(*iceberg.StructType)
}

func TestBindEvolution(t *testing.T) {
	target := merged(t)
	s1 := compile(t, v1Proto, "")
	s2 := compile(t, v2Proto, "")
	d1, err := s1.Bind(target)
	if err != nil {
		t.Fatalf("v1 into merged: %v", err)
	}
	d2, err := s2.Bind(target)
	if err != nil {
		t.Fatalf("v2 into merged: %v", err)
	}

	m1 := newMsg(s1)
	set(m1, "id", "a")
	set(m1, "count", int32(-3))
	set(m1, "score", float32(0.5))
	set(m1, "meta.source", "s")
	appendList(m1, "codes", int32(1), int32(-2))
	setMap(m1, "tallies", "x", int32(7))
	set(m1, "big", uint64(1<<64-1))
	set(m1, "dropped", "d")
	got := decode(t, d1, target, marshal(t, m1))
	want := `{id: "a", count: -3, score: 0.5, meta: {source: "s", shard: null}, codes: [1, -2], ` +
		`tallies: map["x": 7], big: 18446744073709551615/16, region: null, dropped: "d"}`
	if got != want {
		t.Errorf("v1 data:\n got %s\nwant %s", got, want)
	}

	m2 := newMsg(s2)
	set(m2, "id", "b")
	set(m2, "count", int64(1)<<40)
	set(m2, "score", 0.1)
	set(m2, "meta.shard", int32(4))
	set(m2, "region", "eu")
	got = decode(t, d2, target, marshal(t, m2))
	want = `{id: "b", count: 1099511627776, score: 0.1, meta: {source: "", shard: 4}, codes: [], ` +
		`tallies: map[], big: 0/16, region: "eu", dropped: null}`
	if got != want {
		t.Errorf("v2 data:\n got %s\nwant %s", got, want)
	}

	// v2's decoder reads v1's bytes too (the wire formats of int32 and int64 agree;
	// float and double do not, so score is skipped as another wire type).
	got = decode(t, d2, target, marshal(t, m1))
	want = `{id: "a", count: -3, score: 0, meta: {source: "s", shard: 0}, codes: [1, -2], ` +
		`tallies: map["x": 7], big: 18446744073709551615/16, region: "", dropped: null}`
	if got != want {
		t.Errorf("v1 data, v2 schema:\n got %s\nwant %s", got, want)
	}
}

// TestBindSubset reads into a target with fewer fields, in another order.
func TestBindSubset(t *testing.T) {
	s := compile(t, v2Proto, "")
	target := withIDs(&iceberg.StructType{FieldList: []iceberg.NestedField{
		{Name: "region", Type: iceberg.PrimitiveTypes.String},
		{Name: "meta", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{Name: "shard", Type: iceberg.PrimitiveTypes.Int64},
			{Name: "gone", Type: iceberg.PrimitiveTypes.Date},
		}}},
		{Name: "id", Type: iceberg.PrimitiveTypes.String},
	}})
	dec, err := s.Bind(target)
	if err != nil {
		t.Fatal(err)
	}
	m := newMsg(s)
	set(m, "id", "x")
	set(m, "meta.shard", int32(-1))
	set(m, "count", int64(5))
	got := decode(t, dec, target, marshal(t, m))
	if want := `{region: "", meta: {shard: -1, gone: null}, id: "x"}`; got != want {
		t.Errorf("got %s want %s", got, want)
	}
}

func TestBindConflicts(t *testing.T) {
	s := compile(t, `syntax = "proto3"; package c;
		import "google/protobuf/timestamp.proto";
		import "google/protobuf/wrappers.proto";
		message M {
		  string name = 1;
		  Sub sub = 2;
		  repeated string tags = 3;
		  map<string, int64> m = 4;
		  int64 n = 5;
		  uint64 u = 6;
		  google.protobuf.Timestamp ts = 7;
		  google.protobuf.Int64Value w = 8;
		  double d = 9;
		}
		message Sub { string zip = 1; }`, "")
	cases := []struct {
		field  string
		typ    iceberg.Type
		path   string
		schema string
		table  string
	}{
		{"name", iceberg.PrimitiveTypes.Int32, "name", "string", "int"},
		{"sub", iceberg.PrimitiveTypes.String, "sub", "struct", "string"},
		{"sub", &iceberg.StructType{FieldList: []iceberg.NestedField{{Name: "zip", Type: iceberg.PrimitiveTypes.Int32}}}, "sub.zip", "string", "int"},
		{"tags", iceberg.PrimitiveTypes.String, "tags", "list", "string"},
		{"tags", &iceberg.ListType{Element: iceberg.PrimitiveTypes.Binary}, "tags.element", "string", "binary"},
		{"m", &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: iceberg.PrimitiveTypes.Int32}, "m.value", "long", "int"},
		{"m", &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.Binary, ValueType: iceberg.PrimitiveTypes.Int64}, "m.key", "string", "binary"},
		{"m", &iceberg.ListType{Element: iceberg.PrimitiveTypes.Int64}, "m", "map", "list"},
		{"n", iceberg.PrimitiveTypes.Int32, "n", "long", "int"},
		{"u", iceberg.PrimitiveTypes.Int64, "u", "decimal(20, 0)", "long"},
		{"u", iceberg.DecimalTypeOf(19, 0), "u", "decimal(20, 0)", "decimal(19, 0)"},
		{"ts", iceberg.PrimitiveTypes.Timestamp, "ts", "timestamptz", "timestamp"},
		{"w", iceberg.PrimitiveTypes.Int32, "w", "long", "int"},
		{"d", iceberg.PrimitiveTypes.Float32, "d", "double", "float"},
	}
	for _, c := range cases {
		target := withIDs(&iceberg.StructType{FieldList: []iceberg.NestedField{{Name: c.field, Type: c.typ}}})
		_, err := s.Bind(target)
		var cf *schemafmt.Conflict
		if !errors.As(err, &cf) {
			t.Errorf("%s as %s: %v, want a Conflict", c.field, c.typ, err)
			continue
		}
		if cf.Path != c.path || cf.Schema != c.schema || cf.Table != c.table {
			t.Errorf("%s as %s: %+v, want %s %s %s", c.field, c.typ, *cf, c.path, c.schema, c.table)
		}
	}
	_, err := s.Bind(iceberg.PrimitiveTypes.String)
	var cf *schemafmt.Conflict
	if !errors.As(err, &cf) || cf.Path != "" || !strings.Contains(err.Error(), "(the value)") {
		t.Errorf("non-struct target: %v", err)
	}
}

// TestBindWidenWrappers reads wrappers and map keys into promoted types.
func TestBindWiden(t *testing.T) {
	s := compile(t, `syntax = "proto3"; package w;
		import "google/protobuf/wrappers.proto";
		message M {
		  google.protobuf.Int32Value a = 1;
		  google.protobuf.FloatValue b = 2;
		  map<int32, float> c = 3;
		  google.protobuf.UInt64Value d = 4;
		}`, "")
	target := withIDs(&iceberg.StructType{FieldList: []iceberg.NestedField{
		{Name: "a", Type: iceberg.PrimitiveTypes.Int64},
		{Name: "b", Type: iceberg.PrimitiveTypes.Float64},
		{Name: "c", Type: &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.Int64, ValueType: iceberg.PrimitiveTypes.Float64}},
		{Name: "d", Type: iceberg.DecimalTypeOf(25, 0)},
	}})
	dec, err := s.Bind(target)
	if err != nil {
		t.Fatal(err)
	}
	m := newMsg(s)
	set(m, "a.value", int32(-9))
	set(m, "b.value", float32(0.25))
	setMap(m, "c", int32(-1), float32(2))
	set(m, "d.value", uint64(12))
	var v rowcodec.Value
	if r := dec.Decode(marshal(t, m), &v); r != "" {
		t.Fatal(r)
	}
	if got, want := render(v, target), `{a: -9, b: 0.25, c: map[-1: 2], d: 12/11}`; got != want {
		t.Errorf("got %s want %s", got, want)
	}
}
