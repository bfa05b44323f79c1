package protofmt

import (
	"math"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
)

// allProto has every mapped type. Declarations are out of field-number order on
// purpose: Root follows the numbers.
const allProto = `
syntax = "proto3";
package acme.test.v1;

import "google/protobuf/any.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

enum Color {
  COLOR_UNSPECIFIED = 0;
  RED = 1;
  GREEN = 2;
  NEGATIVE = -5;
}

message All {
  int32 i32 = 2;
  bool b = 1;
  sint32 s32 = 3;
  sfixed32 sf32 = 4;
  int64 i64 = 5;
  sint64 s64 = 6;
  sfixed64 sf64 = 7;
  uint32 u32 = 8;
  fixed32 f32 = 9;
  uint64 u64 = 10;
  fixed64 f64 = 11;
  float fl = 12;
  double db = 13;
  string s = 14;
  bytes by = 15;
  Color color = 16;
  Inner inner = 17;
  repeated Inner inners = 18;
  repeated int32 nums = 19;
  repeated string strs = 20;
  map<string, int64> by_name = 21;
  map<int32, string> by_int = 22;
  map<bool, Inner> by_bool = 23;
  oneof choice {
    string c_str = 24;
    Inner c_msg = 25;
    int64 c_int = 26;
  }
  optional int32 opt = 27;
  optional string opt_s = 28;
  repeated Color colors = 29;
  repeated double dbls = 30;
  map<uint64, sint64> by_u64 = 31;
  map<sint32, Color> by_s32 = 32;
}

message Inner {
  string name = 1;
  int32 n = 2;
  Deep deep = 3;
  message Deep { bool flag = 1; }
}

message Known {
  google.protobuf.Timestamp ts = 1;
  google.protobuf.Duration dur = 2;
  google.protobuf.DoubleValue w_double = 3;
  google.protobuf.FloatValue w_float = 4;
  google.protobuf.Int64Value w_int64 = 5;
  google.protobuf.UInt64Value w_uint64 = 6;
  google.protobuf.Int32Value w_int32 = 7;
  google.protobuf.UInt32Value w_uint32 = 8;
  google.protobuf.BoolValue w_bool = 9;
  google.protobuf.StringValue w_string = 10;
  google.protobuf.BytesValue w_bytes = 11;
  google.protobuf.Struct st = 12;
  google.protobuf.Value val = 13;
  google.protobuf.ListValue lv = 14;
  google.protobuf.Any any = 15;
  repeated google.protobuf.Timestamp tss = 16;
  map<string, google.protobuf.Value> vals = 17;
  google.protobuf.NullValue null = 18;
}
`

func TestRootAll(t *testing.T) {
	s := compile(t, allProto, "")
	if s.Message() != "acme.test.v1.All" {
		t.Fatalf("Message() = %q", s.Message())
	}
	want := "struct<" +
		"0: b: optional boolean, 0: i32: optional int, 0: s32: optional int, 0: sf32: optional int, " +
		"0: i64: optional long, 0: s64: optional long, 0: sf64: optional long, " +
		"0: u32: optional long, 0: f32: optional long, " +
		"0: u64: optional decimal(20, 0), 0: f64: optional decimal(20, 0), " +
		"0: fl: optional float, 0: db: optional double, 0: s: optional string, 0: by: optional binary, " +
		"0: color: optional string, " +
		"0: inner: optional struct<0: name: optional string, 0: n: optional int, 0: deep: optional struct<0: flag: optional boolean>>, " +
		"0: inners: optional list<struct<0: name: optional string, 0: n: optional int, 0: deep: optional struct<0: flag: optional boolean>>>, " +
		"0: nums: optional list<int>, 0: strs: optional list<string>, " +
		"0: by_name: optional map<string, long>, 0: by_int: optional map<int, string>, " +
		"0: by_bool: optional map<boolean, struct<0: name: optional string, 0: n: optional int, 0: deep: optional struct<0: flag: optional boolean>>>, " +
		"0: c_str: optional string, " +
		"0: c_msg: optional struct<0: name: optional string, 0: n: optional int, 0: deep: optional struct<0: flag: optional boolean>>, " +
		"0: c_int: optional long, 0: opt: optional int, 0: opt_s: optional string, " +
		"0: colors: optional list<string>, 0: dbls: optional list<double>, " +
		"0: by_u64: optional map<decimal(20, 0), long>, 0: by_s32: optional map<int, string>>"
	if got := s.Root().String(); got != want {
		t.Errorf("Root:\n got %s\nwant %s", got, want)
	}
	// Element, key and value requiredness: only map keys are required.
	root := s.Root().(*iceberg.StructType)
	for _, f := range root.FieldList {
		if f.Required || f.ID != 0 {
			t.Errorf("field %s: required %v id %d", f.Name, f.Required, f.ID)
		}
		switch ft := f.Type.(type) {
		case *iceberg.ListType:
			if ft.ElementRequired {
				t.Errorf("%s: element required", f.Name)
			}
		case *iceberg.MapType:
			if ft.ValueRequired || !ft.KeyField().Required {
				t.Errorf("%s: value required %v, key required %v", f.Name, ft.ValueRequired, ft.KeyField().Required)
			}
		}
	}
	if s.Root() != s.Root() {
		t.Error("Root is rebuilt on every call")
	}
}

func TestRootKnown(t *testing.T) {
	s := compile(t, allProto, "acme.test.v1.Known")
	want := "struct<0: ts: optional timestamptz, 0: dur: optional long, " +
		"0: w_double: optional double, 0: w_float: optional float, 0: w_int64: optional long, " +
		"0: w_uint64: optional decimal(20, 0), 0: w_int32: optional int, 0: w_uint32: optional long, " +
		"0: w_bool: optional boolean, 0: w_string: optional string, 0: w_bytes: optional binary, " +
		"0: st: optional string, 0: val: optional string, 0: lv: optional string, 0: any: optional string, " +
		"0: tss: optional list<timestamptz>, 0: vals: optional map<string, string>, 0: null: optional string>"
	if got := s.Root().String(); got != want {
		t.Errorf("Root:\n got %s\nwant %s", got, want)
	}
}

// allEmpty is how a message with nothing set reads: proto3 defaults, nulls for
// presence, empty lists and maps.
const allEmpty = `{b: false, i32: 0, s32: 0, sf32: 0, i64: 0, s64: 0, sf64: 0, u32: 0, f32: 0, ` +
	`u64: 0/9, f64: 0/9, fl: 0, db: 0, s: "", by: 0x, color: "COLOR_UNSPECIFIED", inner: null, inners: [], ` +
	`nums: [], strs: [], by_name: map[], by_int: map[], by_bool: map[], c_str: null, c_msg: null, c_int: null, ` +
	`opt: null, opt_s: null, colors: [], dbls: [], by_u64: map[], by_s32: map[]}`

func TestDecodeDefaults(t *testing.T) {
	s := compile(t, allProto, "")
	dec, target := bind(t, s)
	if got := decode(t, dec, target, nil); got != allEmpty {
		t.Errorf("empty message:\n got %s\nwant %s", got, allEmpty)
	}
	// Explicit defaults are not written by proto3 producers; on the wire they read the
	// same as absent ones. proto3 optional keeps them.
	m := newMsg(s)
	set(m, "opt", int32(0))
	set(m, "opt_s", "")
	set(m, "c_int", int64(0))
	set(m, "inner", sub(m, "inner"))
	got := decode(t, dec, target, marshal(t, m))
	for _, w := range []string{"opt: 0,", `opt_s: "",`, "c_int: 0,", `inner: {name: "", n: 0, deep: null},`, "c_str: null,"} {
		if !strings.Contains(got, w) {
			t.Errorf("want %q in %s", w, got)
		}
	}
	if got != ref(m) {
		t.Errorf("\n got %s\n ref %s", got, ref(m))
	}
}

func TestDecodeScalarLimits(t *testing.T) {
	s := compile(t, allProto, "")
	dec, target := bind(t, s)
	cases := []struct {
		field string
		value any
		want  string
	}{
		{"b", true, "b: true"},
		{"i32", int32(math.MinInt32), "i32: -2147483648"},
		{"i32", int32(math.MaxInt32), "i32: 2147483647"},
		{"i32", int32(-1), "i32: -1"},
		{"s32", int32(math.MinInt32), "s32: -2147483648"},
		{"s32", int32(math.MaxInt32), "s32: 2147483647"},
		{"sf32", int32(math.MinInt32), "sf32: -2147483648"},
		{"i64", int64(math.MinInt64), "i64: -9223372036854775808"},
		{"i64", int64(math.MaxInt64), "i64: 9223372036854775807"},
		{"s64", int64(math.MinInt64), "s64: -9223372036854775808"},
		{"s64", int64(-1), "s64: -1"},
		{"s64", int64(math.MaxInt64), "s64: 9223372036854775807"},
		{"sf64", int64(math.MinInt64), "sf64: -9223372036854775808"},
		{"u32", uint32(math.MaxUint32), "u32: 4294967295"},
		{"f32", uint32(math.MaxUint32), "f32: 4294967295"},
		{"u64", uint64(math.MaxUint64), "u64: 18446744073709551615/9"},
		{"u64", uint64(1) << 63, "u64: 9223372036854775808/9"},
		{"f64", uint64(math.MaxUint64), "f64: 18446744073709551615/9"},
		{"fl", float32(math.MaxFloat32), "fl: 3.4028234663852886e+38"},
		{"fl", float32(math.SmallestNonzeroFloat32), "fl: 1.401298464324817e-45"},
		{"fl", float32(math.Inf(-1)), "fl: -Inf"},
		{"fl", float32(math.NaN()), "fl: NaN"},
		{"fl", float32(1.1), "fl: 1.100000023841858"},
		{"db", math.MaxFloat64, "db: 1.7976931348623157e+308"},
		{"db", math.Inf(1), "db: +Inf"},
		{"db", math.NaN(), "db: NaN"},
		{"db", math.Copysign(0, -1), "db: -0"},
		{"s", "héllo\x00", `s: "héllo\x00"`},
		{"by", []byte{0, 0xff}, "by: 0x00ff"},
		{"color", protoreflect.EnumNumber(2), `color: "GREEN"`},
		{"color", protoreflect.EnumNumber(-5), `color: "NEGATIVE"`},
		{"color", protoreflect.EnumNumber(99), `color: "99"`},
		{"color", protoreflect.EnumNumber(-7), `color: "-7"`},
	}
	for _, c := range cases {
		m := newMsg(s)
		set(m, c.field, c.value)
		got := decode(t, dec, target, marshal(t, m))
		if !strings.Contains(got, "{"+c.want+",") && !strings.Contains(got, " "+c.want+",") {
			t.Errorf("%s = %v: want %q in\n%s", c.field, c.value, c.want, got)
		}
		if r := ref(m); got != r {
			t.Errorf("%s = %v:\n got %s\n ref %s", c.field, c.value, got, r)
		}
	}
}

// TestDecodeNaNBits checks that NaN payloads pass through.
func TestDecodeNaNBits(t *testing.T) {
	s := compile(t, allProto, "")
	dec, _ := bind(t, s)
	m := newMsg(s)
	nan := math.Float64frombits(0x7ff8_0000_dead_beef)
	set(m, "db", nan)
	var v rowcodec.Value
	if r := dec.Decode(marshal(t, m), &v); r != "" {
		t.Fatal(r)
	}
	if bits := math.Float64bits(v.Elems[12].Float); bits != 0x7ff8_0000_dead_beef {
		t.Errorf("NaN bits %#x", bits)
	}
}

func TestDecodeNested(t *testing.T) {
	s := compile(t, allProto, "")
	dec, target := bind(t, s)
	m := newMsg(s)
	set(m, "inner.name", "a")
	set(m, "inner.deep.flag", true)
	for i, name := range []string{"x", "", "z"} {
		in := sub(m, "inners")
		set(in, "name", name)
		set(in, "n", int32(i))
		appendList(m, "inners", in)
	}
	appendList(m, "nums", int32(3), int32(-1), int32(0), int32(math.MaxInt32))
	appendList(m, "strs", "b", "", "a")
	appendList(m, "colors", protoreflect.EnumNumber(1), protoreflect.EnumNumber(7), protoreflect.EnumNumber(0))
	appendList(m, "dbls", 1.5, math.Inf(-1))
	got := decode(t, dec, target, marshal(t, m))
	for _, w := range []string{
		`inner: {name: "a", n: 0, deep: {flag: true}}`,
		`inners: [{name: "x", n: 0, deep: null}, {name: "", n: 1, deep: null}, {name: "z", n: 2, deep: null}]`,
		`nums: [3, -1, 0, 2147483647]`,
		`strs: ["b", "", "a"]`,
		`colors: ["RED", "7", "COLOR_UNSPECIFIED"]`,
		`dbls: [1.5, -Inf]`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("want %s in\n%s", w, got)
		}
	}
	if r := ref(m); got != r {
		t.Errorf("\n got %s\n ref %s", got, r)
	}
}

// TestDecodeUnpacked reads repeated scalars written unpacked (proto2 producers, or a
// field that became repeated), and packed and unpacked runs of one field.
func TestDecodeUnpacked(t *testing.T) {
	s := compile(t, allProto, "")
	dec, target := bind(t, s)
	var b []byte
	b = protowire.AppendTag(b, 19, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	b = protowire.AppendTag(b, 19, protowire.BytesType)
	b = protowire.AppendBytes(b, protowire.AppendVarint(protowire.AppendVarint(nil, 8), 9))
	b = protowire.AppendTag(b, 19, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(1<<64-1)) // -1 as int32
	got := decode(t, dec, target, b)
	if !strings.Contains(got, "nums: [7, 8, 9, -1]") {
		t.Errorf("nums: %s", got)
	}
}

func TestDecodeMaps(t *testing.T) {
	s := compile(t, allProto, "")
	dec, target := bind(t, s)
	m := newMsg(s)
	for _, k := range []string{"m", "a", "z", "", "é", "B"} {
		setMap(m, "by_name", k, int64(len(k)))
	}
	for _, k := range []int32{5, -3, 0, math.MaxInt32, math.MinInt32} {
		setMap(m, "by_int", k, "v")
	}
	for _, k := range []bool{true, false} {
		in := sub(m, "by_bool")
		set(in, "n", int32(1))
		if k {
			set(in, "name", "yes")
		}
		setMap(m, "by_bool", k, in)
	}
	for _, k := range []uint64{math.MaxUint64, 0, 1 << 63, 5} {
		setMap(m, "by_u64", k, int64(-1))
	}
	setMap(m, "by_s32", int32(-1), protoreflect.EnumNumber(42))
	setMap(m, "by_s32", int32(-2), protoreflect.EnumNumber(1))
	want := []string{
		`by_name: map["": 0, "B": 1, "a": 1, "m": 1, "z": 1, "é": 2]`,
		`by_int: map[-2147483648: "v", -3: "v", 0: "v", 5: "v", 2147483647: "v"]`,
		`by_bool: map[false: {name: "", n: 1, deep: null}, true: {name: "yes", n: 1, deep: null}]`,
		`by_u64: map[0/9: -1, 5/9: -1, 9223372036854775808/9: -1, 18446744073709551615/9: -1]`,
		`by_s32: map[-2: "RED", -1: "42"]`,
	}
	// Go's Marshal writes maps in random order: every run must read the same.
	for range 20 {
		got := decode(t, dec, target, marshal(t, m))
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Fatalf("want %s in\n%s", w, got)
			}
		}
		if r := ref(m); got != r {
			t.Fatalf("\n got %s\n ref %s", got, r)
		}
	}
}

// entry is a map entry's wire form; key or value nil leaves it out.
func entry(num protowire.Number, key, value []byte) []byte {
	var e []byte
	e = append(e, key...)
	e = append(e, value...)
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, e)
}

func strField(num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
}

func varintField(num protowire.Number, x uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), x)
}

func msgField(num protowire.Number, parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), body)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// TestDecodeMapWire covers what producers may write but Go's Marshal does not: repeated
// keys (the last wins), entries without a key or value (the defaults).
func TestDecodeMapWire(t *testing.T) {
	s := compile(t, allProto, "")
	dec, target := bind(t, s)
	b := cat(
		entry(21, strField(1, "k"), varintField(2, 1)),
		entry(21, strField(1, "a"), varintField(2, 2)),
		entry(21, strField(1, "k"), varintField(2, 3)),
		entry(21, nil, varintField(2, 4)), // key ""
		entry(21, strField(1, "v"), nil),  // value 0
		entry(21, varintField(2, 5), nil), // value then key order, key ""
		entry(23, varintField(1, 1), nil), // value: the empty message
		entry(22, varintField(1, 3), strField(2, "x")),
		entry(22, varintField(1, 1), strField(2, "y")),
		entry(22, varintField(1, 3), strField(2, "z")),
	)
	got := decode(t, dec, target, b)
	for _, w := range []string{
		`by_name: map["": 5, "a": 2, "k": 3, "v": 0]`,
		`by_int: map[1: "y", 3: "z"]`,
		`by_bool: map[true: {name: "", n: 0, deep: null}]`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("want %s in\n%s", w, got)
		}
	}
	checkRef(t, s, dec, target, b)
}

// checkRef decodes b with dynamicpb too and compares with the oracle.
func checkRef(t *testing.T, s *Schema, dec schemafmt.Decoder, target iceberg.Type, b []byte) {
	t.Helper()
	m := newMsg(s)
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatalf("dynamicpb: %v", err)
	}
	if got, r := decode(t, dec, target, b), ref(m); got != r {
		t.Errorf("\n got %s\n ref %s", got, r)
	}
}

func TestDecodeOneof(t *testing.T) {
	s := compile(t, allProto, "")
	dec, target := bind(t, s)
	m := newMsg(s)
	set(m, "c_str", "x")
	got := decode(t, dec, target, marshal(t, m))
	if !strings.Contains(got, `c_str: "x", c_msg: null, c_int: null`) {
		t.Errorf("c_str: %s", got)
	}
	m = newMsg(s)
	set(m, "c_msg.name", "n")
	got = decode(t, dec, target, marshal(t, m))
	if !strings.Contains(got, `c_str: null, c_msg: {name: "n", n: 0, deep: null}, c_int: null`) {
		t.Errorf("c_msg: %s", got)
	}
	// Several members on the wire: the last wins, as for a parser.
	b := cat(strField(24, "x"), msgField(25, strField(1, "m")), varintField(26, 9))
	got = decode(t, dec, target, b)
	if !strings.Contains(got, `c_str: null, c_msg: null, c_int: 9`) {
		t.Errorf("three members: %s", got)
	}
	checkRef(t, s, dec, target, b)
	b = cat(varintField(26, 9), msgField(25, strField(1, "m")), strField(24, "x"))
	checkRef(t, s, dec, target, b)
	// A message member, another, then the first again: the first is not merged.
	b = cat(msgField(25, strField(1, "m")), varintField(26, 9), msgField(25, varintField(2, 4)))
	got = decode(t, dec, target, b)
	if !strings.Contains(got, `c_str: null, c_msg: {name: "", n: 4, deep: null}, c_int: null`) {
		t.Errorf("switching members: %s", got)
	}
	checkRef(t, s, dec, target, b)
}

// TestDecodeMerge covers serialized messages that were concatenated: Protobuf merges
// the occurrences of a singular message field.
func TestDecodeMerge(t *testing.T) {
	s := compile(t, allProto, "")
	dec, target := bind(t, s)
	a, b := newMsg(s), newMsg(s)
	set(a, "inner.name", "a")
	set(a, "inner.deep.flag", true)
	set(a, "c_msg.name", "x")
	appendList(a, "nums", int32(1))
	setMap(a, "by_name", "k", int64(1))
	setMap(a, "by_name", "j", int64(1))
	set(b, "inner.n", int32(2))
	set(b, "c_msg.n", int32(3))
	appendList(b, "nums", int32(2))
	setMap(b, "by_name", "k", int64(2))
	set(b, "i32", int32(5))
	data := cat(marshal(t, a), marshal(t, b))
	got := decode(t, dec, target, data)
	for _, w := range []string{
		`i32: 5,`,
		`inner: {name: "a", n: 2, deep: {flag: true}}`,
		`c_msg: {name: "x", n: 3, deep: null}`,
		`nums: [1, 2]`,
		`by_name: map["j": 1, "k": 2]`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("want %s in\n%s", w, got)
		}
	}
	checkRef(t, s, dec, target, data)
	// Runs of a oneof member split by another member: only the last run counts, and
	// nested messages merge at every level.
	data = cat(
		msgField(25, strField(1, "gone")),
		varintField(26, 1),
		msgField(25, varintField(2, 1), msgField(3)),
		varintField(2, 7),
		msgField(25, msgField(3, varintField(1, 1))),
		msgField(17, msgField(3, varintField(1, 1))),
		msgField(17, strField(1, "x"), msgField(3)),
		entry(23, varintField(1, 1), msgField(2, strField(1, "a"))),
		entry(23, varintField(1, 1), cat(msgField(2, varintField(2, 2)), msgField(2, varintField(2, 3)))),
	)
	got = decode(t, dec, target, data)
	for _, w := range []string{
		`i32: 7,`,
		`inner: {name: "x", n: 0, deep: {flag: true}}`,
		`c_str: null, c_msg: {name: "", n: 1, deep: {flag: true}}, c_int: null`,
		`by_bool: map[true: {name: "", n: 3, deep: null}]`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("want %s in\n%s", w, got)
		}
	}
	checkRef(t, s, dec, target, data)

	// Well-known types merge too: a Timestamp's fields, a Struct's entries.
	ks := compile(t, allProto, "acme.test.v1.Known")
	kdec, ktarget := bind(t, ks)
	data = cat(
		msgField(1, varintField(1, 5)), msgField(1, varintField(2, 7000)),
		msgField(12, entry(1, strField(1, "a"), msgField(2, varintField(4, 1)))),
		msgField(12, entry(1, strField(1, "b"), msgField(2, strField(3, "x")))),
		msgField(13, msgField(5, entry(1, strField(1, "k"), nil))),
		msgField(13, msgField(5, entry(1, strField(1, "j"), nil))),
		msgField(7, varintField(1, 3)), msgField(7),
	)
	got = decode(t, kdec, ktarget, data)
	want := `{ts: 5000007, dur: null, w_double: null, w_float: null, w_int64: null, w_uint64: null, w_int32: 3, ` +
		`w_uint32: null, w_bool: null, w_string: null, w_bytes: null, st: "{\"a\":true,\"b\":\"x\"}", ` +
		`val: "{\"j\":null,\"k\":null}", lv: null, any: null, tss: [], vals: map[], null: "NULL_VALUE"}`
	if got != want {
		t.Errorf("well-known types:\n got %s\nwant %s", got, want)
	}
	checkRef(t, ks, kdec, ktarget, data)

	// proto2 groups merge.
	p2 := compile(t, proto2Schema, "")
	pdec, ptarget := bind(t, p2)
	data = []byte{0x2b, 0x08, 0x03, 0x2c, 0x2b, 0x12, 0x01, 't', 0x2c}
	if got, want := decode(t, pdec, ptarget, data), `{id: null, name: null, kind: null, vals: [], extra: {x: 3, tags: ["t"]}, item: []}`; got != want {
		t.Errorf("groups:\n got %s\nwant %s", got, want)
	}

	// The fast path is used again for the next record.
	if got := decode(t, dec, target, nil); got != allEmpty {
		t.Errorf("after a merge:\n got %s\nwant %s", got, allEmpty)
	}
}

func TestDecodeKnown(t *testing.T) {
	s := compile(t, allProto, "acme.test.v1.Known")
	dec, target := bind(t, s)
	empty := `{ts: null, dur: null, w_double: null, w_float: null, w_int64: null, w_uint64: null, ` +
		`w_int32: null, w_uint32: null, w_bool: null, w_string: null, w_bytes: null, st: null, val: null, ` +
		`lv: null, any: null, tss: [], vals: map[], null: "NULL_VALUE"}`
	if got := decode(t, dec, target, nil); got != empty {
		t.Errorf("absent:\n got %s\nwant %s", got, empty)
	}
	// Present but empty: the wrapped defaults.
	m := newMsg(s)
	for _, f := range []string{"ts", "dur", "w_double", "w_float", "w_int64", "w_uint64", "w_int32",
		"w_uint32", "w_bool", "w_string", "w_bytes", "st", "val", "lv", "any"} {
		set(m, f, sub(m, f))
	}
	present := `{ts: 0, dur: 0, w_double: 0, w_float: 0, w_int64: 0, w_uint64: 0/9, ` +
		`w_int32: 0, w_uint32: 0, w_bool: false, w_string: "", w_bytes: 0x, st: "{}", val: "null", ` +
		`lv: "[]", any: "{\"@type\":\"\",\"value\":\"\"}", tss: [], vals: map[], null: "NULL_VALUE"}`
	if got := decode(t, dec, target, marshal(t, m)); got != present {
		t.Errorf("empty:\n got %s\nwant %s", got, present)
	}
	if r := ref(m); r != present {
		t.Errorf("ref:\n got %s\nwant %s", r, present)
	}

	m = newMsg(s)
	set(m, "w_double.value", math.NaN())
	set(m, "w_float.value", float32(-2.5))
	set(m, "w_int64.value", int64(math.MinInt64))
	set(m, "w_uint64.value", uint64(math.MaxUint64))
	set(m, "w_int32.value", int32(-7))
	set(m, "w_uint32.value", uint32(math.MaxUint32))
	set(m, "w_bool.value", true)
	set(m, "w_string.value", "s")
	set(m, "w_bytes.value", []byte{1, 2})
	got := decode(t, dec, target, marshal(t, m))
	want := `w_double: NaN, w_float: -2.5, w_int64: -9223372036854775808, w_uint64: 18446744073709551615/9, ` +
		`w_int32: -7, w_uint32: 4294967295, w_bool: true, w_string: "s", w_bytes: 0x0102,`
	if !strings.Contains(got, want) {
		t.Errorf("wrappers:\n got %s\nwant %s", got, want)
	}
	if r := ref(m); got != r {
		t.Errorf("\n got %s\n ref %s", got, r)
	}
}

func TestDecodeTimestampDuration(t *testing.T) {
	s := compile(t, allProto, "acme.test.v1.Known")
	dec, target := bind(t, s)
	cases := []struct {
		sec   int64
		nanos int32
		us    string
	}{
		{0, 0, "0"},
		{1700000000, 123456789, "1700000000123456"},
		{-1, 999999999, "-1"}, // 1969-12-31T23:59:59.999999999: floored
		{-1, 500000000, "-500000"},
		{0, 999, "0"},
		{0, -1, "-1"},                                   // invalid for a Timestamp, but a Duration's sign
		{-2, -500000001, "-2500001"},                    // a Duration of -2.500000001s: floored
		{253402300799, 999999999, "253402300799999999"}, // 9999-12-31T23:59:59.999999999
		{-62135596800, 0, "-62135596800000000"},         // 0001-01-01
	}
	for _, c := range cases {
		m := newMsg(s)
		set(m, "ts.seconds", c.sec)
		set(m, "ts.nanos", c.nanos)
		set(m, "dur.seconds", c.sec)
		set(m, "dur.nanos", c.nanos)
		ts := sub(m, "tss")
		set(ts, "seconds", c.sec)
		set(ts, "nanos", c.nanos)
		appendList(m, "tss", ts, ts)
		got := decode(t, dec, target, marshal(t, m))
		want := "{ts: " + c.us + ", dur: " + c.us + ","
		if !strings.HasPrefix(got, want) || !strings.Contains(got, "tss: ["+c.us+", "+c.us+"]") {
			t.Errorf("%d s %d ns: want %s in\n%s", c.sec, c.nanos, want, got)
		}
		if r := ref(m); got != r {
			t.Errorf("\n got %s\n ref %s", got, r)
		}
	}
	// Seconds whose microseconds overflow a long.
	m := newMsg(s)
	set(m, "ts.seconds", int64(math.MaxInt64/1000))
	var v rowcodec.Value
	if r := dec.Decode(marshal(t, m), &v); r != `value out of range in field "ts"` {
		t.Errorf("overflow: %q", r)
	}
}

// value builds a google.protobuf.Value of the Known message's descriptors.
type jsonBuilder struct{ s *Schema }

func (j jsonBuilder) value(v any) protoreflect.Message {
	m := sub(newMsg(j.s), "val")
	switch v := v.(type) {
	case nil:
		set(m, "null_value", protoreflect.EnumNumber(0))
	case float64:
		set(m, "number_value", v)
	case string:
		set(m, "string_value", v)
	case bool:
		set(m, "bool_value", v)
	case map[string]any:
		set(m, "struct_value", j.object(v))
	case []any:
		set(m, "list_value", j.list(v))
	case protoreflect.Message: // an empty Value
		return v
	}
	return m
}

func (j jsonBuilder) object(o map[string]any) protoreflect.Message {
	m := sub(newMsg(j.s), "st")
	for k, v := range o {
		setMap(m, "fields", k, j.value(v))
	}
	return m
}

func (j jsonBuilder) list(l []any) protoreflect.Message {
	m := sub(newMsg(j.s), "lv")
	for _, v := range l {
		appendList(m, "values", j.value(v))
	}
	return m
}

func TestDecodeStructJSON(t *testing.T) {
	s := compile(t, allProto, "acme.test.v1.Known")
	dec, target := bind(t, s)
	j := jsonBuilder{s}
	obj := map[string]any{
		"z":     1.0,
		"a":     "x\"y\\\n\t\x01\b\f<>&\u2028é",
		"m":     map[string]any{"b": true, "a": nil, "c": []any{}},
		"list":  []any{1.5, math.Copysign(0, -1), 1e21, 1e-7, 123456789012345678.0, 100.0, 0.000001},
		"nan":   math.NaN(),
		"inf":   math.Inf(1),
		"-inf":  math.Inf(-1),
		"":      map[string]any{},
		"Z":     false,
		"unset": sub(newMsg(s), "val"),
	}
	m := newMsg(s)
	set(m, "st", j.object(obj))
	set(m, "val", j.value([]any{map[string]any{"k": 2.0}, "s", nil}))
	set(m, "lv", j.list([]any{[]any{[]any{}}, 3.0}))
	setMap(m, "vals", "b", j.value(2.0))
	setMap(m, "vals", "a", j.value(map[string]any{"y": 1.0, "x": 2.0}))
	anyMsg := sub(m, "any")
	set(anyMsg, "type_url", "type.googleapis.com/acme.test.v1.Inner")
	set(anyMsg, "value", []byte{0x0a, 0x01, 'a', 0xff})
	set(m, "any", anyMsg)

	wantSt := `{"":{},"-inf":"-Infinity","Z":false,"a":"x\"y\\\n\t\u0001\b\f<>&\u2028é","inf":"Infinity",` +
		`"list":[1.5,-0,1e+21,1e-7,123456789012345680,100,0.000001],"m":{"a":null,"b":true,"c":[]},` +
		`"nan":"NaN","unset":null,"z":1}`
	for range 10 { // map order varies between Marshal calls
		var v rowcodec.Value
		if r := dec.Decode(marshal(t, m), &v); r != "" {
			t.Fatal(r)
		}
		if got := string(v.Elems[11].Bytes); got != wantSt {
			t.Fatalf("Struct:\n got %s\nwant %s", got, wantSt)
		}
		if got, want := string(v.Elems[12].Bytes), `[{"k":2},"s",null]`; got != want {
			t.Errorf("Value: got %s want %s", got, want)
		}
		if got, want := string(v.Elems[13].Bytes), `[[[]],3]`; got != want {
			t.Errorf("ListValue: got %s want %s", got, want)
		}
		if got, want := string(v.Elems[14].Bytes), `{"@type":"type.googleapis.com/acme.test.v1.Inner","value":"CgFh/w=="}`; got != want {
			t.Errorf("Any: got %s want %s", got, want)
		}
		if got, want := render(v.Elems[16], target.(*iceberg.StructType).FieldList[16].Type), `map["a": "{\"x\":2,\"y\":1}", "b": "2"]`; got != want {
			t.Errorf("map of Value: got %s want %s", got, want)
		}
		if got, r := render(v, target), ref(m); got != r {
			t.Fatalf("\n got %s\n ref %s", got, r)
		}
	}
	// Repeated Struct keys: the last wins.
	b := msgField(12,
		entry(1, strField(1, "k"), msgField(2, strField(3, "first"))),
		entry(1, strField(1, "a"), nil),
		entry(1, strField(1, "k"), msgField(2, strField(3, "last"))),
	)
	var v rowcodec.Value
	if r := dec.Decode(b, &v); r != "" {
		t.Fatal(r)
	}
	if got, want := string(v.Elems[11].Bytes), `{"a":null,"k":"last"}`; got != want {
		t.Errorf("repeated keys: got %s want %s", got, want)
	}
	checkRef(t, s, dec, target, b)
}

func TestDecodeInvalid(t *testing.T) {
	s := compile(t, allProto, "")
	dec, _ := bind(t, s)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated tag", []byte{0x80}, "invalid Protobuf wire data"},
		{"field 0", []byte{0x00, 0x01}, "invalid Protobuf wire data"},
		{"truncated varint", []byte{0x10, 0x80}, `invalid Protobuf wire data in field "i32"`},
		{"truncated string", []byte{0x72, 0x05, 'a'}, `invalid Protobuf wire data in field "s"`},
		{"invalid UTF-8", strField(14, "a\xffb"), `invalid UTF-8 in field "s"`},
		{"invalid UTF-8 nested", msgField(17, strField(1, "\xc0")), `invalid UTF-8 in field "inner.name"`},
		{"invalid UTF-8 list", strField(20, "\xed\xa0\x80"), `invalid UTF-8 in field "strs.element"`},
		{"invalid UTF-8 map key", entry(21, strField(1, "\xff"), nil), `invalid UTF-8 in field "by_name.key"`},
		{"truncated nested", msgField(17, []byte{0x08}), `invalid Protobuf wire data in field "inner"`},
		{"truncated packed", cat(protowire.AppendTag(nil, 19, protowire.BytesType), []byte{0x05, 0x01}), `invalid Protobuf wire data in field "nums"`},
		{"truncated packed element", cat(protowire.AppendTag(nil, 19, protowire.BytesType), []byte{0x01, 0x80}), `invalid Protobuf wire data in field "nums.element"`},
		{"truncated entry", cat(protowire.AppendTag(nil, 21, protowire.BytesType), []byte{0x03, 0x0a, 0x01}), `invalid Protobuf wire data in field "by_name"`},
		{"truncated entry key", entry(21, []byte{0x0a, 0x05}, nil), `invalid Protobuf wire data in field "by_name.key"`},
		{"unknown truncated", []byte{0xf8, 0x07}, "invalid Protobuf wire data"},
		{"stray end group", []byte{0x0c}, "invalid Protobuf wire data"},
		{"unknown group unterminated", []byte{0xfb, 0x07}, "invalid Protobuf wire data"},
		{"reserved wire type", []byte{0x0e}, "invalid Protobuf wire data"},
	}
	for _, c := range cases {
		var v rowcodec.Value
		if got := dec.Decode(c.data, &v); got != c.want {
			t.Errorf("%s: got %q want %q", c.name, got, c.want)
		}
	}
	// Unknown fields, and known fields of another wire type, are skipped as parsers do.
	dec2, target := bind(t, s)
	b := cat(varintField(1000, 5), strField(2, "not an int"), varintField(14, 3), varintField(1, 1))
	got := decode(t, dec2, target, b)
	if !strings.HasPrefix(got, `{b: true, i32: 0,`) || !strings.Contains(got, `s: "",`) {
		t.Errorf("skipped fields: %s", got)
	}
	checkRef(t, s, dec2, target, b)
}

// TestDecodeReuse decodes a big message then a small one into the same Value.
func TestDecodeReuse(t *testing.T) {
	s := compile(t, allProto, "")
	dec, target := bind(t, s)
	m := newMsg(s)
	for i := range 5 {
		in := sub(m, "inners")
		set(in, "name", strings.Repeat("x", i))
		set(in, "deep.flag", true)
		appendList(m, "inners", in)
		setMap(m, "by_int", int32(i), "v")
	}
	big := marshal(t, m)
	small := newMsg(s)
	in := sub(small, "inners")
	set(in, "n", int32(1))
	appendList(small, "inners", in)
	setMap(small, "by_int", int32(9), "w")
	var v rowcodec.Value
	for range 3 {
		for _, c := range []protoreflect.Message{m, small} {
			b := marshal(t, c.Interface())
			if c == m {
				b = big
			}
			if r := dec.Decode(b, &v); r != "" {
				t.Fatal(r)
			}
			if got, r := render(v, target), ref(c); got != r {
				t.Fatalf("\n got %s\n ref %s", got, r)
			}
		}
	}
}

const proto2Schema = `
syntax = "proto2";
package acme.p2;

enum Kind { A = 1; B = 2; }

message Rec {
  required int32 id = 1;
  optional string name = 2 [default = "anon"];
  optional Kind kind = 3;
  repeated int64 vals = 4;
  optional group Extra = 5 {
    optional int32 x = 1;
    repeated string tags = 2;
  }
  repeated group Item = 6 {
    optional string k = 1;
  }
  extensions 100 to 200;
}
`

func TestProto2(t *testing.T) {
	s := compile(t, proto2Schema, "")
	want := "struct<0: id: optional int, 0: name: optional string, 0: kind: optional string, " +
		"0: vals: optional list<long>, 0: extra: optional struct<0: x: optional int, 0: tags: optional list<string>>, " +
		"0: item: optional list<struct<0: k: optional string>>>"
	if got := s.Root().String(); got != want {
		t.Errorf("Root:\n got %s\nwant %s", got, want)
	}
	dec, target := bind(t, s)
	// proto2 fields have presence: absent reads as null, even with a [default].
	if got, want := decode(t, dec, target, nil), `{id: null, name: null, kind: null, vals: [], extra: null, item: []}`; got != want {
		t.Errorf("empty:\n got %s\nwant %s", got, want)
	}
	m := newMsg(s)
	set(m, "id", int32(7))
	set(m, "kind", protoreflect.EnumNumber(2))
	appendList(m, "vals", int64(1), int64(-1))
	set(m, "extra.x", int32(3))
	appendList(m.Mutable(field(m, "extra")).Message(), "tags", "t")
	it := sub(m, "item")
	set(it, "k", "v")
	appendList(m, "item", it, sub(m, "item"))
	got := decode(t, dec, target, marshal(t, m))
	want = `{id: 7, name: null, kind: "B", vals: [1, -1], extra: {x: 3, tags: ["t"]}, item: [{k: "v"}, {k: null}]}`
	if got != want {
		t.Errorf("groups:\n got %s\nwant %s", got, want)
	}
	// A closed enum's unknown number still reads as its text.
	if got := decode(t, dec, target, varintField(3, 9)); !strings.Contains(got, `kind: "9"`) {
		t.Errorf("closed enum: %s", got)
	}
}

func TestEmptyMessages(t *testing.T) {
	text := `syntax = "proto3"; package e;
		import "google/protobuf/empty.proto";
		message Top {
		  oneof result {
		    google.protobuf.Empty ok = 1;
		    string error = 2;
		  }
		  repeated google.protobuf.Empty pings = 3;
		  map<string, google.protobuf.Empty> set = 4;
		  Hollow hollow = 5;
		  int32 n = 6;
		}
		message Hollow { google.protobuf.Empty e = 1; repeated Nothing n = 2; }
		message Nothing {}`
	s := compile(t, text, "")
	if got, want := s.Root().String(), "struct<0: error: optional string, 0: n: optional int>"; got != want {
		t.Errorf("Root: %s", got)
	}
	dec, target := bind(t, s)
	m := newMsg(s)
	set(m, "error", "boom")
	set(m, "n", int32(1))
	appendList(m, "pings", sub(m, "pings"))
	setMap(m, "set", "k", sub(m, "set"))
	set(m, "hollow", sub(m, "hollow"))
	if got, want := decode(t, dec, target, marshal(t, m)), `{error: "boom", n: 1}`; got != want {
		t.Errorf("got %s want %s", got, want)
	}
	// ok, set after error, clears it though it is no column.
	b := cat(strField(2, "boom"), msgField(1))
	if got, want := decode(t, dec, target, b), `{error: null, n: 0}`; got != want {
		t.Errorf("ok after error: got %s want %s", got, want)
	}
	checkRef(t, s, dec, target, b)
	b = cat(msgField(1), strField(2, "boom"))
	checkRef(t, s, dec, target, b)
	// A top-level message without fields is an empty struct.
	n := compile(t, text, "e.Nothing")
	if got := n.Root().String(); got != "struct<>" {
		t.Errorf("Nothing: %s", got)
	}
	ndec, ntarget := bind(t, n)
	if got := decode(t, ndec, ntarget, varintField(1, 1)); got != "{}" {
		t.Errorf("Nothing: %s", got)
	}
}

// TestOneofMemberNotRead: a member the target lacks still clears the others.
func TestOneofMemberNotRead(t *testing.T) {
	s := compile(t, allProto, "")
	target := withIDs(&iceberg.StructType{FieldList: []iceberg.NestedField{
		{Name: "c_str", Type: iceberg.PrimitiveTypes.String},
		{Name: "c_int", Type: iceberg.PrimitiveTypes.Int64},
	}})
	dec, err := s.Bind(target)
	if err != nil {
		t.Fatal(err)
	}
	b := cat(strField(24, "x"), msgField(25, strField(1, "m")))
	if got, want := decode(t, dec, target, b), `{c_str: null, c_int: null}`; got != want {
		t.Errorf("got %s want %s", got, want)
	}
	b = cat(msgField(25, strField(1, "m")), strField(24, "x"))
	if got, want := decode(t, dec, target, b), `{c_str: "x", c_int: null}`; got != want {
		t.Errorf("got %s want %s", got, want)
	}
}
