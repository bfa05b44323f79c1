package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/tableschema"
)

// EventSpec is the benchmark table: a typical clickstream event in JSON, the same shape
// as pkg/parquetbuild's own benchmark.
var EventSpec = tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
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

var (
	eventTypes = []string{"page_view", "click", "add_to_cart", "purchase", "search"}
	countries  = []string{"DE", "US", "FR", "BR", "JP", "IN", "GB"}
)

// event returns the key and value of the i-th event of a deterministic stream.
func event(rng *rand.Rand, i int) (key, value []byte) {
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	ts := base.Add(time.Duration(i) * 7 * time.Millisecond)
	v := fmt.Sprintf(`{"event_id":"%08x-%04x-4%03x-8%03x-%012x","type":%q,"user":{"id":%d,"country":%q},`+
		`"session":"s-%016x","url":"https://shop.example.com/products/%d?ref=campaign-%d","amount":"%d.%02d",`+
		`"quantity":%d,"duration_ms":%.3f,"ts":"%s","tags":["%s","v%d"],"agent":"Mozilla/5.0 (X11; Linux x86_64)"}`,
		rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()&(1<<48-1),
		eventTypes[rng.IntN(len(eventTypes))], rng.Int64N(10_000_000), countries[rng.IntN(len(countries))],
		rng.Uint64(), rng.IntN(50_000), rng.IntN(100), rng.IntN(1000), rng.IntN(100), 1+rng.IntN(5),
		rng.ExpFloat64()*800, ts.Format(time.RFC3339Nano), eventTypes[rng.IntN(len(eventTypes))], rng.IntN(10))
	return []byte("user-" + strconv.Itoa(rng.IntN(1e6))), []byte(v)
}

// Sizes are the key+value bytes of every record of a topic, by partition and offset:
// what Mink's indexer counts as bytes indexed.
type Sizes [][]int32

// Bytes is the total of offsets [from, to) of partition p.
func (s Sizes) Bytes(p int32, from, to int64) int64 {
	var n int64
	for _, b := range s[p][from:to] {
		n += int64(b)
	}
	return n
}

// Total is every record's bytes.
func (s Sizes) Total() (records, bytes int64) {
	for p := range s {
		records += int64(len(s[p]))
		bytes += s.Bytes(int32(p), 0, int64(len(s[p])))
	}
	return
}

// Produce writes perPartition events to each of partitions partitions of topic (which
// must be new, so offsets start at 0) and returns their sizes. Compression is the
// producer's batch codec: "none", "snappy", "lz4" or "zstd".
func (e *Env) Produce(ctx context.Context, topic string, partitions int32, perPartition int, compression string, seed uint64) (Sizes, error) {
	return e.ProduceWith(ctx, topic, partitions, perPartition, compression, seed, func(rng *rand.Rand, i int) ([]byte, []byte, error) {
		k, v := event(rng, i)
		return k, v, nil
	})
}

// ProduceWith is Produce with the records made by gen: the key and value of the i-th
// record of a partition, from that partition's deterministic rng.
func (e *Env) ProduceWith(ctx context.Context, topic string, partitions int32, perPartition int, compression string, seed uint64,
	gen func(rng *rand.Rand, i int) (key, value []byte, err error)) (Sizes, error) {
	codec, err := codecOf(compression)
	if err != nil {
		return nil, err
	}
	cl, err := e.KgoClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	sizes := make(Sizes, partitions)
	var (
		mu       sync.Mutex
		firstErr error
	)
	for p := range partitions {
		rng := rand.New(rand.NewPCG(seed, uint64(p)))
		sizes[p] = make([]int32, perPartition)
		for i := range perPartition {
			k, v, err := gen(rng, i)
			if err != nil {
				return nil, fmt.Errorf("bench: record %d of %s/%d: %w", i, topic, p, err)
			}
			sizes[p][i] = int32(len(k) + len(v))
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: k, Value: v}, func(r *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	if firstErr != nil {
		return nil, fmt.Errorf("bench: produce to %s: %w", topic, firstErr)
	}
	// Offsets must be 0..n-1 in production order for Sizes to describe them.
	kc, err := e.Kafka()
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	offs, err := kc.Offsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	for _, o := range offs {
		if o.LogStart != 0 || o.HighWatermark != int64(perPartition) {
			return nil, fmt.Errorf("bench: topic %s partition %d holds [%d, %d), want [0, %d): not a new topic?",
				topic, o.Partition, o.LogStart, o.HighWatermark, perPartition)
		}
	}
	return sizes, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func codecOf(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("bench: unknown compression %q (none, snappy, lz4, zstd)", name)
}
