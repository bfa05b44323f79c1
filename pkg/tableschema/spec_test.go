package tableschema

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestValidateAccepts(t *testing.T) {
	specs := []Spec{
		{Format: FormatRaw},
		{Format: FormatAvro, Value: &Decoding{Format: FormatAvro, Subject: "orders-value", Mode: ModePrefix}},
		{Format: FormatProtobuf, Value: &Decoding{Format: FormatProtobuf, Subject: "o", Mode: ModeLatest, Message: "acme.v1.Order"}},
		{Format: FormatJSON, Columns: []Column{{Name: "id", Type: "long"}}, Key: &Decoding{Format: FormatJSONSchema, Subject: "o-key", Mode: ModePrefix}},
		{Format: FormatJSON, Columns: []Column{{Name: "id", Type: "long", Required: true}}},
		{Format: FormatJSON, Columns: []Column{
			{Name: "b", Type: "boolean"}, {Name: "i", Type: "int"}, {Name: "l", Type: "long"},
			{Name: "f", Type: "float"}, {Name: "d", Type: "double"}, {Name: "dec", Type: "decimal(38, 10)"},
			{Name: "dt", Type: "date"}, {Name: "tm", Type: "time"}, {Name: "ts", Type: "timestamp"},
			{Name: "tstz", Type: "timestamptz"}, {Name: "s", Type: "string"}, {Name: "u", Type: "uuid"},
			{Name: "bin", Type: "binary"}, {Name: "tags", Type: "list<string>"}, {Name: "amounts", Type: "list< decimal(9,2) >"},
			{Name: "user_id", Type: "long", JSONPath: "user.id"}, {Name: "user_name", Type: "string", JSONPath: "user.name"},
			{Name: "odd", Type: "string", JSONPath: "@weird-key.x y"},
		}},
	}
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", s, err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	col := func(cs ...Column) Spec { return Spec{Format: FormatJSON, Columns: cs} }
	cases := []struct {
		spec Spec
		want string // the whole error message
	}{
		{Spec{}, "format: required (json, raw, avro, protobuf or json_schema)"},
		{Spec{Format: "xml"}, `format: unknown format "xml" (want json, raw, avro, protobuf or json_schema)`},
		{Spec{Format: FormatAvro}, "value_subject: format avro needs a registry subject"},
		{Spec{Format: FormatProtobuf, Columns: []Column{{Name: "x", Type: "long"}}}, "columns: format protobuf takes its columns from the schema registry; declare none"},
		{Spec{Format: FormatAvro, Value: &Decoding{Format: FormatProtobuf, Subject: "s", Mode: ModePrefix}}, "format: value decoding format protobuf differs from the table format avro"},
		{Spec{Format: FormatAvro, Value: &Decoding{Format: FormatAvro, Mode: ModePrefix}}, "value_subject: empty"},
		{Spec{Format: FormatAvro, Value: &Decoding{Format: FormatAvro, Subject: "s", Mode: "newest"}}, `value_schema_mode: unknown schema mode "newest" (want prefix or latest)`},
		{Spec{Format: FormatAvro, Value: &Decoding{Format: FormatAvro, Subject: "s", Mode: ModePrefix, Message: "a.B"}}, "message: only Protobuf schemas have messages to pick, not avro"},
		{Spec{Format: FormatProtobuf, Value: &Decoding{Format: FormatProtobuf, Subject: "s", Mode: ModePrefix, Message: "a b"}}, `message: "a b" is not a fully qualified message name (acme.orders.v1.Order)`},
		{Spec{Format: FormatRaw, Value: &Decoding{Format: FormatAvro, Subject: "s", Mode: ModePrefix}}, "value_subject: format raw reads no registry subject"},
		{Spec{Format: FormatRaw, Key: &Decoding{Format: FormatJSON, Subject: "s", Mode: ModePrefix}}, `key_format: key format "json" is not a registry format (want avro, protobuf or json_schema)`},
		{Spec{Format: FormatRaw, Key: &Decoding{Format: FormatAvro, Subject: "k\n", Mode: ModePrefix}}, `key_subject: "k\n" is not a subject name`},
		{Spec{Format: FormatRaw, Key: &Decoding{Format: FormatAvro, Subject: "k", Mode: "x"}}, `key_schema_mode: unknown schema mode "x" (want prefix or latest)`},
		{Spec{Format: FormatJSON}, "columns: format json needs at least one column, or none at all to infer them from the records"},
		{Spec{Format: FormatRaw, Columns: []Column{{Name: "x", Type: "string"}}}, `columns: format raw takes no declared columns (its one user column is "value")`},
		{col(Column{Name: "id", Type: "long"}, Column{Name: "msg", Type: "strng"}), `columns[1] ("msg"): unknown type "strng" (did you mean string?); the types are boolean, int, long, float, double, decimal(P,S), date, time, timestamp, timestamptz, string, uuid, binary, or list<T> of one`},
		{col(Column{Name: "", Type: "long"}), "columns[0]: name is empty"},
		{col(Column{Name: "a b", Type: "long"}), `columns[0] ("a b"): name must match [A-Za-z_][A-Za-z0-9_]* (use json_path to read other keys)`},
		{col(Column{Name: "1a", Type: "long"}), `columns[0] ("1a"): name must match [A-Za-z_][A-Za-z0-9_]* (use json_path to read other keys)`},
		{col(Column{Name: strings.Repeat("a", 129), Type: "long"}), `columns[0] ("` + strings.Repeat("a", 129) + `"): name is longer than 128 bytes`},
		{col(Column{Name: "_kafka_offset", Type: "long"}), `columns[0] ("_kafka_offset"): names starting with _kafka_ are reserved`},
		{col(Column{Name: "_MINK_x", Type: "long"}), `columns[0] ("_MINK_x"): names starting with _mink_ are reserved`},
		{col(Column{Name: "id", Type: "long"}, Column{Name: "ID", Type: "int", JSONPath: "other"}), `columns[1] ("ID"): duplicate name: columns[0] ("id") has the same name ignoring case`},
		{col(Column{Name: "d", Type: "decimal(0,0)"}), `columns[0] ("d"): type "decimal(0,0)": decimal precision must be 1..38`},
		{col(Column{Name: "d", Type: "decimal(39,2)"}), `columns[0] ("d"): type "decimal(39,2)": decimal precision must be 1..38`},
		{col(Column{Name: "d", Type: "decimal(5,6)"}), `columns[0] ("d"): type "decimal(5,6)": decimal scale must be 0..precision (5)`},
		{col(Column{Name: "d", Type: "decimal(5)"}), `columns[0] ("d"): type "decimal(5)": want decimal(P,S)`},
		{col(Column{Name: "d", Type: "decimal(99999999999999999999,1)"}), `columns[0] ("d"): type "decimal(99999999999999999999,1)": decimal precision must be 1..38`},
		{col(Column{Name: "l", Type: "list<list<int>>"}), `columns[0] ("l"): type "list<list<int>>": lists of lists are not supported`},
		{col(Column{Name: "l", Type: "list<int"}), `columns[0] ("l"): type "list<int": list is missing its closing >`},
		{col(Column{Name: "l", Type: "list<nope>"}), `columns[0] ("l"): type "list<nope>": list element: unknown type "nope"; the types are boolean, int, long, float, double, decimal(P,S), date, time, timestamp, timestamptz, string, uuid, binary, or list<T> of one`},
		{col(Column{Name: "l", Type: "LONG"}), `columns[0] ("l"): unknown type "LONG" (did you mean long?); the types are boolean, int, long, float, double, decimal(P,S), date, time, timestamp, timestamptz, string, uuid, binary, or list<T> of one`},
		{col(Column{Name: "p", Type: "long", JSONPath: "a..b"}), `columns[0] ("p"): json_path "a..b": empty key (want dotted keys such as user.id)`},
		{col(Column{Name: "p", Type: "long", JSONPath: "a\x01"}), `columns[0] ("p"): json_path "a\x01": control character in key "a\x01"`},
		{col(Column{Name: "p", Type: "long", JSONPath: "a\xff"}), `columns[0] ("p"): json_path "a\xff": not valid UTF-8`},
		{col(Column{Name: "a", Type: "long"}, Column{Name: "b", Type: "long", JSONPath: "a"}), `columns[1] ("b"): json path "a" is already read by columns[0] ("a")`},
		{col(Column{Name: "u", Type: "string", JSONPath: "user"}, Column{Name: "b", Type: "long", JSONPath: "user.id"}), `columns[1] ("b"): json path "user.id" lies inside "user", which columns[0] ("u") reads`},
		{col(Column{Name: "b", Type: "long", JSONPath: "user.id"}, Column{Name: "user", Type: "string"}), `columns[1] ("user"): json path "user" contains "user.id", which columns[0] ("b") reads`},
	}
	for _, c := range cases {
		err := c.spec.Validate()
		if err == nil {
			t.Errorf("Validate(%+v) = nil, want %q", c.spec, c.want)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("Validate(%+v)\n got %q\nwant %q", c.spec, err.Error(), c.want)
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field == "" || fe.Reason == "" {
			t.Errorf("Validate(%+v) = %T, want *FieldError with field and reason", c.spec, err)
		}
	}
}

func TestSpecJSONRoundTrip(t *testing.T) {
	specs := []Spec{
		{Format: FormatRaw},
		{Format: FormatJSON, Columns: []Column{
			{Name: "id", Type: "long", Required: true},
			{Name: "user_name", Type: "string", JSONPath: "user.name"},
			{Name: "tags", Type: "list<string>"},
		}},
	}
	for _, s := range specs {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var got Spec
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("round trip of %s: got %+v, want %+v", b, got, s)
		}
	}

	// The stored form is part of the Postgres state: freeze it.
	b, _ := json.Marshal(specs[1])
	want := `{"format":"json","columns":[{"name":"id","type":"long","required":true},{"name":"user_name","type":"string","json_path":"user.name"},{"name":"tags","type":"list\u003cstring\u003e"}]}`
	if string(b) != want {
		t.Errorf("stored form\n got %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(specs[0])
	if string(b) != `{"format":"raw"}` {
		t.Errorf("raw stored form = %s", b)
	}

	// jsonb may hand back reordered keys, whitespace and an empty list.
	var got Spec
	if err := json.Unmarshal([]byte(` { "columns" : [ ], "format" : "raw" } `), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, specs[0]) {
		t.Errorf("got %+v, want %+v", got, specs[0])
	}
	if err := json.Unmarshal([]byte(`{"format": 3}`), &got); err == nil {
		t.Error("format as a number was accepted")
	}
}

func TestDecimalBytes(t *testing.T) {
	// Iceberg spec / Java TypeUtil.decimalRequiredBytes.
	want := map[int]int{1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3, 7: 4, 9: 4, 10: 5, 11: 5, 12: 6, 14: 6,
		15: 7, 16: 7, 17: 8, 18: 8, 19: 9, 21: 9, 22: 10, 23: 10, 24: 11, 26: 11, 27: 12, 28: 12,
		29: 13, 31: 13, 32: 14, 33: 14, 34: 15, 35: 15, 36: 16, 38: 16}
	for p, n := range want {
		if got := DecimalBytes(p); got != n {
			t.Errorf("DecimalBytes(%d) = %d, want %d", p, got, n)
		}
	}
}

// TestParseJSONPath: the one reader of json_path, at CreateTable and AlterTable and when
// records decode: keys joined by dots, JSON's odd keys kept, JSONPath refused.
func TestParseJSONPath(t *testing.T) {
	for p, want := range map[string][]string{
		"user.id": {"user", "id"}, "_id.$oid": {"_id", "$oid"}, "@timestamp": {"@timestamp"},
		"first name": {"first name"}, "price(usd)": {"price(usd)"}, "$$": {"$$"}, "a.b.c.d": {"a", "b", "c", "d"},
	} {
		got, err := ParseJSONPath(p)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseJSONPath(%q) = %q, %v; want %q", p, got, err, want)
		}
		if c := (Column{Name: "c", JSONPath: p}); !slices.Equal(c.Path(), want) {
			t.Errorf("Column.Path of %q = %q", p, c.Path())
		}
	}
	for p, why := range map[string]string{
		"$$[[[((": "holds '['", "$.user.id": `leave out the leading "$"`, "$": "not JSONPath", "$['a']": "not JSONPath",
		"items[0].id": "holds '['", "user.*": "holds '*'", "a..b": "empty key", ".a": "empty key", "a.": "empty key",
		" user.id": "begins or ends with a space", "a\x00": "control character", "": "empty key",
		strings.Repeat("k", 1025): "longer than 1024",
	} {
		if _, err := ParseJSONPath(p); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseJSONPath(%q): %v, want %q", p, err, why)
		}
	}
	// A path stored before these rules reads as it did.
	if c := (Column{Name: "c", JSONPath: "items[0].id"}); !slices.Equal(c.Path(), []string{"items[0]", "id"}) {
		t.Errorf("a stored path: %q", c.Path())
	}
}

// TestUnknownTypeSuggests: a type another system names differently (SQL, Avro, Go), in
// another case or with a typo, is refused with every type listed and the near ones named.
func TestUnknownTypeSuggests(t *testing.T) {
	col := func(cs ...Column) Spec { return Spec{Format: FormatJSON, Columns: cs} }
	for typ, near := range map[string]string{
		"integer": "int or long", "INTEGER": "int or long", "varchar": "string", "VARCHAR(20)": "string", "text": "string",
		"bigint": "long", "int64": "long", "bool": "boolean", "float64": "double", "datetime": "timestamp or timestamptz",
		"bytes": "binary", "strng": "string", "Boolean": "boolean", "timestmp": "timestamp", "numeric(10,2)": "decimal(P,S) or double",
		"list<integer>": "int or long",
	} {
		err := col(Column{Name: "c", Type: typ}).Validate()
		if err == nil {
			t.Errorf("%q: accepted", typ)
			continue
		}
		for _, want := range []string{"(did you mean " + near + "?)", "the types are boolean, int, long,", "binary, or list<T>"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %q does not say %q", typ, err, want)
			}
		}
	}
	if err := col(Column{Name: "c", Type: "geometry"}).Validate(); err == nil || strings.Contains(err.Error(), "did you mean") ||
		!strings.Contains(err.Error(), "the types are") {
		t.Errorf("geometry: %v; want the types listed and nothing suggested", err)
	}
}
