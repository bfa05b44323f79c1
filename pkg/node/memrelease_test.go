package node

import (
	"context"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/lease/leasetest"
)

func TestMemReleaseOncePerBurst(t *testing.T) {
	var m memRelease
	steps := []struct {
		delta uint64
		want  bool
	}{
		{1 << 20, false},   // quiet, no burst yet
		{100 << 20, false}, // a burst under way
		{50 << 20, false},  // still busy
		{1 << 20, true},    // quiet after it: release
		{1 << 20, false},   // quiet: released already
		{2 << 20, false},
		{30 << 20, false},
		{40 << 20, false}, // a second burst, made of busy intervals
		{0, true},
		// A node whose idle work allocates 30 MiB an interval (an indexer holding
		// 1,000 idle partitions): the end of a burst still counts, and its idle
		// intervals alone release nothing.
		{250 << 20, false},
		{250 << 20, false},
		{30 << 20, true},
		{30 << 20, false},
		{30 << 20, false},
		{30 << 20, false},
		{30 << 20, false},
	}
	for i, s := range steps {
		if got := m.observe(s.delta); got != s.want {
			t.Fatalf("step %d (%d bytes): release %v, want %v", i, s.delta, got, s.want)
		}
	}
}

var sink [][]byte

// After a burst of allocation the loop returns the heap's free pages to the OS within
// a couple of intervals, not minutes later.
func TestMemReleaseReturnsABurst(t *testing.T) {
	released := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { releaseMemoryAfterBursts(ctx, 100*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	before := released()
	for range 256 {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil // the burst is over: 256 MiB of garbage
	leasetest.Eventually(t, 10*time.Second, "the burst's memory returned to the OS", func() bool {
		return released() >= before+128<<20
	})
}
