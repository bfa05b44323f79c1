package await_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
)

// An event wakes a wait at once: with polling alone this wait would take its 20ms steps.
func TestWakesOnEvent(t *testing.T) {
	var mu sync.Mutex
	ch := make(chan struct{})
	changed := func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return ch }
	var v atomic.Int32
	go func() {
		time.Sleep(50 * time.Millisecond) // the event comes later: what the wait is for
		v.Store(1)
		mu.Lock()
		close(ch)
		ch = make(chan struct{})
		mu.Unlock()
	}()
	start := time.Now()
	got := await.For(t, 5*time.Second, "v to be 1", func() (int32, bool) { return v.Load(), v.Load() == 1 }, changed)
	if got != 1 {
		t.Fatalf("got %d", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
}

// Without events it polls; a condition that never holds fails the test with its last value.
func TestTimesOutNamingWhat(t *testing.T) {
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { recover() }()
		await.For(ft, 30*time.Millisecond, "the impossible", func() (int, bool) { return 7, false })
	}()
	<-done
	if want := "timed out after 30ms waiting for the impossible; last: 7"; ft.msg != want {
		t.Fatalf("failure %q, want %q", ft.msg, want)
	}
	n := 0
	await.True(t, time.Second, "three polls", func() bool { n++; return n == 3 })
}

type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}

// Within answers instead of failing: the last value and false on timeout, the value and
// true once the condition holds.
func TestWithinAnswersWithoutFailing(t *testing.T) {
	v, ok := await.Within(30*time.Millisecond, 0, func() (int, bool) { return 7, false })
	if ok || v != 7 {
		t.Fatalf("a condition that never holds: %d, %v; want its last value 7 and false", v, ok)
	}
	n := 0
	v, ok = await.Within(5*time.Second, 0, func() (int, bool) { n++; return n, n == 3 })
	if !ok || v != 3 {
		t.Fatalf("a condition that holds at its third check: %d, %v; want 3 and true", v, ok)
	}
}

// Every checks a costly condition at its interval, not at For's pace.
func TestEveryChecksAtItsInterval(t *testing.T) {
	const interval, checks = 50 * time.Millisecond, 4
	n := 0
	start := time.Now()
	got := await.Every(t, 10*time.Second, interval, "the fourth check", func() (int, bool) { n++; return n, n == checks })
	if got != checks {
		t.Fatalf("got %d, want %d", got, checks)
	}
	if d := time.Since(start); d < (checks-1)*interval {
		t.Fatalf("%d checks within %v: closer than every %v", checks, d, interval)
	}
}
