package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/pg"
)

// DefaultTTL is the seed's lease_ttl.
const DefaultTTL = 30 * time.Second

// Config describes one node to the lease library.
type Config struct {
	NodeID        string
	Roles         []Role
	GRPCAddr      string            // advertised gRPC address
	Addrs         map[string]string // other advertised addresses ("catalog", "s3", ...)
	Version       string
	TTL           time.Duration // lease_ttl; rounds run every TTL/3
	MaxPartitions int           // cap on partition leases; 0 = none
	Logger        *slog.Logger
}

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	if c.NodeID == "" {
		return errors.New("node id is empty")
	}
	if len(c.Roles) == 0 {
		return errors.New("node has no role")
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < 300*time.Millisecond {
		return fmt.Errorf("lease ttl %v is too short (minimum 300ms)", c.TTL)
	}
	if c.MaxPartitions < 0 {
		return fmt.Errorf("max partitions %d is negative", c.MaxPartitions)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Addrs == nil {
		c.Addrs = map[string]string{}
	}
	return nil
}

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

// Stats are a node's coordination figures.
type Stats struct {
	Rounds      int64 // rounds that completed
	Failed      int64 // rounds that failed (Postgres unreachable, ...)
	Statements  int64 // SQL statements sent in rounds, registration and leave
	RowsRead    int64 // rows those statements returned
	RowsWritten int64 // rows they inserted, updated or deleted
	Acquired    int64
	Released    int64
	Lost        int64
}

// Manager is one node's membership and leases.
type Manager struct {
	db          pg.DB
	cfg         Config
	log         *slog.Logger
	incarnation string
	workers     map[Kind]Worker
	kick        chan struct{}

	mu         sync.Mutex
	held       map[Scope]*held
	unreleased map[Scope]Lease // released but still ours in Postgres: released again every round
	draining   bool
	startedAt  time.Time
	lastRenew  time.Time // local time at which the last successful renewal was sent
	lastErr    error
	roundSeq   uint64 // rounds started
	lastOK     uint64 // the latest started round that completed without error
	registered bool
	// changed is closed, and replaced, whenever something Changed's callers wait for
	// happened: registration, a round's end (its leases moved, Acting may have changed),
	// Acting turning false as the local deadline passes, a worker stopped at its own
	// deadline, the leave.
	changed    chan struct{}
	actingEnds *time.Timer     // notifies when Acting turns false for want of a renewal
	base       context.Context // parent of worker contexts; ends when Run ends
	wg         sync.WaitGroup

	// What the last rounds read, kept between rounds: the members and the tables are
	// read again only when their generation moved.
	settled    bool // has seen the membership for a round since it (re)joined
	membersGen int64
	tablesGen  int64
	members    []Member
	tables     []TableView
	tableNames map[int64]string
	// The free leases the last completed round read, less what it took itself: for
	// Free (metrics), never for decisions.
	freeParts   map[int64]int32
	freeWriters map[int64]bool

	rounds, failed, statements, rowsRead, rowsWritten, acquired, released, lost atomic.Int64
}

// NewManager prepares a node; Run registers it.
func NewManager(db pg.DB, cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return &Manager{
		db:          db,
		cfg:         cfg,
		log:         cfg.Logger.With("node", cfg.NodeID),
		incarnation: fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]),
		workers:     map[Kind]Worker{},
		kick:        make(chan struct{}, 1),
		changed:     make(chan struct{}),
		held:        map[Scope]*held{},
		base:        context.Background(),
	}, nil
}

// OnLease sets the worker run for every lease of kind k this node holds. Call it before
// Run.
func (m *Manager) OnLease(k Kind, w Worker) { m.workers[k] = w }

// Config returns the node's config (with defaults filled in).
func (m *Manager) Config() Config { return m.cfg }

// safety is how long before Postgres would expire a lease the node stops acting under it.
func (m *Manager) safety() time.Duration { return m.cfg.TTL / 6 }

func (m *Manager) count(n int) { m.statements.Add(int64(n)) }

// rows counts what statements read and wrote.
func (m *Manager) rows(read, written int64) {
	m.rowsRead.Add(read)
	m.rowsWritten.Add(written)
}

// Run registers the node, runs a round every TTL/3 until ctx ends, then releases every
// lease and leaves at once. It returns nil after a clean leave, or ErrReplaced if another
// process took this node id over (ErrLeft if this Manager had left already: a Manager
// runs once).
func (m *Manager) Run(ctx context.Context) error {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	m.mu.Lock()
	m.base = base
	m.mu.Unlock()
	defer cancelBase()

	interval := m.cfg.TTL / 3
	// Register, retrying while Postgres is unreachable: a node may start before it.
	for {
		err := m.Register(ctx)
		if err == nil {
			break
		}
		if errors.Is(err, ErrLeft) {
			return err
		}
		if ctx.Err() != nil {
			// The attempt may still commit in Postgres (its client gave up, not the
			// server): leave, so that it frees at once whatever it registered, and so that
			// it is refused if it commits later.
			return m.Leave()
		}
		m.log.Warn("register failed; retrying", "error", err)
		select {
		case <-ctx.Done():
			return m.Leave()
		case <-time.After(interval):
		}
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		err := m.Round(ctx)
		for _, final := range []error{ErrReplaced, ErrLeft} {
			if errors.Is(err, final) {
				m.stopAll(final)
				return err
			}
		}
		if err != nil && ctx.Err() == nil {
			m.log.Warn("lease round failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return m.Leave()
		case <-ticker.C:
		case <-m.kick:
		}
	}
}

// Kick asks for a round now rather than at the next tick (after a drain, say).
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

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

// Held returns the leases this node holds and acts under now, by scope.
func (m *Manager) Held() []Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Lease, 0, len(m.held))
	for _, h := range m.held {
		if h.ctx.Err() == nil {
			out = append(out, h.Lease)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Scope, out[j].Scope
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Partition < b.Partition
	})
	return out
}

// FreeLeases counts the leases of one kind of one table that had no live holder.
type FreeLeases struct {
	Table     int64
	TableName string // "namespace.name"
	Kind      Kind
	Free      int
}

// Free counts, for every table and both kinds, the leases that had no live holder as of
// the last completed round, less those the round itself took: a partition no indexer
// indexes, a table no writer commits. A dead holder's lease counts as held until the
// round that frees it, a lease_ttl after its last renewal. Nil before the first round.
func (m *Manager) Free() []FreeLeases {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freeParts == nil {
		return nil
	}
	out := make([]FreeLeases, 0, 2*len(m.tables))
	for _, t := range m.tables {
		w := 0
		if m.freeWriters[t.ID] {
			w = 1
		}
		name := m.tableNames[t.ID]
		out = append(out, FreeLeases{Table: t.ID, TableName: name, Kind: KindPartition, Free: int(max(0, m.freeParts[t.ID]))},
			FreeLeases{Table: t.ID, TableName: name, Kind: KindWriter, Free: w})
	}
	return out
}

// Fenced runs fn under lease l (see the package function Fenced).
func (m *Manager) Fenced(ctx context.Context, l Lease, fn func(tx pgx.Tx) error) error {
	return Fenced(ctx, m.db, l, fn)
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

// AwaitRound starts a round now and waits until a round that began after the call has
// completed: what the node was told before (a drain, say) is then done in Postgres, not
// only locally.
func (m *Manager) AwaitRound(ctx context.Context) error {
	m.mu.Lock()
	want := m.roundSeq + 1
	m.mu.Unlock()
	m.Kick()
	for {
		m.mu.Lock()
		done, changed := m.lastOK >= want, m.changed
		m.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lease: waiting for a round: %w", context.Cause(ctx))
		case <-changed:
		}
	}
}

// Changed returns a channel closed at the next event: the node registered, a round ended
// (whatever it did; Stats, Held, Free, LastError and Acting may have changed), Acting
// turned false (the local deadline passed without a renewal, or the node left), or a
// worker stopped at its local deadline (Held changed). It is what callers waiting on
// Acting, Held or Stats wake on, instead of polling. Take the channel before reading the
// state it guards, so nothing falls between.
func (m *Manager) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *Manager) notify() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notifyLocked()
}

// actingUntilLocked notes a renewal begun at start: Acting turns false, and Changed is
// closed, at its local deadline unless another renewal comes first.
func (m *Manager) actingUntilLocked(start time.Time) {
	d := time.Until(start.Add(m.cfg.TTL - m.safety()))
	if m.actingEnds == nil {
		m.actingEnds = time.AfterFunc(d, m.notify)
		return
	}
	m.actingEnds.Reset(d)
}

// Draining reports whether the node is draining.
func (m *Manager) Draining() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.draining
}

// Acting reports whether the node renewed recently enough to act under its leases.
func (m *Manager) Acting() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.registered && time.Since(m.lastRenew) < m.cfg.TTL-m.safety()
}

// StartedAt is the database time at which this process registered.
func (m *Manager) StartedAt() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.startedAt
}

// LastError is the error of the last round, nil if it succeeded.
func (m *Manager) LastError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastErr
}

// Stats returns the node's coordination counters.
func (m *Manager) Stats() Stats {
	return Stats{
		Rounds: m.rounds.Load(), Failed: m.failed.Load(), Statements: m.statements.Load(),
		RowsRead: m.rowsRead.Load(), RowsWritten: m.rowsWritten.Load(),
		Acquired: m.acquired.Load(), Released: m.released.Load(), Lost: m.lost.Load(),
	}
}

// leaseAttrs are the log attributes every line about a lease carries.
func leaseAttrs(l Lease) []any {
	attrs := []any{"table", l.TableName, "table_id", l.Table, "kind", string(l.Kind), "epoch", l.Epoch}
	if l.Kind == KindPartition {
		attrs = append(attrs, "partition", l.Partition)
	}
	return attrs
}
