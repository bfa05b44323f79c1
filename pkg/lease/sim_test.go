package lease_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
)

// TestSimulationAtScale runs many nodes' rounds against one real Postgres, in lockstep
// passes, and reports how many passes the cluster takes to converge (start, a join, a
// clean leave) and how many statements one node sends per round. Sizes come from
// MINK_SIM_NODES, MINK_SIM_TABLES, MINK_SIM_PARTITIONS (default 50 x 20 x 32, and 10
// nodes, where a join lowers every share and work must be handed back).
func TestSimulationAtScale(t *testing.T) {
	nodes, tables, parts := envInt("MINK_SIM_NODES", 50), envInt("MINK_SIM_TABLES", 20), envInt("MINK_SIM_PARTITIONS", 32)
	t.Run(fmt.Sprintf("%dx%dx%d", nodes, tables, parts), func(t *testing.T) { simulate(t, nodes, tables, parts) })
	t.Run(fmt.Sprintf("%dx%dx%d", 10, tables, parts), func(t *testing.T) { simulate(t, 10, tables, parts) })
}

func simulate(t *testing.T, nodes, tables, parts int) {
	db := newDB(t)
	var ids []int64
	for i := 0; i < tables; i++ {
		ids = append(ids, leasetest.Table(t, db, fmt.Sprintf("t%d", i), int32(parts)))
	}
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newNode := func(i int) *lease.Manager {
		m, err := lease.NewManager(db, lease.Config{
			NodeID: fmt.Sprintf("sim-%03d", i), Roles: []lease.Role{lease.RoleIndexer, lease.RoleWriter},
			GRPCAddr: "sim:7070", TTL: time.Minute, Logger: quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Register(ctx); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var ms []*lease.Manager
	for i := 0; i < nodes; i++ {
		ms = append(ms, newNode(i))
	}
	defer func() {
		for _, m := range ms {
			m.Leave()
		}
	}()

	// converge runs passes (every node one round, in order) until one changes nothing.
	converge := func(what string) {
		t.Helper()
		var before []lease.Stats
		for _, m := range ms {
			before = append(before, m.Stats())
		}
		for pass := 1; pass <= 100; pass++ {
			moved := int64(0)
			for _, m := range ms {
				s0 := m.Stats()
				if err := m.Round(ctx); err != nil {
					t.Fatalf("%s: round: %v", what, err)
				}
				s1 := m.Stats()
				moved += s1.Acquired - s0.Acquired + s1.Released - s0.Released
			}
			if moved == 0 {
				var stmts, rounds int64
				for i, m := range ms {
					s := m.Stats()
					if i < len(before) {
						stmts += s.Statements - before[i].Statements
						rounds += s.Rounds - before[i].Rounds
					}
				}
				t.Logf("%s: %d nodes x %d tables x %d partitions converged in %d passes (the last one quiet); %.2f statements per node per round",
					what, len(ms), tables, parts, pass, float64(stmts)/float64(rounds))
				if per := float64(stmts) / float64(rounds); per > 8 {
					t.Errorf("%s: %.2f statements per node per round; a round must be a constant number of statements", what, per)
				}
				return
			}
		}
		t.Fatalf("%s: no convergence in 100 passes", what)
	}
	checkShares := func(what string) {
		t.Helper()
		share := (parts + len(ms) - 1) / len(ms)
		for _, id := range ids {
			c := countHeld(t, db, id)
			total := 0
			for n, k := range c {
				if k > share {
					t.Fatalf("%s: %s holds %d partitions of table %d, share %d", what, n, k, id, share)
				}
				total += k
			}
			if total != parts {
				t.Fatalf("%s: table %d has %d of %d partitions held", what, id, total, parts)
			}
		}
	}
	converge("start")
	checkShares("start")
	ms = append(ms, newNode(nodes))
	converge("join")
	checkShares("join")
	if err := ms[0].Leave(); err != nil {
		t.Fatal(err)
	}
	ms = ms[1:]
	converge("leave")
	checkShares("leave")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
