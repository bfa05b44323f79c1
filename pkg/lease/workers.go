package lease

import (
	"context"
	"errors"
	"time"
)

// Worker does the work of one lease. Its ctx ends when the lease is lost, released, or
// locally presumed expired, or when the node stops; it must then return promptly. Every
// write it makes goes through Fenced with l, so even a late one changes nothing.
type Worker func(ctx context.Context, l Lease)

// ErrLocalDeadline is the cause of a worker's ctx ending because the node could not renew
// in time: it stops acting before Postgres can let another node take the lease.
var ErrLocalDeadline = errors.New("lease not renewed in time: stopped acting before it can expire")

// held is one lease this node holds and the worker running under it.
type held struct {
	Lease
	cancel context.CancelCauseFunc
	ctx    context.Context
	done   chan struct{}
	timer  *time.Timer
}

// OnLease sets the worker run for every lease of kind k this node holds. Call it before
// Run.
func (m *Manager) OnLease(k Kind, w Worker) { m.workers[k] = w }

// loseAll stops every worker: the leases are no longer this node's.
func (m *Manager) loseAll(why string) {
	hs := m.detachAll()
	m.mu.Lock()
	m.settled = false
	m.mu.Unlock()
	m.stop(ErrLeaseLost, hs...)
	for _, h := range hs {
		m.lost.Add(1)
		m.log.Warn("lease lost: "+why, leaseAttrs(h.Lease)...)
	}
}

// renewed records a renewal that began at start: every lease this node holds now expires
// at expires. Workers stopped at their local deadline (the node could not renew in time)
// start again, each under a new epoch, so that the old worker, should it still run, is
// fenced out of the lease its successor works under.
func (m *Manager) renewed(start, expires time.Time) {
	deadline := start.Add(m.cfg.TTL - m.safety())
	m.mu.Lock()
	m.lastRenew = start
	m.actingUntilLocked(start)
	var restart []*held
	for _, h := range m.held {
		h.Expires = expires
		if h.ctx.Err() == nil {
			h.timer.Reset(time.Until(deadline))
		} else {
			restart = append(restart, h)
		}
	}
	m.mu.Unlock()
	if len(restart) > 0 {
		m.restart(restart, start)
	}
}

// restart gives the leases whose workers stopped at their local deadline new epochs and
// new workers, in one statement, once each old worker has ended (until then it stays
// stopped, and the next renewal tries again): an old worker, should it still be inside a
// fenced write, is then fenced out of the lease its successor works under. A lease that
// is not ours any more is dropped.
func (m *Manager) restart(hs []*held, start time.Time) {
	var ready []*held
	for _, h := range hs {
		select {
		case <-h.done:
			ready = append(ready, h)
		default:
			m.log.Warn("lease worker still running after its local deadline; not restarting it yet", leaseAttrs(h.Lease)...)
		}
	}
	if len(ready) == 0 {
		return
	}
	scopes := make([]Scope, len(ready))
	epochs := make([]int64, len(ready))
	for i, h := range ready {
		scopes[i], epochs[i] = h.Scope, h.Epoch
	}
	ctx, cancel := context.WithTimeout(m.base, m.cfg.TTL/3)
	defer cancel()
	m.count(1)
	got, err := newEpochs(ctx, m.db, m.cfg.NodeID, m.incarnation, scopes, epochs)
	if err != nil {
		// They stay stopped; the next round's renewal tries again.
		m.log.Warn("could not restart lease workers under new epochs", "leases", len(ready), "error", err)
		return
	}
	m.rows(int64(len(got)), int64(len(got)))
	epoch := make(map[Scope]int64, len(got))
	for _, l := range got {
		epoch[l.Scope] = l.Epoch
	}
	for _, h := range ready {
		m.mu.Lock()
		current := m.held[h.Scope] == h
		if current {
			delete(m.held, h.Scope)
		}
		m.mu.Unlock()
		if !current {
			continue // released or lost meanwhile
		}
		e, ok := epoch[h.Scope]
		if !ok {
			m.lost.Add(1)
			m.log.Warn("lease lost", leaseAttrs(h.Lease)...)
			continue
		}
		l := h.Lease
		l.Epoch = e
		m.start(l, start, "renewed after its worker stopped; new epoch")
	}
}

// expireLocally stops the workers of leases past their local deadline. The timers do it
// too; this covers a round that starts late.
func (m *Manager) expireLocally() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.registered && time.Since(m.lastRenew) > m.cfg.TTL-m.safety() {
		for _, h := range m.held {
			h.cancel(ErrLocalDeadline)
		}
	}
}

// start runs the worker of a lease just taken or renewed, until its local deadline.
func (m *Manager) start(l Lease, renewStart time.Time, why string) {
	m.mu.Lock()
	if old := m.held[l.Scope]; old != nil {
		m.mu.Unlock()
		m.stop(ErrLeaseLost, old)
		m.mu.Lock()
	}
	ctx, cancel := context.WithCancelCause(m.base)
	h := &held{Lease: l, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	h.timer = time.AfterFunc(time.Until(renewStart.Add(m.cfg.TTL-m.safety())), func() {
		cancel(ErrLocalDeadline)
		m.notify() // Held changed
	})
	m.held[l.Scope] = h
	w := m.workers[l.Kind]
	m.wg.Add(1)
	m.mu.Unlock()
	m.log.Info("lease "+why, leaseAttrs(l)...)
	go func() {
		defer m.wg.Done()
		defer close(h.done)
		if w != nil {
			w(ctx, l)
		}
		<-ctx.Done() // a worker that returns early still holds the lease until it ends
	}()
}

// stop ends leases' workers and waits for them, all at once and not past the leases'
// safety margin: fencing protects the data even from a worker that ignores its context.
func (m *Manager) stop(cause error, hs ...*held) {
	for _, h := range hs {
		h.timer.Stop()
		h.cancel(cause)
	}
	deadline := time.NewTimer(m.safety())
	defer deadline.Stop()
	late := false
	for _, h := range hs {
		if !late {
			select {
			case <-h.done:
				continue
			case <-deadline.C:
				late = true
			}
		}
		select {
		case <-h.done:
		default:
			m.log.Error("lease worker did not stop in time", leaseAttrs(h.Lease)...)
		}
	}
}

func (m *Manager) stopAll(cause error) {
	m.stop(cause, m.detachAll()...)
	m.notify()
}

// detachAll takes every lease off this node's books (the released ones not yet freed
// too) and returns those with workers.
func (m *Manager) detachAll() []*held {
	m.mu.Lock()
	defer m.mu.Unlock()
	hs := make([]*held, 0, len(m.held))
	for s, h := range m.held {
		hs = append(hs, h)
		delete(m.held, s)
	}
	m.unreleased = nil
	return hs
}
