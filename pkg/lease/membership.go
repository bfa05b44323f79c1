package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/pg"
)

// member is this node's member row as registration and renewals write it.
func (m *Manager) member() memberRow {
	roles := make([]string, len(m.cfg.Roles))
	for i, r := range m.cfg.Roles {
		roles[i] = string(r)
	}
	m.mu.Lock()
	draining := m.draining
	m.mu.Unlock()
	return memberRow{node: m.cfg.NodeID, incarnation: m.incarnation, roles: roles, grpcAddr: m.cfg.GRPCAddr,
		addrs: m.cfg.Addrs, version: m.cfg.Version, draining: draining, ttl: m.cfg.TTL, maxPartitions: m.cfg.MaxPartitions}
}

// Register inserts the member row, taking it over from any earlier process with the same
// node id. When that process's row was still live it adopts its leases under new epochs,
// so that the older process, should it still run (paused, partitioned), is fenced out of
// every one of them; whatever it cannot adopt at once (a fenced write of the old process
// in flight holds the row) is left to the rounds, which free it once that write ends.
// Run calls it; simulations that drive rounds themselves call Register, Round and Leave.
func (m *Manager) Register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/3)
	defer cancel()
	start := time.Now()
	var leases []Lease
	var startedAt, expires time.Time
	err := pgx.BeginFunc(ctx, m.db, func(tx pgx.Tx) error {
		m.count(2)
		old, oldLive, err := lockMember(ctx, tx, m.cfg.NodeID)
		if err != nil {
			return err
		}
		if startedAt, expires, err = registerMember(ctx, tx, m.member()); err != nil {
			return err
		}
		m.rows(1, 1)
		if old == "" || old == m.incarnation {
			return nil
		}
		// The old incarnation is retired: the rounds free what it still holds.
		m.count(1)
		if err := retire(ctx, tx, m.cfg.NodeID, old); err != nil {
			return err
		}
		m.rows(0, 1)
		// And refused for good: paused while replaced, the old process would otherwise
		// insert its member row again when it wakes after this one has left.
		m.count(1)
		if err := refuseReplaced(ctx, tx, m.cfg.NodeID, old); err != nil {
			return err
		}
		m.rows(0, 1)
		if !oldLive {
			return nil
		}
		m.count(1)
		leases, err = adopt(ctx, tx, m.cfg.NodeID, m.incarnation, old, expires)
		m.rows(int64(len(leases)), int64(len(leases)))
		return err
	})
	if err != nil {
		return fmt.Errorf("lease: register %s: %w", m.cfg.NodeID, leftErr(err))
	}
	m.mu.Lock()
	m.startedAt = startedAt
	m.registered = true
	m.settled = false
	m.lastRenew = start
	m.actingUntilLocked(start)
	m.mu.Unlock()
	m.log.Info("registered", "roles", m.cfg.Roles, "grpc_addr", m.cfg.GRPCAddr, "incarnation", m.incarnation, "adopted", len(leases))
	for _, l := range leases {
		m.start(l, start, "adopted from an earlier process with this node id")
	}
	m.notify() // once the adopted leases are held too
	return nil
}

// leftErr tells a statement that Postgres refused because this incarnation left the
// cluster, or was replaced by another process (mink_refuse_left's errors), by its
// SQLSTATE.
func leftErr(err error) error {
	switch pg.Code(err) {
	case "MK001":
		return ErrLeft
	case "MK002":
		return ErrReplaced
	}
	return err
}

// Leave frees every lease and deletes the member row at once, whatever the workers do,
// so other nodes can take the work in their next round, and records the incarnation as
// left, so that Postgres refuses any statement of it still on its way (a round's renewal
// that the stop cancelled) instead of inserting the member row again. It asks the
// workers to stop first but does not wait for them before freeing: fencing makes a slow
// one harmless, and a lease row that a fenced write in flight holds is freed by the
// other nodes' rounds the moment that write ends (it never outlives it, and takeover
// waits for it as always). It waits for Postgres (and for a registration or acquisition
// of this node in flight there) at most lease_ttl/6, then for the workers at most a
// lease_ttl.
func (m *Manager) Leave() error {
	for _, h := range m.detachAll() {
		h.timer.Stop()
		h.cancel(context.Canceled)
	}
	m.mu.Lock()
	m.registered = false // acts under nothing from now on
	if m.actingEnds != nil {
		m.actingEnds.Stop()
	}
	m.notifyLocked()
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.safety())
	defer cancel()
	var recorded, freed, kept, gone int64
	err := pgx.BeginFunc(ctx, m.db, func(tx pgx.Tx) error {
		// First the record that this incarnation left (see mink_left): it waits for any
		// insertion of its member row in flight to commit, so the statement after it sees
		// that row, and from its commit on Postgres refuses every later one, such as a
		// renewal of the last round that reaches Postgres only now.
		m.count(3)
		var err error
		if recorded, err = recordLeft(ctx, tx, m.cfg.NodeID, m.incarnation); err != nil {
			return err
		}
		// Then the member row, before the leases: deleting it waits for an acquisition in
		// flight (which locks the row it acquires under), so the next statement, with a
		// snapshot of its own, frees what that acquisition took too.
		if gone, err = deleteMember(ctx, tx, m.cfg.NodeID, m.incarnation); err != nil {
			return err
		}
		freed, kept, err = freeAll(ctx, tx, m.cfg.NodeID, m.incarnation)
		return err
	})
	if err != nil {
		// Postgres is unreachable: the leases are free once the member row expires.
		m.log.Warn("leave failed; leases will be free after lease_ttl", "error", err)
	} else {
		m.rows(1, recorded+gone+freed+kept)
		m.released.Add(freed)
		if kept > 0 {
			m.log.Warn("left the cluster; leases under fenced writes still in flight are freed when those end")
		} else {
			m.log.Info("left the cluster")
		}
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(m.cfg.TTL):
		m.log.Error("lease workers still running a lease_ttl after leaving; their leases are gone, so their writes change nothing")
	}
	return nil
}

// SetDraining drains (true) or undrains the node: a draining node releases every lease at
// its next round, which this call starts at once, and takes no new ones.
func (m *Manager) SetDraining(on bool) {
	m.mu.Lock()
	m.draining = on
	m.mu.Unlock()
	m.log.Info("draining changed", "draining", on)
	m.Kick()
}

// Draining reports whether the node is draining.
func (m *Manager) Draining() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.draining
}

// StartedAt is the database time at which this process registered.
func (m *Manager) StartedAt() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.startedAt
}
