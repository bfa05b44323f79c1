// Package atomicmax keeps high-water marks (the most that ran at once, the highest offset
// seen) in atomic integers that many goroutines raise without a lock.
package atomicmax

import "sync/atomic"

// Store raises a to v if v is larger; a never goes down.
func Store(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}
