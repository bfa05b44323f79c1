package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Round is one round of the seed's rules: renew the member row (which renews every lease
// this node holds), free the leases of members whose rows expired, read what changed,
// decide, then release and acquire. In a steady cluster it writes one row and reads a
// handful, whatever the number of tables, partitions and leases held. Run calls it every
// TTL/3; tests and simulations call it directly.
func (m *Manager) Round(ctx context.Context) (err error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/3)
	defer cancel()
	defer func() {
		if err != nil {
			m.failed.Add(1)
		} else {
			m.rounds.Add(1)
		}
		m.mu.Lock()
		m.lastErr = err
		m.notifyLocked()
		m.mu.Unlock()
	}()
	m.expireLocally()
	m.mu.Lock()
	m.roundSeq++
	seq := m.roundSeq
	// A node that could not renew for a whole lease_ttl (an outage) comes back as if it
	// joined: it first watches the membership for one round, so that nodes recovering
	// together all compute their shares over all of them.
	if m.registered && time.Since(m.lastRenew) > m.cfg.TTL {
		m.settled = false
	}
	m.mu.Unlock()
	defer func() {
		if err == nil {
			m.mu.Lock()
			m.lastOK = max(m.lastOK, seq)
			m.mu.Unlock()
		}
	}()

	// The renewal, alone in its transaction: it locks only this node's member row, which
	// no fenced write ever locks, so nothing can hold it up.
	start := time.Now()
	m.count(1)
	inserted, expires, err := renewMember(ctx, m.db, m.member())
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("lease: %s: %w", m.cfg.NodeID, ErrReplaced)
	}
	if err != nil {
		return fmt.Errorf("lease: heartbeat: %w", leftErr(err))
	}
	m.rows(1, 1)
	if inserted {
		// Our row had expired and another node's round deleted it, freeing our leases
		// (they may be another node's by now): nothing we held is ours any more.
		m.loseAll("the member row expired and was removed: its leases were freed")
	}
	m.renewed(start, expires)

	m.count(roundStatements)
	rr, err := readRound(ctx, m.db)
	if err != nil {
		return err
	}
	m.rows(2+rr.freeRows, rr.cleaned)
	freeParts, freeWriters := rr.freeParts, rr.freeWriters
	if err := m.refresh(ctx, rr.membersGen, rr.tablesGen); err != nil {
		return err
	}

	m.mu.Lock()
	settled := m.settled
	held := make([]Scope, 0, len(m.held)+len(m.unreleased))
	for s := range m.held {
		held = append(held, s)
	}
	for s := range m.unreleased {
		held = append(held, s)
	}
	view := View{Self: m.cfg.NodeID, Members: m.members, Tables: m.tables, Held: held,
		FreePartitions: freeParts, FreeWriters: freeWriters}
	m.mu.Unlock()
	m.dropGone()
	act := Decide(view)
	if len(act.Fetch) > 0 && settled {
		if view.FreeScopes, err = m.freeScopes(ctx, act.Fetch); err != nil {
			return err
		}
		act = Decide(view)
	}
	if err := m.release(ctx, act.Release); err != nil {
		return err
	}
	var got []Lease
	if len(act.Acquire) > 0 && settled {
		if got, err = m.acquire(ctx, act.Acquire); err != nil {
			return err
		}
	}
	for _, l := range got {
		// Free as the round read it, but no longer: this node took it.
		if l.Kind == KindWriter {
			delete(freeWriters, l.Table)
		} else {
			freeParts[l.Table]--
		}
	}
	m.mu.Lock()
	m.settled = true
	m.freeParts, m.freeWriters = freeParts, freeWriters
	m.mu.Unlock()
	return nil
}

// refresh reads the members and the tables again when their generations moved.
func (m *Manager) refresh(ctx context.Context, membersGen, tablesGen int64) error {
	m.mu.Lock()
	needMembers, needTables := membersGen != m.membersGen || m.members == nil, tablesGen != m.tablesGen || m.tables == nil
	m.mu.Unlock()
	if needMembers {
		m.count(1)
		ms, err := ListMembers(ctx, m.db)
		if err != nil {
			return fmt.Errorf("lease: read members: %w", err)
		}
		m.rows(int64(len(ms)), 0)
		m.mu.Lock()
		m.members, m.membersGen = ms, membersGen
		m.mu.Unlock()
	}
	if needTables {
		m.count(1)
		tables, names, err := readTables(ctx, m.db)
		if err != nil {
			return fmt.Errorf("lease: read tables: %w", err)
		}
		m.rows(int64(len(tables)), 0)
		m.mu.Lock()
		m.tables, m.tableNames, m.tablesGen = tables, names, tablesGen
		m.mu.Unlock()
	}
	return nil
}

// freeScopes reads, for each table, up to the wanted number of its free partition leases,
// the ones this node prefers most, so that a round reads no more than it may take. The
// node hashes its preferences itself and sends them as one array (a key per partition,
// table after table): ordering by mink_preference in SQL (the same hash) made Postgres
// compute a sha256 per free row, which at a 1,000-node cold start was most of its work.
func (m *Manager) freeScopes(ctx context.Context, wants map[int64]int32) (map[int64][]int32, error) {
	m.mu.Lock()
	parts := make(map[int64]int32, len(m.tables))
	for _, t := range m.tables {
		parts[t.ID] = t.Partitions
	}
	m.mu.Unlock()
	var tables, offsets []int64
	var counts []int32
	var keys []int64
	for t, n := range wants {
		tables, counts, offsets = append(tables, t), append(counts, n), append(offsets, int64(len(keys)))
		keys = appendPreferenceKeys(keys, m.cfg.NodeID, t, parts[t])
	}
	m.count(1)
	out, n, err := readFree(ctx, m.db, tables, counts, offsets, partsOf(tables, parts), keys)
	m.rows(n, 0)
	if err != nil {
		return nil, fmt.Errorf("lease: read free leases: %w", err)
	}
	return out, nil
}

// appendPreferenceKeys appends node's Preference for each partition of a table, as
// bigints that sort as the uint64s do (the sign bit flipped).
func appendPreferenceKeys(keys []int64, node string, table int64, partitions int32) []int64 {
	for p := range partitions {
		keys = append(keys, int64(Preference(node, PartitionScope(table, p))^(1<<63)))
	}
	return keys
}

func partsOf(tables []int64, parts map[int64]int32) []int32 {
	out := make([]int32, len(tables))
	for i, t := range tables {
		out[i] = parts[t]
	}
	return out
}

// dropGone forgets the leases of tables that no longer exist (dropped: their lease rows
// went with them) and stops their workers.
func (m *Manager) dropGone() {
	m.mu.Lock()
	var gone []*held
	for s, h := range m.held {
		if _, ok := m.tableNames[s.Table]; !ok && m.tableNames != nil {
			gone = append(gone, h)
			delete(m.held, s)
		}
	}
	for s := range m.unreleased {
		if _, ok := m.tableNames[s.Table]; !ok && m.tableNames != nil {
			delete(m.unreleased, s)
		}
	}
	m.mu.Unlock()
	m.stop(ErrLeaseLost, gone...)
	for _, h := range gone {
		m.lost.Add(1)
		m.log.Info("lease gone with its table", leaseAttrs(h.Lease)...)
	}
}

// acquire takes free leases in one statement and returns those it got; Postgres decides
// who wins a race, and a lease another node is taking at the same moment is skipped, not
// waited for.
func (m *Manager) acquire(ctx context.Context, ss []Scope) ([]Lease, error) {
	start := time.Now()
	m.count(1)
	got, err := acquire(ctx, m.db, m.cfg.NodeID, m.incarnation, ss)
	if err != nil {
		return nil, fmt.Errorf("lease: acquire: %w", err)
	}
	m.rows(int64(len(got)), int64(len(got)))
	for _, l := range got {
		m.acquired.Add(1)
		m.start(l, start, "acquired")
	}
	return got, nil
}

// release stops the workers of ss, then frees the leases in one statement. Stopping first
// means the next holder never overlaps with this one, even before fencing is needed. A
// lease whose row a worker that ignored its stop still holds in a fenced write, or that
// Postgres did not free (an error), stays this node's in Postgres: it is kept aside and
// released again every round until it is free. Nothing else would ever free it, as this
// node's member row stays live.
func (m *Manager) release(ctx context.Context, ss []Scope) error {
	var hs []*held
	m.mu.Lock()
	for _, s := range ss {
		if h := m.held[s]; h != nil {
			hs = append(hs, h)
			delete(m.held, s)
		}
	}
	pending := make(map[Scope]Lease, len(hs)+len(m.unreleased))
	for s, l := range m.unreleased {
		pending[s] = l
	}
	m.mu.Unlock()
	m.stop(context.Canceled, hs...)
	for _, h := range hs {
		pending[h.Scope] = h.Lease
	}
	if len(pending) == 0 {
		return nil
	}
	m.count(1)
	freed, err := free(ctx, m.db, m.cfg.NodeID, m.incarnation, pending)
	m.rows(int64(len(freed)), int64(len(freed)))
	m.released.Add(int64(len(freed)))
	for _, s := range freed {
		m.log.Info("lease released", leaseAttrs(pending[s])...)
		delete(pending, s)
	}
	if err == nil && len(pending) > 0 {
		// Not freed: still ours (locked by a fenced write in flight: next round), or not
		// ours any more (its table dropped, say: forget it).
		err = m.stillMine(ctx, pending)
	}
	m.mu.Lock()
	m.unreleased = pending
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("lease: release: %w", err)
	}
	return nil
}

// stillMine removes from pending the leases this node no longer holds in Postgres.
func (m *Manager) stillMine(ctx context.Context, pending map[Scope]Lease) error {
	m.count(1)
	mine, err := stillHeld(ctx, m.db, m.cfg.NodeID, m.incarnation, pending)
	if err != nil {
		return err
	}
	m.rows(int64(len(mine)), 0)
	keep := map[Scope]bool{}
	for _, s := range mine {
		keep[s] = true
	}
	for s, l := range pending {
		if !keep[s] {
			m.log.Info("lease no longer held; nothing to release", leaseAttrs(l)...)
			delete(pending, s)
		} else {
			m.log.Warn("lease not released: a fenced write under it is still in flight; trying again next round", leaseAttrs(l)...)
		}
	}
	return nil
}
