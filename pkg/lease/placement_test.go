package lease

import (
	"fmt"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// Preferences are part of the wire contract between releases: a node running an older
// build must compute the same ones, or two versions would disagree on who takes what.
func TestPreferenceGolden(t *testing.T) {
	golden := []struct {
		node string
		s    Scope
		want uint64
	}{
		{"node-a", PartitionScope(1, 0), 0x3db138c4f9d670be},
		{"node-a", PartitionScope(1, 31), 0xe2fb1ccf135d822e},
		{"node-a", PartitionScope(42, 7), 0x482b9a2d9f292e4d},
		{"node-a", WriterScope(1), 0xeefa4c00d376f802},
		{"node-a", WriterScope(42), 0x412e17071307db4e},
		{"node-b", PartitionScope(1, 0), 0x71dc31bc2725ef2f},
		{"node-b", PartitionScope(1, 31), 0xe75ab9459fe575d2},
		{"node-b", PartitionScope(42, 7), 0x99d335375f030d88},
		{"node-b", WriterScope(1), 0x61eb04f7fd36a6b5},
		{"node-b", WriterScope(42), 0xc656f2b562e3039d},
		{"indexer-0.mink:7070", PartitionScope(1, 0), 0xa0a8b0bce669bcbd},
		{"indexer-0.mink:7070", PartitionScope(1, 31), 0x19f2553e345958de},
		{"indexer-0.mink:7070", PartitionScope(42, 7), 0xc6c6f514b671894a},
		{"indexer-0.mink:7070", WriterScope(1), 0x8f6928de03db66fc},
		{"indexer-0.mink:7070", WriterScope(42), 0x23aaa5b721f021b6},
	}
	for _, g := range golden {
		if got := Preference(g.node, g.s); got != g.want {
			t.Errorf("Preference(%q, %s) = %#x, want %#x (preferences must never change)", g.node, g.s, got, g.want)
		}
	}
}

func TestScopeStringRoundTrip(t *testing.T) {
	for _, s := range []Scope{PartitionScope(1, 0), PartitionScope(9, 31), WriterScope(7)} {
		got, err := ParseScope(s.String())
		if err != nil || got != s {
			t.Errorf("ParseScope(%q) = %v, %v", s.String(), got, err)
		}
	}
	for _, bad := range []string{"", "writer", "writer/x", "partition/1", "partition/1/-1", "reader/1"} {
		if _, err := ParseScope(bad); err == nil {
			t.Errorf("ParseScope(%q) succeeded", bad)
		}
	}
}

// cluster is an in-memory stand-in for the lease rows, applying actions as Postgres
// would: an acquisition wins only if the lease is free, a release only if held.
type cluster struct {
	members []Member
	tables  []TableView
	holders map[Scope]string
	max     map[string]int
}

// view is what node self sees, as the manager builds it: its own leases, the free counts,
// and the free partitions of the tables a first Decide asks for.
func (c *cluster) view(self string) View {
	v := View{Self: self, Tables: c.tables, FreePartitions: map[int64]int32{}, FreeWriters: map[int64]bool{}}
	for _, m := range c.members {
		m.MaxPartitions = c.max[m.NodeID]
		v.Members = append(v.Members, m)
	}
	for s, h := range c.holders {
		if h == self {
			v.Held = append(v.Held, s)
		}
	}
	sortScopes(v.Held)
	for _, t := range c.tables {
		for p := int32(0); p < t.Partitions; p++ {
			if _, ok := c.holders[PartitionScope(t.ID, p)]; !ok {
				v.FreePartitions[t.ID]++
			}
		}
		if _, ok := c.holders[WriterScope(t.ID)]; !ok {
			v.FreeWriters[t.ID] = true
		}
	}
	return v
}

// decide is Decide as the manager calls it: again with the free partitions when asked,
// as many as asked of the ones self prefers most (what the manager's query returns).
func (c *cluster) decide(self string) (View, Actions) {
	v := c.view(self)
	a := Decide(v)
	if len(a.Fetch) > 0 {
		v.FreeScopes = map[int64][]int32{}
		for tbl, n := range a.Fetch {
			var free []Scope
			for _, t := range c.tables {
				if t.ID != tbl {
					continue
				}
				for p := int32(0); p < t.Partitions; p++ {
					if _, ok := c.holders[PartitionScope(t.ID, p)]; !ok {
						free = append(free, PartitionScope(t.ID, p))
					}
				}
			}
			sort.Slice(free, func(i, j int) bool { return prefers(self, free[i], free[j]) })
			for _, s := range free[:min(len(free), int(n))] {
				v.FreeScopes[tbl] = append(v.FreeScopes[tbl], s.Partition)
			}
		}
		a = Decide(v)
	}
	return v, a
}

func (c *cluster) apply(self string, a Actions) (moves int) {
	for _, s := range a.Release {
		if c.holders[s] == self {
			delete(c.holders, s)
			moves++
		}
	}
	for _, s := range a.Acquire {
		if _, taken := c.holders[s]; !taken {
			c.holders[s] = self
			moves++
		}
	}
	return moves
}

// converge runs rounds, every node in order, until a whole pass changes nothing; it
// returns the number of passes, or fails after limit.
func (c *cluster) converge(t *rapid.T, limit int, check func(self string, v View, a Actions)) int {
	for pass := 1; pass <= limit; pass++ {
		changed := false
		for _, m := range c.members {
			v, a := c.decide(m.NodeID)
			if check != nil {
				check(m.NodeID, v, a)
			}
			if c.apply(m.NodeID, a) > 0 {
				changed = true
			}
		}
		if !changed {
			return pass
		}
	}
	t.Fatalf("no convergence after %d passes", limit)
	return 0
}

func genCluster(t *rapid.T) *cluster {
	c := &cluster{holders: map[Scope]string{}, max: map[string]int{}}
	n := rapid.IntRange(1, 8).Draw(t, "nodes")
	for i := 0; i < n; i++ {
		m := Member{NodeID: fmt.Sprintf("node-%d", i)}
		switch rapid.IntRange(0, 3).Draw(t, "roles") {
		case 0:
			m.Roles = []Role{RoleIndexer}
		case 1:
			m.Roles = []Role{RoleWriter}
		case 2:
			m.Roles = []Role{RoleIndexer, RoleWriter}
		case 3:
			m.Roles = []Role{RoleFileServer}
		}
		c.max[m.NodeID] = rapid.IntRange(0, 12).Draw(t, "max")
		c.members = append(c.members, m)
	}
	nt := rapid.IntRange(1, 4).Draw(t, "tables")
	for i := 0; i < nt; i++ {
		c.tables = append(c.tables, TableView{ID: int64(i + 1), Partitions: int32(rapid.IntRange(0, 20).Draw(t, "partitions"))})
	}
	return c
}

func (c *cluster) membersWithCaps() []Member {
	var out []Member
	for _, m := range c.members {
		m.MaxPartitions = c.max[m.NodeID]
		out = append(out, m)
	}
	return out
}

func (c *cluster) indexers() []string {
	var out []string
	for _, m := range c.members {
		if m.Has(RoleIndexer) && !m.Draining {
			out = append(out, m.NodeID)
		}
	}
	return out
}

func (c *cluster) writers() []string {
	var out []string
	for _, m := range c.members {
		if m.Has(RoleWriter) && !m.Draining {
			out = append(out, m.NodeID)
		}
	}
	return out
}

func (c *cluster) count(node string, table int64) (n int) {
	for s, h := range c.holders {
		if h == node && s.Kind == KindPartition && (table == 0 || s.Table == table) {
			n++
		}
	}
	return n
}

// checkRound holds for every single decision: acquisitions only of free leases, at most
// one release per table (unless draining, or shedding above a lowered cap), the cap never
// exceeded after the round.
func checkRound(t *rapid.T, self string, v View, a Actions) {
	holds := map[Scope]bool{}
	for _, s := range v.Held {
		holds[s] = true
	}
	perTable := map[int64]int{}
	for _, s := range a.Release {
		if !holds[s] {
			t.Fatalf("%s releases %s which it does not hold", self, s)
		}
		if s.Kind == KindPartition {
			perTable[s.Table]++
		}
	}
	held := 0
	for _, s := range v.Held {
		if s.Kind == KindPartition {
			held++
		}
	}
	draining, maxp := true, 0
	for _, m := range v.Members {
		if m.NodeID == self {
			draining = m.Draining || !m.Has(RoleIndexer)
			maxp = m.MaxPartitions
		}
	}
	overCap := maxp > 0 && held > maxp
	for tbl, n := range perTable {
		if n > 1 && !draining && !overCap {
			t.Fatalf("%s releases %d leases of table %d in one round", self, n, tbl)
		}
	}
	acq := 0
	for _, s := range a.Acquire {
		if holds[s] {
			t.Fatalf("%s acquires %s which it holds", self, s)
		}
		if s.Kind == KindPartition {
			acq++
		}
	}
	released := 0
	for _, s := range a.Release {
		if s.Kind == KindPartition {
			released++
		}
	}
	if maxp > 0 && acq > 0 && held-released+acq > maxp {
		t.Fatalf("%s would hold %d partition leases, cap %d", self, held-released+acq, maxp)
	}
}

// checkConverged: every indexing node holds exactly its share; shares are the seed's
// (at most the count divided by the indexers, rounded up), balanced within one but for
// nodes at their cap, and leave no partition free while a node has room; every writer
// lease is with the writer that prefers it most.
func checkConverged(t *rapid.T, c *cluster) {
	idx := c.indexers()
	shares := Shares(c.membersWithCaps(), c.tables)
	atCap := func(n string) bool { return c.max[n] > 0 && c.count(n, 0) >= c.max[n] }
	anyCapped := false
	for _, n := range idx {
		anyCapped = anyCapped || c.max[n] > 0
	}
	for _, tb := range c.tables {
		if len(idx) == 0 {
			break
		}
		ceil := (int(tb.Partitions) + len(idx) - 1) / len(idx)
		free := 0
		for p := int32(0); p < tb.Partitions; p++ {
			if _, ok := c.holders[PartitionScope(tb.ID, p)]; !ok {
				free++
			}
		}
		lo, hi := 1<<30, -1
		for _, n := range idx {
			got := c.count(n, tb.ID)
			if got != int(shares[n][tb.ID]) {
				t.Fatalf("%s holds %d partitions of table %d, its share is %d", n, got, tb.ID, shares[n][tb.ID])
			}
			// The seed's share, rounded up, holds unless caps make others take more.
			if got > ceil && !anyCapped {
				t.Fatalf("%s holds %d partitions of table %d, above the share %d", n, got, tb.ID, ceil)
			}
			if free > 0 && !atCap(n) {
				t.Fatalf("table %d has %d free partitions while %s has room (%d of cap %d)", tb.ID, free, n, c.count(n, 0), c.max[n])
			}
			if c.max[n] == 0 {
				lo, hi = min(lo, got), max(hi, got)
			}
		}
		if hi >= 0 && hi-lo > 1 {
			t.Fatalf("table %d: uncapped nodes hold from %d to %d partitions: not balanced within one", tb.ID, lo, hi)
		}
	}
	for _, n := range idx {
		if c.max[n] > 0 && c.count(n, 0) > c.max[n] {
			t.Fatalf("%s holds %d partition leases, cap %d", n, c.count(n, 0), c.max[n])
		}
	}
	for s, h := range c.holders {
		if s.Kind == KindPartition {
			ok := false
			for _, n := range idx {
				ok = ok || n == h
			}
			if !ok {
				t.Fatalf("%s held by %s, which is not an indexer", s, h)
			}
		}
	}
	ws := c.writers()
	for _, tb := range c.tables {
		h, held := c.holders[WriterScope(tb.ID)]
		if want := topNode(ws, WriterScope(tb.ID)); want != h || (want != "" && !held) {
			t.Fatalf("writer lease of table %d held by %q, want %q", tb.ID, h, want)
		}
	}
}

func TestDecideConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCluster(t)
		c.converge(t, 200, func(self string, v View, a Actions) { checkRound(t, self, v, a) })
		checkConverged(t, c)
	})
}

// Starting from an arbitrary (even unfair) assignment, the rules still converge, each
// round within its bounds, and once converged nothing moves for 50 more rounds.
func TestDecideFromArbitraryStateThenStill(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCluster(t)
		for _, tb := range c.tables {
			for p := int32(0); p < tb.Partitions; p++ {
				if i := rapid.IntRange(-1, len(c.members)-1).Draw(t, "holder"); i >= 0 && c.members[i].Has(RoleIndexer) {
					c.holders[PartitionScope(tb.ID, p)] = c.members[i].NodeID
				}
			}
		}
		c.converge(t, 400, func(self string, v View, a Actions) { checkRound(t, self, v, a) })
		checkConverged(t, c)
		for round := 0; round < 50; round++ {
			for _, m := range c.members {
				if _, a := c.decide(m.NodeID); !a.Empty() {
					t.Fatalf("round %d after convergence: %s moves %+v", round, m.NodeID, a)
				}
			}
		}
	})
}

// A joining node: shares drop, nodes above their new share hand back one partition per
// table per round, and the only leases that move are ones released by a node above its
// new share; nothing else changes hands.
func TestDecideJoinMovesOnlyWhatItMust(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCluster(t)
		for k := range c.max {
			c.max[k] = 0 // caps would let the joiner take leases no rule moved
		}
		c.converge(t, 200, nil)
		before := map[Scope]string{}
		for s, h := range c.holders {
			before[s] = h
		}
		joiner := Member{NodeID: "joiner", Roles: []Role{RoleIndexer}}
		c.members = append(c.members, joiner)
		newShares := Shares(c.membersWithCaps(), c.tables)
		mustRelease := 0
		for _, n := range c.indexers() {
			for _, tb := range c.tables {
				if over := c.count(n, tb.ID) - int(newShares[n][tb.ID]); over > 0 {
					mustRelease += over
				}
			}
		}
		releases := 0
		c.converge(t, 400, func(self string, v View, a Actions) {
			checkRound(t, self, v, a)
			for _, s := range a.Release {
				if s.Kind != KindPartition {
					continue
				}
				held := 0
				for _, s2 := range v.Held {
					if s2.Kind == KindPartition && s2.Table == s.Table {
						held++
					}
				}
				if held <= int(newShares[self][s.Table]) {
					t.Fatalf("%s released %s at %d leases, not above its share %d", self, s, held, newShares[self][s.Table])
				}
				releases++
			}
		})
		checkConverged(t, c)
		if releases != mustRelease {
			t.Fatalf("%d partition leases released after the join, want exactly %d", releases, mustRelease)
		}
		for s, h := range c.holders {
			if s.Kind == KindPartition && before[s] != "" && before[s] != h && c.count(before[s], s.Table) < int(newShares[before[s]][s.Table]) {
				t.Fatalf("%s moved from %s (now below its share) to %s", s, before[s], h)
			}
		}
	})
}

// A node that leaves (cleanly: its leases freed at once): the leases that were its move,
// and others only where a share went up by one for a node that takes a freed lease.
func TestDecideLeaveMovesOnlyItsLeases(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCluster(t)
		for k := range c.max {
			c.max[k] = 0
		}
		c.converge(t, 200, nil)
		gone := rapid.IntRange(0, len(c.members)-1).Draw(t, "leaving")
		leaving := c.members[gone].NodeID
		c.members = append(c.members[:gone:gone], c.members[gone+1:]...)
		before := map[Scope]string{}
		for s, h := range c.holders {
			if h == leaving {
				delete(c.holders, s)
			} else {
				before[s] = h
			}
		}
		shares := Shares(c.membersWithCaps(), c.tables)
		c.converge(t, 400, func(self string, v View, a Actions) { checkRound(t, self, v, a) })
		checkConverged(t, c)
		for s, h := range before {
			if s.Kind != KindPartition || c.holders[s] == h {
				continue
			}
			// A staying node gives a lease up only when its share went down.
			if c.count(h, s.Table) < int(shares[h][s.Table]) {
				t.Fatalf("%s moved from %s to %q although %s is below its share", s, h, c.holders[s], h)
			}
		}
	})
}

// Caps: what a capped node cannot take goes to the others; no partition stays free while
// any indexing node has room; nothing oscillates.
func TestDecideCapsNeverStrand(t *testing.T) {
	c := &cluster{holders: map[Scope]string{}, max: map[string]int{"a": 0, "b": 0, "c": 1}}
	for _, n := range []string{"a", "b", "c"} {
		c.members = append(c.members, Member{NodeID: n, Roles: []Role{RoleIndexer}})
	}
	c.tables = []TableView{{ID: 1, Partitions: 12}}
	rapid.Check(t, func(rt *rapid.T) {
		c.holders = map[Scope]string{}
		c.converge(rt, 50, nil)
		checkConverged(rt, c)
		if c.count("a", 1)+c.count("b", 1)+c.count("c", 1) != 12 || c.count("c", 1) != 1 {
			rt.Fatalf("12 partitions, c capped at 1: a %d, b %d, c %d", c.count("a", 1), c.count("b", 1), c.count("c", 1))
		}
	})
}

// A draining node releases everything at once and takes nothing; undrained, it takes its
// share again.
func TestDecideDrain(t *testing.T) {
	c := &cluster{holders: map[Scope]string{}, max: map[string]int{}}
	for _, n := range []string{"a", "b", "c"} {
		c.members = append(c.members, Member{NodeID: n, Roles: []Role{RoleIndexer, RoleWriter}})
	}
	c.tables = []TableView{{ID: 1, Partitions: 9}, {ID: 2, Partitions: 4}}
	rapid.Check(t, func(rt *rapid.T) {
		c.holders = map[Scope]string{}
		c.members[1].Draining = false
		c.converge(rt, 50, nil)
		c.members[1].Draining = true
		_, a := c.decide("b")
		if len(a.Acquire) != 0 {
			rt.Fatalf("draining node acquires %v", a.Acquire)
		}
		c.apply("b", a)
		for s, h := range c.holders {
			if h == "b" {
				rt.Fatalf("draining node still holds %s", s)
			}
		}
		c.converge(rt, 50, nil)
		checkConverged(rt, c)
		if c.count("a", 1)+c.count("c", 1) != 9 {
			rt.Fatalf("table 1 not fully held by a and c: %v", c.holders)
		}
	})
}

func TestDecideDeterministicOrder(t *testing.T) {
	c := &cluster{holders: map[Scope]string{}, max: map[string]int{"a": 3},
		members: []Member{{NodeID: "a", Roles: []Role{RoleIndexer}}}, tables: []TableView{{ID: 1, Partitions: 8}}}
	_, a := c.decide("a")
	if len(a.Acquire) != 3 {
		t.Fatalf("acquire %v, want 3 leases (cap)", a.Acquire)
	}
	// The three must be the node's most preferred of the eight.
	var all []Scope
	for p := int32(0); p < 8; p++ {
		all = append(all, PartitionScope(1, p))
	}
	sort.Slice(all, func(i, j int) bool { return prefers("a", all[i], all[j]) })
	want := map[Scope]bool{all[0]: true, all[1]: true, all[2]: true}
	for _, s := range a.Acquire {
		if !want[s] {
			t.Fatalf("acquired %s, not among the three most preferred %v", s, all[:3])
		}
	}
	// Without the free partitions in the view, Decide asks for them and takes nothing.
	if a := Decide(c.view("a")); len(a.Fetch) != 1 || a.Fetch[1] != 3 || len(a.Acquire) != 0 {
		t.Fatalf("first decide %+v, want a fetch of table 1", a)
	}
}
