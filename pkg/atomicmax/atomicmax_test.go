package atomicmax

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Concurrent stores leave the largest value, whatever their order.
func TestStoreKeepsTheLargest(t *testing.T) {
	var a atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range int64(1000) {
				Store(&a, (i*7919+int64(g)*104729)%10007)
			}
		}()
	}
	wg.Wait()
	if got := a.Load(); got != 10006 {
		t.Fatalf("high-water mark %d, want 10006", got)
	}
	Store(&a, 3)
	if got := a.Load(); got != 10006 {
		t.Fatalf("a smaller store lowered the mark to %d", got)
	}
}
