package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/lease"
)

// CoordPhase is one convergence: after start, a join or a clean leave.
type CoordPhase struct {
	Name        string
	Nodes       int
	Passes      int     // lockstep passes (every node one round) until one moved nothing, that one included
	MinPasses   int     // the fewest the seed's rules allow, the quiet pass included
	StmtsPerRnd float64 // SQL statements per node per round
	LeasesPerNd float64 // leases a node holds once converged (partition and writer)
}

// CoordResult is one simulated cluster size.
type CoordResult struct {
	Nodes, Tables, Partitions int
	Phases                    []CoordPhase
	RoundP50, RoundP99        time.Duration // one node's round, start to end, against the shared Postgres
	Took                      time.Duration
}

// Coordinate simulates nodes in this process, each a lease.Manager with the indexer and
// writer roles driving Register/Round/Leave against one real Postgres, as
// pkg/lease/sim_test.go does: every pass runs one round of every node in turn, until a
// pass changes nothing. Sizes are nodes x tables x partitions.
func (e *Env) Coordinate(ctx context.Context, nodes, tbls, parts int) (CoordResult, error) {
	start := time.Now()
	res := CoordResult{Nodes: nodes, Tables: tbls, Partitions: parts}
	db, _, err := e.NewDB(ctx)
	if err != nil {
		return res, err
	}
	defer db.Close()
	if err := coordTables(ctx, db, tbls, parts); err != nil {
		return res, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newNode := func(i int) (*lease.Manager, error) {
		m, err := lease.NewManager(db, lease.Config{
			NodeID: fmt.Sprintf("sim-%03d", i), Roles: []lease.Role{lease.RoleIndexer, lease.RoleWriter},
			GRPCAddr: "sim:7070", TTL: time.Minute, Logger: quiet,
		})
		if err != nil {
			return nil, err
		}
		return m, m.Register(ctx)
	}
	var ms []*lease.Manager
	defer func() {
		for _, m := range ms {
			m.Leave()
		}
	}()
	for i := range nodes {
		m, err := newNode(i)
		if err != nil {
			return res, err
		}
		ms = append(ms, m)
	}
	var roundTimes []time.Duration
	converge := func(name string, minPasses int) error {
		before := make([]lease.Stats, len(ms))
		for i, m := range ms {
			before[i] = m.Stats()
		}
		for pass := 1; pass <= 100; pass++ {
			moved := int64(0)
			for _, m := range ms {
				s0 := m.Stats()
				t0 := time.Now()
				if err := m.Round(ctx); err != nil {
					return fmt.Errorf("%s: round: %w", name, err)
				}
				roundTimes = append(roundTimes, time.Since(t0))
				s1 := m.Stats()
				moved += s1.Acquired - s0.Acquired + s1.Released - s0.Released
			}
			if moved > 0 {
				continue
			}
			var stmts, rounds int64
			held := 0
			for i, m := range ms {
				s := m.Stats()
				stmts += s.Statements - before[i].Statements
				rounds += s.Rounds - before[i].Rounds
				held += len(m.Held())
			}
			res.Phases = append(res.Phases, CoordPhase{Name: name, Nodes: len(ms), Passes: pass, MinPasses: minPasses,
				StmtsPerRnd: float64(stmts) / float64(rounds), LeasesPerNd: float64(held) / float64(len(ms))})
			return nil
		}
		return fmt.Errorf("%s: no convergence in 100 passes", name)
	}
	// Start: every lease is free; each node takes its share in its first round.
	if err := converge("start", 2); err != nil {
		return res, err
	}
	// Join: shares drop; nodes above the new share hand back one partition per table
	// per round, and the new node (last in each pass) takes them in the same pass.
	excess := maxHeld(ms) - ceilDiv(parts, len(ms)+1)
	m, err := newNode(nodes)
	if err != nil {
		return res, err
	}
	ms = append(ms, m)
	if err := converge("join", max(1, excess)+1); err != nil {
		return res, err
	}
	// Leave: a clean leave frees the node's leases at once; others take them next pass.
	if err := ms[0].Leave(); err != nil {
		return res, err
	}
	ms = ms[1:]
	if err := converge("leave", 2); err != nil {
		return res, err
	}
	res.RoundP50, res.RoundP99 = Percentile(roundTimes, 50), Percentile(roundTimes, 99)
	res.Took = time.Since(start)
	return res, nil
}

// maxHeld is the most partition leases of one table any node holds.
func maxHeld(ms []*lease.Manager) int {
	most := 0
	for _, m := range ms {
		per := map[int64]int{}
		for _, l := range m.Held() {
			if l.Kind == lease.KindPartition {
				per[l.Table]++
				most = max(most, per[l.Table])
			}
		}
	}
	return most
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// coordTables registers tables with their lease rows straight in Postgres (the
// simulation needs no topics).
func coordTables(ctx context.Context, db *pgxpool.Pool, tbls, parts int) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for i := range tbls {
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO mink_tables (namespace, name, topic, partitions)
				VALUES ('default', $1, $1, $2) RETURNING id`, fmt.Sprintf("t%03d", i), parts).Scan(&id); err != nil {
				return err
			}
			if err := lease.AddScopes(ctx, tx, id, int32(parts)); err != nil {
				return err
			}
		}
		return nil
	})
}
