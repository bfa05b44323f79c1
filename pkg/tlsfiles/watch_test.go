package tlsfiles

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestWatchLogsEachFailureOnce: a failure is reported when it differs from the reload
// before (a file that stays broken is reported once, not every interval), again after a
// reload that worked; each change is reported.
func TestWatchLogsEachFailureOnce(t *testing.T) {
	e1, e2 := errors.New("broken"), errors.New("missing")
	type result struct {
		changed bool
		err     error
	}
	script := []result{{err: e1}, {err: e1}, {err: e1}, {changed: true}, {err: e1}, {err: e1}, {}, {err: e2}, {err: e2}, {err: e1}, {changed: true}}
	var (
		mu       sync.Mutex
		next     int
		failed   []string
		reloaded int
	)
	done := make(chan struct{})
	reload := func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if next == len(script) {
			return false, nil
		}
		r := script[next]
		if next++; next == len(script) {
			defer close(done)
		}
		return r.changed, r.err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		watch(ctx, time.Millisecond, reload, func(err error) { failed = append(failed, err.Error()) }, func() { reloaded++ })
	})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not run the script's reloads")
	}
	cancel()
	wg.Wait()
	if want := []string{"broken", "broken", "missing", "broken"}; !slices.Equal(failed, want) {
		t.Errorf("failures reported %q, want %q", failed, want)
	}
	if reloaded != 2 {
		t.Errorf("changes reported %d, want 2", reloaded)
	}
}
