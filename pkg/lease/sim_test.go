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

	// converge runs passes (every node one round, in order) until one changes nothing;
	// in that quiet pass every node must write exactly one row (its renewal) and read a
	// constant number (its renewal, the janitor's count, the generations: nothing is
	// free), whatever the partitions.
	converge := func(what string) {
		t.Helper()
		for pass := 1; pass <= 100; pass++ {
			moved := int64(0)
			var read, written, stmts []int64
			for _, m := range ms {
				s0 := m.Stats()
				if err := m.Round(ctx); err != nil {
					t.Fatalf("%s: round: %v", what, err)
				}
				s1 := m.Stats()
				moved += s1.Acquired - s0.Acquired + s1.Released - s0.Released
				read = append(read, s1.RowsRead-s0.RowsRead)
				written = append(written, s1.RowsWritten-s0.RowsWritten)
				stmts = append(stmts, s1.Statements-s0.Statements)
			}
			// The first pass after a (re)join only settles: nothing is taken in it.
			if moved != 0 || pass == 1 {
				continue
			}
			t.Logf("%s: %d nodes x %d tables x %d partitions converged in %d passes (the last one quiet)",
				what, len(ms), tables, parts, pass)
			for i := range ms {
				if written[i] != 1 || read[i] != 3 || stmts[i] != 4 {
					t.Errorf("%s: a steady round of node %d wrote %d rows and read %d in %d statements; want 1 row written and 3 read in 4 statements",
						what, i, written[i], read[i], stmts[i])
				}
			}
			return
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
