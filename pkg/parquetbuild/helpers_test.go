package parquetbuild

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// testSpec has every column type, lists, nested paths and a required column.
var testSpec = tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
	{Name: "event_id", Type: "uuid"},
	{Name: "user_id", Type: "long", JSONPath: "user.id", Required: true},
	{Name: "user_name", Type: "string", JSONPath: "user.name"},
	{Name: "kind", Type: "string"},
	{Name: "ok", Type: "boolean"},
	{Name: "qty", Type: "int"},
	{Name: "ratio", Type: "float"},
	{Name: "score", Type: "double"},
	{Name: "price", Type: "decimal(9,2)"},
	{Name: "total", Type: "decimal(18,4)"},
	{Name: "huge", Type: "decimal(38,6)"},
	{Name: "day", Type: "date"},
	{Name: "at", Type: "time"},
	{Name: "local_ts", Type: "timestamp"},
	{Name: "ts", Type: "timestamptz"},
	{Name: "blob", Type: "binary"},
	{Name: "tags", Type: "list<string>"},
	{Name: "nums", Type: "list<long>"},
}}

var kinds = []string{"view", "click", "purchase", "signup", "ünïcödé-kind", "a-very-long-kind-name-beyond-sixteen-characters", ""}

// makeRecords returns n records of one partition with deterministic contents: a mix of
// every value shape, nulls, missing keys, long strings, and every badEvery-th record
// broken in some way (0: none broken). Seeded, so another process gets the same records.
func makeRecords(n int, seed uint64, badEvery int) []record.Record {
	rng := rand.New(rand.NewPCG(seed, 42))
	recs := make([]record.Record, 0, n)
	offset := int64(1000)
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		offset += 1 + int64(rng.IntN(2)) // gaps, as after compaction or transactions
		r := record.Record{
			Partition: 7,
			Offset:    offset,
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
		}
		if rng.IntN(4) > 0 {
			r.Key = []byte(fmt.Sprintf("key-%d", rng.IntN(1000)))
		}
		for h := rng.IntN(3); h > 0; h-- {
			var v []byte
			if rng.IntN(4) > 0 {
				v = []byte(fmt.Sprintf("hv%d", rng.IntN(100)))
			}
			r.Headers = append(r.Headers, record.Header{Key: fmt.Sprintf("h%d", h), Value: v})
		}
		switch {
		case badEvery > 0 && i%badEvery == badEvery-1:
			r.Value = badValue(rng)
		default:
			r.Value = goodValue(rng, i)
		}
		recs = append(recs, r)
	}
	return recs
}

func goodValue(rng *rand.Rand, i int) []byte {
	var b strings.Builder
	b.WriteString("{")
	field := func(name, val string) {
		if b.Len() > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %s", name, val)
	}
	maybe := func(name, val string) {
		switch rng.IntN(10) {
		case 0: // missing
		case 1:
			field(name, "null")
		default:
			field(name, val)
		}
	}
	maybe("event_id", fmt.Sprintf(`"%08x-%04x-%04x-%04x-%012x"`, rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<16), rng.IntN(1<<16), rng.Uint64()&(1<<48-1)))
	field("user", fmt.Sprintf(`{"id": %d, "name": %q, "extra": [1, {"x": null}]}`, rng.Int64N(1<<62)-(1<<61), fmt.Sprintf("user-%d-%s", rng.IntN(500), strings.Repeat("x", rng.IntN(30)))))
	maybe("kind", fmt.Sprintf("%q", kinds[rng.IntN(len(kinds))]))
	maybe("ok", []string{"true", "false"}[rng.IntN(2)])
	maybe("qty", fmt.Sprint(rng.Int32N(1<<20)-(1<<19)))
	maybe("ratio", fmt.Sprintf("%g", float32(rng.NormFloat64())))
	maybe("score", fmt.Sprintf("%g", rng.NormFloat64()*1e6))
	maybe("price", fmt.Sprintf(`"%d.%02d"`, rng.IntN(2000000)-1000000, rng.IntN(100)))
	maybe("total", fmt.Sprintf("%d.%04d", rng.Int64N(1<<40)-(1<<39), rng.IntN(10000)))
	maybe("huge", fmt.Sprintf(`"%s%d%018d.%06d"`, []string{"", "-"}[rng.IntN(2)], rng.Int64N(1<<40), rng.Int64N(1e18), rng.IntN(1e6)))
	maybe("day", fmt.Sprintf(`"%s"`, time.Date(1950+rng.IntN(100), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), 0, 0, 0, 0, time.UTC).Format("2006-01-02")))
	maybe("at", fmt.Sprintf(`"%02d:%02d:%02d.%06d"`, rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e6)))
	maybe("local_ts", fmt.Sprintf(`"2024-05-01T%02d:%02d:%02d.%03d"`, rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000)))
	if rng.IntN(2) == 0 {
		maybe("ts", fmt.Sprint(1714521600000+int64(i)*1000+rng.Int64N(1000)))
	} else {
		maybe("ts", fmt.Sprintf(`"2024-05-01T%02d:%02d:%02d.%06d+02:00"`, rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e6)))
	}
	raw := make([]byte, rng.IntN(40))
	for j := range raw {
		raw[j] = byte(rng.IntN(256))
	}
	maybe("blob", fmt.Sprintf("%q", base64.StdEncoding.EncodeToString(raw)))
	tags := []string{}
	for j := rng.IntN(4); j > 0; j-- {
		if rng.IntN(5) == 0 {
			tags = append(tags, "null")
		} else {
			tags = append(tags, fmt.Sprintf("%q", kinds[rng.IntN(len(kinds))]))
		}
	}
	maybe("tags", "["+strings.Join(tags, ", ")+"]")
	nums := []string{}
	for j := rng.IntN(3); j > 0; j-- {
		nums = append(nums, fmt.Sprint(rng.Int64()))
	}
	maybe("nums", "["+strings.Join(nums, ",")+"]")
	field("ignored", `{"deep": [[1, 2], {"a": "b"}], "s": "\u00e9\n"}`)
	b.WriteString("}")
	return []byte(b.String())
}

func badValue(rng *rand.Rand) []byte {
	bad := []string{
		"", // empty
		`{"user": {"id": 1}, "qty": "many"}`,
		`{"user": {"id": 1}, "qty": 1e10}`,
		`{"user": {"id": "x"}}`,
		`{"kind": "no user"}`,
		`{"user": {"id": 1}, "price": 1.234}`,
		`{"user": {"id": 1}`,
		`[1, 2, 3]`,
		"\xff\xfe",
		`{"user": {"id": 1}, "day": "2023-02-30"}`,
	}
	if rng.IntN(len(bad)+1) == len(bad) {
		return nil // tombstone
	}
	return []byte(bad[rng.IntN(len(bad))])
}

// expectedRows decodes recs with a fresh decoder and returns deep copies of the rows.
func expectedRows(t testing.TB, spec tableschema.Spec, recs []record.Record) ([]rowcodec.Row, int64) {
	t.Helper()
	d, err := rowcodec.NewDecoder(spec)
	if err != nil {
		t.Fatal(err)
	}
	var row rowcodec.Row
	var errs int64
	out := make([]rowcodec.Row, len(recs))
	for i, r := range recs {
		if !d.Decode(r, &row) {
			errs++
		}
		out[i] = rowcodec.Row{Values: cloneValues(row.Values)}
	}
	return out, errs
}

func cloneValues(vs []rowcodec.Value) []rowcodec.Value {
	out := make([]rowcodec.Value, len(vs))
	for i, v := range vs {
		out[i] = rowcodec.Value{Valid: v.Valid, Int: v.Int, Float: v.Float, Bytes: bytes.Clone(v.Bytes)}
		if v.Elems != nil {
			out[i].Elems = cloneValues(v.Elems)
		}
		if !v.Valid {
			out[i] = rowcodec.Value{}
		}
	}
	return out
}

// build builds recs into w and returns the stats.
func build(t testing.TB, w io.Writer, spec tableschema.Spec, s Settings, recs []record.Record, chunkRows int) FileStats {
	t.Helper()
	b, err := NewBuilder(w, spec, s)
	if err != nil {
		t.Fatal(err)
	}
	if chunkRows > 0 {
		b.chunkRows = chunkRows
	}
	for _, r := range recs {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.Close()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// smallSettings makes several row groups and many pages out of a few thousand rows.
func smallSettings() Settings {
	s := DefaultSettings()
	s.RowGroupRows = 1000
	s.PageBufferBytes = 8 << 10
	return s
}
