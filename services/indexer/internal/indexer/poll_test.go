package indexer

import (
	"context"
	"errors"
	"testing"
	"time"
)

// nextAnswer keeps the order a Poll under the range's deadline had: a deadline already
// past comes before any answer, an answer before a deadline still to come.
func TestNextAnswer(t *testing.T) {
	ready := func() chan polled {
		ch := make(chan polled, 1)
		ch <- polled{next: 7}
		return ch
	}
	if p := nextAnswer(context.Background(), ready(), time.Now().Add(-time.Millisecond)); !errors.Is(p.err, context.DeadlineExceeded) || p.next != 0 {
		t.Errorf("deadline passed, answer ready: %+v", p)
	}
	if p := nextAnswer(context.Background(), ready(), time.Now().Add(time.Hour)); p.err != nil || p.next != 7 {
		t.Errorf("answer ready: %+v", p)
	}
	if p := nextAnswer(context.Background(), ready(), time.Time{}); p.err != nil || p.next != 7 {
		t.Errorf("no deadline: %+v", p)
	}
	if p := nextAnswer(context.Background(), make(chan polled), time.Now().Add(20*time.Millisecond)); !errors.Is(p.err, context.DeadlineExceeded) {
		t.Errorf("no answer by the deadline: %+v", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p := nextAnswer(ctx, make(chan polled), time.Time{}); !errors.Is(p.err, context.Canceled) {
		t.Errorf("context ended: %+v", p)
	}
}
