package rowcodec

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tableschema"
)

// eventSpec is the benchmark harness's JSON table (bench.EventSpec): a clickstream event
// with a nested object, a numeric string for a decimal, an RFC 3339 timestamp, a list and
// a key no column reads.
var eventSpec = tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
	{Name: "event_id", Type: "uuid", Required: true},
	{Name: "event_type", Type: "string", JSONPath: "type"},
	{Name: "user_id", Type: "long", JSONPath: "user.id"},
	{Name: "country", Type: "string", JSONPath: "user.country"},
	{Name: "session_id", Type: "string", JSONPath: "session"},
	{Name: "url", Type: "string"},
	{Name: "amount", Type: "decimal(12,2)"},
	{Name: "quantity", Type: "int"},
	{Name: "duration_ms", Type: "double"},
	{Name: "ts", Type: "timestamptz"},
	{Name: "tags", Type: "list<string>"},
}}

// eventRecords are n of the harness's events (bench/data.go's shape).
func eventRecords(n int) []record.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{"page_view", "click", "add_to_cart", "purchase", "search"}
	countries := []string{"DE", "US", "FR", "BR", "JP", "IN", "GB"}
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]record.Record, n)
	for i := range recs {
		ts := base.Add(time.Duration(i) * 7 * time.Millisecond)
		v := fmt.Sprintf(`{"event_id":"%08x-%04x-4%03x-8%03x-%012x","type":%q,"user":{"id":%d,"country":%q},`+
			`"session":"s-%016x","url":"https://shop.example.com/products/%d?ref=campaign-%d","amount":"%d.%02d",`+
			`"quantity":%d,"duration_ms":%.3f,"ts":"%s","tags":["%s","v%d"],"agent":"Mozilla/5.0 (X11; Linux x86_64)"}`,
			rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()&(1<<48-1),
			types[rng.IntN(len(types))], rng.Int64N(10_000_000), countries[rng.IntN(len(countries))],
			rng.Uint64(), rng.IntN(50_000), rng.IntN(100), rng.IntN(1000), rng.IntN(100), 1+rng.IntN(5),
			rng.ExpFloat64()*800, ts.Format(time.RFC3339Nano), types[rng.IntN(len(types))], rng.IntN(10))
		recs[i] = record.Record{Offset: int64(i), Timestamp: ts, Key: fmt.Appendf(nil, "user-%d", rng.IntN(1e6)), Value: []byte(v)}
	}
	return recs
}

// BenchmarkDecodeEvent decodes the harness's events, one op per record: the decoder
// alone, without the Parquet encode (see bench's BenchmarkDecoders for that).
func BenchmarkDecodeEvent(b *testing.B) {
	recs := eventRecords(4096)
	var size int64
	for _, r := range recs {
		size += int64(len(r.Value))
	}
	d, err := NewDecoder(eventSpec)
	if err != nil {
		b.Fatal(err)
	}
	var row Row
	b.SetBytes(size / int64(len(recs)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if !d.Decode(recs[i], &row) {
			b.Fatal(string(row.Values[len(row.Values)-1].Bytes))
		}
		if i++; i == len(recs) {
			i = 0
		}
	}
}

// BenchmarkDecodeAllTypes decodes one record with every column type.
func BenchmarkDecodeAllTypes(b *testing.B) {
	value := []byte(`{"b": true, "i": -2147483648, "l": 9007199254740993, "f": 1.5, "d": -2.25e-3,
		"dec": "-123.4", "big": -99999999999999999999999999999999999999, "mid": 123456789012345678.9,
		"dt": "1969-12-31", "tm": "13:45:30.1234567", "ts": "2024-01-02T03:04:05.123456789",
		"tz": "2024-01-02T05:04:05.5+02:00", "s": "h\u00e9\"llo\ud83d\ude00\n", "u": "123E4567-e89b-12d3-a456-426614174000",
		"bin": "aGVsbG8=", "tags": ["a", null, ""], "nums": [], "user": {"name": "bob", "id": 1e3, "x": [1]},
		"req": "here", "unknown": {"deep": [1, 2, {"a": null}]}}`)
	d, err := NewDecoder(allTypes)
	if err != nil {
		b.Fatal(err)
	}
	r := record.Record{Partition: 3, Offset: 42, Timestamp: time.UnixMilli(1700000000123), Value: value}
	var row Row
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if !d.Decode(r, &row) {
			b.Fatal(string(row.Values[len(row.Values)-1].Bytes))
		}
	}
}
