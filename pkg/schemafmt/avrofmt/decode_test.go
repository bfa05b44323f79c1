package avrofmt

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/hamba/avro/v2"

	"github.com/minkhq/mink/pkg/rowcodec"
)

func richValue() tRich {
	zip := int32(12345)
	return tRich{
		B: true, I: -42, L: math.MinInt64, F: 1.5, D: -2.25,
		By: []byte{0, 1, 0xff}, S: "héllo", E: "BLUE", Fx: [4]byte{0xde, 0xad, 0xbe, 0xef},
		DecB:    rat("-12345678.90"),
		DecBig:  rat("-1234567890123456789012345.12345"),
		DecF:    rat("999999999999999.999"),
		DecFBig: rat("-99999999999999999999999999999999999999"),
		U:       "0F8FAD5B-D9CB-469F-A165-70867728950E",
		UF:      [16]byte{0x0f, 0x8f, 0xad, 0x5b, 0xd9, 0xcb, 0x46, 0x9f, 0xa1, 0x65, 0x70, 0x86, 0x77, 0x28, 0x95, 0x0e},
		Date:    time.Date(1969, 12, 30, 0, 0, 0, 0, time.UTC),
		TMs:     13*time.Hour + 45*time.Millisecond,
		TUs:     23*time.Hour + 59*time.Minute + 999999*time.Microsecond,
		TsMs:    time.UnixMilli(1700000000123).UTC(),
		TsUs:    time.UnixMicro(-1700000000123456).UTC(),
		LTsMs:   time.UnixMilli(1).UTC(),
		LTsUs:   time.UnixMicro(2).UTC(),
		TsNs:    1700000000123456789,
		Dur:     avro.LogicalDuration{Months: 1, Days: 2, Milliseconds: 3},
		Odd:     "odd",
		Addr:    tAddress{Street: "Main St", Zip: &zip},
		Lines:   []tLine{{SKU: "a", Qty: 1}, {SKU: "b", Qty: -2}},
		M:       map[string][]int64{"k": {1, -1, math.MaxInt64}},
		Opt:     ptr("x"),
		Opt2:    nil,
		Choice:  map[string]any{"com.acme.Address": map[string]any{"street": "Elm", "zip": nil}},
		Addr2:   tAddress{Street: "Second"},
	}
}

const richWant = `{b: true, i: -42, l: -9223372036854775808, f: 1.5, d: -2.25, by: 0x0001ff, ` +
	`s: "héllo", e: "BLUE", fx: 0xdeadbeef, dec_b: -1234567890, dec_big: -123456789012345678901234512345, ` +
	`dec_f: 999999999999999999, dec_fbig: -99999999999999999999999999999999999999, ` +
	`u: 0x0f8fad5bd9cb469fa16570867728950e, uf: 0x0f8fad5bd9cb469fa16570867728950e, ` +
	`date: -2, tms: 46800045000, tus: 86340999999, tsms: 1700000000123000, tsus: -1700000000123456, ` +
	`ltsms: 1000, ltsus: 2, tsns: 1700000000123456789, dur: 0x010000000200000003000000, odd: "odd", ` +
	`addr: {street: "Main St", zip: 12345}, lines: [{sku: "a", qty: 1} {sku: "b", qty: -2}], ` +
	`m: {"k": [1 -1 9223372036854775807]}, opt: "x", opt2: null, ` +
	`choice: {int: null, string: null, Address: {street: "Elm", zip: null}, array: null, map: null}, ` +
	`addr2: {street: "Second", zip: null}}`

func TestDecodeRich(t *testing.T) {
	s := mustCompile(t, richSchema)
	target := withIDs(s.Root())
	d := mustBind(t, s)
	data := marshal(t, richSchema, richValue())
	var v rowcodec.Value
	if r := d.Decode(data, &v); r != "" {
		t.Fatalf("Decode: %s", r)
	}
	if got := show(target, v); got != richWant {
		t.Errorf("decoded\n got %s\nwant %s", got, richWant)
	}
	// Again into the same value: memory reused, same result.
	if r := d.Decode(data, &v); r != "" {
		t.Fatalf("Decode again: %s", r)
	}
	if got := show(target, v); got != richWant {
		t.Errorf("decoded again\n got %s\nwant %s", got, richWant)
	}
}

func TestDecodeUnions(t *testing.T) {
	const schema = `{"type": "record", "name": "U", "fields": [
		{"name": "c", "type": ["null", "int", "string", {"type": "record", "name": "P", "fields": [{"name": "x", "type": "long"}]},
			{"type": "array", "items": "int"}, {"type": "map", "values": "string"},
			{"type": "enum", "name": "E", "symbols": ["A", "B"]}, {"type": "fixed", "name": "F", "size": 2}]},
		{"name": "o", "type": ["null", "double"]},
		{"name": "p", "type": ["double", "null"]},
		{"name": "n", "type": ["int", "string"]}]}`
	type tU struct {
		C map[string]any `avro:"c"`
		O *float64       `avro:"o"`
		P *float64       `avro:"p"`
		N map[string]any `avro:"n"`
	}
	s := mustCompile(t, schema)
	target := withIDs(s.Root())
	d := mustBind(t, s)
	for _, c := range []struct {
		v    tU
		want string
	}{
		{tU{N: map[string]any{"int": 1}}, `{c: null, o: null, p: null, n: {int: 1, string: null}}`},
		{tU{C: map[string]any{"int": 7}, O: ptr(0.5), P: ptr(-1.0), N: map[string]any{"string": "s"}},
			`{c: {int: 7, string: null, P: null, array: null, map: null, E: null, F: null}, o: 0.5, p: -1, n: {int: null, string: "s"}}`},
		{tU{C: map[string]any{"string": "z"}, N: map[string]any{"int": 1}},
			`{c: {int: null, string: "z", P: null, array: null, map: null, E: null, F: null}, o: null, p: null, n: {int: 1, string: null}}`},
		{tU{C: map[string]any{"P": map[string]any{"x": int64(-9)}}, N: map[string]any{"int": 1}},
			`{c: {int: null, string: null, P: {x: -9}, array: null, map: null, E: null, F: null}, o: null, p: null, n: {int: 1, string: null}}`},
		{tU{C: map[string]any{"array": []int{1, 2}}, N: map[string]any{"int": 1}},
			`{c: {int: null, string: null, P: null, array: [1 2], map: null, E: null, F: null}, o: null, p: null, n: {int: 1, string: null}}`},
		{tU{C: map[string]any{"map": map[string]string{"a": "b"}}, N: map[string]any{"int": 1}},
			`{c: {int: null, string: null, P: null, array: null, map: {"a": "b"}, E: null, F: null}, o: null, p: null, n: {int: 1, string: null}}`},
		{tU{C: map[string]any{"E": "B"}, N: map[string]any{"int": 1}},
			`{c: {int: null, string: null, P: null, array: null, map: null, E: "B", F: null}, o: null, p: null, n: {int: 1, string: null}}`},
		{tU{C: map[string]any{"F": [2]byte{1, 2}}, N: map[string]any{"int": 1}},
			`{c: {int: null, string: null, P: null, array: null, map: null, E: null, F: 0x0102}, o: null, p: null, n: {int: 1, string: null}}`},
	} {
		data := marshal(t, schema, c.v)
		if got := show(target, decode(t, d, data)); got != c.want {
			t.Errorf("decoded %+v\n got %s\nwant %s", c.v, got, c.want)
		}
	}
}

func TestDecodeTopLevel(t *testing.T) {
	for _, c := range []struct {
		schema string
		v      any
		want   string
	}{
		{`"string"`, "hi", `"hi"`},
		{`"long"`, int64(-3), `-3`},
		{`["null", "string"]`, nil, `null`},
		{`["null", "string"]`, ptr("x"), `"x"`},
		{`{"type": "array", "items": "string"}`, []string{"a", "b"}, `["a" "b"]`},
		{`{"type": "map", "values": {"type": "array", "items": "int"}}`, map[string][]int32{"x": {1, 2}}, `{"x": [1 2]}`},
		{`{"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 1}`, rat("-99.9"), `-999`},
		{`{"type": "record", "name": "Empty", "fields": []}`, map[string]any{}, `{}`},
	} {
		s := mustCompile(t, c.schema)
		target := withIDs(s.Root())
		d := mustBind(t, s)
		if got := show(target, decode(t, d, marshal(t, c.schema, c.v))); got != c.want {
			t.Errorf("%s: decoded %v\n got %s\nwant %s", c.schema, c.v, got, c.want)
		}
	}
}

func TestDecodeDecimals(t *testing.T) {
	values := []string{"0", "1", "-1", "127", "-128", "128", "-129", "255", "-256", "32767", "-32768",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
		"18446744073709551616", "-18446744073709551616",
		"99999999999999999999999999999999999999", "-99999999999999999999999999999999999999",
		"12345678901234567890123456789012345678", "-10000000000000000000000000000000000000"}
	for _, prec := range []int{1, 2, 9, 18, 19, 20, 30, 38} {
		for _, fixed := range []bool{false, true} {
			typ := `{"type": "bytes", "logicalType": "decimal", "precision": ` + strconv.Itoa(prec) + `, "scale": 0}`
			if fixed {
				typ = `{"type": "fixed", "name": "D", "size": 16, "logicalType": "decimal", "precision": ` + strconv.Itoa(prec) + `, "scale": 0}`
			}
			s := mustCompile(t, typ)
			target := withIDs(s.Root())
			d := mustBind(t, s)
			for _, val := range values {
				if len(strings.TrimPrefix(val, "-")) > prec {
					continue // hamba refuses to write it
				}
				data := marshal(t, typ, rat(val))
				if got := show(target, decode(t, d, data)); got != val {
					t.Errorf("decimal(%d,0) fixed=%v: %s decoded as %s", prec, fixed, val, got)
				}
			}
		}
	}
}

// TestDecodeBad checks the reasons for values the schema cannot have.
func TestDecodeBad(t *testing.T) {
	const schema = `{"type": "record", "name": "R", "fields": [
		{"name": "name", "type": "string"},
		{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
		{"name": "u", "type": ["null", "int", "string"]},
		{"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
		{"name": "tags", "type": {"type": "array", "items": "string"}},
		{"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
		{"name": "flag", "type": "boolean"},
		{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}`
	s := mustCompile(t, schema)
	d := mustBind(t, s)
	// good: name "ab", e A, u int 1, amount 0x01, tags [], id, true, ts 0.
	id := "\x48" + "0f8fad5b-d9cb-469f-a165-70867728950e"
	good := "\x04ab" + "\x00" + "\x02\x02" + "\x02\x01" + "\x00" + id + "\x01" + "\x00"
	var v rowcodec.Value
	if r := d.Decode([]byte(good), &v); r != "" {
		t.Fatalf("good value: %s", r)
	}
	for _, c := range []struct{ data, reason string }{
		{"", `field "name": truncated Avro value`},
		{"\x04a", `field "name": truncated Avro value`},
		{"\x03", `field "name": negative length`},
		{"\x04\xff\xfe", `field "name": invalid UTF-8`},
		{"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", `field "name": truncated Avro value`},
		{"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", `field "name": invalid long encoding`},
		{"\x04ab\x12", `field "e": enum index 9 out of range`},
		{"\x04ab\x01", `field "e": enum index -1 out of range`},
		{"\x04ab\x00\x0a", `field "u": union index 5 out of range`},
		{"\x04ab\x00\xff\xff\xff\xff\x7f", `field "u": union index -2147483648 out of range`},
		{"\x04ab\x00\xff\xff\xff\xff\xff\x01", `field "u": invalid int encoding`},
		{"\x04ab\x00\x04\x03", `field "u.string": negative length`},
		{"\x04ab\x00\x02\x02\x0a\x27\x10\x00\x00\x00", `field "amount": decimal does not fit decimal(10,2)`},
		{"\x04ab\x00\x02\x02\x02\x01\xfe\xff\xff\xff\x0f", `field "tags": block of 2147483647 items is longer than the rest of the input`},
		{"\x04ab\x00\x02\x02\x02\x01\x01\x02\x03", `field "tags.element": negative length`},
		{"\x04ab\x00\x02\x02\x02\x01\x00\x48" + strings.Repeat("x", 36), `field "id": invalid UUID text`},
		{"\x04ab\x00\x02\x02\x02\x01\x00\x02x", `field "id": invalid UUID text`},
		{good[:len(good)-2] + "\x02\x00", `field "flag": invalid boolean byte`},
		{good[:len(good)-1] + "\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", `field "ts": timestamp out of range`},
		{good + "\x00", `extra bytes after the Avro value`},
	} {
		if r := d.Decode([]byte(c.data), &v); r != c.reason {
			t.Errorf("Decode(%q) = %q, want %q", c.data, r, c.reason)
		}
	}
}

func TestDecodeBlocks(t *testing.T) {
	// Producers may split arrays and maps into blocks, with or without byte sizes.
	const schema = `{"type": "record", "name": "R", "fields": [
		{"name": "a", "type": {"type": "array", "items": "string"}},
		{"name": "m", "type": {"type": "map", "values": "int"}}]}`
	type tR struct {
		A []string         `avro:"a"`
		M map[string]int32 `avro:"m"`
	}
	s := mustCompile(t, schema)
	target := withIDs(s.Root())
	d := mustBind(t, s)
	as, err := avro.ParseWithCache(schema, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sizes := range []bool{false, true} {
		api := avro.Config{BlockLength: 2, DisableBlockSizeHeader: !sizes}.Freeze()
		data, err := api.Marshal(as, tR{A: []string{"1", "2", "3", "4", "5"}, M: map[string]int32{"x": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := show(target, decode(t, d, data)), `{a: ["1" "2" "3" "4" "5"], m: {"x": 1}}`; got != want {
			t.Errorf("sizes=%v: got %s, want %s", sizes, got, want)
		}
	}
	// Huge counts and lengths fail before any allocation.
	var v rowcodec.Value
	for _, c := range []struct{ data, reason string }{
		{"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", `field "a": block of 4611686018427387904 items is longer than the rest of the input`},
		{"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01\x02", `field "a": block of 9223372036854775807 items is longer than the rest of the input`},
		{"\x02\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", `field "a.element": truncated Avro value`},
		{"\x00\x10\x02x\x02", `field "m": block of 8 items is longer than the rest of the input`},
		{"\x00\x02\x04\xff\xfe\x02\x00", `field "m.key": invalid UTF-8`},
	} {
		if r := d.Decode([]byte(c.data), &v); r != c.reason {
			t.Errorf("Decode(%q) = %q, want %q", c.data, r, c.reason)
		}
	}
}

func TestDecodeSkipStillParses(t *testing.T) {
	// The table lacks "gone", but its bytes must still be walked to find what follows.
	s := mustCompile(t, `{"type": "record", "name": "R", "fields": [
		{"name": "gone", "type": {"type": "array", "items": ["null", {"type": "record", "name": "X", "fields": [
			{"name": "s", "type": "string"}, {"name": "m", "type": {"type": "map", "values": "double"}},
			{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}}, {"name": "f", "type": {"type": "fixed", "name": "F", "size": 3}}]}]}},
		{"name": "kept", "type": "int"}]}`)
	root := s.Root().(*iceberg.StructType)
	target := withIDs(withoutField(root, "gone"))
	d, err := s.Bind(target)
	if err != nil {
		t.Fatal(err)
	}
	// gone: one block of 2 items: null, X{s "ab", m {"k": 1.0}, e A, f "xyz"}; kept 7.
	good := "\x04" + "\x00" + "\x02" + "\x04ab" + "\x02\x02k\x00\x00\x00\x00\x00\x00\xf0\x3f\x00" + "\x00" + "xyz" + "\x00" + "\x0e"
	v, r := decodeReason(d, []byte(good))
	if got := show(target, v); r != "" || got != `{kept: 7}` {
		t.Fatalf("Decode = %s %q", got, r)
	}
	for _, c := range []struct{ data, reason string }{
		{good[:5], `field "gone.element.s": truncated Avro value`},
		{strings.Replace(good, "\x04ab", "\x03ab", 1), `field "gone.element.s": negative length`},
		{strings.Replace(good, "\x3f\x00\x00xyz", "\x3f\x00\x02xyz", 1), `field "gone.element.e": enum index 1 out of range`},
		{strings.Replace(good, "xyz\x00", "xyz\x02", 1), `field "gone.element": union index 7 out of range`},
		{"\x02\x04", `field "gone.element": union index 2 out of range`},
	} {
		if _, r := decodeReason(d, []byte(c.data)); r != c.reason {
			t.Errorf("Decode(%q) = %q, want %q", c.data, r, c.reason)
		}
	}
}

func TestDecodeUnionWithEmptyBranch(t *testing.T) {
	// A branch without data reads as null, so this union is an optional long at "e".
	s := mustCompile(t, `{"type": "record", "name": "R", "fields": [
		{"name": "e", "type": ["null", {"type": "record", "name": "Empty", "fields": []}, "long"]}]}`)
	target := withIDs(s.Root())
	d := mustBind(t, s)
	for _, c := range []struct{ data, want string }{
		{"\x00", `{e: null}`},
		{"\x02", `{e: null}`},
		{"\x04\x07", `{e: -4}`},
		{"\x04", `field "e": truncated Avro value`},
		{"\x06", `field "e": union index 3 out of range`},
	} {
		v, r := decodeReason(d, []byte(c.data))
		got := r
		if r == "" {
			got = show(target, v)
		}
		if got != c.want {
			t.Errorf("Decode(%q) = %s, want %s", c.data, got, c.want)
		}
	}
}
