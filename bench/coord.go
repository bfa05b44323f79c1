package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/lease"
)

// coordTTL is the simulated nodes' lease_ttl. The rules do not depend on it; it only has
// to be longer than a pass (one round of every node, in turn), so that no member row
// expires between two of its node's rounds however long a pass of 1,000 nodes takes on
// a slow machine. A crash is simulated by expiring the victim's row in SQL.
const coordTTL = 10 * time.Minute

// roundInterval is how often a real node runs a round at the default lease_ttl: the
// time within which the whole cluster's Postgres work of one pass must fit.
const roundInterval = lease.DefaultTTL / 3

// CoordOptions is one simulated cluster.
type CoordOptions struct {
	Nodes, Tables, Partitions int
	SteadyPasses              int  // passes measured once the cold start converged, twice
	Changes                   bool // then a join, a clean leave and a crash
}

// CoordPhase is one convergence: after a cold start, a join, a clean leave or a crash.
type CoordPhase struct {
	Name      string
	Nodes     int   // nodes in the cluster during the phase
	Passes    int   // lockstep passes (every node one round) until one moved nothing, that one included
	MinPasses int   // the fewest the rules allow, the quiet pass included
	Settle    int   // passes of MinPasses in which a node only watches the membership
	Excess    int   // the most leases of one table a node had to hand back, one per round
	Moved     int64 // leases acquired and released
	// Per node per round over the phase.
	Stmts, Read, Written float64
	Took                 time.Duration
	// LeaveCall is how long the leaving node's Leave took (clean leave only): its one
	// statement frees every lease it holds and deletes its member row.
	LeaveCall time.Duration
	LeaveHeld int // leases the leaving node held
}

// CoordSteady is the steady state after the cold start: passes in which nothing moves.
type CoordSteady struct {
	Nodes, Passes, Rounds int
	// Per node per round, exact averages of lease.Stats deltas; Max* is the most one
	// round read or wrote.
	Stmts, Read, Written float64
	MaxRead, MaxWritten  int64
	Moved                int64   // leases moved during the steady passes (0 when steady)
	Held                 float64 // leases a node holds (partition and writer), on average
	LeaseRows            int64   // lease rows in Postgres: tables x (partitions + 1)
	// PGCPU is the Postgres cluster's CPU time (user + system, every process) over the
	// steady passes, PGClients the part of the client backends (the nodes' connections),
	// PGIdle the whole cluster's over as long a wall time with no rounds; CPUErr says why
	// they are unknown.
	PGCPU, PGClients, PGIdle time.Duration
	CPUErr                   error
	ClientCPU                time.Duration // this process's CPU time over the steady passes
	Wall                     time.Duration
	RoundP50, RoundP99       time.Duration
}

// CPUPerPass is the cluster's Postgres work of one round of every node.
func (s CoordSteady) CPUPerPass() time.Duration { return s.PGCPU / time.Duration(max(1, s.Passes)) }

// CoordResult is one simulated cluster size.
type CoordResult struct {
	Nodes, Tables, Partitions int
	Phases                    []CoordPhase
	// Fresh is the steady state right after the cold start converged, when the lease
	// rows' earlier versions (every lease was taken once) are still in the table and its
	// indexes; Steady is the same after a VACUUM ANALYZE, as autovacuum leaves it.
	Fresh, Steady CoordSteady
	Took          time.Duration
}

// Phase returns the phase of that name (zero if it did not run).
func (r CoordResult) Phase(name string) CoordPhase {
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	return CoordPhase{}
}

// Coordinate simulates nodes in this process, each a lease.Manager with the indexer and
// writer roles driving Register/Round/Leave against one real Postgres, as
// pkg/lease/sim_test.go does: every pass runs one round of every node in turn. It
// measures the cold start (every node registered, every lease free) until a pass moves
// nothing, then steady passes, then (o.Changes) a join, a clean leave and a crash, each
// until a pass moves nothing.
func (e *Env) Coordinate(ctx context.Context, o CoordOptions) (CoordResult, error) {
	start := time.Now()
	res := CoordResult{Nodes: o.Nodes, Tables: o.Tables, Partitions: o.Partitions}
	db, _, err := e.NewDB(ctx)
	if err != nil {
		return res, err
	}
	defer db.Close()
	if err := coordTables(ctx, db, o.Tables, o.Partitions); err != nil {
		return res, err
	}
	cpu, cpuErr := e.pgCPU(ctx)
	s := &sim{ctx: ctx, db: db}
	defer s.close()
	for i := range o.Nodes {
		m, err := s.newNode(i)
		if err != nil {
			return res, err
		}
		s.ms = append(s.ms, m)
	}
	// Cold start: every node takes nothing in its first round (it only watches the
	// membership), then its share in its second.
	ph, err := s.converge("cold start", 1)
	if err != nil {
		return res, err
	}
	res.Phases = append(res.Phases, ph)

	// Steady: right after the cold start, then once VACUUM has removed what the cold
	// start's acquisitions left behind (autovacuum does it within a minute or so: every
	// lease row was updated once).
	if res.Fresh, err = s.steady(o.SteadyPasses, cpu, false); err != nil {
		return res, err
	}
	if _, err := db.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return res, fmt.Errorf("vacuum: %w", err)
	}
	if res.Steady, err = s.steady(o.SteadyPasses, cpu, true); err != nil {
		return res, err
	}
	for _, st := range []*CoordSteady{&res.Fresh, &res.Steady} {
		st.LeaseRows = int64(o.Tables) * int64(o.Partitions+1)
		if cpuErr != nil {
			st.CPUErr = cpuErr
		}
	}
	if !o.Changes {
		res.Took = time.Since(start)
		return res, nil
	}

	// Join: shares drop; nodes above the new share hand back one partition per table
	// per round, and the new node (last in each pass) takes them from its second round.
	m, err := s.newNode(o.Nodes)
	if err != nil {
		return res, err
	}
	s.ms = append(s.ms, m)
	if ph, err = s.converge("join", 1); err != nil {
		return res, err
	}
	res.Phases = append(res.Phases, ph)

	// Clean leave: the node frees its leases and deletes its member row at once; the
	// others take them in their next round.
	leaver := s.ms[0]
	held := len(leaver.Held())
	t0 := time.Now()
	if err := leaver.Leave(); err != nil {
		return res, err
	}
	call := time.Since(t0)
	s.ms = s.ms[1:]
	if ph, err = s.converge("clean leave", 0); err != nil {
		return res, err
	}
	ph.LeaveCall, ph.LeaveHeld = call, held
	res.Phases = append(res.Phases, ph)

	// Crash: the victim runs no more rounds and its member row expires (as lease_ttl
	// passing would have it); the next round of any node deletes the row, frees its
	// leases, and the others take them.
	k := len(s.ms) / 2
	victim := s.ms[k]
	s.ms = append(s.ms[:k:k], s.ms[k+1:]...)
	s.crashed = append(s.crashed, victim)
	if _, err := db.Exec(ctx, `UPDATE mink_members SET expires_at = now() WHERE node_id = $1`, victim.Config().NodeID); err != nil {
		return res, err
	}
	if ph, err = s.converge("crash", 0); err != nil {
		return res, err
	}
	res.Phases = append(res.Phases, ph)
	res.Took = time.Since(start)
	return res, nil
}

// sim is the simulated cluster: its live nodes in pass order, and those that crashed.
type sim struct {
	ctx     context.Context
	db      *pgxpool.Pool
	ms      []*lease.Manager
	crashed []*lease.Manager
	rounds  []time.Duration // each round's duration, when recorded
	record  bool
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))

func (s *sim) newNode(i int) (*lease.Manager, error) {
	m, err := lease.NewManager(s.db, lease.Config{
		NodeID: fmt.Sprintf("sim-%04d", i), Roles: []lease.Role{lease.RoleIndexer, lease.RoleWriter},
		GRPCAddr: "sim:7070", TTL: coordTTL, Logger: quietLog,
	})
	if err != nil {
		return nil, err
	}
	return m, m.Register(s.ctx)
}

// close stops every node's workers. The pool is closed first: the database is thrown
// away, and a Leave that cannot reach it still stops its workers at once.
func (s *sim) close() {
	s.db.Close()
	for _, m := range append(s.ms, s.crashed...) {
		m.Leave()
	}
}

// pass runs one round of every node in turn and returns the leases moved.
func (s *sim) pass(each func(d lease.Stats)) (int64, error) {
	moved := int64(0)
	for _, m := range s.ms {
		s0 := m.Stats()
		t0 := time.Now()
		if err := m.Round(s.ctx); err != nil {
			return moved, fmt.Errorf("%s: round: %w", m.Config().NodeID, err)
		}
		if s.record {
			s.rounds = append(s.rounds, time.Since(t0))
		}
		d := statsDelta(m.Stats(), s0)
		moved += d.Acquired + d.Released
		if each != nil {
			each(d)
		}
	}
	return moved, nil
}

func statsDelta(a, b lease.Stats) lease.Stats {
	return lease.Stats{Rounds: a.Rounds - b.Rounds, Failed: a.Failed - b.Failed, Statements: a.Statements - b.Statements,
		RowsRead: a.RowsRead - b.RowsRead, RowsWritten: a.RowsWritten - b.RowsWritten,
		Acquired: a.Acquired - b.Acquired, Released: a.Released - b.Released, Lost: a.Lost - b.Lost}
}

// total is the sum of every live node's counters.
func (s *sim) total() lease.Stats {
	var t lease.Stats
	for _, m := range s.ms {
		st := m.Stats()
		t.Rounds += st.Rounds
		t.Statements += st.Statements
		t.RowsRead += st.RowsRead
		t.RowsWritten += st.RowsWritten
		t.Acquired += st.Acquired
		t.Released += st.Released
		t.Lost += st.Lost
	}
	return t
}

// converge runs passes until one moves no lease; the first settle passes never count as
// quiet (a node that just registered takes nothing in its first round).
func (s *sim) converge(name string, settle int) (CoordPhase, error) {
	ph := CoordPhase{Name: name, Nodes: len(s.ms), Settle: settle}
	var err error
	if ph.MinPasses, ph.Excess, err = s.fewestPasses(settle); err != nil {
		return ph, fmt.Errorf("%s: %w", name, err)
	}
	before := s.total()
	t0 := time.Now()
	for pass := 1; pass <= 100; pass++ {
		moved, err := s.pass(nil)
		if err != nil {
			return ph, fmt.Errorf("%s: %w", name, err)
		}
		ph.Moved += moved
		if moved > 0 || pass <= settle {
			continue
		}
		d := statsDelta(s.total(), before)
		r := float64(max(1, d.Rounds))
		ph.Passes, ph.Took = pass, time.Since(t0)
		ph.Stmts, ph.Read, ph.Written = float64(d.Statements)/r, float64(d.RowsRead)/r, float64(d.RowsWritten)/r
		return ph, nil
	}
	return ph, fmt.Errorf("%s: no convergence in 100 passes", name)
}

// fewestPasses is the fewest passes in which the rules can take the cluster from what
// its nodes hold now to their shares over the live members, the quiet pass included:
// leases are handed back one per table per round (excess rounds), a node that just
// registered takes nothing for settle rounds, and the nodes that take come after those
// that hand back in each pass (the joiner is last), so they take in the same pass.
func (s *sim) fewestPasses(settle int) (passes, excess int, err error) {
	members, err := lease.ListMembers(s.ctx, s.db)
	if err != nil {
		return 0, 0, err
	}
	rows, err := s.db.Query(s.ctx, `SELECT id, partitions FROM mink_tables`)
	if err != nil {
		return 0, 0, err
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lease.TableView, error) {
		var t lease.TableView
		return t, r.Scan(&t.ID, &t.Partitions)
	})
	if err != nil {
		return 0, 0, err
	}
	shares := lease.Shares(members, tables)
	var writers []string
	for _, m := range members {
		if m.Has(lease.RoleWriter) && !m.Draining {
			writers = append(writers, m.NodeID)
		}
	}
	writerOf := map[int64]string{}
	for _, t := range tables {
		writerOf[t.ID] = topWriter(writers, lease.WriterScope(t.ID))
	}
	deficit := 0
	held := map[string]bool{}
	for _, m := range s.ms {
		id := m.Config().NodeID
		per := map[int64]int{}
		for _, l := range m.Held() {
			switch {
			case l.Kind == lease.KindPartition:
				per[l.Table]++
			case writerOf[l.Table] == id:
				held[l.Scope.String()] = true
			default:
				excess = max(excess, 1) // a writer lease is handed back at once
			}
		}
		for _, t := range tables {
			n, share := per[t.ID], int(shares[id][t.ID])
			excess = max(excess, n-share)
			deficit += max(0, share-n)
		}
	}
	for t, w := range writerOf {
		if w != "" && !held[lease.WriterScope(t).String()] {
			deficit++
		}
	}
	if deficit == 0 && excess == 0 {
		return settle + 1, 0, nil
	}
	return max(settle+1, excess) + 1, excess, nil
}

// topWriter is the writer node that prefers s most, as the rules choose a table's writer.
func topWriter(nodes []string, s lease.Scope) string {
	best, bestPref := "", uint64(0)
	for _, n := range nodes {
		p := lease.Preference(n, s)
		if best == "" || p > bestPref || p == bestPref && n < best {
			best, bestPref = n, p
		}
	}
	return best
}

// steady runs passes after convergence and measures what a round costs when nothing
// moves: lease.Stats deltas, the Postgres cluster's CPU time and this process's, and the
// rounds' durations; then (idle) the Postgres CPU time of as long a wall time with no
// rounds.
func (s *sim) steady(passes int, cpu func() (pgTimes, error), idle bool) (CoordSteady, error) {
	st := CoordSteady{Nodes: len(s.ms), Passes: passes}
	for _, m := range s.ms {
		st.Held += float64(len(m.Held()))
	}
	st.Held /= float64(len(s.ms))
	before := s.total()
	var cpu0, cpu1 pgTimes
	var err error
	if cpu != nil {
		cpu0, err = cpu()
	}
	client0 := selfCPU()
	t0 := time.Now()
	s.record, s.rounds = true, nil
	for range passes {
		moved, err := s.pass(func(d lease.Stats) {
			st.MaxRead, st.MaxWritten = max(st.MaxRead, d.RowsRead), max(st.MaxWritten, d.RowsWritten)
		})
		if err != nil {
			return st, fmt.Errorf("steady: %w", err)
		}
		st.Moved += moved
	}
	s.record = false
	st.Wall = time.Since(t0)
	st.ClientCPU = selfCPU() - client0
	if cpu != nil && err == nil {
		cpu1, err = cpu()
	}
	if cpu == nil {
		err = errors.New("not measured")
	}
	d := statsDelta(s.total(), before)
	st.Rounds = int(d.Rounds)
	r := float64(max(1, d.Rounds))
	st.Stmts, st.Read, st.Written = float64(d.Statements)/r, float64(d.RowsRead)/r, float64(d.RowsWritten)/r
	st.RoundP50, st.RoundP99 = Percentile(s.rounds, 50), Percentile(s.rounds, 99)
	s.rounds = nil
	if err != nil {
		st.CPUErr = err
		return st, nil
	}
	st.PGCPU, st.PGClients = cpu1.all-cpu0.all, cpu1.clients-cpu0.clients
	if !idle {
		return st, nil
	}
	// The idle cluster (checkpointer, autovacuum launcher, ...) over as long a wall time,
	// at most 10 s, scaled to the steady passes' wall time.
	wait := min(st.Wall, 10*time.Second)
	i0, err := cpu()
	if err == nil {
		select {
		case <-s.ctx.Done():
			return st, s.ctx.Err()
		case <-time.After(wait):
		}
		var i1 pgTimes
		if i1, err = cpu(); err == nil && wait > 0 {
			st.PGIdle = time.Duration(float64(i1.all-i0.all) * float64(st.Wall) / float64(wait))
		}
	}
	return st, nil
}

// pgCPU returns a function that reads the CPU time (user + system) the private Postgres
// cluster has used so far: the postmaster's and every child's (backends, checkpointer,
// autovacuum, ...) from /proc/<pid>/stat, and the postmaster's cutime and cstime for the
// children that already exited; and, of it, that of the live client backends (the
// simulated nodes' connections). A given server (-postgres-url) is not measured.
func (e *Env) pgCPU(ctx context.Context) (func() (pgTimes, error), error) {
	if e.pg == nil {
		return nil, errors.New("unavailable: Postgres is a given server (-postgres-url), not the harness's private cluster")
	}
	pool, err := pgxpool.New(ctx, e.PGAdmin)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	var dir string
	if err := pool.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return nil, fmt.Errorf("unavailable: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return nil, fmt.Errorf("unavailable: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return nil, fmt.Errorf("unavailable: postmaster.pid: %w", err)
	}
	tick := clockTicks()
	dur := func(ticks int64) time.Duration { return time.Duration(float64(ticks) / tick * float64(time.Second)) }
	return func() (pgTimes, error) {
		pm, ok := procTimes(pid)
		if !ok {
			return pgTimes{}, fmt.Errorf("unavailable: postmaster %d not found in /proc", pid)
		}
		all, clients := pm.utime+pm.stime+pm.cutime+pm.cstime, int64(0)
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return pgTimes{}, err
		}
		for _, ent := range ents {
			k, err := strconv.Atoi(ent.Name())
			if err != nil || k == pid {
				continue
			}
			if t, ok := procTimes(k); ok && t.ppid == pid {
				all += t.utime + t.stime
				if clientBackend(k) {
					clients += t.utime + t.stime
				}
			}
		}
		return pgTimes{all: dur(all), clients: dur(clients)}, nil
	}, nil
}

// pgTimes is the Postgres cluster's CPU time so far, and its client backends' part.
type pgTimes struct{ all, clients time.Duration }

// clientBackend reports whether a postmaster child is a client connection's backend: its
// title names the client's address and port, "postgres: user db 127.0.0.1(port) idle".
func clientBackend(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return clientTitle.Match(b)
}

var clientTitle = regexp.MustCompile(`^postgres: \S+ \S+ \S+\(\d+\)`)

type procTime struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procTimes reads a process's parent and CPU times, in clock ticks, from /proc/<pid>/stat.
func procTimes(pid int) (procTime, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procTime{}, false
	}
	// "pid (comm) state ppid ... utime stime cutime cstime ...": fields 4 and 14-17; comm
	// may hold spaces, so count after its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procTime{}, false
	}
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	return procTime{ppid: int(n(f[1])), utime: n(f[11]), stime: n(f[12]), cutime: n(f[13]), cstime: n(f[14])}, true
}

// clockTicks is the kernel's clock ticks per second (getconf CLK_TCK), usually 100.
func clockTicks() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if v, err2 := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && err2 == nil && v > 0 {
		return v
	}
	return 100
}

// selfCPU is this process's CPU time (user + system) so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// coordTables registers tables with their lease rows straight in Postgres (the
// simulation needs no topics).
func coordTables(ctx context.Context, db *pgxpool.Pool, tbls, parts int) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for i := range tbls {
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO mink_tables (namespace, name, topic, partitions)
				VALUES ('default', $1, $1, $2) RETURNING id`, fmt.Sprintf("t%04d", i), parts).Scan(&id); err != nil {
				return err
			}
			if err := lease.AddScopes(ctx, tx, id, int32(parts)); err != nil {
				return err
			}
		}
		return nil
	})
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
