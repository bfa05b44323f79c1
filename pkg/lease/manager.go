package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
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
	return &Manager{
		db:          db,
		cfg:         cfg,
		log:         cfg.Logger.With("node", cfg.NodeID),
		incarnation: uuid.NewString(),
		workers:     map[Kind]Worker{},
		kick:        make(chan struct{}, 1),
		changed:     make(chan struct{}),
		held:        map[Scope]*held{},
		base:        context.Background(),
	}, nil
}

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

// Acting reports whether the node renewed recently enough to act under its leases.
func (m *Manager) Acting() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.registered && time.Since(m.lastRenew) < m.cfg.TTL-m.safety()
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
