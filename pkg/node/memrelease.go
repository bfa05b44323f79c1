package node

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Returning memory after a burst. Go keeps the heap a burst grew (64 clients reading
// at once, a flood of table loads) until a collection shrinks its goal, and a quiet
// process collects only every two minutes; the scavenger then returns pages slowly. So
// a node stays at its peak RSS long after the burst, which is what an operator's
// memory limit and the next burst see. This loop notices the end of a burst (the
// process allocated much since it last returned memory, and almost nothing in the
// last interval) and returns the heap's free pages to the OS at once, one forced
// collection per burst.
const (
	memCheckEvery = 5 * time.Second
	memBurstBytes = 64 << 20 // allocated since the last release: a burst worth a release
	memQuietBytes = 8 << 20  // allocated in one interval: at most this is quiet
)

// memRelease decides, from the bytes allocated in the last interval and since the
// last release, whether to return memory now.
type memRelease struct {
	sinceRelease uint64
	peak         uint64 // the most allocated in one interval since the last release
}

// observe reports whether to release after an interval in which delta bytes were
// allocated. An interval is quiet below memQuietBytes, or below a quarter of the
// busiest since the last release: a node's idle work may allocate more than
// memQuietBytes (an indexer's thousands of idle partitions poll), and its end of a
// burst must still count (issue 32).
func (m *memRelease) observe(delta uint64) bool {
	m.sinceRelease += delta
	m.peak = max(m.peak, delta)
	if m.sinceRelease >= memBurstBytes && (delta <= memQuietBytes || delta <= m.peak/4) {
		m.sinceRelease, m.peak = 0, 0
		return true
	}
	return false
}

// releaseMemoryAfterBursts checks every interval until ctx ends.
func releaseMemoryAfterBursts(ctx context.Context, every time.Duration) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocs := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[0].Value.Uint64()
	}
	var m memRelease
	last := allocs()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := allocs()
		if m.observe(now - last) {
			// Two collections: the first moves sync.Pool caches (gRPC's and
			// parquet-go's buffers) to their victim lists, the second frees them;
			// then FreeOSMemory returns the free pages.
			runtime.GC()
			debug.FreeOSMemory()
		}
		last = now
	}
}
