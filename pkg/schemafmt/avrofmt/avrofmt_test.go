package avrofmt

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/minkhq/mink/pkg/schemafmt"
)

const richSchema = `{"type": "record", "name": "Rich", "namespace": "com.acme", "fields": [
  {"name": "b", "type": "boolean"},
  {"name": "i", "type": "int"},
  {"name": "l", "type": "long"},
  {"name": "f", "type": "float"},
  {"name": "d", "type": "double"},
  {"name": "by", "type": "bytes"},
  {"name": "s", "type": "string"},
  {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
  {"name": "fx", "type": {"type": "fixed", "name": "Hash", "size": 4}},
  {"name": "nothing", "type": "null"},
  {"name": "dec_b", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
  {"name": "dec_big", "type": {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 5}},
  {"name": "dec_f", "type": {"type": "fixed", "name": "Dec18", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 3}},
  {"name": "dec_fbig", "type": {"type": "fixed", "name": "Dec38", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 0}},
  {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
  {"name": "uf", "type": {"type": "fixed", "name": "UUIDF", "size": 16, "logicalType": "uuid"}},
  {"name": "date", "type": {"type": "int", "logicalType": "date"}},
  {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
  {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
  {"name": "tsms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "tsus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
  {"name": "ltsms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
  {"name": "ltsus", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
  {"name": "tsns", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
  {"name": "dur", "type": {"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}},
  {"name": "odd", "type": {"type": "string", "logicalType": "made-up"}},
  {"name": "addr", "type": {"type": "record", "name": "Address", "fields": [
    {"name": "street", "type": "string"},
    {"name": "zip", "type": ["null", "int"]}]}},
  {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
    {"name": "sku", "type": "string"},
    {"name": "qty", "type": "int"}]}}},
  {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "long"}}},
  {"name": "opt", "type": ["null", "string"]},
  {"name": "opt2", "type": ["string", "null"]},
  {"name": "choice", "type": ["null", "int", "string", "Address", {"type": "array", "items": "int"}, {"type": "map", "values": "string"}]},
  {"name": "addr2", "type": "Address"}
]}`

const richRoot = `struct<` +
	`0: b: optional boolean, 0: i: optional int, 0: l: optional long, 0: f: optional float, ` +
	`0: d: optional double, 0: by: optional binary, 0: s: optional string, 0: e: optional string, ` +
	`0: fx: optional fixed[4], 0: dec_b: optional decimal(10, 2), 0: dec_big: optional decimal(30, 5), ` +
	`0: dec_f: optional decimal(18, 3), 0: dec_fbig: optional decimal(38, 0), 0: u: optional uuid, ` +
	`0: uf: optional uuid, 0: date: optional date, 0: tms: optional time, 0: tus: optional time, ` +
	`0: tsms: optional timestamptz, 0: tsus: optional timestamptz, 0: ltsms: optional timestamp, ` +
	`0: ltsus: optional timestamp, 0: tsns: optional long, 0: dur: optional fixed[12], ` +
	`0: odd: optional string, ` +
	`0: addr: optional struct<0: street: optional string, 0: zip: optional int>, ` +
	`0: lines: optional list<struct<0: sku: optional string, 0: qty: optional int>>, ` +
	`0: m: optional map<string, list<long>>, 0: opt: optional string, 0: opt2: optional string, ` +
	`0: choice: optional struct<0: int: optional int, 0: string: optional string, ` +
	`0: Address: optional struct<0: street: optional string, 0: zip: optional int>, ` +
	`0: array: optional list<int>, 0: map: optional map<string, string>>, ` +
	`0: addr2: optional struct<0: street: optional string, 0: zip: optional int>>`

type tAddress struct {
	Street string `avro:"street"`
	Zip    *int32 `avro:"zip"`
}

type tLine struct {
	SKU string `avro:"sku"`
	Qty int32  `avro:"qty"`
}

//lint:file-ignore ST1011 tRich's TMs is named for Avro's time-millis, beside TUs for time-micros

type tRich struct {
	B       bool                 `avro:"b"`
	I       int32                `avro:"i"`
	L       int64                `avro:"l"`
	F       float32              `avro:"f"`
	D       float64              `avro:"d"`
	By      []byte               `avro:"by"`
	S       string               `avro:"s"`
	E       string               `avro:"e"`
	Fx      [4]byte              `avro:"fx"`
	Nothing any                  `avro:"nothing"`
	DecB    *big.Rat             `avro:"dec_b"`
	DecBig  *big.Rat             `avro:"dec_big"`
	DecF    *big.Rat             `avro:"dec_f"`
	DecFBig *big.Rat             `avro:"dec_fbig"`
	U       string               `avro:"u"`
	UF      [16]byte             `avro:"uf"`
	Date    time.Time            `avro:"date"`
	TMs     time.Duration        `avro:"tms"`
	TUs     time.Duration        `avro:"tus"`
	TsMs    time.Time            `avro:"tsms"`
	TsUs    time.Time            `avro:"tsus"`
	LTsMs   time.Time            `avro:"ltsms"`
	LTsUs   time.Time            `avro:"ltsus"`
	TsNs    int64                `avro:"tsns"`
	Dur     avro.LogicalDuration `avro:"dur"`
	Odd     string               `avro:"odd"`
	Addr    tAddress             `avro:"addr"`
	Lines   []tLine              `avro:"lines"`
	M       map[string][]int64   `avro:"m"`
	Opt     *string              `avro:"opt"`
	Opt2    *string              `avro:"opt2"`
	Choice  map[string]any       `avro:"choice"`
	Addr2   tAddress             `avro:"addr2"`
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

func ptr[T any](v T) *T { return &v }

func TestRoot(t *testing.T) {
	s := mustCompile(t, richSchema)
	if got := s.Root().String(); got != richRoot {
		t.Errorf("Root:\n got %s\nwant %s", got, richRoot)
	}
	for _, c := range []struct{ schema, root string }{
		{`"string"`, "string"},
		{`{"type": "long", "logicalType": "timestamp-micros"}`, "timestamptz"},
		{`{"type": "array", "items": ["null", "double"]}`, "list<double>"},
		{`["null", {"type": "map", "values": "boolean"}]`, "map<string, boolean>"},
		{`["int"]`, "int"},
		{`["int", "string"]`, "struct<0: int: optional int, 0: string: optional string>"},
		{`{"type": "record", "name": "Empty", "fields": []}`, "struct<>"},
		// Types without data are left out, wherever they are.
		{`{"type": "record", "name": "R", "fields": [
			{"name": "a", "type": "null"},
			{"name": "b", "type": {"type": "array", "items": "null"}},
			{"name": "c", "type": {"type": "record", "name": "E", "fields": [{"name": "x", "type": "null"}]}},
			{"name": "d", "type": {"type": "fixed", "name": "F0", "size": 0}},
			{"name": "e", "type": ["null", "E", "int"]},
			{"name": "f", "type": "int"}]}`,
			"struct<0: e: optional int, 0: f: optional int>"},
		// Two branches of one simple name use their full names.
		{`["null", {"type": "record", "name": "A", "namespace": "x.one", "fields": [{"name": "v", "type": "int"}]},
			{"type": "record", "name": "A", "namespace": "x.two", "fields": [{"name": "v", "type": "string"}]}, "long"]`,
			"struct<0: x_one_A: optional struct<0: v: optional int>, 0: x_two_A: optional struct<0: v: optional string>, 0: long: optional long>"},
		{`["long", {"type": "long", "logicalType": "timestamp-millis"}]`,
			"struct<0: long: optional long, 0: long_timestamp_millis: optional timestamptz>"},
		{`{"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 7}`, "binary"}, // invalid: underlying type
		{`{"type": "fixed", "name": "U", "size": 15, "logicalType": "uuid"}`, "fixed[15]"},
	} {
		s := mustCompile(t, c.schema)
		if got := s.Root().String(); got != c.root {
			t.Errorf("Root of %s:\n got %s\nwant %s", c.schema, got, c.root)
		}
	}
}

func TestRootIsStable(t *testing.T) {
	s := mustCompile(t, richSchema)
	if s.Root() != s.Root() {
		t.Error("Root returned different values")
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, c := range []struct{ schema, err string }{
		{`{"type": "record", "name": "Node", "namespace": "com.acme", "fields": [
			{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}`,
			`recursive type "com.acme.Node" is not supported (field "next")`},
		{`{"type": "record", "name": "Tree", "namespace": "com.acme", "fields": [
			{"name": "kids", "type": {"type": "array", "items": "Tree"}}]}`,
			`recursive type "com.acme.Tree" is not supported (field "kids.element")`},
		{`{"type": "record", "name": "A", "fields": [
			{"name": "b", "type": {"type": "record", "name": "B", "fields": [
				{"name": "m", "type": {"type": "map", "values": "A"}}]}}]}`,
			`recursive type "A" is not supported (field "b.m.value")`},
		{`{"type": "record", "name": "R", "fields": [
			{"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}}]}`,
			`field "amount": decimal precision 40 is more than the 38 Iceberg allows`},
		{`"null"`, "nothing to map"},
		{`["null"]`, "nothing to map"},
		{`{"type": "record", "name": "R", "fields": [{"name": "x", "type": "Missing"}]}`, "invalid Avro schema"},
	} {
		_, err := Compile(schemafmt.Source{Text: c.schema})
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Compile(%s) = %v, want %q", c.schema, err, c.err)
		}
	}
}

func TestCompileTooLarge(t *testing.T) {
	// Each level defines the one below in its first field and uses it again in its
	// second: 2^20 fields once expanded, from a schema of 20 records.
	text := `{"type": "record", "name": "L0", "fields": [{"name": "v", "type": "int"}]}`
	for i := 1; i <= 20; i++ {
		text = fmt.Sprintf(`{"type": "record", "name": "L%d", "fields": [{"name": "a", "type": %s}, {"name": "b", "type": "L%d"}]}`,
			i, text, i-1)
	}
	_, err := Compile(schemafmt.Source{Text: text})
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("Compile = %v, want too large", err)
	}
}

func TestReferences(t *testing.T) {
	// Money is in its own subject; Address uses it; the order uses both.
	money := schemafmt.Reference{Name: "com.acme.common.Money", Subject: "money", Version: 1, Source: schemafmt.Source{
		Text: `{"type": "record", "name": "Money", "namespace": "com.acme.common", "fields": [
			{"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
			{"name": "currency", "type": "string"}]}`}}
	address := schemafmt.Reference{Name: "com.acme.Address", Subject: "address", Version: 3, Source: schemafmt.Source{
		Text: `{"type": "record", "name": "Address", "namespace": "com.acme", "fields": [
			{"name": "city", "type": "string"},
			{"name": "fee", "type": ["null", "com.acme.common.Money"]}]}`,
		References: []schemafmt.Reference{money}}}
	order := `{"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
		{"name": "ship_to", "type": "Address"},
		{"name": "total", "type": "com.acme.common.Money"}]}`
	s := mustCompile(t, order, address, money)
	want := "struct<0: ship_to: optional struct<0: city: optional string, 0: fee: optional struct<0: amount: optional decimal(9, 2), 0: currency: optional string>>, " +
		"0: total: optional struct<0: amount: optional decimal(9, 2), 0: currency: optional string>>"
	if got := s.Root().String(); got != want {
		t.Errorf("Root:\n got %s\nwant %s", got, want)
	}

	// The producer's view: all three schemas parsed together.
	full := strings.Replace(order, `"type": "Address"`, `"type": `+address.Source.Text, 1)
	full = strings.Replace(full, `["null", "com.acme.common.Money"]`, `["null", `+money.Source.Text+`]`, 1)
	type tMoney struct {
		Amount   *big.Rat `avro:"amount"`
		Currency string   `avro:"currency"`
	}
	type tAddr struct {
		City string  `avro:"city"`
		Fee  *tMoney `avro:"fee"`
	}
	type tOrder struct {
		ShipTo tAddr  `avro:"ship_to"`
		Total  tMoney `avro:"total"`
	}
	data := marshal(t, full, tOrder{
		ShipTo: tAddr{City: "Oslo", Fee: &tMoney{Amount: rat("4.50"), Currency: "NOK"}},
		Total:  tMoney{Amount: rat("-1234567.89"), Currency: "EUR"},
	})
	target := withIDs(s.Root())
	d, err := s.Bind(target)
	if err != nil {
		t.Fatal(err)
	}
	got := show(target, decode(t, d, data))
	if want := `{ship_to: {city: "Oslo", fee: {amount: 450, currency: "NOK"}}, total: {amount: -123456789, currency: "EUR"}}`; got != want {
		t.Errorf("decoded\n got %s\nwant %s", got, want)
	}

	// A reference that is missing, or that defines another name.
	noMoney := address
	noMoney.Source.References = nil
	if _, err := Compile(schemafmt.Source{Text: order, References: []schemafmt.Reference{noMoney}}); err == nil ||
		!strings.Contains(err.Error(), `reference "com.acme.Address" (subject "address" version 3): invalid Avro schema`) {
		t.Errorf("Compile without Money's subject = %v", err)
	}
	wrong := money
	wrong.Name = "com.acme.common.Cash"
	_, err = Compile(schemafmt.Source{Text: order, References: []schemafmt.Reference{wrong}})
	if err == nil || !strings.Contains(err.Error(), `does not define type "com.acme.common.Cash"`) {
		t.Errorf("Compile with a wrong reference name = %v", err)
	}
	// A type of one Compile does not leak into another.
	if _, err := Compile(schemafmt.Source{Text: `"com.acme.common.Money"`}); err == nil {
		t.Error("a referenced type leaked into a later Compile")
	}
}
