package files

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/parquetbuild"
)

// setBuildCap gives s n build slots (Options.BuildConcurrency, as New makes them).
func setBuildCap(s *Store, n int) {
	s.o.BuildConcurrency = n
	s.slots = make(chan struct{}, n)
}

// newGate is a channel that closes when open is called, or at the end of the test (a
// failed test's builds do not hold the store's Close).
func newGate(t *testing.T) (gate chan struct{}, open func()) {
	gate = make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	return gate, open
}

// readAll reads key through s and returns its bytes.
func readAll(ctx context.Context, s *Store, key string) ([]byte, error) {
	obj, err := s.Open(ctx, key, nil, false)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj.Body)
}

// TestBuildConcurrencyCap: cold reads of more files than there are build slots run at
// most BuildConcurrency builds at once; the others wait, and each read gets the exact
// bytes recorded. A reader whose context ends while its build waits for a slot gets its
// context's error at once, and its build never runs; the next read of it builds it.
func TestBuildConcurrencyCap(t *testing.T) {
	e := newMeasureEnv(t, "fs-1")
	s := e.stores["fs-1"]
	const slots, files = 2, 6
	setBuildCap(s, slots)
	var keys []string
	for i := range int64(files) {
		keys = append(keys, e.commitRange(i, i+1))
	}
	late := e.commitRange(files, files+2)

	// Every build holds its slot until the gate opens, so the builds that could run at
	// once all do before any ends: without the cap all six would be running.
	gate, open := newGate(t)
	var mu sync.Mutex
	started := map[string]int{}
	s.slotTaken = func(what string) {
		mu.Lock()
		started[what]++
		mu.Unlock()
		<-gate
	}
	got := make([][]byte, files)
	errs := make([]error, files)
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { got[i], errs[i] = readAll(e.ctx, s, k) })
	}
	await.True(t, 10*time.Second, "the first builds to take every slot", func() bool { return s.BuildStats().Running == slots })
	await.True(t, 10*time.Second, "every read to wait for its build", func() bool { return s.fills.Len() == files })

	// A reader that gives up while its build queues.
	ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	began := time.Now()
	_, err := readAll(ctx, s, late)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read whose build waits for a slot past its deadline: %v, want its context's error", err)
	}
	if waited := time.Since(began); waited > 5*time.Second {
		t.Fatalf("the read returned %v after its deadline", waited)
	}
	if s.fills.Has(late) {
		t.Fatal("the abandoned build is still queued")
	}

	open()
	wg.Wait()
	for i, k := range keys {
		if errs[i] != nil {
			t.Fatalf("read %s: %v", k, errs[i])
		}
		if !bytes.Equal(got[i], e.files[k]) {
			t.Fatalf("read %s: %d bytes, not the %d recorded", k, len(got[i]), len(e.files[k]))
		}
	}
	if b := s.BuildStats(); b.Peak != slots || b.Running != 0 {
		t.Fatalf("build stats %+v: want a peak of exactly %d builds at once and none left running", b, slots)
	}
	mu.Lock()
	for _, k := range keys {
		if started[k] != 1 {
			t.Errorf("%s built %d times, want once", k, started[k])
		}
	}
	if started[late] != 0 || s.o.Cache.Contains(late) {
		t.Errorf("the abandoned build ran (%d starts; cached %v)", started[late], s.o.Cache.Contains(late))
	}
	mu.Unlock()

	b, err := readAll(e.ctx, s, late)
	if err != nil || !bytes.Equal(b, e.files[late]) {
		t.Fatalf("the next read of the abandoned file: %d bytes, %v; want its %d recorded bytes", len(b), err, len(e.files[late]))
	}
	if st := s.Stats(); st.Builds != files+1 {
		t.Fatalf("%d builds, want %d", st.Builds, files+1)
	}
}

// TestBuildPages: builds keep their finished pages in the store's one pool, so their
// memory is bounded by BuildMemory: with room, pages pass through it and all go back;
// with none, every page waits in a temporary file, and the bytes are the same.
func TestBuildPages(t *testing.T) {
	e := newMeasureEnv(t, "fs-1")
	s := e.stores["fs-1"]
	a, b := e.commitRange(0, 5), e.commitRange(5, 10)

	got, err := readAll(e.ctx, s, a)
	if err != nil || !bytes.Equal(got, e.files[a]) {
		t.Fatalf("read %s: %d bytes, %v; want its %d recorded bytes", a, len(got), err, len(e.files[a]))
	}
	if st := s.BuildStats(); st.PagesPeak == 0 || st.PagesInMemory != 0 || st.PagesSpilled != 0 {
		t.Fatalf("with room: build stats %+v, want pages through the pool and all given back, none spilled", st)
	}

	pages, err := parquetbuild.NewPages(0, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.pages = pages
	got, err = readAll(e.ctx, s, b)
	if err != nil || !bytes.Equal(got, e.files[b]) {
		t.Fatalf("read %s with no page memory: %d bytes, %v; want its %d recorded bytes", b, len(got), err, len(e.files[b]))
	}
	if st := s.BuildStats(); st.PagesSpilled == 0 || st.PagesPeak != 0 || st.PagesInMemory != 0 {
		t.Fatalf("with no room: build stats %+v, want every page spilled and none in memory", st)
	}
}

// TestTailBuildsTakeASlot: a live load's tail build waits for a build slot like a data
// file's, and a load that gives up while it waits leaves no build behind.
func TestTailBuildsTakeASlot(t *testing.T) {
	e := newMeasureEnv(t, "fs-1")
	s := e.stores["fs-1"]
	setBuildCap(s, 1)
	key := e.commitRange(0, 2)
	gate, open := newGate(t)
	var tails atomic.Int64
	s.slotTaken = func(what string) {
		if what != key {
			tails.Add(1)
		}
		<-gate
	}
	done := make(chan error, 1)
	go func() { _, err := readAll(e.ctx, s, key); done <- err }()
	await.True(t, 10*time.Second, "the data build to take the slot", func() bool { return s.BuildStats().Running == 1 })

	req := MeasureRequest{Table: e.table, Partition: 0, Start: 2, End: 6, MaxBytes: measureMaxBytes, TTL: time.Minute}
	ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	_, err := s.Measure(ctx, req)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a tail build waiting for the only slot: %v, want its load's context error", err)
	}
	open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := tails.Load(); n != 0 {
		t.Fatalf("%d tail builds ran after their load gave up", n)
	}
	m, err := s.Measure(e.ctx, req)
	if err != nil || m.Key == "" || tails.Load() != 1 {
		t.Fatalf("measure once the slot is free: %+v, %v (%d tail builds)", m, err, tails.Load())
	}
	if b := s.BuildStats(); b.Peak != 1 {
		t.Fatalf("build stats %+v: want one build at a time", b)
	}
}
