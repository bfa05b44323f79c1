package kafkasrc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/record"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkReadRange reads one partition of ~50 MB of JSON-like values, as a file
// server does to build a file. MB/s counts key and value bytes delivered to fn.
func BenchmarkReadRange(b *testing.B) {
	for _, bc := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"zstd", kgo.ZstdCompression()}} {
		b.Run(bc.name, func(b *testing.B) {
			c := kafkatest.New(b, kafkatest.Brokers(1))
			const topic, n = "bench", 50_000
			c.CreateTopic(topic, 1, nil)
			p := c.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(bc.codec),
				kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(10*time.Millisecond))
			var size int64
			for i := 0; i < n; i += 1000 {
				var rs []*kgo.Record
				for j := i; j < i+1000; j++ {
					v := fmt.Appendf(nil, `{"id":%d,"user":"user-%d","event":"page_view","url":"https://example.com/%s","ts":%d,"tags":["a","b","c"],"payload":"%s"}`,
						j, j%977, strings.Repeat("p", j%64), 1_700_000_000_000+j, strings.Repeat("x", 800+j%200))
					k := fmt.Appendf(nil, "user-%d", j%977)
					size += int64(len(v) + len(k))
					rs = append(rs, &kgo.Record{Key: k, Value: v})
				}
				kafkatest.Produce(b, p, rs...)
			}
			cl, err := kafkasrc.New(c.Addrs())
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				var got int64
				err := cl.ReadRange(context.Background(), topic, 0, 0, n, func(r record.Record) error {
					got += int64(len(r.Key) + len(r.Value))
					return nil
				})
				if err != nil || got != size {
					b.Fatalf("read %d bytes, want %d: %v", got, size, err)
				}
			}
		})
	}
}
