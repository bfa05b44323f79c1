package parquetbuild

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// eventSpec is a typical clickstream table.
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

const benchEvents = 100_000

var benchData = sync.OnceValues(func() ([]record.Record, int64) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{"page_view", "click", "add_to_cart", "purchase", "search"}
	countries := []string{"DE", "US", "FR", "BR", "JP", "IN", "GB"}
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]record.Record, benchEvents)
	var total int64
	for i := range recs {
		ts := base.Add(time.Duration(i) * 7 * time.Millisecond)
		v := fmt.Sprintf(`{"event_id":"%08x-%04x-4%03x-8%03x-%012x","type":%q,"user":{"id":%d,"country":%q},`+
			`"session":"s-%016x","url":"https://shop.example.com/products/%d?ref=campaign-%d","amount":"%d.%02d",`+
			`"quantity":%d,"duration_ms":%.3f,"ts":"%s","tags":["%s","v%d"],"agent":"Mozilla/5.0 (X11; Linux x86_64)"}`,
			rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()&(1<<48-1),
			types[rng.IntN(len(types))], rng.Int64N(10_000_000), countries[rng.IntN(len(countries))],
			rng.Uint64(), rng.IntN(50_000), rng.IntN(100), rng.IntN(1000), rng.IntN(100), 1+rng.IntN(5),
			rng.ExpFloat64()*800, ts.Format(time.RFC3339Nano), types[rng.IntN(len(types))], rng.IntN(10))
		recs[i] = record.Record{Partition: 0, Offset: int64(i), Timestamp: ts, Key: []byte(fmt.Sprintf("user-%d", rng.IntN(1e6))), Value: []byte(v)}
		total += int64(len(v))
	}
	return recs, total
})

// BenchmarkBuild measures building a file of 100k JSON events into io.Discard, as the
// indexer does to measure a range; MB/s is of JSON input.
func BenchmarkBuild(b *testing.B) {
	recs, total := benchData()
	b.SetBytes(total)
	b.ReportAllocs()
	var size int64
	for b.Loop() {
		bl, err := NewBuilder(io.Discard, eventSpec, DefaultSettings())
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := bl.Add(r); err != nil {
				b.Fatal(err)
			}
		}
		st, err := bl.Close()
		if err != nil || st.DecodeErrors != 0 {
			b.Fatal(err, st.DecodeErrors)
		}
		size = st.Size
	}
	b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(size)/float64(total), "file/json")
}

// BenchmarkDecodeOnly is the baseline: decoding the same events without writing.
func BenchmarkDecodeOnly(b *testing.B) {
	recs, total := benchData()
	d, err := rowcodec.NewDecoder(eventSpec)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(total)
	b.ReportAllocs()
	var row rowcodec.Row
	for b.Loop() {
		for _, r := range recs {
			if !d.Decode(r, &row) {
				b.Fatal(string(row.Values[len(row.Values)-1].Bytes))
			}
		}
	}
	b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
