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
	Rounds     int64 // rounds that completed
	Failed     int64 // rounds that failed (Postgres unreachable, ...)
	Statements int64 // SQL statements sent in rounds, registration and leave
	Acquired   int64
	Released   int64
	Lost       int64
}

// Manager is one node's membership and leases.
type Manager struct {
	db          DB
	cfg         Config
	log         *slog.Logger
	incarnation string
	workers     map[Kind]Worker
	kick        chan struct{}

	mu         sync.Mutex
	held       map[Scope]*held
	draining   bool
	startedAt  time.Time
	lastRenew  time.Time // local time at which the last successful renewal was sent
	lastErr    error
	roundSeq   uint64 // rounds started
	lastOK     uint64 // the latest started round that completed without error
	registered bool
	base       context.Context // parent of worker contexts; ends when Run ends
	wg         sync.WaitGroup

	rounds, failed, statements, acquired, released, lost atomic.Int64
}

// NewManager prepares a node; Run registers it.
func NewManager(db DB, cfg Config) (*Manager, error) {
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

// Run registers the node, runs a round every TTL/3 until ctx ends, then releases every
// lease and leaves at once. It returns nil after a clean leave, or ErrReplaced if another
// process took this node id over.
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
		m.log.Warn("register failed; retrying", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		err := m.Round(ctx)
		if errors.Is(err, ErrReplaced) {
			m.stopAll(ErrReplaced)
			return err
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

const upsertMember = `INSERT INTO mink_members
		(node_id, incarnation, roles, grpc_addr, addrs, version, draining, started_at, renewed_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now(), now() + $8 * interval '1 millisecond')
	ON CONFLICT (node_id) DO UPDATE SET
		roles = EXCLUDED.roles, grpc_addr = EXCLUDED.grpc_addr, addrs = EXCLUDED.addrs,
		version = EXCLUDED.version, draining = EXCLUDED.draining,
		renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at`

func (m *Manager) memberArgs() []any {
	roles := make([]string, len(m.cfg.Roles))
	for i, r := range m.cfg.Roles {
		roles[i] = string(r)
	}
	m.mu.Lock()
	draining := m.draining
	m.mu.Unlock()
	return []any{m.cfg.NodeID, m.incarnation, roles, m.cfg.GRPCAddr, m.cfg.Addrs, m.cfg.Version, draining, m.cfg.TTL.Milliseconds()}
}

// Register inserts the member row, taking it over from any earlier process with the same
// node id, and adopts that process's unexpired leases under new epochs, so that the older
// process, should it still run (paused, partitioned), is fenced out of every one of them.
// Run calls it; simulations that drive rounds themselves call Register, Round and Leave.
func (m *Manager) Register(ctx context.Context) error {
	start := time.Now()
	var leases []Lease
	var startedAt time.Time
	err := pgx.BeginFunc(ctx, m.db, func(tx pgx.Tx) error {
		m.count(2)
		var started time.Time
		if err := tx.QueryRow(ctx, upsertMember+`, incarnation = EXCLUDED.incarnation, started_at = EXCLUDED.started_at
			RETURNING started_at`, m.memberArgs()...).Scan(&started); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE mink_leases l SET epoch = l.epoch + 1, acquired_at = now(),
				expires_at = now() + $2 * interval '1 millisecond'
			FROM mink_tables t
			WHERE l.holder = $1 AND l.expires_at > now() AND t.id = l.table_id
			RETURNING l.kind, l.table_id, l.partition, t.namespace || '.' || t.name, l.epoch, l.expires_at`,
			m.cfg.NodeID, m.cfg.TTL.Milliseconds())
		if err != nil {
			return err
		}
		leases, err = scanLeases(rows, m.cfg.NodeID)
		startedAt = started
		return err
	})
	if err != nil {
		return fmt.Errorf("lease: register %s: %w", m.cfg.NodeID, err)
	}
	m.mu.Lock()
	m.startedAt = startedAt
	m.registered = true
	m.lastRenew = start
	m.mu.Unlock()
	m.log.Info("registered", "roles", m.cfg.Roles, "grpc_addr", m.cfg.GRPCAddr, "incarnation", m.incarnation, "adopted", len(leases))
	for _, l := range leases {
		m.start(l, start, "adopted from an earlier process with this node id")
	}
	return nil
}

// Round is one round of the seed's rules: renew the member row and every lease in one
// batch, read the cluster, decide, then release and acquire. It sends a constant number
// of statements whatever the number of leases. Run calls it every TTL/3; tests and
// simulations call it directly.
func (m *Manager) Round(ctx context.Context) (err error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/3)
	defer cancel()
	defer func() {
		m.mu.Lock()
		m.lastErr = err
		m.mu.Unlock()
		if err != nil {
			m.failed.Add(1)
		} else {
			m.rounds.Add(1)
		}
	}()
	m.expireLocally()
	m.mu.Lock()
	m.roundSeq++
	seq := m.roundSeq
	m.mu.Unlock()
	defer func() {
		if err == nil {
			m.mu.Lock()
			m.lastOK = max(m.lastOK, seq)
			m.mu.Unlock()
		}
	}()
	start := time.Now()

	b := &pgx.Batch{}
	b.Queue(upsertMember+` WHERE mink_members.incarnation = $2 RETURNING 1`, m.memberArgs()...)
	b.Queue(`UPDATE mink_leases l SET expires_at = now() + $3 * interval '1 millisecond'
		FROM mink_members m, mink_tables t
		WHERE l.holder = $1 AND l.expires_at > now() AND t.id = l.table_id
		  AND m.node_id = $1 AND m.incarnation = $2
		RETURNING l.kind, l.table_id, l.partition, t.namespace || '.' || t.name, l.epoch, l.expires_at`,
		m.cfg.NodeID, m.incarnation, m.cfg.TTL.Milliseconds())
	m.count(2)
	br := m.db.SendBatch(ctx, b)
	var one int
	if err := br.QueryRow().Scan(&one); err != nil {
		br.Close()
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("lease: %s: %w", m.cfg.NodeID, ErrReplaced)
		}
		return fmt.Errorf("lease: heartbeat: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return fmt.Errorf("lease: renew: %w", err)
	}
	renewed, err := scanLeases(rows, m.cfg.NodeID)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("lease: renew: %w", err)
	}
	m.reconcile(renewed, start)

	view, _, err := readView(ctx, m.db, m.cfg.NodeID, m.cfg.TTL, m.count)
	if err != nil {
		return fmt.Errorf("lease: read cluster: %w", err)
	}
	view.MaxPartitions = m.cfg.MaxPartitions
	act := Decide(view)
	if len(act.Release) > 0 {
		if err := m.release(ctx, act.Release); err != nil {
			return err
		}
	}
	if len(act.Acquire) > 0 {
		if err := m.acquire(ctx, act.Acquire); err != nil {
			return err
		}
	}
	return nil
}

// reconcile aligns local leases with what Postgres renewed: a lease it did not renew, or
// renewed under another epoch, is lost; one it renewed that has no live worker (the local
// deadline passed, or an acquisition whose answer never arrived) gets a new worker.
func (m *Manager) reconcile(renewed []Lease, start time.Time) {
	now := map[Scope]Lease{}
	for _, l := range renewed {
		now[l.Scope] = l
	}
	m.mu.Lock()
	m.lastRenew = start
	var lost []*held
	for s, h := range m.held {
		if l, ok := now[s]; !ok || l.Epoch != h.Epoch {
			lost = append(lost, h)
			delete(m.held, s)
		}
	}
	m.mu.Unlock()
	for _, h := range lost {
		m.lost.Add(1)
		m.stop(h, ErrLeaseLost)
		m.log.Warn("lease lost", leaseAttrs(h.Lease)...)
	}
	deadline := start.Add(m.cfg.TTL - m.safety())
	for _, l := range renewed {
		m.mu.Lock()
		h := m.held[l.Scope]
		if h != nil && h.ctx.Err() == nil {
			h.Expires = l.Expires
			h.timer.Reset(time.Until(deadline))
			m.mu.Unlock()
			continue
		}
		if h != nil {
			delete(m.held, l.Scope)
		}
		m.mu.Unlock()
		if h != nil {
			m.stop(h, ErrLocalDeadline)
		}
		m.start(l, start, "renewed with no worker running")
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

// acquire takes free leases in one statement; Postgres decides who wins a race.
func (m *Manager) acquire(ctx context.Context, ss []Scope) error {
	kinds, tables, parts := scopeArrays(ss)
	start := time.Now()
	m.count(1)
	rows, err := m.db.Query(ctx, `UPDATE mink_leases l SET holder = $1, epoch = l.epoch + 1,
			expires_at = now() + $3 * interval '1 millisecond', acquired_at = now()
		FROM unnest($4::text[], $5::bigint[], $6::int[]) AS w(kind, table_id, partition),
			mink_members m, mink_tables t
		WHERE l.kind = w.kind AND l.table_id = w.table_id AND l.partition = w.partition
		  AND (l.holder IS NULL OR l.expires_at IS NULL OR l.expires_at <= now())
		  AND m.node_id = $1 AND m.incarnation = $2 AND m.expires_at > now() AND NOT m.draining
		  AND t.id = l.table_id
		RETURNING l.kind, l.table_id, l.partition, t.namespace || '.' || t.name, l.epoch, l.expires_at`,
		m.cfg.NodeID, m.incarnation, m.cfg.TTL.Milliseconds(), kinds, tables, parts)
	if err != nil {
		return fmt.Errorf("lease: acquire: %w", err)
	}
	got, err := scanLeases(rows, m.cfg.NodeID)
	if err != nil {
		return fmt.Errorf("lease: acquire: %w", err)
	}
	for _, l := range got {
		m.acquired.Add(1)
		m.start(l, start, "acquired")
	}
	return nil
}

// release stops the workers of ss, then frees the leases in one statement. Stopping first
// means the next holder never overlaps with this one, even before fencing is needed.
func (m *Manager) release(ctx context.Context, ss []Scope) error {
	var hs []*held
	m.mu.Lock()
	for _, s := range ss {
		if h := m.held[s]; h != nil {
			hs = append(hs, h)
			delete(m.held, s)
		}
	}
	m.mu.Unlock()
	var epochs []int64
	var scopes []Scope
	for _, h := range hs {
		m.stop(h, context.Canceled)
		scopes = append(scopes, h.Scope)
		epochs = append(epochs, h.Epoch)
	}
	if len(scopes) == 0 {
		return nil
	}
	kinds, tables, parts := scopeArrays(scopes)
	m.count(1)
	tag, err := m.db.Exec(ctx, `UPDATE mink_leases l SET holder = NULL, expires_at = NULL
		FROM unnest($2::text[], $3::bigint[], $4::int[], $5::bigint[]) AS w(kind, table_id, partition, epoch)
		WHERE l.kind = w.kind AND l.table_id = w.table_id AND l.partition = w.partition
		  AND l.epoch = w.epoch AND l.holder = $1`,
		m.cfg.NodeID, kinds, tables, parts, epochs)
	if err != nil {
		// The workers are stopped; the leases expire on their own after lease_ttl.
		return fmt.Errorf("lease: release: %w", err)
	}
	m.released.Add(tag.RowsAffected())
	for _, h := range hs {
		m.log.Info("lease released", leaseAttrs(h.Lease)...)
	}
	return nil
}

// start runs the worker of a lease just taken or renewed, until its local deadline.
func (m *Manager) start(l Lease, renewStart time.Time, why string) {
	m.mu.Lock()
	if old := m.held[l.Scope]; old != nil {
		m.mu.Unlock()
		m.stop(old, ErrLeaseLost)
		m.mu.Lock()
	}
	ctx, cancel := context.WithCancelCause(m.base)
	h := &held{Lease: l, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	h.timer = time.AfterFunc(time.Until(renewStart.Add(m.cfg.TTL-m.safety())), func() { cancel(ErrLocalDeadline) })
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

// stop ends a lease's worker and waits for it, but not past the lease's own safety margin:
// fencing protects the data even from a worker that ignores its context.
func (m *Manager) stop(h *held, cause error) {
	h.timer.Stop()
	h.cancel(cause)
	select {
	case <-h.done:
	case <-time.After(m.safety()):
		m.log.Error("lease worker did not stop in time", leaseAttrs(h.Lease)...)
	}
}

func (m *Manager) stopAll(cause error) {
	m.mu.Lock()
	hs := make([]*held, 0, len(m.held))
	for s, h := range m.held {
		hs = append(hs, h)
		delete(m.held, s)
	}
	m.mu.Unlock()
	for _, h := range hs {
		m.stop(h, cause)
	}
}

// Leave stops every worker, releases every lease and deletes the member row, at once, so
// other nodes can take the work in their next round.
func (m *Manager) Leave() error {
	m.stopAll(context.Canceled)
	m.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.TTL/3)
	defer cancel()
	m.count(2)
	err := pgx.BeginFunc(ctx, m.db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE mink_leases SET holder = NULL, expires_at = NULL
			WHERE holder = $1 AND EXISTS (SELECT 1 FROM mink_members WHERE node_id = $1 AND incarnation = $2)`,
			m.cfg.NodeID, m.incarnation)
		if err != nil {
			return err
		}
		m.released.Add(tag.RowsAffected())
		_, err = tx.Exec(ctx, `DELETE FROM mink_members WHERE node_id = $1 AND incarnation = $2`, m.cfg.NodeID, m.incarnation)
		return err
	})
	if err != nil {
		// Postgres is unreachable: the leases and the row expire on their own.
		m.log.Warn("leave failed; leases will expire after lease_ttl", "error", err)
		return nil
	}
	m.log.Info("left the cluster")
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
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		done := m.lastOK >= want
		m.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lease: waiting for a round: %w", context.Cause(ctx))
		case <-tick.C:
		}
	}
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
