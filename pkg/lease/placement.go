package lease

import (
	"crypto/sha256"
	"encoding/binary"
	"sort"
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

// View is what one node knows at the start of a round: everything Decide needs, read
// from Postgres in a constant number of statements.
type View struct {
	Self          string
	Members       []Member         // live members only
	Tables        []TableView      // every table
	Holders       map[Scope]string // unexpired leases and their holders; absent = free
	MaxPartitions int              // cap on Self's partition leases; 0 = none
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
}

// Empty reports whether the round changes nothing.
func (a Actions) Empty() bool { return len(a.Acquire) == 0 && len(a.Release) == 0 }

// Decide applies the seed's sharing rules for v.Self, as a pure function:
//   - a table's partition share is its partition count divided by the live, non-draining
//     indexing nodes, rounded up;
//   - below its share a node takes free leases, the ones it prefers most first;
//   - above its share it releases one lease of that table per round (its least preferred);
//   - max_partitions caps the partition leases it holds;
//   - each table's writer lease goes to the live, non-draining writer node that prefers
//     it most: that node takes it when free, and any other holder releases it.
//
// A draining node, or one not (yet) among the live members, releases what it holds and
// takes nothing.
func Decide(v View) Actions {
	var self *Member
	indexers, writers := []string{}, []string{}
	for i := range v.Members {
		m := &v.Members[i]
		if m.NodeID == v.Self {
			self = m
		}
		if m.Draining {
			continue
		}
		if m.Has(RoleIndexer) {
			indexers = append(indexers, m.NodeID)
		}
		if m.Has(RoleWriter) {
			writers = append(writers, m.NodeID)
		}
	}
	var act Actions
	mine := map[int64][]Scope{} // this node's partition leases, by table
	held := 0
	var myWriters []Scope
	for s, h := range v.Holders {
		if h != v.Self {
			continue
		}
		if s.Kind == KindWriter {
			myWriters = append(myWriters, s)
		} else {
			mine[s.Table] = append(mine[s.Table], s)
			held++
		}
	}
	if self == nil || self.Draining {
		for _, ss := range mine {
			act.Release = append(act.Release, ss...)
		}
		act.Release = append(act.Release, myWriters...)
		sortScopes(act.Release)
		return act
	}

	tables := append([]TableView(nil), v.Tables...)
	sort.Slice(tables, func(i, j int) bool { return tables[i].ID < tables[j].ID })
	known := map[int64]TableView{}
	for _, t := range tables {
		known[t.ID] = t
	}

	if self.Has(RoleIndexer) {
		n := int32(len(indexers))
		var candidates []Scope
		for _, t := range tables {
			if t.Partitions <= 0 {
				continue
			}
			share := (t.Partitions + n - 1) / n
			my := mine[t.ID]
			switch {
			case int32(len(my)) > share:
				// One per table per round, so a joining node takes work gradually.
				act.Release = append(act.Release, leastPreferred(v.Self, my))
			case int32(len(my)) < share:
				var free []Scope
				for p := int32(0); p < t.Partitions; p++ {
					s := PartitionScope(t.ID, p)
					if _, taken := v.Holders[s]; !taken {
						free = append(free, s)
					}
				}
				sort.Slice(free, func(i, j int) bool { return prefers(v.Self, free[i], free[j]) })
				if want := int(share) - len(my); len(free) > want {
					free = free[:want]
				}
				candidates = append(candidates, free...)
			}
		}
		// max_partitions: take the most preferred candidates across tables first; a node
		// over its cap (the cap was lowered) sheds its least preferred leases.
		if v.MaxPartitions > 0 {
			room := v.MaxPartitions - (held - len(act.Release))
			sort.Slice(candidates, func(i, j int) bool { return prefers(v.Self, candidates[i], candidates[j]) })
			if room < 0 {
				var kept []Scope
				releasing := map[Scope]bool{}
				for _, s := range act.Release {
					releasing[s] = true
				}
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
			if len(candidates) > room {
				candidates = candidates[:room]
			}
		}
		act.Acquire = append(act.Acquire, candidates...)
	} else {
		// Not an indexer (any more): hand partition leases back.
		for _, ss := range mine {
			act.Release = append(act.Release, ss...)
		}
	}

	for _, s := range myWriters {
		if _, ok := known[s.Table]; !ok || !self.Has(RoleWriter) || topNode(writers, s) != v.Self {
			act.Release = append(act.Release, s)
		}
	}
	if self.Has(RoleWriter) {
		for _, t := range tables {
			s := WriterScope(t.ID)
			if _, taken := v.Holders[s]; !taken && topNode(writers, s) == v.Self {
				act.Acquire = append(act.Acquire, s)
			}
		}
	}
	sortScopes(act.Acquire)
	sortScopes(act.Release)
	return act
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
