package jsonfmt

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/rowcodec"
)

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// The rich schema read with payloads as a Go producer writes them.
func TestDecodeRich(t *testing.T) {
	type line struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	type order struct {
		ID       int64             `json:"id"`
		Customer string            `json:"customer"`
		Amount   float64           `json:"amount"`
		Paid     bool              `json:"paid"`
		Created  time.Time         `json:"created"`
		Day      string            `json:"day"`
		At       string            `json:"at"`
		Ref      string            `json:"ref"`
		Note     *string           `json:"note"`
		Status   string            `json:"status,omitempty"`
		Level    int               `json:"level"`
		Address  map[string]string `json:"address"`
		Attrs    map[string]int    `json:"attrs"`
		Tags     []string          `json:"tags"`
		Matrix   [][]float64       `json:"matrix"`
		Lines    []line            `json:"lines"`
		Anything []any             `json:"anything"`
		Pair     []any             `json:"pair"`
		Choice   any               `json:"choice"`
		Maybe    *int              `json:"maybe"`
		Both     map[string]any    `json:"both"`
		Free     any               `json:"free"`
		Unknown  string            `json:"unknown"`
	}
	note := "leave at door"
	o := order{
		ID: 42, Customer: "Zoë", Amount: 12.5, Paid: true,
		Created: time.Date(2024, 3, 1, 10, 30, 0, 123456789, time.FixedZone("", 3600)),
		Day:     "2024-03-01", At: "10:30:00.5", Ref: "0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7f",
		Note: &note, Status: "paid", Level: 2,
		Address: map[string]string{"zip": "10115", "city": "Berlin", "street": "ignored"},
		Attrs:   map[string]int{"b": 2, "a": 1},
		Tags:    []string{"x", "y"}, Matrix: [][]float64{{1, 2}, {}, nil},
		Lines:    []line{{"A-1", 3}},
		Anything: []any{1, "two", map[string]any{"three": 3}, nil},
		Pair:     []any{"p", 1},
		Choice:   "text",
		Both:     map[string]any{"sku": "B", "discount": 0.1},
		Free:     map[string]any{"z": []any{true, nil}, "a": "b c"},
		Unknown:  "skipped",
	}
	r := newReader(t, mustCompile(t, richSchema), nil)
	r.expect(mustJSON(t, o), `{id: 42, customer: "Zoë", amount: 12.5, paid: true, `+
		`created: 2024-03-01T09:30:00.123456Z, day: 2024-03-01, at: 10:30:00.5, ref: 0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7f, email: null, `+
		`note: "leave at door", status: "paid", level: 2, ratio: null, flag: null, version: null, `+
		`address: {zip: "10115", city: "Berlin"}, attrs: map{"a": 1, "b": 2}, labels: null, extra: null, `+
		`tags: ["x", "y"], matrix: [[1, 2], [], null], lines: [{sku: "A-1", qty: 3}], `+
		`anything: ["1", "\"two\"", "{\"three\":3}", null], pair: ["\"p\"", "1"], choice: "\"text\"", maybe: null, `+
		`maybeToo: null, both: {sku: "B", qty: null, discount: 0.1}, free: "{\"a\":\"b c\",\"z\":[true,null]}", `+
		`yes: null, multi: null, onlyNull: null, inferred: null, with.dot and space: null, ünï"code: null, : null}`)

	// Every property absent, or null: all null, no reason.
	allNull := `{id: null, customer: null, amount: null, paid: null, created: null, day: null, at: null, ref: null, email: null, ` +
		`note: null, status: null, level: null, ratio: null, flag: null, version: null, address: null, attrs: null, labels: null, extra: null, ` +
		`tags: null, matrix: null, lines: null, anything: null, pair: null, choice: null, maybe: null, maybeToo: null, both: null, ` +
		`free: null, yes: null, multi: null, onlyNull: null, inferred: null, with.dot and space: null, ünï"code: null, : null}`
	r.expect(`{}`, allNull)
	var nulls strings.Builder
	nulls.WriteString("{")
	for i, f := range r.target.(*iceberg.StructType).FieldList {
		if i > 0 {
			nulls.WriteString(",")
		}
		nulls.WriteString(mustJSON(t, f.Name) + ":null")
	}
	nulls.WriteString("}")
	r.expect(nulls.String(), allNull)

	// Odd property names are matched exactly.
	r.expect(`{"with.dot and space":"a","ünï\"code":"b","":7,"ünï\u0022code":"c"}`,
		strings.NewReplacer(`with.dot and space: null`, `with.dot and space: "a"`, `ünï"code: null`, `ünï"code: "c"`, `, : null`, `, : 7`).Replace(allNull))
}

func TestDecodePrimitives(t *testing.T) {
	read := func(schema string) *reader { return newReader(t, mustCompile(t, schema), nil) }

	read(`{"type":"integer"}`).expect(
		`0`, `0`, `-0`, `0`, `42`, `42`, `-17`, `-17`, ` 5 `, `5`,
		`9223372036854775807`, `9223372036854775807`,
		`-9223372036854775808`, `-9223372036854775808`,
		`9223372036854775808`, `error: 9223372036854775808 is out of range for long`,
		`-9223372036854775809`, `error: -9223372036854775809 is out of range for long`,
		`92233720368547758070`, `error: 92233720368547758070 is out of range for long`,
		`1e3`, `1000`, `1E+3`, `1000`, `10.0`, `10`, `1.5e1`, `15`, `100e-2`, `1`, `0.0e5`, `0`,
		`9.223372036854775807e18`, `9223372036854775807`,
		`9.223372036854775808e18`, `error: 9.223372036854775808e18 is out of range for long`,
		`1e19`, `error: 1e19 is out of range for long`,
		`1e400`, `error: 1e400 is out of range for long`,
		`1.5`, `error: 1.5 is not an integer`, `1e-1`, `error: 1e-1 is not an integer`,
		`"12"`, `error: expected an integer, got a string "12"`,
		`true`, `error: expected an integer, got a boolean true`,
		`[1]`, `error: expected an integer, got an array`,
		`null`, `null`,
		`01`, `error: malformed JSON at byte 1: unexpected '1', want the end of the value`,
		`1.`, `error: malformed JSON: unexpected end of input, want a digit after the decimal point`,
		`-`, `error: malformed JSON: unexpected end of input, want a digit`,
		`+1`, `error: malformed JSON at byte 0: unexpected '+', want a value`,
		`NaN`, `error: malformed JSON at byte 0: unexpected 'N', want a value`,
	)

	read(`{"type":"number"}`).expect(
		`0`, `0`, `-0`, `-0`, `1.5`, `1.5`, `1e3`, `1000`, `0.1`, `0.1`,
		`1.7976931348623157e308`, `1.7976931348623157e+308`,
		`1e400`, `error: 1e400 is out of range for double`,
		`-1e400`, `error: -1e400 is out of range for double`,
		`1e-400`, `0`, `5e-324`, `5e-324`,
		`123456789012345678901234567890`, `1.2345678901234568e+29`,
		`"1.5"`, `error: expected a number, got a string "1.5"`,
		`Infinity`, `error: malformed JSON at byte 0: unexpected 'I', want a value`,
	)

	read(`{"type":"boolean"}`).expect(
		`true`, `true`, `false`, `false`, `null`, `null`,
		`1`, `error: expected a boolean, got a number 1`,
		`"true"`, `error: expected a boolean, got a string "true"`,
		`tru`, `error: malformed JSON: unexpected end of input, want true`,
		`trUe`, `error: malformed JSON at byte 2: unexpected 'U', want true`,
	)

	read(`{"type":"string"}`).expect(
		`""`, `""`, `"abc"`, `"abc"`, `"Zoë 日本"`, `"Zoë 日本"`,
		`"a\"b\\c\/d\b\f\n\r\t"`, `"a\"b\\c/d\b\f\n\r\t"`,
		`"\u00e9\u65E5"`, `"é日"`, `"\ud83d\ude00"`, `"😀"`,
		`"\ud83d"`, "\"\ufffd\"", `"\ude00x"`, "\"\ufffdx\"",
		"\"\xff\"", `error: invalid UTF-8 in "`+"\ufffd"+`"`,
		"\"a\x01\"", `error: malformed JSON at byte 2: unexpected byte 0x01, control characters in a string must be escaped`,
		`"\x"`, `error: malformed JSON at byte 2: unexpected 'x', want an escape (one of "\/bfnrtu)`,
		`"\u12"`, `error: malformed JSON at byte 3: unexpected '1', want 4 hex digits after \u`,
		`"abc`, `error: malformed JSON: unexpected end of input, want the end of a string`,
		`5`, `error: expected a string, got a number 5`,
		`{"a":1}`, `error: expected a string, got an object`,
		`"`+strings.Repeat("x", 50)+`"`, `"`+strings.Repeat("x", 50)+`"`,
	)
	// Long wrong values are cut in messages.
	read(`{"type":"integer"}`).expect(`"`+strings.Repeat("é", 30)+`"`, `error: expected an integer, got a string "`+strings.Repeat("é", 19)+`…`)

	read(`{"oneOf":[{"type":"null","title":"Not included"},{"type":"integer"}]}`).expect(
		`3`, `3`, `null`, `null`, `"3"`, `error: expected an integer, got a string "3"`)
	read(`{"type":"string","enum":["a","b"]}`).expect(`"a"`, `"a"`, `"zzz"`, `"zzz"`) // not validated
	read(`{"const":3}`).expect(`3`, `3`, `4`, `4`)
}

func TestDecodeDateTime(t *testing.T) {
	newReader(t, mustCompile(t, `{"type":"string","format":"date-time"}`), nil).expect(
		`"2024-03-01T10:30:00Z"`, `2024-03-01T10:30:00Z`,
		`"2024-03-01t10:30:00z"`, `2024-03-01T10:30:00Z`,
		`"2024-03-01T10:30:00.5+01:00"`, `2024-03-01T09:30:00.5Z`,
		`"2024-03-01T10:30:00.123456789-05:30"`, `2024-03-01T16:00:00.123456Z`,
		`"2024-03-01T10:30:00-00:00"`, `2024-03-01T10:30:00Z`,
		`"1970-01-01T00:00:00Z"`, `1970-01-01T00:00:00Z`,
		`"1969-12-31T23:59:59.9999999Z"`, `1969-12-31T23:59:59.999999Z`, // floors, like UnixMicro
		`"0000-01-01T00:00:00Z"`, `0000-01-01T00:00:00Z`,
		`"9999-12-31T23:59:59.999999Z"`, `9999-12-31T23:59:59.999999Z`,
		`"2000-01-01T00:00:00+23:59"`, `1999-12-31T00:01:00Z`,
		`"2024-02-29T00:00:00Z"`, `2024-02-29T00:00:00Z`,
		`"2023-02-29T00:00:00Z"`, `error: "2023-02-29T00:00:00Z" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`"1900-02-29T00:00:00Z"`, `error: "1900-02-29T00:00:00Z" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`"2024-03-01T10:30:00"`, `error: "2024-03-01T10:30:00" has no UTC offset (want Z or ±hh:mm)`,
		`"2024-03-01 10:30:00Z"`, `error: "2024-03-01 10:30:00Z" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`"2024-03-01T10:30:00+0100"`, `error: "2024-03-01T10:30:00+0100" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`"2024-03-01T10:30:00+24:00"`, `error: "2024-03-01T10:30:00+24:00" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`"2016-12-31T23:59:60Z"`, `error: "2016-12-31T23:59:60Z" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`"2024-03-01T24:00:00Z"`, `error: "2024-03-01T24:00:00Z" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`"2024-03-01T10:30:00.Z"`, `error: "2024-03-01T10:30:00.Z" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`"2024-3-01T10:30:00Z"`, `error: "2024-3-01T10:30:00Z" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`"+2024-03-01T10:30:00Z"`, `error: "+2024-03-01T10:30:00Z" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`""`, `error: "" is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)`,
		`1709289000000`, `error: expected an RFC 3339 date-time string, got a number 1709289000000`,
		`"2024-03-01T10:30:00\u005a"`, `2024-03-01T10:30:00Z`, // escapes are read first
	)

	newReader(t, mustCompile(t, `{"type":"string","format":"date"}`), nil).expect(
		`"2024-03-01"`, `2024-03-01`, `"1970-01-01"`, `1970-01-01`, `"1969-12-31"`, `1969-12-31`,
		`"0000-01-01"`, `0000-01-01`, `"9999-12-31"`, `9999-12-31`, `"2000-02-29"`, `2000-02-29`,
		`"2100-02-29"`, `error: "2100-02-29" is not a date (want YYYY-MM-DD)`,
		`"2024-04-31"`, `error: "2024-04-31" is not a date (want YYYY-MM-DD)`,
		`"2024-13-01"`, `error: "2024-13-01" is not a date (want YYYY-MM-DD)`,
		`"2024-00-10"`, `error: "2024-00-10" is not a date (want YYYY-MM-DD)`,
		`"2024-03-01T00:00:00Z"`, `error: "2024-03-01T00:00:00Z" is not a date (want YYYY-MM-DD)`,
		`"20240301"`, `error: "20240301" is not a date (want YYYY-MM-DD)`,
		`19783`, `error: expected a date string, got a number 19783`,
	)

	newReader(t, mustCompile(t, `{"type":"string","format":"time"}`), nil).expect(
		`"00:00:00"`, `00:00:00`, `"23:59:59.999999"`, `23:59:59.999999`, `"23:59:59.9999999"`, `23:59:59.999999`,
		`"10:30:00Z"`, `10:30:00`, `"10:30:00+02:00"`, `08:30:00`, `"01:00:00+02:00"`, `23:00:00`,
		`"22:00:00.25-03:00"`, `01:00:00.25`,
		`"24:00:00"`, `error: "24:00:00" is not a time (want hh:mm:ss[.ffffff], optionally with Z or ±hh:mm)`,
		`"10:60:00"`, `error: "10:60:00" is not a time (want hh:mm:ss[.ffffff], optionally with Z or ±hh:mm)`,
		`"10:30"`, `error: "10:30" is not a time (want hh:mm:ss[.ffffff], optionally with Z or ±hh:mm)`,
		`"1:30:00"`, `error: "1:30:00" is not a time (want hh:mm:ss[.ffffff], optionally with Z or ±hh:mm)`,
		`"10:30:00 "`, `error: "10:30:00 " is not a time (want hh:mm:ss[.ffffff], optionally with Z or ±hh:mm)`,
		`"10:30:00+2"`, `error: "10:30:00+2" is not a time (want hh:mm:ss[.ffffff], optionally with Z or ±hh:mm)`,
	)

	newReader(t, mustCompile(t, `{"type":"string","format":"uuid"}`), nil).expect(
		`"0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7f"`, `0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7f`,
		`"0191E2C4-6F0E-7C3A-9B1D-2A3B4C5D6E7F"`, `0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7f`,
		`"00000000-0000-0000-0000-000000000000"`, `00000000-0000-0000-0000-000000000000`,
		`"{0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7f}"`, `error: "{0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7f}" is not a UUID (want 8-4-4-4-12 hex digits)`,
		`"0191e2c46f0e7c3a9b1d2a3b4c5d6e7f"`, `error: "0191e2c46f0e7c3a9b1d2a3b4c5d6e7f" is not a UUID (want 8-4-4-4-12 hex digits)`,
		`"0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7g"`, `error: "0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7g" is not a UUID (want 8-4-4-4-12 hex digits)`,
	)
}

func TestDecodeJSONText(t *testing.T) {
	newReader(t, mustCompile(t, `{"type":"object","properties":{"v":{}}}`), nil).expect(
		`{"v": { "b" : [1, 2 ,	"a b" ] ,
		  "c":null, "d": {} , "e": [ ] } }`, `{v: "{\"b\":[1,2,\"a b\"],\"c\":null,\"d\":{},\"e\":[]}"}`,
		`{"v":"x"}`, `{v: "\"x\""}`,
		`{"v":"\u00e9\n"}`, `{v: "\"\\u00e9\\n\""}`, // escapes as written
		`{"v":1.50E+3}`, `{v: "1.50E+3"}`, // numbers as written
		`{"v":-0}`, `{v: "-0"}`,
		`{"v":true}`, `{v: "true"}`,
		`{"v":null}`, `{v: null}`, // null is null, not the text null
		`{"v":[null]}`, `{v: "[null]"}`,
		`{"v":{"b":1,"a":2,"b":3}}`, `{v: "{\"b\":1,\"a\":2,\"b\":3}"}`, // as written, duplicates included
		"{\"v\":[\"\xff\"]}", `error: field "v": invalid UTF-8 in ["`+"\ufffd"+`"]`,
		`{"v":[1,]}`, `error: malformed JSON at byte 8: unexpected ']', want a value`,
	)
	// A top-level schema of no shape: the whole document is the one value.
	newReader(t, mustCompile(t, `{}`), nil).expect(` {"a" : [1]} `, `"{\"a\":[1]}"`, `null`, `null`, `"s"`, `"\"s\""`)
	// A union of a date-time and a string is JSON text; of two integers, an integer.
	newReader(t, mustCompile(t, `{"anyOf":[{"type":"string","format":"email"},{"type":"string","format":"date-time"}]}`), nil).expect(
		`"2024-01-01T00:00:00Z"`, `"\"2024-01-01T00:00:00Z\""`)
	newReader(t, mustCompile(t, `{"oneOf":[{"type":"integer","minimum":0},{"type":"integer","maximum":-10}]}`), nil).expect(`-20`, `-20`)
	// A union that admits anything.
	newReader(t, mustCompile(t, `{"anyOf":[{"type":"string"},{}]}`), nil).expect(`5`, `"5"`, `"s"`, `"\"s\""`)
	// A list without items.
	newReader(t, mustCompile(t, `{"type":"array"}`), nil).expect(`[1, "a", {"x": [ ]}, null]`, `["1", "\"a\"", "{\"x\":[]}", null]`)
}

func TestDecodeNested(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
	  "a":{"type":"object","properties":{"b":{"type":"array","items":{"type":"object","properties":{"c":{"type":"integer"}}}}}},
	  "m":{"type":"object","additionalProperties":{"type":"array","items":{"type":"string","format":"date"}}},
	  "s":{"type":"string"}}}`)
	r := newReader(t, s, nil)
	r.expect(
		`{"a":{"b":[{"c":1},{"c":null},{},null]},"m":{"k":["2024-01-01",null]},"s":"x"}`,
		`{a: {b: [{c: 1}, {c: null}, {c: null}, null]}, m: map{"k": [2024-01-01, null]}, s: "x"}`,
		// Wrong types name the path: properties dotted, list indexes in brackets, map keys as names.
		`{"a":{"b":[{"c":1},{"c":"2"}]}}`, `error: field "a.b[1].c": expected an integer, got a string "2"`,
		`{"m":{"k":["2024-01-01","1st of May"]}}`, `error: field "m.k[1]": "1st of May" is not a date (want YYYY-MM-DD)`,
		`{"m":{"we\"ird":5}}`, `error: field "m.we\"ird": expected an array, got a number 5`,
		`{"a":[]}`, `error: field "a": expected an object, got an array`,
		`{"a":{"b":{}}}`, `error: field "a.b": expected an array, got an object`,
		`{"m":[]}`, `error: field "m": expected an object, got an array`,
		"{\"m\":{\"\xff\":[]}}", `error: field "m": invalid UTF-8 in the key "`+"\ufffd"+`"`,
		// The first wrong value is the reason; a later syntax error outranks it.
		`{"s":1,"a":{"b":[{"c":"x"}]}}`, `error: field "s": expected a string, got a number 1`,
		`{"s":1,"a":{"b":[{"c":"x"}]}`, `error: malformed JSON: unexpected end of input, want , or } in an object`,
		// Top level.
		`[]`, `error: expected an object, got an array`,
		`"x"`, `error: expected an object, got a string "x"`,
		`null`, `null`,
		``, `error: malformed JSON: empty value`,
		`  `, `error: malformed JSON: empty value`,
		`{"s":"x"} {}`, `error: malformed JSON at byte 10: unexpected '{', want the end of the value`,
		`{"s":"x"}}`, `error: malformed JSON at byte 9: unexpected '}', want the end of the value`,
		`{"s" "x"}`, `error: malformed JSON at byte 5: unexpected '"', want : after an object key`,
		`{s:"x"}`, `error: malformed JSON at byte 1: unexpected 's', want a string key`,
		`{"s":"x",}`, `error: malformed JSON at byte 9: unexpected '}', want a string key`,
		`{"s":'x'}`, `error: malformed JSON at byte 5: unexpected '\'', want a value`,
		"\xef\xbb\xbf{}", `error: malformed JSON at byte 0: unexpected byte 0xef, want a value`,
		// Unknown properties are skipped, but must be JSON.
		`{"zz":{"deep":[1,{"x":[true,false,null,"s",-1.5e-3]}]},"s":"ok"}`, `{a: null, m: null, s: "ok"}`,
		`{"zz":[1 2]}`, `error: malformed JSON at byte 9: unexpected '2', want , or ] in an array`,
	)
}

func TestDecodeDuplicateKeys(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"integer"},"l":{"type":"array","items":{"type":"integer"}},
	  "m":{"additionalProperties":{"type":"integer"}}}}`)
	r := newReader(t, s, nil)
	r.expect(
		`{"a":1,"a":2}`, `{a: 2, l: null, m: null}`,
		`{"a":1,"a":null}`, `{a: null, l: null, m: null}`,
		`{"l":[1,2,3],"l":[4]}`, `{a: null, l: [4], m: null}`,
		`{"m":{"x":1,"y":2,"x":3}}`, `{a: null, l: null, m: map{"y": 2, "x": 3}}`,
		`{"m":{"k":1,"k":2,"k":3}}`, `{a: null, l: null, m: map{"k": 3}}`,
		`{"m":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"b":10,"j":11,"a":12}}`,
		`{a: null, l: null, m: map{"c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9, "b": 10, "j": 11, "a": 12}}`,
		`{"m":{"k\u0031":1,"k1":2}}`, `{a: null, l: null, m: map{"k1": 2}}`, // keys compare unescaped
		// A wrong value counts even if a later duplicate is right.
		`{"a":"x","a":1}`, `error: field "a": expected an integer, got a string "x"`,
	)
}

// Memory is reused between documents without old values showing through.
func TestDecodeReuse(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"string"}}}},
	  "m":{"additionalProperties":{"type":"array","items":{"type":"integer"}}},"u":{"type":"string","format":"uuid"},"s":{"type":"string"}}}`)
	r := newReader(t, s, nil)
	r.expect(
		`{"l":[{"x":1,"y":"a"},{"x":2,"y":"b"},{"x":3}],"m":{"p":[1,2,3],"q":[4]},"u":"00000000-0000-0000-0000-000000000001","s":"esc\u0041ped"}`,
		`{l: [{x: 1, y: "a"}, {x: 2, y: "b"}, {x: 3, y: null}], m: map{"p": [1, 2, 3], "q": [4]}, u: 00000000-0000-0000-0000-000000000001, s: "escAped"}`,
		`{"l":[{"y":"c"}],"m":{"q":[]},"u":"00000000-0000-0000-0000-000000000002"}`,
		`{l: [{x: null, y: "c"}], m: map{"q": []}, u: 00000000-0000-0000-0000-000000000002, s: null}`,
		`{"l":[],"m":{}}`, `{l: [], m: map{}, u: null, s: null}`,
		`{"l":[{"x":"bad"}]}`, `error: field "l[0].x": expected an integer, got a string "bad"`,
		`{"l":[{"x":5},{"x":6}]}`, `{l: [{x: 5, y: null}, {x: 6, y: null}], m: null, u: null, s: null}`,
	)
	// Bytes alias the payload or the decoder's memory, and stay right until the next call.
	var v rowcodec.Value
	payload := []byte(`{"s":"plain","u":"00000000-0000-0000-0000-0000000000ff"}`)
	if reason := r.dec.Decode(payload, &v); reason != "" {
		t.Fatal(reason)
	}
	if got := render(r.target, v); got != `{l: null, m: null, u: 00000000-0000-0000-0000-0000000000ff, s: "plain"}` {
		t.Errorf("got %s", got)
	}
}

// Many properties: looked up by hashing rather than scanning.
func TestDecodeManyFields(t *testing.T) {
	var props, doc, want []string
	for i := range 40 {
		name := string(rune('A'+i%26)) + strings.Repeat("x", i/26)
		props = append(props, `"`+name+`":{"type":"integer"}`)
		if i%3 == 0 {
			doc = append(doc, `"`+name+`":`+mustJSON(t, i))
			want = append(want, name+": "+mustJSON(t, i))
		} else {
			want = append(want, name+": null")
		}
	}
	r := newReader(t, mustCompile(t, `{"properties":{`+strings.Join(props, ",")+`}}`), nil)
	r.expect(`{"nope":1,`+strings.Join(doc, ",")+`}`, "{"+strings.Join(want, ", ")+"}")
}

func TestDecodeDepth(t *testing.T) {
	r := newReader(t, mustCompile(t, `{"type":"object","properties":{"v":{},"s":{"type":"string"}}}`), nil)
	ok := `{"v":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`
	if got := r.read(ok); !strings.HasPrefix(got, `{v: "[[[`) {
		t.Errorf("999 levels: %.60s", got)
	}
	deep := `{"v":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`
	r.expect(deep, `error: JSON nested deeper than 1000 levels`)
	r.expect(`{"x":`+strings.Repeat(`{"a":`, 1000)+`1`+strings.Repeat("}", 1000)+`}`, `error: JSON nested deeper than 1000 levels`)
	r.expect(strings.Repeat("[", 100000), `error: JSON nested deeper than 1000 levels`)
}

// The same bytes give the same result in a fresh decoder and in a used one.
func TestDecodeDeterministic(t *testing.T) {
	s := mustCompile(t, richSchema)
	payloads := []string{
		`{"id":1,"attrs":{"b":1,"a":2,"b":3},"free":{ "x" : [ 1 , 2 ] },"created":"2024-01-01T00:00:00.1234567+05:00"}`,
		`{"id":1.5}`, `{"id":1,`, `{"tags":["a",3]}`, `{"lines":[{"qty":1e2}]}`,
	}
	first := newReader(t, s, nil)
	var want []string
	for _, p := range payloads {
		want = append(want, first.read(p))
	}
	for range 3 {
		r := newReader(t, s, nil)
		for i := len(payloads) - 1; i >= 0; i-- {
			if got := r.read(payloads[i]); got != want[i] {
				t.Errorf("%s: %s, then %s", payloads[i], want[i], got)
			}
		}
	}
}

func TestRenderSanity(t *testing.T) {
	// The helpers themselves: a double that is not finite never comes out of a decoder.
	if render(iceberg.PrimitiveTypes.Float64, rowcodec.Value{Valid: true, Float: math.Inf(1)}) != "+Inf" {
		t.Error("render")
	}
}

func BenchmarkDecodeRich(b *testing.B) {
	r := newReader(b, mustCompile(b, richSchema), nil)
	payload := []byte(`{"id":42,"customer":"Zoë","amount":12.5,"paid":true,"created":"2024-03-01T09:30:00.123456Z",` +
		`"day":"2024-03-01","ref":"0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7f","status":"paid","address":{"zip":"10115","city":"Berlin"},` +
		`"attrs":{"a":1,"b":2,"c":3},"tags":["x","y"],"lines":[{"sku":"A-1","qty":3},{"sku":"B-2","qty":1}],"free":{"k":[1,2]},"unknown":{"x":[1,2,3]}}`)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if reason := r.dec.Decode(payload, &r.v); reason != "" {
			b.Fatal(reason)
		}
	}
}
