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

// For calls cond until it holds and returns its value. wake are the Changed methods
// of components whose events may make cond hold.
func For[T any](tb testing.TB, timeout time.Duration, what string, cond func() (T, bool), wake ...func() <-chan struct{}) T {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	poll := time.Millisecond
	for {
		// The wake channels first: an event between cond and the wait still wakes it.
		chans := make([]<-chan struct{}, len(wake))
		for i, w := range wake {
			chans[i] = w()
		}
		v, ok := cond()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s; last: %v", timeout, what, v)
		}
		wait(chans, poll)
		poll = min(2*poll, 20*time.Millisecond)
	}
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
