// Package await is how tests wait: on a condition, never a fixed sleep. A wait wakes as
// soon as a component says something changed (lease.Manager.Changed) and otherwise
// polls, first often (most conditions hold within milliseconds) and then every 20ms.
// On timeout the test fails naming what it waited for and the condition's last value.
package await

import (
	"reflect"
	"testing"
	"time"
)

// maxPoll is the longest For waits between two checks of a condition without events.
const maxPoll = 20 * time.Millisecond

// For calls cond until it holds and returns its value. wake are the Changed methods
// of components whose events may make cond hold.
func For[T any](tb testing.TB, timeout time.Duration, what string, cond func() (T, bool), wake ...func() <-chan struct{}) T {
	tb.Helper()
	v, ok := poll(timeout, 0, cond, wake)
	if !ok {
		tb.Fatalf("timed out after %v waiting for %s; last: %v", timeout, what, v)
	}
	return v
}

// True is For for a condition with no value to show.
func True(tb testing.TB, timeout time.Duration, what string, cond func() bool, wake ...func() <-chan struct{}) {
	tb.Helper()
	For(tb, timeout, what, func() (string, bool) {
		if cond() {
			return "", true
		}
		return "not yet", false
	}, wake...)
}

// Every is For for a condition that is costly to check (a process to run, a table to
// scan): it is checked every interval.
func Every[T any](tb testing.TB, timeout, interval time.Duration, what string, cond func() (T, bool)) T {
	tb.Helper()
	v, ok := poll(timeout, interval, cond, nil)
	if !ok {
		tb.Fatalf("timed out after %v waiting for %s; last: %v", timeout, what, v)
	}
	return v
}

// Within reports whether cond held within timeout, and its last value, without failing
// the test: for a wait whose timeout the test reports with t.Error and goes on, or one
// off the test's goroutine (where t.Fatal must not be called). It checks cond every
// interval, or, when interval is 0, as For does.
func Within[T any](timeout, interval time.Duration, cond func() (T, bool), wake ...func() <-chan struct{}) (T, bool) {
	return poll(timeout, interval, cond, wake)
}

// poll is the one wait: cond until it holds or timeout passes, woken by wake, checked
// every interval (0: every 1ms, doubling up to maxPoll).
func poll[T any](timeout, interval time.Duration, cond func() (T, bool), wake []func() <-chan struct{}) (T, bool) {
	deadline := time.Now().Add(timeout)
	step := interval
	if step <= 0 {
		step = time.Millisecond
	}
	for {
		// The wake channels first: an event between cond and the wait still wakes it.
		chans := make([]<-chan struct{}, len(wake))
		for i, w := range wake {
			chans[i] = w()
		}
		v, ok := cond()
		if ok {
			return v, true
		}
		if time.Now().After(deadline) {
			return v, false
		}
		wait(chans, step)
		if interval <= 0 {
			step = min(2*step, maxPoll)
		}
	}
}

// wait returns when any channel is closed or d has passed.
func wait(chans []<-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)}}
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	reflect.Select(cases)
}
