package kafkasrc_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/record"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceVaried writes n varied records per partition, rotating through every codec so
// that batches of all kinds sit in each partition.
func produceVaried(t *testing.T, c *kafkatest.Cluster, topic string, partitions int32, n int) []record.Record {
	t.Helper()
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	var ps []*kgo.Client
	for _, codec := range codecs {
		ps = append(ps, producer(c, kgo.ProducerBatchCompression(codec)))
	}
	var all []*kgo.Record
	for i := 0; i < n; i += 25 {
		var batch []*kgo.Record
		for p := range partitions {
			for j := i; j < min(i+25, n); j++ {
				batch = append(batch, variedRecord(topic, p, j))
			}
		}
		all = append(all, kafkatest.Produce(t, ps[(i/25)%len(ps)], batch...)...)
	}
	return want(all)
}

func TestReadRangeAndTailerTiling(t *testing.T) {
	c := kafkatest.New(t)
	const topic, partitions, n = "plain", 4, 300
	c.CreateTopic(topic, partitions, nil)
	all := produceVaried(t, c, topic, partitions, n)
	// Small fetches so that every read and poll spans many fetches and batches.
	cl := newClient(t, c, kafkasrc.WithFetchMaxBytes(2048))

	ctx := ctxFor(t, 10*time.Second)
	if got, err := cl.Partitions(ctx, topic); err != nil || got != partitions {
		t.Fatalf("Partitions = %d, %v; want %d", got, err, partitions)
	}
	pos, err := cl.Offsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, po := range pos {
		if po != (kafkasrc.PartitionOffsets{Partition: int32(p), LogStart: 0, HighWatermark: n, LastStable: n}) {
			t.Fatalf("Offsets[%d] = %+v, want [0, %d) all stable", p, po, n)
		}
	}

	t.Run("whole partitions", func(t *testing.T) {
		for p := range int32(partitions) {
			checkRange(t, cl, all, topic, p, 0, n)
		}
	})
	t.Run("random sub-ranges", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 150 {
			p := rng.Int32N(partitions)
			from := rng.Int64N(n + 1)
			to := from + rng.Int64N(n-from+1)
			checkRange(t, cl, all, topic, p, from, to)
		}
		checkRange(t, cl, all, topic, 0, 17, 18) // a single offset
		checkRange(t, cl, all, topic, 0, n, n)   // empty, at the end
	})
	t.Run("tailer positions tile the partitions", func(t *testing.T) {
		for p := range int32(partitions) {
			tl := kafkasrc.NewTailer(cl, topic, p, 0)
			got, cuts := tail(t, tl, n)
			tl.Close()
			if d := diff(got, inRange(all, p, 0, n)); d != "" {
				t.Fatalf("tailed partition %d: %s", p, d)
			}
			if len(cuts) < 5 {
				t.Fatalf("only %d positions: fetches were not small", len(cuts))
			}
			checkTiling(t, cl, all, topic, p, cuts)
			if tl.HighWatermark() != n || tl.LastStable() != n {
				t.Fatalf("tailer saw hwm %d, lso %d; want %d", tl.HighWatermark(), tl.LastStable(), n)
			}
		}
		// Starting mid-partition tiles just as well.
		tl := kafkasrc.NewTailer(cl, topic, 2, 123)
		defer tl.Close()
		_, cuts := tail(t, tl, n)
		checkTiling(t, cl, all, topic, 2, cuts)
	})
	t.Run("fn error stops the read", func(t *testing.T) {
		stop := errors.New("stop")
		calls := 0
		err := cl.ReadRange(ctx, topic, 1, 0, n, func(record.Record) error {
			calls++
			if calls == 10 {
				return stop
			}
			return nil
		})
		if err != stop || calls != 10 {
			t.Fatalf("ReadRange = %v after %d calls; want fn's error after 10", err, calls)
		}
	})
	t.Run("past the end", func(t *testing.T) {
		err := cl.ReadRange(ctx, topic, 0, 10, n+1, func(record.Record) error {
			t.Fatal("fn called for a range that cannot be read")
			return nil
		})
		if !errors.Is(err, kafkasrc.ErrNotStable) || !strings.Contains(err.Error(), "301") {
			t.Fatalf("ReadRange past the end: %v; want ErrNotStable naming the offsets", err)
		}
		if err := cl.ReadRange(ctx, topic, 0, 5, 4, func(record.Record) error { return nil }); err == nil {
			t.Fatal("ReadRange accepted from > to")
		}
	})
}

func TestUnknownTopic(t *testing.T) {
	c := kafkatest.New(t)
	c.CreateTopic("known", 2, nil)
	cl := newClient(t, c)
	ctx := ctxFor(t, 10*time.Second)
	check := func(what string, err error, name string) {
		t.Helper()
		if !errors.Is(err, kafkasrc.ErrUnknownTopic) || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: %v; want ErrUnknownTopic naming %q", what, err, name)
		}
	}
	_, err := cl.Partitions(ctx, "no-such-topic")
	check("Partitions", err, "no-such-topic")
	_, err = cl.Offsets(ctx, "no-such-topic")
	check("Offsets", err, "no-such-topic")
	err = cl.ReadRange(ctx, "no-such-topic", 0, 0, 1, func(record.Record) error { return nil })
	check("ReadRange", err, "no-such-topic")
	err = cl.ReadRange(ctx, "known", 7, 0, 1, func(record.Record) error { return nil })
	check("ReadRange of a missing partition", err, "known")
	tl := kafkasrc.NewTailer(cl, "no-such-topic", 0, 0)
	defer tl.Close()
	_, _, err = tl.Poll(ctx)
	check("Poll", err, "no-such-topic")
}

func TestConcurrentReadRange(t *testing.T) {
	c := kafkatest.New(t)
	const topic, partitions, n = "busy", 4, 300
	c.CreateTopic(topic, partitions, nil)
	all := produceVaried(t, c, topic, partitions, n)
	cl := newClient(t, c, kafkasrc.WithFetchMaxBytes(32<<10))

	const readers, reads = 32, 4
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	for i := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for range reads {
				p := rng.Int32N(partitions)
				from := rng.Int64N(n)
				to := from + 1 + rng.Int64N(n-from)
				var got []record.Record
				err := cl.ReadRange(context.Background(), topic, p, from, to, func(r record.Record) error {
					got = append(got, r)
					return nil
				})
				d := diff(got, inRange(all, p, from, to))
				if err != nil || d != "" {
					mu.Lock()
					errs = append(errs, strings.Join([]string{d, errString(err)}, " "))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d concurrent reads were wrong, first: %s", len(errs), readers*reads, errs[0])
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTailerLeavesNothingRunning(t *testing.T) {
	c := kafkatest.New(t)
	c.CreateTopic("idle", 3, nil)
	cl := newClient(t, c, kafkasrc.WithPollWait(2*time.Second))

	// Three Tailers wait on an idle topic (on three brokers' long polls).
	type result struct {
		next int64
		err  error
	}
	var tailers []*kafkasrc.Tailer
	results := make(chan result, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for p := range int32(3) {
		tl := kafkasrc.NewTailer(cl, "idle", p, 0)
		tailers = append(tailers, tl)
		go func() {
			_, next, err := tl.Poll(ctx)
			results <- result{next, err}
		}()
	}
	// Wait until they really wait: the hub's loops are running.
	await.True(t, 5*time.Second, "tailers to wait", hubRunning)

	// Losing the lease: cancel, then Close. Poll returns at once (well before the 2s
	// long poll ends) and nothing of the Tailers keeps running.
	start := time.Now()
	cancel()
	for range 3 {
		r := <-results
		if !errors.Is(r.err, context.Canceled) || r.next != 0 {
			t.Fatalf("Poll after cancel = %d, %v", r.next, r.err)
		}
	}
	for _, tl := range tailers {
		tl.Close()
	}
	waitNoHubGoroutines(t)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("stopping took %v", d)
	}

	// Close alone also ends a waiting Poll.
	tl := kafkasrc.NewTailer(cl, "idle", 1, 0)
	done := make(chan error, 1)
	go func() { _, _, err := tl.Poll(context.Background()); done <- err }()
	await.True(t, 5*time.Second, "tailer to wait", hubRunning)
	tl.Close()
	if err := <-done; !errors.Is(err, kafkasrc.ErrClosed) {
		t.Fatalf("Poll after Close = %v, want ErrClosed", err)
	}
	if _, _, err := tl.Poll(context.Background()); !errors.Is(err, kafkasrc.ErrClosed) {
		t.Fatalf("Poll of a closed Tailer = %v", err)
	}
	waitNoHubGoroutines(t)

	// Closing the Client ends a waiting Poll as well, and everything after fails.
	tl = kafkasrc.NewTailer(cl, "idle", 2, 0)
	defer tl.Close()
	go func() { _, _, err := tl.Poll(context.Background()); done <- err }()
	await.True(t, 5*time.Second, "tailer to wait", hubRunning)
	cl.Close()
	if err := <-done; !errors.Is(err, kafkasrc.ErrClosed) {
		t.Fatalf("Poll when the Client closes = %v, want ErrClosed", err)
	}
	if err := cl.ReadRange(context.Background(), "idle", 0, 0, 1, func(record.Record) error { return nil }); !errors.Is(err, kafkasrc.ErrClosed) {
		t.Fatalf("ReadRange on a closed Client = %v", err)
	}
	waitNoHubGoroutines(t)
}

func hubRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtimeStack(buf)]), "kafkasrc.(*hub).loop")
}
