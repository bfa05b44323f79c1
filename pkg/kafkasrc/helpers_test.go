package kafkasrc_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/record"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// Every test closes what it starts; anything still running afterwards is a leak.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// base is when test records are stamped: recent, since brokers expire old records
// (retention.ms defaults to a week) whenever retention runs, as Compact makes it.
var base = time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)

func newClient(t testing.TB, c *kafkatest.Cluster, opts ...kafkasrc.Option) *kafkasrc.Client {
	t.Helper()
	cl, err := kafkasrc.New(c.Addrs(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// producer writes with an explicit partition and a fixed codec.
func producer(c *kafkatest.Cluster, opts ...kgo.Opt) *kgo.Client {
	return c.Client(append([]kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond),
	}, opts...)...)
}

// variedRecord makes record i with every shape a row can have: nil and empty keys,
// tombstones and empty values, no headers, repeated header keys in a given order,
// nil and empty header values, and an explicit millisecond timestamp.
func variedRecord(topic string, partition int32, i int) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: partition, Timestamp: base.Add(time.Duration(i) * 37 * time.Millisecond)}
	switch i % 7 {
	case 0:
		r.Key = nil
	case 1:
		r.Key = []byte{}
	default:
		r.Key = fmt.Appendf(nil, "key-%d", i%50)
	}
	switch i % 11 {
	case 0:
		r.Value = nil
	case 1:
		r.Value = []byte{}
	default:
		r.Value = fmt.Appendf(nil, `{"i":%d,"name":"rec-%d","pad":"%s"}`, i, i, strings.Repeat("x", i%200))
	}
	switch i % 3 {
	case 1:
		r.Headers = []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}, {Key: "a", Value: []byte("2")}}
	case 2:
		r.Headers = []kgo.RecordHeader{{Key: "", Value: []byte{}}}
	}
	return r
}

// want converts produced records (offsets assigned) to what a read must return.
func want(recs []*kgo.Record) []record.Record {
	out := make([]record.Record, 0, len(recs))
	for _, r := range recs {
		var hs []record.Header
		for _, h := range r.Headers {
			hs = append(hs, record.Header{Key: h.Key, Value: h.Value})
		}
		out = append(out, record.Record{
			Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
			Key: r.Key, Value: r.Value, Headers: hs,
		})
	}
	slices.SortFunc(out, func(a, b record.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

// inRange picks the records of one partition with from <= offset < to.
func inRange(all []record.Record, partition int32, from, to int64) []record.Record {
	var out []record.Record
	for _, r := range all {
		if r.Partition == partition && r.Offset >= from && r.Offset < to {
			out = append(out, r)
		}
	}
	return out
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// diff describes the first difference between got and want, or returns "".
func diff(got, want []record.Record) string {
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		switch {
		case g.Partition != w.Partition || g.Offset != w.Offset:
			return fmt.Sprintf("record %d: got %d/%d, want %d/%d", i, g.Partition, g.Offset, w.Partition, w.Offset)
		case !g.Timestamp.Equal(w.Timestamp):
			return fmt.Sprintf("offset %d: timestamp %v, want %v", w.Offset, g.Timestamp, w.Timestamp)
		case !sameBytes(g.Key, w.Key):
			return fmt.Sprintf("offset %d: key %q (nil %v), want %q (nil %v)", w.Offset, g.Key, g.Key == nil, w.Key, w.Key == nil)
		case !sameBytes(g.Value, w.Value):
			return fmt.Sprintf("offset %d: value %q (nil %v), want %q (nil %v)", w.Offset, g.Value, g.Value == nil, w.Value, w.Value == nil)
		case len(g.Headers) != len(w.Headers):
			return fmt.Sprintf("offset %d: %d headers, want %d", w.Offset, len(g.Headers), len(w.Headers))
		}
		for j := range g.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !sameBytes(g.Headers[j].Value, w.Headers[j].Value) {
				return fmt.Sprintf("offset %d: header %d is %+v, want %+v", w.Offset, j, g.Headers[j], w.Headers[j])
			}
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("got %d records, want %d", len(got), len(want))
	}
	return ""
}

func readRange(t testing.TB, cl *kafkasrc.Client, topic string, partition int32, from, to int64) []record.Record {
	t.Helper()
	var got []record.Record
	last := int64(-1)
	err := cl.ReadRange(ctxFor(t, 20*time.Second), topic, partition, from, to, func(r record.Record) error {
		if r.Offset <= last {
			return fmt.Errorf("offset %d after %d: not in order", r.Offset, last)
		}
		last = r.Offset
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadRange(%s/%d, %d, %d): %v", topic, partition, from, to, err)
	}
	return got
}

func checkRange(t testing.TB, cl *kafkasrc.Client, all []record.Record, topic string, partition int32, from, to int64) {
	t.Helper()
	if d := diff(readRange(t, cl, topic, partition, from, to), inRange(all, partition, from, to)); d != "" {
		t.Fatalf("ReadRange(%s/%d, %d, %d): %s", topic, partition, from, to, d)
	}
}

// tail polls tl until it stands at target and returns the records and every distinct
// position Poll returned, starting with where it began.
func tail(t testing.TB, tl *kafkasrc.Tailer, target int64) ([]record.Record, []int64) {
	t.Helper()
	ctx := ctxFor(t, 15*time.Second)
	cuts := []int64{tl.Next()}
	var recs []record.Record
	for cuts[len(cuts)-1] < target {
		rs, next, err := tl.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll at %d (target %d): %v", cuts[len(cuts)-1], target, err)
		}
		if len(rs) == 0 && next == cuts[len(cuts)-1] {
			t.Fatalf("Poll returned no records and did not move from %d", next)
		}
		for _, r := range rs {
			if r.Offset < cuts[len(cuts)-1] || r.Offset >= next {
				t.Fatalf("Poll moved %d -> %d but returned offset %d", cuts[len(cuts)-1], next, r.Offset)
			}
		}
		recs = append(recs, rs...)
		if next != cuts[len(cuts)-1] {
			cuts = append(cuts, next)
		}
	}
	if got := cuts[len(cuts)-1]; got != target {
		t.Fatalf("tailer moved to %d, past the target %d", got, target)
	}
	return recs, cuts
}

// checkTiling reads the ranges between successive cuts and checks that together they
// are exactly all records of the partition in [cuts[0], last cut).
func checkTiling(t testing.TB, cl *kafkasrc.Client, all []record.Record, topic string, partition int32, cuts []int64) {
	t.Helper()
	var got []record.Record
	for i := 1; i < len(cuts); i++ {
		got = append(got, readRange(t, cl, topic, partition, cuts[i-1], cuts[i])...)
	}
	if d := diff(got, inRange(all, partition, cuts[0], cuts[len(cuts)-1])); d != "" {
		t.Fatalf("ranges cut at %v: %s", cuts, d)
	}
}

func hwm(t testing.TB, cl *kafkasrc.Client, topic string, partition int32) kafkasrc.PartitionOffsets {
	t.Helper()
	pos, err := cl.Offsets(ctxFor(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	return pos[partition]
}

// waitNoHubGoroutines waits until no goroutine runs kafkasrc code: a Tailer's waiting
// must not outlive it, even while its Client stays open.
func waitNoHubGoroutines(t testing.TB) {
	t.Helper()
	await.For(t, 3*time.Second, "no kafkasrc goroutine left", func() (string, bool) {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var left []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "kafkasrc.(*hub)") {
				left = append(left, g)
			}
		}
		return "\n" + strings.Join(left, "\n\n"), len(left) == 0
	})
}

func runtimeStack(buf []byte) int { return runtime.Stack(buf, true) }
