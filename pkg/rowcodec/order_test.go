package rowcodec

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/minkhq/mink/pkg/record"
)

// Values of allTypes' columns as JSON text, good and bad, for records drawn below.
var columnValues = map[string][]string{
	"b":    {`true`, `false`, `null`, `1`, `"x"`},
	"i":    {`1`, `-2147483648`, `2147483648`, `1.5`, `"1"`, `1e3`},
	"l":    {`9007199254740993`, `1e3`, `-0`, `1.5`, `[1]`},
	"f":    {`1.5`, `1e39`, `"a"`, `-0.0`},
	"d":    {`-2.25e-3`, `1e400`, `{}`},
	"dec":  {`"-123.4"`, `12.345`, `"abc"`, `1e20`, `0.1`},
	"big":  {`-99999999999999999999999999999999999999`, `"1e38"`, `1`},
	"mid":  {`123456789012345678.9`, `"0.01"`, `1e-3`},
	"dt":   {`"1969-12-31"`, `"2023-02-29"`, `"2024-1-1"`},
	"tm":   {`"13:45:30.1234567"`, `"25:00:00"`, `"00:00:00"`},
	"ts":   {`"2024-01-02T03:04:05.123456789"`, `1700000000000`, `"2024-01-02T03:04:05Z"`, `"2024-01-02 03:04:05"`, `"2024-01-02T03:04:05.5+02:00"`},
	"tz":   {`"2024-01-02T05:04:05.5+02:00"`, `"2024-01-02T05:04:05"`, `"x"`, `"2024-02-30T00:00:00Z"`, `"0000-01-01T00:00:00Z"`},
	"s":    {`"h\u00e9"`, `"\ud800"`, `"a\"b"`, `7`, `"plain"`},
	"u":    {`"123E4567-e89b-12d3-a456-426614174000"`, `"zzz"`, `"123e4567-e89b-12d3-a456-42661417400g"`},
	"bin":  {`"aGVsbG8="`, `"!!"`, `""`},
	"tags": {`["a", null]`, `[]`, `"a"`, `[1]`},
	"nums": {`[1, -2]`, `[1.5]`, `null`},
	"req":  {`"here"`, `null`, `"r"`},
	"zz":   {`{"a": [1, 2, {"b": null}]}`, `"x"`}, // no column reads it
}

var userFields = map[string][]string{"id": {`7`, `1e3`, `"7"`}, "name": {`"bob"`, `null`, `1`}, "x": {`[1]`}}

// drawObject draws a JSON object of some of fields' keys, in some order, and the same
// object with its keys in canonical order (want, by the order of keys).
func drawObject(t *rapid.T, label string, fields map[string][]string, keys []string, nested func() (string, string)) (got, canonical string) {
	picked := map[string]string{}
	var order []string
	for _, k := range keys {
		if rapid.Bool().Draw(t, label+"has "+k) {
			v := ""
			if k == "user" {
				v, _ = nested()
			} else {
				v = rapid.SampledFrom(fields[k]).Draw(t, label+k)
			}
			picked[k] = v
			order = append(order, k)
		}
	}
	members := func(ks []string) string {
		var b strings.Builder
		b.WriteString("{")
		for i, k := range ks {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"` + k + `":` + picked[k])
		}
		b.WriteString("}")
		return b.String()
	}
	shuffled := rapid.Permutation(order).Draw(t, label+"order")
	return members(shuffled), members(order)
}

// The decoder keeps no state from one record to the next that changes a row: the key it
// expects next, its scratch memory and its slices give the same row and the same error
// text as a fresh decoder, and a valid record's row does not depend on its key order.
func TestDecodeDependsOnTheRecordOnly(t *testing.T) {
	var keys []string
	for _, c := range allTypes.Columns {
		if c.JSONPath == "" {
			keys = append(keys, c.Name)
		}
	}
	keys = append(keys, "user", "zz")
	shared, err := NewDecoder(allTypes)
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		for i := range rapid.IntRange(1, 8).Draw(t, "records") {
			user := func() (string, string) {
				if v := rapid.IntRange(0, 4).Draw(t, "user kind"); v == 0 {
					return "null", "null"
				} else if v == 1 {
					return "5", "5"
				}
				return drawObject(t, "user.", userFields, []string{"id", "name", "x"}, nil)
			}
			value, canonical := drawObject(t, "", columnValues, keys, user)
			if rapid.IntRange(0, 9).Draw(t, "truncate") == 0 {
				value = value[:rapid.IntRange(0, len(value)-1).Draw(t, "at")]
			}
			rec := record.Record{Partition: 1, Offset: int64(i), Timestamp: time.UnixMilli(5), Value: []byte(value)}
			var sharedRow, freshRow Row
			ok := shared.Decode(rec, &sharedRow)
			fresh, err := NewDecoder(allTypes)
			if err != nil {
				t.Fatal(err)
			}
			okFresh := fresh.Decode(rec, &freshRow)
			// A row is valid until its decoder's next Decode: dump it before.
			want := dump(freshRow)
			if got := dump(sharedRow); ok != okFresh || got != want {
				t.Fatalf("%s: after other records %v %s, fresh %v %s", value, ok, got, okFresh, want)
			}
			if !ok || value == canonical {
				continue
			}
			var inOrder Row
			rec.Value = []byte(canonical)
			if !fresh.Decode(rec, &inOrder) || dump(inOrder) != want {
				t.Fatalf("%s: %s\nin column order %s: %s", value, want, canonical, dump(inOrder))
			}
		}
	})
}
