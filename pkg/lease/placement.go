package lease

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Preference is how much node prefers the lease of scope s: a hash of both, the same on
// every node and in every release (a golden test freezes it), as in rendezvous hashing.
func Preference(node string, s Scope) uint64 {
	h := sha256.New()
	h.Write([]byte(node))
	h.Write([]byte{0})
	h.Write([]byte(s.String()))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// prefers orders scopes for one node: most preferred first, ties (never seen with a
// 64-bit hash, but possible) broken by the scope name so every node agrees.
func prefers(node string, a, b Scope) bool {
	pa, pb := Preference(node, a), Preference(node, b)
	if pa != pb {
		return pa > pb
	}
	return a.String() < b.String()
}

// View is what one node knows at the start of a round: everything Decide needs. None of
// it grows with the number of partitions but what the node holds and the free leases of
// the tables it is below its share of.
type View struct {
	Self    string
	Members []Member    // live members only, with their caps
	Tables  []TableView // every table
	Held    []Scope     // the leases Self holds
	// FreePartitions is, per table, how many partition leases are free; FreeWriters
	// the tables whose writer lease is free.
	FreePartitions map[int64]int32
	FreeWriters    map[int64]bool
	// FreeScopes are the free partitions of the tables a first Decide asked for in
	// Actions.Fetch (the manager reads only those); nil: not fetched yet.
	FreeScopes map[int64][]int32
}

// TableView is one table's lease scopes.
type TableView struct {
	ID         int64
	Partitions int32
}

// Actions is what one node does this round.
type Actions struct {
	Acquire []Scope
	Release []Scope
	// Fetch is, per table, how many free partitions Decide wants to pick from (it is
	// below its share of the table and some are free): read that many of the free ones
	// Self prefers most into View.FreeScopes and decide again.
	Fetch map[int64]int32
}

// Empty reports whether the round changes nothing.
func (a Actions) Empty() bool { return len(a.Acquire) == 0 && len(a.Release) == 0 }

// Decide applies the seed's sharing rules for v.Self, as a pure function:
//   - a table's partition share is its partition count divided by the live, non-draining
//     indexing nodes, rounded up; so that shares add up to the partition count, the
//     nodes that prefer the table most take the rounding (Shares): balanced within one;
//   - max_partitions caps the partition leases a node holds, and the shares know every
//     node's cap: what a capped node cannot take goes to the others, so no partition is
//     left free while an indexing node has room;
//   - below its share a node takes free leases, the ones it prefers most first;
//   - above its share it releases one lease of that table per round (its least preferred),
//     so a joining node takes work gradually;
//   - each table's writer lease goes to the live, non-draining writer node that prefers
//     it most: that node takes it when free, and any other holder releases it.
//
// A draining node, or one not (yet) among the live members, releases what it holds and
// takes nothing.
func Decide(v View) Actions {
	var act Actions
	var self *Member
	for i := range v.Members {
		if v.Members[i].NodeID == v.Self {
			self = &v.Members[i]
		}
	}
	mine := map[int64][]Scope{} // this node's partition leases, by table
	held := 0
	var myWriters []Scope
	for _, s := range v.Held {
		if s.Kind == KindWriter {
			myWriters = append(myWriters, s)
		} else {
			mine[s.Table] = append(mine[s.Table], s)
			held++
		}
	}
	if self == nil || self.Draining {
		act.Release = append(act.Release, v.Held...)
		sortScopes(act.Release)
		return act
	}
	plan := plans.get(v.Members, v.Tables)
	known := map[int64]bool{}
	for _, t := range v.Tables {
		known[t.ID] = true
	}

	if self.Has(RoleIndexer) {
		shares := plan.shares(v.Self)
		releasing := map[Scope]bool{}
		var fetch []int64
		wants := map[int64]int32{}
		for _, t := range plan.tables {
			my := mine[t.ID]
			share := shares[t.ID]
			switch n := int32(len(my)); {
			case n > share:
				// One per table per round, so a joining node takes work gradually.
				s := leastPreferred(v.Self, my)
				act.Release = append(act.Release, s)
				releasing[s] = true
			case n < share && v.FreePartitions[t.ID] > 0:
				wants[t.ID] = share - n
				fetch = append(fetch, t.ID)
			}
		}
		// Leases of tables that are gone (dropped) are let go.
		for tbl, ss := range mine {
			if !known[tbl] {
				act.Release = append(act.Release, ss...)
				for _, s := range ss {
					releasing[s] = true
				}
			}
		}
		room := math.MaxInt
		if self.MaxPartitions > 0 {
			room = self.MaxPartitions - (held - len(releasing))
			if room < 0 {
				// A lowered cap: shed the least preferred leases down to it.
				var kept []Scope
				for _, ss := range mine {
					for _, s := range ss {
						if !releasing[s] {
							kept = append(kept, s)
						}
					}
				}
				sort.Slice(kept, func(i, j int) bool { return prefers(v.Self, kept[i], kept[j]) })
				act.Release = append(act.Release, kept[len(kept)+room:]...)
				room = 0
			}
		}
		if v.FreeScopes == nil {
			if len(fetch) > 0 && room > 0 {
				act.Fetch = wants
				for t, w := range wants {
					wants[t] = int32(min(int(w), room))
				}
			}
		} else if room > 0 {
			var candidates []Scope
			for _, tbl := range fetch {
				var free []Scope
				for _, p := range v.FreeScopes[tbl] {
					free = append(free, PartitionScope(tbl, p))
				}
				sort.Slice(free, func(i, j int) bool { return prefers(v.Self, free[i], free[j]) })
				if w := int(wants[tbl]); len(free) > w {
					free = free[:w]
				}
				candidates = append(candidates, free...)
			}
			if len(candidates) > room {
				sort.Slice(candidates, func(i, j int) bool { return prefers(v.Self, candidates[i], candidates[j]) })
				candidates = candidates[:room]
			}
			act.Acquire = append(act.Acquire, candidates...)
		}
	} else {
		// Not an indexer (any more): hand partition leases back.
		for _, ss := range mine {
			act.Release = append(act.Release, ss...)
		}
	}

	for _, s := range myWriters {
		if !known[s.Table] || !self.Has(RoleWriter) || plan.writer(s.Table) != v.Self {
			act.Release = append(act.Release, s)
		}
	}
	if self.Has(RoleWriter) {
		for _, t := range plan.tables {
			if v.FreeWriters[t.ID] && plan.writer(t.ID) == v.Self {
				act.Acquire = append(act.Acquire, WriterScope(t.ID))
			}
		}
	}
	sortScopes(act.Acquire)
	sortScopes(act.Release)
	return act
}

// Shares returns every indexing node's share of every table, by node and table id: what
// Decide moves each node towards. Exported for tests and tools.
func Shares(members []Member, tables []TableView) map[string]map[int64]int32 {
	p := plans.get(members, tables)
	out := map[string]map[int64]int32{}
	for _, n := range p.indexers {
		out[n] = p.shares(n)
	}
	return out
}

// plan is the shares and writer choices of one membership and set of tables. It depends
// on nothing else, so every node computes the same one, and it is worked out once per
// change (the members and tables rarely change between rounds).
type plan struct {
	tables   []TableView // by id
	indexers []string    // live, non-draining indexing nodes, by id
	alloc    [][]int32   // alloc[i][j]: indexer i's share of tables[j]
	index    map[string]int
	writers  map[int64]string // each table's writer: the writer node that prefers it most
}

func (p *plan) shares(node string) map[int64]int32 {
	out := make(map[int64]int32, len(p.tables))
	i, ok := p.index[node]
	for j, t := range p.tables {
		if ok {
			out[t.ID] = p.alloc[i][j]
		} else {
			out[t.ID] = 0
		}
	}
	return out
}

func (p *plan) writer(table int64) string { return p.writers[table] }

// newPlan works the shares out table by table (by id), filling each table's partitions
// into the indexing nodes' remaining capacity as evenly as their caps allow: every node
// gets the same number but those whose cap is lower, which get their cap; the remainder
// of an uneven split goes one each to the nodes that prefer the table most (the
// preference for its writer lease, so no further hash is needed). A cap is a node's
// total over all tables, so what a table takes of it is not there for the next.
func newPlan(members []Member, tables []TableView) *plan {
	p := &plan{index: map[string]int{}, writers: map[int64]string{}}
	p.tables = append([]TableView(nil), tables...)
	sort.Slice(p.tables, func(i, j int) bool { return p.tables[i].ID < p.tables[j].ID })
	var caps []int64
	var writers []string
	for _, m := range members {
		if m.Draining {
			continue
		}
		if m.Has(RoleIndexer) {
			p.indexers = append(p.indexers, m.NodeID)
		}
		if m.Has(RoleWriter) {
			writers = append(writers, m.NodeID)
		}
	}
	sort.Strings(p.indexers)
	sort.Strings(writers)
	capOf := map[string]int64{}
	for _, m := range members {
		if m.MaxPartitions > 0 {
			capOf[m.NodeID] = int64(m.MaxPartitions)
		}
	}
	for i, n := range p.indexers {
		p.index[n] = i
		c, ok := capOf[n]
		if !ok {
			c = math.MaxInt64
		}
		caps = append(caps, c)
	}
	p.alloc = make([][]int32, len(p.indexers))
	for i := range p.alloc {
		p.alloc[i] = make([]int32, len(p.tables))
	}
	rank := make([]int, len(p.indexers))
	prefs := make([]uint64, len(p.indexers))
	for j, t := range p.tables {
		ws := WriterScope(t.ID)
		for i, n := range p.indexers {
			rank[i], prefs[i] = i, Preference(n, ws)
		}
		sort.Slice(rank, func(a, b int) bool {
			if prefs[rank[a]] != prefs[rank[b]] {
				return prefs[rank[a]] > prefs[rank[b]]
			}
			return p.indexers[rank[a]] < p.indexers[rank[b]]
		})
		fill(p.alloc, j, caps, rank, int64(t.Partitions))
		p.writers[t.ID] = topNode(writers, ws)
	}
	return p
}

// fill shares left partitions of table j among the nodes in rank order (most preferring
// first), within their remaining capacity caps, which it reduces.
func fill(alloc [][]int32, j int, caps []int64, rank []int, left int64) {
	eligible := make([]int, 0, len(rank))
	for _, i := range rank {
		if caps[i] > 0 {
			eligible = append(eligible, i)
		}
	}
	got := make(map[int]int64, len(eligible))
	for left > 0 && len(eligible) > 0 {
		q, r := left/int64(len(eligible)), left%int64(len(eligible))
		// A node whose remaining room is at most the even split takes all of it; the
		// rest is split again among the others.
		capped := false
		kept := eligible[:0:0]
		for _, i := range eligible {
			if room := caps[i] - got[i]; room <= q {
				got[i] += room
				left -= room
				capped = true
			} else {
				kept = append(kept, i)
			}
		}
		if capped {
			eligible = kept
			continue
		}
		for k, i := range eligible {
			got[i] += q
			if int64(k) < r {
				got[i]++
			}
		}
		left = 0
	}
	for i, n := range got {
		alloc[i][j] = int32(n)
		caps[i] -= n
	}
}

// plans memoises the plan of the last few memberships: nodes decide every round, and
// the members and tables almost never change between two of them. Simulations of many
// nodes in one process share it.
var plans = &planCache{entries: map[string]*plan{}}

type planCache struct {
	mu      sync.Mutex
	entries map[string]*plan
	order   []string
}

const planCacheSize = 8

func (c *planCache) get(members []Member, tables []TableView) *plan {
	key := planKey(members, tables)
	c.mu.Lock()
	p, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return p
	}
	p = newPlan(members, tables)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok {
		c.entries[key] = p
		c.order = append(c.order, key)
		if len(c.order) > planCacheSize {
			delete(c.entries, c.order[0])
			c.order = c.order[1:]
		}
	}
	return c.entries[key]
}

// planKey is everything a plan depends on.
func planKey(members []Member, tables []TableView) string {
	ms := make([]string, 0, len(members))
	for _, m := range members {
		roles := make([]string, len(m.Roles))
		for i, r := range m.Roles {
			roles[i] = string(r)
		}
		sort.Strings(roles)
		ms = append(ms, m.NodeID+"|"+strings.Join(roles, ",")+"|"+strconv.FormatBool(m.Draining)+"|"+strconv.Itoa(m.MaxPartitions))
	}
	sort.Strings(ms)
	ts := make([]TableView, len(tables))
	copy(ts, tables)
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m)
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, t := range ts {
		b.WriteString(strconv.FormatInt(t.ID, 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(int64(t.Partitions), 10))
		b.WriteByte(0)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return string(sum[:])
}

// leastPreferred is the scope node would give up first.
func leastPreferred(node string, ss []Scope) Scope {
	worst := ss[0]
	for _, s := range ss[1:] {
		if prefers(node, worst, s) {
			worst = s
		}
	}
	return worst
}

// topNode is the node that prefers s most ("" when there is none).
func topNode(nodes []string, s Scope) string {
	best, bestPref := "", uint64(0)
	for _, n := range nodes {
		p := Preference(n, s)
		if best == "" || p > bestPref || p == bestPref && n < best {
			best, bestPref = n, p
		}
	}
	return best
}

func sortScopes(ss []Scope) {
	sort.Slice(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Partition < b.Partition
	})
}
