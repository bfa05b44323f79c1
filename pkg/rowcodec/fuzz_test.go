package rowcodec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tableschema"
)

// FuzzDecode checks, for any value bytes, that decoding never panics and always yields
// exactly one well-formed row, that our notion of valid JSON is encoding/json's, and that
// values that decode agree with encoding/json.
func FuzzDecode(f *testing.F) {
	seeds := []string{
		`{"b": true, "i": 1, "l": 9007199254740993, "f": 1.5, "d": 2e-3, "dec": "1.25", "big": -1,
		 "mid": 1.5, "dt": "2024-02-29", "tm": "01:02:03", "ts": 1700000000000, "tz": "2024-01-01T00:00:00Z",
		 "s": "x\u00e9\ud83d\ude00", "u": "123e4567-e89b-12d3-a456-426614174000", "bin": "AAE=", "tags": ["a", null],
		 "nums": [1, -2], "user": {"id": 7, "name": "n"}, "req": "r"}`,
		`{"req": "r", "l": 1e3, "dec": 12e-2, "user": null}`,
		`{"req": "\ud800", "s": "\u0000"}`,
		`{"l": 1.5}`,
		`[1, {"a": [true, false, null]}]`,
		`{"req": "r"`,
		`{"a": 1,}`,
		"{\"req\": \"\xff\"}",
		``,
		`null`,
		`{"req": "r", "l": -0.0e-0, "i": -2147483648}`,
		strings.Repeat(`{"a":`, 50) + "1" + strings.Repeat("}", 50),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	d, err := NewDecoder(allTypes)
	if err != nil {
		f.Fatal(err)
	}
	nUser := len(allTypes.Columns)
	var row Row
	f.Fuzz(func(t *testing.T, value []byte) {
		rec := record.Record{Partition: 1, Offset: 5, Timestamp: time.UnixMilli(99), Value: value}
		ok := d.Decode(rec, &row)

		if len(row.Values) != nUser+tableschema.KafkaColumnCount {
			t.Fatalf("%d values", len(row.Values))
		}
		errV := row.Values[len(row.Values)-1]
		if ok == errV.Valid {
			t.Fatalf("ok=%v but error column valid=%v (%q)", ok, errV.Valid, errV.Bytes)
		}
		k := row.Values[nUser:]
		if k[0].Int != 1 || k[1].Int != 5 || k[2].Int != 99000 || k[3].Valid || !k[4].Valid {
			t.Fatalf("kafka columns %+v", k)
		}
		msg := ""
		if errV.Valid {
			msg = string(errV.Bytes)
		}
		if !ok {
			if msg == "" || !utf8.ValidString(msg) {
				t.Fatalf("bad error text %q", msg)
			}
			for i := 0; i < nUser; i++ {
				if row.Values[i].Valid {
					t.Fatalf("error row with user column %d set", i)
				}
			}
		}

		syntaxErr := strings.HasPrefix(msg, "malformed JSON") || strings.HasPrefix(msg, "JSON nested deeper")
		if valid := json.Valid(value); valid == strings.HasPrefix(msg, "malformed JSON") {
			t.Fatalf("json.Valid=%v but error %q", valid, msg)
		}
		if !ok && !syntaxErr && !json.Valid(value) {
			t.Fatalf("invalid JSON reported as %q", msg)
		}

		if ok {
			checkAgainstStdlib(t, value, row)
		}

		// Same input, fresh row: same result.
		var again Row
		ok2 := d.Decode(rec, &again)
		if ok2 != ok || dump(again) != dump(row) {
			t.Fatalf("decoding is not deterministic:\n%s\n%s", dump(row), dump(again))
		}
	})
}

// checkAgainstStdlib compares a few decoded columns with encoding/json's reading.
func checkAgainstStdlib(t *testing.T, value []byte, row Row) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("we decoded what encoding/json rejects: %v", err)
	}
	idx := map[string]int{}
	for i, c := range allTypes.Columns {
		idx[c.Name] = i
	}
	if s, isStr := m["s"].(string); isStr {
		if v := row.Values[idx["s"]]; !v.Valid || string(v.Bytes) != s {
			t.Fatalf("s: ours %q, encoding/json %q", v.Bytes, s)
		}
	}
	if n, isNum := m["l"].(json.Number); isNum {
		if i, err := n.Int64(); err == nil {
			if v := row.Values[idx["l"]]; !v.Valid || v.Int != i {
				t.Fatalf("l: ours %d, encoding/json %d", v.Int, i)
			}
		}
	}
	if b, isBool := m["b"].(bool); isBool {
		if v := row.Values[idx["b"]]; !v.Valid || (v.Int == 1) != b {
			t.Fatalf("b: ours %d, encoding/json %v", v.Int, b)
		}
	}
	if v := row.Values[idx["u"]]; v.Valid && len(v.Bytes) != 16 {
		t.Fatalf("uuid of %d bytes", len(v.Bytes))
	}
	if v := row.Values[idx["big"]]; v.Valid && len(v.Bytes) != 16 {
		t.Fatalf("decimal(38,0) of %d bytes", len(v.Bytes))
	}
	for _, name := range []string{"s", "user_name", "req"} {
		if v := row.Values[idx[name]]; v.Valid && !utf8.Valid(v.Bytes) {
			t.Fatalf("%s: invalid UTF-8 stored", name)
		}
	}
}

func dump(r Row) string {
	var b strings.Builder
	for _, v := range r.Values {
		dumpValue(&b, v)
		b.WriteByte('|')
	}
	return b.String()
}

func dumpValue(b *strings.Builder, v Value) {
	if !v.Valid {
		b.WriteString("null")
		return
	}
	fmt.Fprintf(b, "%d/%v/%x", v.Int, v.Float, v.Bytes)
	if len(v.Elems) > 0 { // an empty list may or may not reuse memory: same value
		b.WriteString("[")
		for _, e := range v.Elems {
			dumpValue(b, e)
			b.WriteString(",")
		}
		b.WriteString("]")
	}
}
