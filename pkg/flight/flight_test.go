package flight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
)

// Concurrent callers of one key share one build and its result; all but the first
// joined it.
func TestCallersShareOneBuild(t *testing.T) {
	g := New[int](context.Background())
	defer g.Close()
	release := make(chan struct{})
	var builds atomic.Int32
	build := func(b *Build) (int, error) {
		builds.Add(1)
		b.Begin()
		<-release
		return 42, nil
	}
	const callers = 8
	var wg sync.WaitGroup
	var joined atomic.Int32
	vals := make([]int, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			v, j, err := g.Do(context.Background(), "k", build)
			vals[i], errs[i] = v, err
			if j {
				joined.Add(1)
			}
		})
	}
	waitWaiters(t, g, "k", callers)
	close(release)
	wg.Wait()
	for i := range callers {
		if vals[i] != 42 || errs[i] != nil {
			t.Fatalf("caller %d: %d, %v; want 42", i, vals[i], errs[i])
		}
	}
	if n := builds.Load(); n != 1 {
		t.Fatalf("%d builds, want 1", n)
	}
	if j := joined.Load(); j != callers-1 {
		t.Fatalf("%d callers joined, want %d", j, callers-1)
	}
	if g.Has("k") || g.Len() != 0 {
		t.Fatal("a finished build is still under way")
	}
}

// A caller that gives up gets its context's error at once; the begun build it started
// goes on, uncancelled, even with nobody waiting, and the next caller joins it.
func TestGivingUpLeavesABegunBuildToTheNext(t *testing.T) {
	g := New[string](context.Background())
	defer g.Close()
	begun, release := make(chan struct{}), make(chan struct{})
	var cancelled atomic.Bool
	build := func(b *Build) (string, error) {
		b.Begin()
		close(begun)
		<-release
		cancelled.Store(b.Context().Err() != nil)
		return "built", nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, _, err := g.Do(ctx, "k", build); first <- err }()
	<-begun
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v, want context.Canceled", err)
	}
	type answer struct {
		v      string
		joined bool
	}
	next := make(chan answer, 1)
	go func() { v, j, _ := g.Do(context.Background(), "k", build); next <- answer{v, j} }()
	waitWaiters(t, g, "k", 1)
	close(release)
	if a := <-next; a.v != "built" || !a.joined {
		t.Fatalf("the next caller got %q (joined %v), want the begun build's result", a.v, a.joined)
	}
	if cancelled.Load() {
		t.Fatal("a caller giving up cancelled the build")
	}
}

// A build that has not begun when its last caller gives up is dropped: its context
// ends, Begin answers false, and the next caller of the key starts a build of its own.
func TestUnbegunBuildIsDroppedWhenEveryCallerGivesUp(t *testing.T) {
	g := New[int](context.Background())
	defer g.Close()
	slot := make(chan struct{}) // never free: the build waits for it
	dropped := make(chan bool, 1)
	queued := func(b *Build) (int, error) {
		select {
		case <-slot:
		case <-b.Context().Done():
		}
		dropped <- !b.Begin()
		return 0, b.Context().Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, _, err := g.Do(ctx, "k", queued); errc <- err }()
	waitWaiters(t, g, "k", 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v, want context.Canceled", err)
	}
	if !<-dropped {
		t.Fatal("Begin answered true for a build every caller left")
	}
	if g.Has("k") {
		t.Fatal("the dropped build is still under way")
	}
	v, joined, err := g.Do(context.Background(), "k", func(b *Build) (int, error) { return 7, nil })
	if v != 7 || joined || err != nil {
		t.Fatalf("the next caller: %d, joined %v, %v; want a build of its own", v, joined, err)
	}
}

// Close waits for the builds under way; after it, and once the group's context has
// ended, Do starts nothing and answers ErrClosed.
func TestCloseWaitsAndRefuses(t *testing.T) {
	base, stop := context.WithCancel(context.Background())
	g := New[int](base)
	var finished atomic.Bool
	errc := make(chan error, 1)
	go func() {
		_, _, err := g.Do(context.Background(), "k", func(b *Build) (int, error) {
			b.Begin()
			<-b.Context().Done() // the group's context
			finished.Store(true)
			return 0, b.Context().Err()
		})
		errc <- err
	}()
	waitWaiters(t, g, "k", 1)
	stop()
	if _, _, err := g.Do(context.Background(), "other", func(*Build) (int, error) { t.Error("a build ran after its group's context ended"); return 0, nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do once the context ended: %v, want ErrClosed", err)
	}
	g.Close()
	if !finished.Load() {
		t.Fatal("Close returned before the build under way ended")
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the build's caller: %v, want the build's error", err)
	}
	g2 := New[int](context.Background())
	g2.Close()
	if _, _, err := g2.Do(context.Background(), "k", func(*Build) (int, error) { t.Error("a build ran after Close"); return 0, nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
}

// waitWaiters waits until n callers wait for key's build.
func waitWaiters[V any](t *testing.T, g *Group[V], key string, n int) {
	t.Helper()
	await.For(t, 10*time.Second, "callers waiting for "+key, func() (int, bool) { w := g.Waiting(key); return w, w == n })
}
