package rowcodec

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tableschema"
)

// allTypes has one column of every type, plus lists and nested paths.
var allTypes = tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
	{Name: "b", Type: "boolean"},
	{Name: "i", Type: "int"},
	{Name: "l", Type: "long"},
	{Name: "f", Type: "float"},
	{Name: "d", Type: "double"},
	{Name: "dec", Type: "decimal(10,2)"},
	{Name: "big", Type: "decimal(38,0)"},
	{Name: "mid", Type: "decimal(20,2)"},
	{Name: "dt", Type: "date"},
	{Name: "tm", Type: "time"},
	{Name: "ts", Type: "timestamp"},
	{Name: "tz", Type: "timestamptz"},
	{Name: "s", Type: "string"},
	{Name: "u", Type: "uuid"},
	{Name: "bin", Type: "binary"},
	{Name: "tags", Type: "list<string>"},
	{Name: "nums", Type: "list<long>"},
	{Name: "user_id", Type: "long", JSONPath: "user.id"},
	{Name: "user_name", Type: "string", JSONPath: "user.name"},
	{Name: "req", Type: "string", Required: true},
}}

type decoded struct {
	t   *testing.T
	d   *Decoder
	row Row
	ok  bool
}

func decodeJSON(t *testing.T, spec tableschema.Spec, value string) decoded {
	t.Helper()
	d, err := NewDecoder(spec)
	if err != nil {
		t.Fatal(err)
	}
	var r decoded
	r.t, r.d = t, d
	r.ok = d.Decode(record.Record{Partition: 3, Offset: 42, Timestamp: time.UnixMilli(1700000000123), Value: []byte(value)}, &r.row)
	return r
}

func (r decoded) col(name string) Value {
	r.t.Helper()
	for i, f := range r.d.Fields() {
		if f.Name == name {
			return r.row.Values[i]
		}
	}
	r.t.Fatalf("no column %q", name)
	return Value{}
}

func (r decoded) errText() string {
	v := r.col(tableschema.ColumnMinkError)
	if !v.Valid {
		return ""
	}
	return string(v.Bytes)
}

func TestDecodeAllTypes(t *testing.T) {
	in := `{
		"b": true, "i": -2147483648, "l": 9007199254740993, "f": 1.5, "d": -2.25e-3,
		"dec": "-123.4", "big": -99999999999999999999999999999999999999, "mid": 123456789012345678.9,
		"dt": "1969-12-31", "tm": "13:45:30.1234567", "ts": "2024-01-02T03:04:05.123456789",
		"tz": "2024-01-02T05:04:05.5+02:00", "s": "h\u00e9\"llo\ud83d\ude00\n", "u": "123E4567-e89b-12d3-a456-426614174000",
		"bin": "aGVsbG8=", "tags": ["a", null, ""], "nums": [], "user": {"name": "bob", "id": 1e3, "x": [1]},
		"req": "here", "unknown": {"deep": [1, 2, {"a": null}]}
	}`
	r := decodeJSON(t, allTypes, in)
	if !r.ok || r.errText() != "" {
		t.Fatalf("decode failed: %s", r.errText())
	}
	ints := map[string]int64{
		"b": 1, "i": math.MinInt32, "l": 9007199254740993, "dec": -12340,
		"dt": -1, "tm": (13*3600+45*60+30)*1_000_000 + 123456,
		"ts":      time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC).UnixMicro(),
		"tz":      time.Date(2024, 1, 2, 3, 4, 5, 500000000, time.UTC).UnixMicro(),
		"user_id": 1000,
	}
	for name, want := range ints {
		if v := r.col(name); !v.Valid || v.Int != want {
			t.Errorf("%s = %+v, want %d", name, v, want)
		}
	}
	if v := r.col("f"); v.Float != 1.5 {
		t.Errorf("f = %v", v.Float)
	}
	if v := r.col("d"); v.Float != -2.25e-3 {
		t.Errorf("d = %v", v.Float)
	}
	if v := r.col("s"); string(v.Bytes) != "hé\"llo😀\n" {
		t.Errorf("s = %q", v.Bytes)
	}
	if v := r.col("u"); !bytes.Equal(v.Bytes, []byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}) {
		t.Errorf("u = %x", v.Bytes)
	}
	if v := r.col("bin"); string(v.Bytes) != "hello" {
		t.Errorf("bin = %q", v.Bytes)
	}
	if v := r.col("user_name"); string(v.Bytes) != "bob" {
		t.Errorf("user_name = %q", v.Bytes)
	}
	tags := r.col("tags")
	if !tags.Valid || len(tags.Elems) != 3 || string(tags.Elems[0].Bytes) != "a" || tags.Elems[1].Valid || !tags.Elems[2].Valid || len(tags.Elems[2].Bytes) != 0 {
		t.Errorf("tags = %+v", tags)
	}
	if nums := r.col("nums"); !nums.Valid || len(nums.Elems) != 0 {
		t.Errorf("nums = %+v", nums)
	}
	checkFixedDecimal(t, r.col("big").Bytes, "-99999999999999999999999999999999999999", 16)
	checkFixedDecimal(t, r.col("mid").Bytes, "12345678901234567890", 9)
}

// checkFixedDecimal checks a fixed-length two's complement decimal against math/big.
func checkFixedDecimal(t *testing.T, got []byte, unscaled string, n int) {
	t.Helper()
	want, _ := new(big.Int).SetString(unscaled, 10)
	if len(got) != n {
		t.Fatalf("decimal %s: %d bytes, want %d", unscaled, len(got), n)
	}
	v := new(big.Int).SetBytes(got)
	if got[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	if v.Cmp(want) != 0 {
		t.Errorf("decimal bytes %x = %s, want %s", got, v, want)
	}
}

func TestDecodeNumbersExact(t *testing.T) {
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
		{Name: "i", Type: "int"}, {Name: "l", Type: "long"}, {Name: "f", Type: "float"}, {Name: "d", Type: "double"},
		{Name: "dec", Type: "decimal(10,2)"}, {Name: "p", Type: "decimal(38,10)"}, {Name: "ts", Type: "timestamptz"},
	}}
	ok := []struct {
		json string
		col  string
		want int64
	}{
		{`{"l": 9223372036854775807}`, "l", math.MaxInt64},
		{`{"l": -9223372036854775808}`, "l", math.MinInt64},
		{`{"l": 9007199254740993}`, "l", 9007199254740993}, // 2^53+1: lost by float64
		{`{"l": -0}`, "l", 0},
		{`{"l": 1.0e1}`, "l", 10},
		{`{"l": 123456789012345678.0}`, "l", 123456789012345678},
		{`{"l": 0.0e99999999999999}`, "l", 0},
		{`{"l": 9.223372036854775807e18}`, "l", math.MaxInt64},
		{`{"i": 2147483647}`, "i", math.MaxInt32},
		{`{"dec": 99999999.99}`, "dec", 9999999999},
		{`{"dec": "-0.01"}`, "dec", -1},
		{`{"dec": 1.5e2}`, "dec", 15000},
		{`{"dec": 1.230000}`, "dec", 123},
		{`{"dec": 0}`, "dec", 0},
		{`{"ts": 1700000000123}`, "ts", 1700000000123000},
		{`{"ts": -1}`, "ts", -1000},
	}
	for _, c := range ok {
		r := decodeJSON(t, spec, c.json)
		if v := r.col(c.col); !r.ok || !v.Valid || v.Int != c.want {
			t.Errorf("%s: %s = %+v (%s), want %d", c.json, c.col, v, r.errText(), c.want)
		}
	}
	bad := []struct{ json, err string }{
		{`{"l": 9223372036854775808}`, `column "l": 9223372036854775808 is out of range for long`},
		{`{"l": -9223372036854775809}`, `column "l": -9223372036854775809 is out of range for long`},
		{`{"l": 1e19}`, `column "l": 1e19 is out of range for long`},
		{`{"l": 1e999999999999}`, `column "l": 1e999999999999 is out of range for long`},
		{`{"l": 1.5}`, `column "l": 1.5 is not an integer for long`},
		{`{"l": 1e-1}`, `column "l": 1e-1 is not an integer for long`},
		{`{"l": "12"}`, `column "l": expected a number, got a string "12"`},
		{`{"i": 2147483648}`, `column "i": 2147483648 is out of range for int`},
		{`{"f": 1e39}`, `column "f": 1e39 is out of range for float`},
		{`{"d": -1e309}`, `column "d": -1e309 is out of range for double`},
		{`{"dec": 1.234}`, `column "dec": 1.234 has more than 2 digits after the point for decimal(10,2)`},
		{`{"dec": 123456789}`, `column "dec": 123456789 is out of range for decimal(10,2)`},
		{`{"dec": "1,5"}`, `column "dec": "1,5" is not a decimal number`},
		{`{"dec": " 1"}`, `column "dec": " 1" is not a decimal number`},
		{`{"dec": true}`, `column "dec": expected a number or a numeric string, got a boolean true`},
		{`{"p": 1e28}`, `column "p": 1e28 is out of range for decimal(38,10)`},
		{`{"ts": 1.5}`, `column "ts": 1.5 is not an integer as epoch milliseconds`},
		{`{"ts": 9223372036854776}`, `column "ts": 9223372036854776 is out of range as epoch milliseconds`},
	}
	for _, c := range bad {
		r := decodeJSON(t, spec, c.json)
		if r.ok || r.errText() != c.err {
			t.Errorf("%s: ok=%v err %q, want %q", c.json, r.ok, r.errText(), c.err)
		}
	}
	// The largest decimal(38,10) magnitude is exact, both signs.
	for _, s := range []string{"9999999999999999999999999999.9999999999", "-9999999999999999999999999999.9999999999", "-0.0000000001"} {
		r := decodeJSON(t, spec, `{"p": "`+s+`"}`)
		if !r.ok {
			t.Fatalf("%s: %s", s, r.errText())
		}
		checkFixedDecimal(t, r.col("p").Bytes, strings.ReplaceAll(s, ".", ""), 16)
	}
}

func TestDecodeTextTypes(t *testing.T) {
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
		{Name: "dt", Type: "date"}, {Name: "tm", Type: "time"}, {Name: "ts", Type: "timestamp"},
		{Name: "tz", Type: "timestamptz"}, {Name: "u", Type: "uuid"}, {Name: "bin", Type: "binary"}, {Name: "s", Type: "string"},
		{Name: "bo", Type: "boolean"},
	}}
	bad := []struct{ json, err string }{
		{`{"dt": "2023-02-29"}`, `column "dt": "2023-02-29" is not a date (want YYYY-MM-DD)`},
		{`{"dt": 19000}`, `column "dt": expected a string, got a number 19000`},
		{`{"tm": "24:00:00"}`, `column "tm": "24:00:00" is not a time (want hh:mm:ss[.ffffff])`},
		{`{"ts": "yesterday"}`, `column "ts": "yesterday" is not an RFC 3339 timestamp`},
		{`{"tz": "2024-01-02T03:04:05"}`, `column "tz": "2024-01-02T03:04:05" has no UTC offset (want Z or ±hh:mm)`},
		{`{"tz": {}}`, `column "tz": expected an RFC 3339 timestamp string or epoch milliseconds, got an object`},
		{`{"u": "123e4567e89b12d3a456426614174000"}`, `column "u": "123e4567e89b12d3a456426614174000" is not a UUID (want 8-4-4-4-12 hex digits)`},
		{`{"u": "123e4567-e89b-12d3-a456-42661417400g"}`, `column "u": "123e4567-e89b-12d3-a456-42661417400g" is not a UUID (want 8-4-4-4-12 hex digits)`},
		{`{"bin": "not base64!"}`, `column "bin": "not base64!" is not valid base64`},
		{"{\"s\": \"\xff\"}", "column \"s\": invalid UTF-8 in \"\uFFFD\""},
		{`{"s": 5}`, `column "s": expected a string, got a number 5`},
		{`{"s": ["` + strings.Repeat("x", 50) + `"]}`, `column "s": expected a string, got an array`},
		{`{"s": "` + strings.Repeat("é", 50) + `", "bo": "` + strings.Repeat("é", 50) + `"}`, `column "bo": expected a boolean, got a string "` + strings.Repeat("é", 19) + `…`},
	}
	for _, c := range bad {
		r := decodeJSON(t, spec, c.json)
		if r.ok || r.errText() != c.err {
			t.Errorf("%s: ok=%v err %q, want %q", c.json, r.ok, r.errText(), c.err)
		}
	}
	// A lone surrogate escape is replaced, as encoding/json does; the row is fine.
	r := decodeJSON(t, spec, `{"s": "a\ud800b\udc00\ud800\u0041"}`)
	if got := string(r.col("s").Bytes); !r.ok || got != "a\uFFFDb\uFFFD\uFFFDA" {
		t.Errorf("lone surrogates: %q ok=%v %s", got, r.ok, r.errText())
	}
	// Timestamps: a zone-less timestamp is a wall clock; offsets convert to UTC.
	r = decodeJSON(t, spec, `{"ts": "2024-06-01T12:00:00+05:30", "tz": "2024-06-01T06:30:00Z"}`)
	if r.col("ts").Int != r.col("tz").Int || r.col("tz").Int != time.Date(2024, 6, 1, 6, 30, 0, 0, time.UTC).UnixMicro() {
		t.Errorf("ts %d tz %d", r.col("ts").Int, r.col("tz").Int)
	}
	// Sub-microsecond digits floor, also before 1970.
	r = decodeJSON(t, spec, `{"tz": "1969-12-31T23:59:59.9999999Z"}`)
	if got := r.col("tz").Int; got != -1 {
		t.Errorf("pre-epoch floor: %d, want -1", got)
	}
}

func TestDecodeErrorsMakeOneNullRow(t *testing.T) {
	cases := []struct{ value, err string }{
		{"", "malformed JSON: empty value"},
		{"  \n", "malformed JSON: empty value"},
		{`{"req": "x"`, "malformed JSON: unexpected end of input, want , or } in an object"},
		{`{"req": "x",}`, `malformed JSON at byte 12: unexpected '}', want a string key`},
		{`{"req": 'x'}`, `malformed JSON at byte 8: unexpected '\'', want a value`},
		{`{"req": "x"} x`, `malformed JSON at byte 13: unexpected 'x', want the end of the value`},
		{`{"req": "a` + "\x01" + `"}`, `malformed JSON at byte 10: unexpected byte 0x01, control characters in a string must be escaped`},
		{`{"req": "\x"}`, `malformed JSON at byte 10: unexpected 'x', want an escape (one of "\/bfnrtu)`},
		{`{"req": tru}`, `malformed JSON at byte 11: unexpected '}', want true`},
		{`{"l": 01}`, `malformed JSON at byte 7: unexpected '1', want , or } in an object`},
		{`{"l": 1.}`, `malformed JSON at byte 8: unexpected '}', want a digit after the decimal point`},
		{`{"l": "x", "req": "x"`, `malformed JSON: unexpected end of input, want , or } in an object`}, // syntax outranks the type error
		{`[1, 2]`, "not a JSON object (got an array)"},
		{`"s"`, "not a JSON object (got a string)"},
		{`null`, "not a JSON object (got null)"},
		{`12`, "not a JSON object (got a number)"},
		{`[1, 2`, "malformed JSON: unexpected end of input, want , or ] in an array"},
		{`{"b": 1}`, `column "b": expected a boolean, got a number 1`},
		{`{"tags": "a"}`, `column "tags": expected an array, got a string "a"`},
		{`{"tags": ["a", 1]}`, `column "tags": element 1: expected a string, got a number 1`},
		{`{"nums": [1, 2.5]}`, `column "nums": element 1: 2.5 is not an integer for long`},
		{`{"user": "bob", "req": "x"}`, `column "user_id": expected an object at "user", got a string`},
		{`{"l": 1}`, `missing required column "req"`},
		{`{"req": null}`, `required column "req" is null`},
		{`{"l": "x", "i": "y"}`, `column "l": expected a number, got a string "x"`}, // the first problem wins
		{strings.Repeat("[", 2000), "JSON nested deeper than 1000 levels"},
		{`{"x": ` + strings.Repeat("[", 2000), "JSON nested deeper than 1000 levels"},
	}
	for _, c := range cases {
		r := decodeJSON(t, allTypes, c.value)
		if r.ok {
			t.Errorf("%q decoded", c.value)
			continue
		}
		if r.errText() != c.err {
			t.Errorf("%q:\n got %q\nwant %q", c.value, r.errText(), c.err)
		}
		for i := 0; i < len(allTypes.Columns); i++ {
			if r.row.Values[i].Valid {
				t.Errorf("%q: user column %s is not null", c.value, allTypes.Columns[i].Name)
			}
		}
		checkKafkaColumns(t, r, 3, 42)
	}

	// A tombstone is a row too.
	d, _ := NewDecoder(allTypes)
	var row Row
	if d.Decode(record.Record{Offset: 7}, &row) {
		t.Fatal("tombstone decoded")
	}
	if got := string(row.Values[len(row.Values)-1].Bytes); got != "null value (tombstone)" {
		t.Errorf("tombstone error %q", got)
	}
}

func checkKafkaColumns(t *testing.T, r decoded, partition int32, offset int64) {
	t.Helper()
	if v := r.col(tableschema.ColumnKafkaPartition); !v.Valid || v.Int != int64(partition) {
		t.Errorf("partition %+v", v)
	}
	if v := r.col(tableschema.ColumnKafkaOffset); !v.Valid || v.Int != offset {
		t.Errorf("offset %+v", v)
	}
	if v := r.col(tableschema.ColumnKafkaTimestamp); !v.Valid || v.Int != 1700000000123000 {
		t.Errorf("timestamp %+v", v)
	}
}

func TestDecodeKafkaColumnsAndReuse(t *testing.T) {
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "tags", Type: "list<string>"}}}
	d, err := NewDecoder(spec)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	rec := record.Record{
		Partition: 9, Offset: 1 << 40, Timestamp: time.Date(2024, 1, 1, 0, 0, 0, 999, time.UTC),
		Key:   []byte{},
		Value: []byte(`{"tags": ["a", "b", "c"]}`),
		Headers: []record.Header{{Key: "trace", Value: []byte("t1")}, {Key: "nil", Value: nil}, {Key: "bad\xffkey", Value: []byte{}},
			{Key: "trace", Value: []byte("t2")}},
	}
	if !d.Decode(rec, &row) {
		t.Fatal("decode failed")
	}
	v := row.Values
	if !v[0].Valid || len(v[0].Elems) != 3 {
		t.Fatalf("tags %+v", v[0])
	}
	if v[1].Int != 9 || v[2].Int != 1<<40 || v[3].Int != time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() {
		t.Errorf("kafka columns %+v %+v %+v", v[1], v[2], v[3])
	}
	if !v[4].Valid || v[4].Bytes == nil || len(v[4].Bytes) != 0 {
		t.Errorf("an empty key is not a null key: %+v", v[4])
	}
	h := v[5]
	if !h.Valid || len(h.Elems) != 4 {
		t.Fatalf("headers %+v", h)
	}
	wantKeys := []string{"trace", "nil", "bad\uFFFDkey", "trace"}
	for i, e := range h.Elems {
		if !e.Valid || len(e.Elems) != 2 || string(e.Elems[0].Bytes) != wantKeys[i] {
			t.Errorf("header %d = %+v", i, e)
		}
	}
	if h.Elems[1].Elems[1].Valid || !h.Elems[2].Elems[1].Valid || string(h.Elems[3].Elems[1].Bytes) != "t2" {
		t.Errorf("header values %+v", h.Elems)
	}
	if v[6].Valid {
		t.Errorf("error column set: %q", v[6].Bytes)
	}

	// The same Row for a smaller record: nothing of the first may show through.
	if !d.Decode(record.Record{Partition: 9, Offset: 1<<40 + 1, Value: []byte(`{}`)}, &row) {
		t.Fatal("decode failed")
	}
	v = row.Values
	if v[0].Valid || v[4].Valid || !v[5].Valid || len(v[5].Elems) != 0 || v[6].Valid {
		t.Errorf("stale values after reuse: %+v", v)
	}
	if !d.Decode(record.Record{Value: []byte(`{"tags": 1}`)}, &row) && !row.Values[6].Valid {
		t.Error("no error text")
	}
	if !d.Decode(record.Record{Value: []byte(`{"tags": ["x"]}`)}, &row) || row.Values[6].Valid || len(row.Values[0].Elems) != 1 {
		t.Errorf("stale error after reuse: %+v", row.Values)
	}
}

func TestDecodeRaw(t *testing.T) {
	d, err := NewDecoder(tableschema.Spec{Format: tableschema.FormatRaw})
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	if !d.Decode(record.Record{Value: []byte("not json {")}, &row) || string(row.Values[0].Bytes) != "not json {" || !row.Values[0].Valid {
		t.Errorf("raw value %+v", row.Values[0])
	}
	if !d.Decode(record.Record{}, &row) || row.Values[0].Valid || row.Values[len(row.Values)-1].Valid {
		t.Errorf("raw tombstone: %+v", row.Values)
	}
	if len(row.Values) != 1+tableschema.KafkaColumnCount {
		t.Errorf("%d values", len(row.Values))
	}
}

func TestDecodeDuplicateKeysLastWins(t *testing.T) {
	r := decodeJSON(t, allTypes, `{"req": "a", "l": 1, "l": 2, "user": {"id": 5}, "user": {"name": "x"}}`)
	if !r.ok || r.col("l").Int != 2 || r.col("user_id").Int != 5 || string(r.col("user_name").Bytes) != "x" {
		t.Errorf("duplicates: ok=%v l=%d id=%+v name=%q", r.ok, r.col("l").Int, r.col("user_id"), r.col("user_name").Bytes)
	}
	r = decodeJSON(t, allTypes, `{"req": "a", "l": 1, "l": null, "user": null}`)
	if !r.ok || r.col("l").Valid || r.col("user_id").Valid {
		t.Errorf("null after value: %+v", r.col("l"))
	}
}

func TestMessagesNameTypesCanonically(t *testing.T) {
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "a", Type: " list< decimal( 9 , 2 ) > "}}}
	r := decodeJSON(t, spec, `{"a": [1, 0.001]}`)
	if want := `column "a": element 1: 0.001 has more than 2 digits after the point for decimal(9,2)`; r.errText() != want {
		t.Errorf("got %q, want %q", r.errText(), want)
	}
}

func TestNewDecoderRejectsInvalidSpec(t *testing.T) {
	if _, err := NewDecoder(tableschema.Spec{Format: tableschema.FormatAvro}); err == nil {
		t.Fatal("avro accepted")
	}
}

func TestBinaryIsStandardBase64(t *testing.T) {
	raw := []byte{0, 0xff, 0xfe, 'a', 0x80}
	r := decodeJSON(t, tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "b", Type: "binary"}}},
		`{"b": "`+base64.StdEncoding.EncodeToString(raw)+`"}`)
	if !bytes.Equal(r.col("b").Bytes, raw) {
		t.Errorf("binary %x", r.col("b").Bytes)
	}
	if !utf8.ValidString(r.errText()) {
		t.Error("invalid error text")
	}
}

func TestSpecial8MatchesByteLoop(t *testing.T) {
	naive := func(b []byte) bool {
		for _, c := range b {
			if c == '"' || c == '\\' || c < 0x20 {
				return true
			}
		}
		return false
	}
	rng := rand.New(rand.NewPCG(1, 1))
	interesting := []byte{0, 0x1f, 0x20, 0x21, '"', '\\', 0x7f, 0x80, 0xff, 'a', 0x5b, 0x5d}
	for i := 0; i < 200000; i++ {
		var b [8]byte
		for j := range b {
			if rng.IntN(2) == 0 {
				b[j] = interesting[rng.IntN(len(interesting))]
			} else {
				b[j] = byte(rng.IntN(256))
			}
		}
		if got, want := special8(binary.LittleEndian.Uint64(b[:])), naive(b[:]); got != want {
			t.Fatalf("special8(%q) = %v, want %v", b, got, want)
		}
	}
}
