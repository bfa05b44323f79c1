// Package assembly plans which adjacent data files of a partition the writer merges:
// size-tiered assembly, so a partition keeps few files below the target size and every
// row is rewritten a bounded number of times. Plan is a pure function of the current
// files; the writer builds each merge from Kafka and commits them as a replace snapshot.
//
// Design notes: docs/design/assembly.md.
package assembly

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/parquetbuild"
)

// Policy is one table's assembly settings.
type Policy struct {
	Target int64 // bytes a merge adds up to at most; files of Target/2 or more are final
	Tier   int   // k: files of one tier merged into one, at least 2
	// Budget bounds the bytes one round reads: merges are taken, partition by partition,
	// while the bytes taken are below it (so a round may pass it by at most Target). 0:
	// no bound.
	Budget int64
}

// Final is the size from which a file is never rewritten.
func (p Policy) Final() int64 { return p.Target / 2 }

// Tier is the size tier of a file of rows rows: ⌊log_k(rows)⌋ (0 below k).
func Tier(rows int64, k int) int {
	t := 0
	for ; rows >= int64(k); rows /= int64(k) {
		t++
	}
	return t
}

// Plan returns one round's merges: runs of adjacent files of one partition, each to be
// replaced by one file holding exactly their rows. live holds each partition's files by
// Start; logStart is Kafka's log start offset per partition (files below it are left to
// expiry).
func Plan(live map[int32][]icebergmeta.DataFile, logStart map[int32]int64, p Policy) [][]icebergmeta.DataFile {
	if p.Tier < 2 {
		p.Tier = 2
	}
	var out [][]icebergmeta.DataFile
	var taken int64
	for _, part := range slices.Sorted(maps.Keys(live)) {
		files := live[part]
		for _, g := range planPartition(files, logStart[part], p) {
			if p.Budget > 0 && taken >= p.Budget {
				return out
			}
			run := slices.Clone(files[g.lo:g.hi]) // the caller's files change while merges are built
			out = append(out, run)
			for _, f := range run {
				taken += f.Size
			}
		}
	}
	return out
}

// block is a run of adjacent files, files[lo:hi], taken as one file: one of the
// partition's files, or a merge of several.
type block struct {
	lo, hi     int
	rows, size int64
	tier       int
}

func (b block) merged() bool { return b.hi-b.lo > 1 }

// planner plans one partition.
type planner struct {
	p     Policy
	files []icebergmeta.DataFile
	st    []block // the stack: the current run's blocks, oldest first
	out   []block // merges to build
	// front: the stack's bottom holds the partition's first file, which a single block
	// above it does not absorb (see settle).
	front bool
}

// planPartition returns the merges of one partition's files, by offset.
func planPartition(files []icebergmeta.DataFile, logStart int64, p Policy) []block {
	pl := &planner{p: p, files: files}
	lo := 0 // first file of the current run between barriers
	for i, f := range files {
		switch {
		case f.Start < logStart || f.Size >= p.Final():
			pl.run(lo, i, true)
			lo = i + 1
		case i > lo && !SameSettings(files[i-1], f):
			pl.run(lo, i, true)
			lo = i
		}
	}
	pl.run(lo, len(files), false)
	slices.SortFunc(pl.out, func(a, b block) int { return a.lo - b.lo })
	return pl.out
}

// run plans files[lo:hi], a run between barriers; closed: something follows it, so it
// never gains a file.
func (pl *planner) run(lo, hi int, closed bool) {
	pl.st, pl.front = pl.st[:0], lo == 0
	for i := lo; i < hi; i++ {
		f := pl.files[i]
		pl.st = append(pl.st, block{lo: i, hi: i + 1, rows: f.Records, size: f.Size, tier: Tier(f.Records, pl.p.Tier)})
		pl.settle()
	}
	if closed {
		pl.pack(pl.st)
	} else {
		for _, b := range pl.st {
			pl.emit(b)
		}
	}
	pl.st = pl.st[:0]
}

// settle applies absorb and carry at the stack's top until neither does anything. The
// partition's first file, alone below a newer file of a higher tier, is not absorbed but
// left for a carry: it is where expiry leaves the retained part of a file Kafka partly
// deleted, and absorbing that would rewrite its neighbour at every cut.
func (pl *planner) settle() {
	for len(pl.st) > 0 {
		n := len(pl.st)
		t := pl.st[n-1].tier
		i := n - 1
		for i > 0 && pl.st[i-1].tier < t {
			i--
		}
		if i < n-1 && !(pl.front && i == 0 && n == 2) {
			pl.merge(i)
			continue
		}
		j, same := n-1, 0
		for ; j >= 0 && pl.st[j].tier <= t; j-- {
			if pl.st[j].tier == t {
				same++
			}
		}
		if same < pl.p.Tier {
			return
		}
		pl.merge(j + 1)
	}
}

// merge merges the stack's blocks from i to the top. One that reaches T/2 is final: the
// blocks below it are then closed, and the stack starts afresh above it. One that would
// pass T is cut instead: its oldest blocks that fit T become a final file, and the rest
// start the stack afresh, taken one by one as the next round takes them once that file
// is built. So a plan is the same whatever part of an earlier one was built, and rounds
// cut short by the budget end where one round would.
func (pl *planner) merge(i int) {
	run := pl.st[i:]
	var size int64
	for _, b := range run {
		size += b.size
	}
	if size <= pl.p.Target {
		b := pl.union(run)
		if b.size < pl.p.Final() {
			pl.st = append(pl.st[:i], b)
			return
		}
		pl.pack(pl.st[:i])
		pl.emit(b)
		pl.st, pl.front = pl.st[:0], false
		return
	}
	first := pl.fit(run)[0] // at least two blocks, more than T/2: each is below T/2
	rest := slices.Clone(run[len(first):])
	pl.pack(pl.st[:i])
	pl.emit(pl.union(first))
	pl.st, pl.front = pl.st[:0], false
	for _, b := range rest {
		pl.st = append(pl.st, b)
		pl.settle()
	}
}

// pack merges bs, a run that gains no more files (or that a final file closed), into as
// few files as fit T: oldest first, each but the last reaches T/2.
func (pl *planner) pack(bs []block) {
	for _, g := range pl.fit(bs) {
		pl.emit(pl.union(g))
	}
}

// fit cuts bs, oldest first, into groups adding up to at most T. Every block is below
// T/2, so each group but the last adds up to more than T/2.
func (pl *planner) fit(bs []block) [][]block {
	var groups [][]block
	var size int64
	start := 0
	for i, b := range bs {
		if i > start && size+b.size > pl.p.Target {
			groups = append(groups, bs[start:i])
			start, size = i, 0
		}
		size += b.size
	}
	if start < len(bs) {
		groups = append(groups, bs[start:])
	}
	return groups
}

// emit records b as a merge to build, if it merges anything.
func (pl *planner) emit(b block) {
	if b.merged() {
		pl.out = append(pl.out, b)
	}
}

// union is the block of adjacent blocks bs: its size is their sum, which a merged file
// does not pass.
func (pl *planner) union(bs []block) block {
	u := block{lo: bs[0].lo, hi: bs[len(bs)-1].hi}
	for _, b := range bs {
		u.rows += b.rows
		u.size += b.size
	}
	u.tier = Tier(u.rows, pl.p.Tier)
	return u
}

// SameSettings reports whether two files were built with the same recipe, so that one
// build can hold both.
func SameSettings(a, b icebergmeta.DataFile) bool {
	if bytes.Equal(a.Settings, b.Settings) {
		return true
	}
	var sa, sb parquetbuild.Settings
	return json.Unmarshal(a.Settings, &sa) == nil && json.Unmarshal(b.Settings, &sb) == nil && sa == sb
}
