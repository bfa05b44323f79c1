package assembly

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/minkhq/mink/pkg/icebergmeta"
)

// indexed is one range as the indexer cut it: its offsets and what assembly did to its
// rows since.
type indexed struct {
	start, end int64
	tier0      int // the range's own tier
	maxTier    int // the highest tier of a non-final file its rows were in
	rewrites   int
}

// part is one partition as the writer holds it: its files and its ranges' history.
type part struct {
	files  []icebergmeta.DataFile
	ranges []indexed
	next   int64
}

// sim applies plans to partitions the way the writer commits them: each merge becomes
// one file of its parts' rows, sized by shrink (the sum of the parts unless set).
type sim struct {
	p      Policy
	parts  map[int32]*part
	shrink func(parts []icebergmeta.DataFile) int64
}

func newSim(p Policy, partitions int) *sim {
	s := &sim{p: p, parts: map[int32]*part{}}
	for i := range partitions {
		s.parts[int32(i)] = &part{}
	}
	return s
}

func settings(v int) []byte { return fmt.Appendf(nil, `{"version":1,"table_version":%d}`, v) }

// add indexes a range of rows rows and size bytes at the end of partition p.
func (s *sim) add(p int32, rows, size int64, recipe int) {
	pt := s.parts[p]
	f := icebergmeta.DataFile{Key: fmt.Sprintf("r-%d-%d", p, pt.next), Partition: p, Start: pt.next, End: pt.next + rows,
		Records: rows, Size: size, Settings: settings(recipe)}
	pt.files = append(pt.files, f)
	t := Tier(rows, s.p.Tier)
	pt.ranges = append(pt.ranges, indexed{start: f.Start, end: f.End, tier0: t, maxTier: t})
	pt.next = f.End
}

func (s *sim) live() map[int32][]icebergmeta.DataFile {
	m := map[int32][]icebergmeta.DataFile{}
	for p, pt := range s.parts {
		if len(pt.files) > 0 {
			m[p] = pt.files
		}
	}
	return m
}

// apply commits a plan; it fails t if a merge is not a run of adjacent, mergeable files.
func (s *sim) apply(t rapid.TB, plan [][]icebergmeta.DataFile, logStart map[int32]int64) {
	t.Helper()
	for _, g := range plan {
		if len(g) < 2 {
			t.Fatalf("a merge of %d file(s)", len(g))
		}
		p := g[0].Partition
		pt := s.parts[p]
		i := slices.IndexFunc(pt.files, func(f icebergmeta.DataFile) bool { return f.Key == g[0].Key })
		if i < 0 || i+len(g) > len(pt.files) {
			t.Fatalf("partition %d: merge from %s is not a run of its files", p, g[0].Key)
		}
		var size, rows int64
		for j, f := range g {
			if pt.files[i+j].Key != f.Key {
				t.Fatalf("partition %d: merge skips file %s: not adjacent", p, pt.files[i+j].Key)
			}
			if j > 0 && g[j-1].End != f.Start {
				t.Fatalf("partition %d: merge has a gap at %d", p, g[j-1].End)
			}
			if f.Size >= s.p.Final() {
				t.Fatalf("partition %d: merge takes the final file %s (%d bytes, final from %d)", p, f.Key, f.Size, s.p.Final())
			}
			if f.Start < logStart[p] {
				t.Fatalf("partition %d: merge takes %s, below the log start %d", p, f.Key, logStart[p])
			}
			if !SameSettings(g[0], f) {
				t.Fatalf("partition %d: merge mixes recipes %s and %s", p, g[0].Settings, f.Settings)
			}
			size += f.Size
			rows += f.Records
		}
		if size > s.p.Target {
			t.Fatalf("partition %d: merge of %d bytes, target %d", p, size, s.p.Target)
		}
		if s.shrink != nil {
			size = s.shrink(g)
		}
		m := icebergmeta.DataFile{Key: fmt.Sprintf("m-%d-%d-%d", p, g[0].Start, g[len(g)-1].End), Partition: p,
			Start: g[0].Start, End: g[len(g)-1].End, Records: rows, Size: size, Settings: g[0].Settings}
		pt.files = slices.Replace(pt.files, i, i+len(g), m)
		tier := Tier(rows, s.p.Tier)
		for j := range pt.ranges {
			r := &pt.ranges[j]
			if r.start >= m.Start && r.end <= m.End {
				r.rewrites++
				if m.Size < s.p.Final() {
					r.maxTier = max(r.maxTier, tier)
				}
			}
		}
	}
}

// round plans and commits one assembly round.
func (s *sim) round(t rapid.TB, logStart map[int32]int64) [][]icebergmeta.DataFile {
	t.Helper()
	plan := Plan(s.live(), logStart, s.p)
	if again := Plan(s.live(), logStart, s.p); !slices.EqualFunc(plan, again, func(a, b []icebergmeta.DataFile) bool {
		return slices.EqualFunc(a, b, func(x, y icebergmeta.DataFile) bool { return x.Key == y.Key })
	}) {
		t.Fatal("two plans of the same files differ")
	}
	s.apply(t, plan, logStart)
	return plan
}

// checkShape checks what a round leaves in a partition: split at final files and recipe
// changes, every run but the last holds at most one file; in the last, tiers do not rise
// towards newer offsets and at most k-1 files share a tier, but for the partition's first
// file. It returns the bound on files below T/2 this shape implies.
func checkShape(t rapid.TB, p Policy, part int32, files []icebergmeta.DataFile) (small, bound int) {
	t.Helper()
	var runs [][]icebergmeta.DataFile
	var cur []icebergmeta.DataFile
	for i, f := range files {
		if f.Size >= p.Final() {
			runs, cur = append(runs, cur), nil
			continue
		}
		small++
		if len(cur) > 0 && !SameSettings(files[i-1], f) {
			runs, cur = append(runs, cur), nil
		}
		cur = append(cur, f)
	}
	closed := 0
	for _, r := range runs {
		if len(r) > 1 {
			t.Fatalf("partition %d: %d files below %d bytes between barriers, want at most 1", part, len(r), p.Final())
		}
		closed += len(r)
	}
	front := 0 // 1: the last run starts with the partition's first file, which may be lower
	if len(cur) > 0 && cur[0].Key == files[0].Key {
		front = 1
	}
	tiers := map[int]int{}
	for i, f := range cur {
		tr := Tier(f.Records, p.Tier)
		if i > front && tr > Tier(cur[i-1].Records, p.Tier) {
			t.Fatalf("partition %d: tier rises from %d to %d at offset %d", part, Tier(cur[i-1].Records, p.Tier), tr, f.Start)
		}
		if i >= front {
			tiers[tr]++
		}
	}
	for tr, n := range tiers {
		if n > p.Tier-1 {
			t.Fatalf("partition %d: %d files of tier %d, want at most %d", part, n, tr, p.Tier-1)
		}
	}
	bound = closed
	if len(cur) > 0 {
		lo, hi := Tier(cur[len(cur)-1].Records, p.Tier), 0
		for _, f := range cur {
			hi = max(hi, Tier(f.Records, p.Tier))
			lo = min(lo, Tier(f.Records, p.Tier))
		}
		bound += front + (p.Tier-1)*(hi-lo+1)
	}
	if small > bound {
		t.Fatalf("partition %d: %d files below %d bytes, bound %d", part, small, p.Final(), bound)
	}
	return small, bound
}

// drawPolicy draws a target and a tier width.
func drawPolicy(t *rapid.T) Policy {
	return Policy{Target: rapid.Int64Range(8<<10, 8<<20).Draw(t, "target"), Tier: rapid.IntRange(2, 8).Draw(t, "k")}
}

// Over random sequences of ranges (sizes from a few rows to final ones, recipe changes,
// several per round): every merge is a run of adjacent mergeable files adding up to at
// most the target; after each round the partition has the shape that bounds its files
// below T/2 (checkShape), a plan of the same files plans nothing more, and every range's
// rows were rewritten at most t - t0 + 2 times.
func TestPlanBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		s := newSim(p, 1)
		recipe := 0
		for range rapid.IntRange(1, 120).Draw(t, "rounds") {
			for range rapid.IntRange(0, 6).Draw(t, "ranges") {
				if rapid.IntRange(0, 40).Draw(t, "recipe change") == 0 {
					recipe++
				}
				rows := rapid.Int64Range(1, 1<<rapid.IntRange(1, 16).Draw(t, "scale")).Draw(t, "rows")
				perRow := rapid.Int64Range(1, 300).Draw(t, "bytes per row")
				s.add(0, rows, 200+rows*perRow, recipe)
			}
			s.round(t, nil)
			checkShape(t, p, 0, s.parts[0].files)
			if again := Plan(s.live(), nil, p); len(again) > 0 {
				t.Fatalf("a round leaves %d more merges to do", len(again))
			}
		}
		for _, r := range s.parts[0].ranges {
			if r.rewrites > r.maxTier-r.tier0+2 {
				t.Fatalf("range [%d, %d) of tier %d rewritten %d times, its rows reached tier %d: bound %d",
					r.start, r.end, r.tier0, r.rewrites, r.maxTier, r.maxTier-r.tier0+2)
			}
		}
	})
}

// A steady partition (ranges of one tier, as a quiet topic at a steady rate makes):
// only carries (and packs into final files) merge, so a row is rewritten at most
// t - t0 + 1 times.
func TestPlanSteady(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		s := newSim(p, 1)
		lo := int64(1)
		for range rapid.IntRange(0, 3).Draw(t, "rows tier") {
			lo *= int64(p.Tier)
		}
		perRow := rapid.Int64Range(10, 200).Draw(t, "bytes per row")
		for range rapid.IntRange(1, 300).Draw(t, "rounds") {
			for range rapid.IntRange(0, 3).Draw(t, "ranges") {
				rows := rapid.Int64Range(lo, lo*2-1).Draw(t, "rows") // lo = k^j, 2lo-1 < k^(j+1): one tier
				s.add(0, rows, 500+rows*perRow, 0)
			}
			s.round(t, nil)
			checkShape(t, p, 0, s.parts[0].files)
		}
		for _, r := range s.parts[0].ranges {
			if r.rewrites > r.maxTier-r.tier0+1 {
				t.Fatalf("range [%d, %d) of tier %d rewritten %d times, its rows reached tier %d: bound %d",
					r.start, r.end, r.tier0, r.rewrites, r.maxTier, r.maxTier-r.tier0+1)
			}
		}
	})
}

// The round budget: a round reads less than the budget plus one target, and rounds cut
// by it end where one unbounded round ends (a plan is the same whatever part of an
// earlier one was built), over several partitions.
func TestPlanBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		parts := rapid.IntRange(1, 4).Draw(t, "partitions")
		bounded, free := newSim(p, parts), newSim(p, parts)
		bounded.p.Budget = rapid.Int64Range(1, 4*p.Target).Draw(t, "budget")
		for range rapid.IntRange(1, 30).Draw(t, "batches") {
			for part := range parts {
				for range rapid.IntRange(0, 20).Draw(t, "ranges") {
					rows := rapid.Int64Range(1, 2000).Draw(t, "rows")
					size := 200 + rows*rapid.Int64Range(1, 100).Draw(t, "bytes per row")
					bounded.add(int32(part), rows, size, 0)
					free.add(int32(part), rows, size, 0)
				}
			}
			before := map[int32][]icebergmeta.DataFile{}
			for k, v := range free.parts {
				before[k] = slices.Clone(v.files)
			}
			free.round(t, nil)
			for n := 0; ; n++ {
				plan := bounded.round(t, nil)
				if len(plan) == 0 {
					break
				}
				var read int64
				for _, g := range plan {
					for _, f := range g {
						read += f.Size
					}
				}
				if read >= bounded.p.Budget+p.Target {
					t.Fatalf("a round reads %d bytes, budget %d, target %d", read, bounded.p.Budget, p.Target)
				}
				if n > 10000 {
					t.Fatal("rounds never end")
				}
			}
			for part := range parts {
				keys := func(fs []icebergmeta.DataFile) []string {
					var ks []string
					for _, f := range fs {
						ks = append(ks, f.Key)
					}
					return ks
				}
				if a, b := keys(bounded.parts[int32(part)].files), keys(free.parts[int32(part)].files); !slices.Equal(a, b) {
					for _, f := range before[int32(part)] {
						t.Logf("DBG %s rows %d size %d tier %d", f.Key, f.Records, f.Size, Tier(f.Records, p.Tier))
					}
					t.Logf("DBG policy %+v", bounded.p)
					t.Fatalf("partition %d: rounds under a budget end with %v, one round with %v", part, a, b)
				}
			}
		}
	})
}

// Real merges are a little smaller than their parts (one footer instead of several):
// plans stay valid, a few more rounds at most reach a plan of nothing, and the shape
// holds then. The log start moves meanwhile: files below it are never merged, whether
// expiry has removed them yet or not.
func TestPlanShrinkAndExpiry(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		s := newSim(p, 1)
		overhead := rapid.Int64Range(0, 2000).Draw(t, "footer")
		s.shrink = func(g []icebergmeta.DataFile) int64 {
			var n int64
			for _, f := range g {
				n += f.Size
			}
			return max(n-overhead*int64(len(g)-1), 1)
		}
		logStart := map[int32]int64{}
		for range rapid.IntRange(1, 80).Draw(t, "rounds") {
			for range rapid.IntRange(0, 6).Draw(t, "ranges") {
				rows := rapid.Int64Range(1, 4000).Draw(t, "rows")
				s.add(0, rows, overhead+100+rows*rapid.Int64Range(1, 50).Draw(t, "bytes per row"), 0)
			}
			if pt := s.parts[0]; rapid.IntRange(0, 10).Draw(t, "log start moves") == 0 && pt.next > 0 {
				logStart[0] = rapid.Int64Range(logStart[0], pt.next).Draw(t, "log start")
				// Expiry may fail (Kafka unreachable): assembly still plans, around the files.
				if rapid.Bool().Draw(t, "expired") {
					expire(pt, logStart[0])
				}
			}
			for n := 0; ; n++ {
				plan := s.round(t, logStart)
				if len(plan) == 0 {
					break
				}
				if n > 3 {
					t.Fatalf("still merging after %d rounds without new files", n)
				}
			}
			if fs := s.parts[0].files; len(fs) > 0 && fs[0].Start >= logStart[0] {
				checkShape(t, p, 0, fs)
			}
		}
	})
}

// expire does what the writer's expiry does: files wholly below the log start leave,
// and the one that straddles it is replaced by its retained part, with fewer rows.
func expire(pt *part, logStart int64) {
	var out []icebergmeta.DataFile
	for _, f := range pt.files {
		switch {
		case f.End <= logStart:
		case f.Start < logStart:
			kept := f.End - logStart
			f.Size = max(1, f.Size*kept/f.Records)
			f.Start, f.Records, f.Key = logStart, kept, f.Key+"-tail"
			out = append(out, f)
		default:
			out = append(out, f)
		}
	}
	pt.files = out
	i := sort.Search(len(pt.ranges), func(i int) bool { return pt.ranges[i].end > logStart })
	pt.ranges = pt.ranges[i:]
}

// run is a partition's files of these row counts, adjacent from offset 0, each of
// 1000 bytes plus 100 per row, built with recipe 0.
func run(rows ...int64) []icebergmeta.DataFile {
	var fs []icebergmeta.DataFile
	var at int64
	for _, n := range rows {
		fs = append(fs, icebergmeta.DataFile{Key: fmt.Sprintf("f%d", len(fs)), Start: at, End: at + n, Records: n, Size: 1000 + 100*n, Settings: settings(0)})
		at += n
	}
	return fs
}

// merges is a plan as the indexes of its first and last files.
func merges(fs []icebergmeta.DataFile, plan [][]icebergmeta.DataFile) [][2]int {
	var out [][2]int
	for _, g := range plan {
		first := slices.IndexFunc(fs, func(f icebergmeta.DataFile) bool { return f.Key == g[0].Key })
		out = append(out, [2]int{first, first + len(g) - 1})
	}
	return out
}

func TestPlanExamples(t *testing.T) {
	big := Policy{Target: 1 << 30, Tier: 4}
	for _, c := range []struct {
		name     string
		files    []icebergmeta.DataFile
		p        Policy
		logStart int64
		want     [][2]int
	}{
		{"fewer than k of a tier stay", run(25, 25, 25), big, 0, nil},
		{"k of a tier merge", run(25, 25, 25, 25, 25), big, 0, [][2]int{{0, 3}}},
		// 16 ranges carry twice (4 of tier 2 make tier 3, 4 of those tier 4): one build.
		{"carries are one build", run(slices.Repeat([]int64{25}, 17)...), big, 0, [][2]int{{0, 15}}},
		{"newer files of a lower tier wait", run(200, 100, 30, 30, 5), big, 0, nil},
		// 4 and 5 rows (tier 1) sit below a newer file of tier 3: they merge into it.
		{"a newer file of a higher tier absorbs the lower ones below it", run(100, 4, 5, 200), big, 0, [][2]int{{1, 3}}},
		// The partition's first file (expiry's retained part, say) is not absorbed by its
		// neighbour alone, but swept up by the next carry.
		{"the first file waits for a carry", run(5, 100), big, 0, nil},
		{"a carry takes the first file along", run(5, 100, 100, 100, 100), big, 0, [][2]int{{0, 4}}},
		// Files of at least half the target are final; the run they close (one file here)
		// stays, the files after them merge on their own.
		{"final files are never merged", run(20, 100, 20, 20, 20, 20), Policy{Target: 20000, Tier: 4}, 0, [][2]int{{2, 5}}},
		// Four files of 3000 bytes pass the target 10000: the oldest three that fit make
		// a final file, the fourth stays.
		{"a merge never passes the target", run(20, 20, 20, 20), Policy{Target: 10000, Tier: 4}, 0, [][2]int{{0, 2}}},
		// Files below the log start are expiry's.
		{"files below the log start stay", run(25, 25, 25, 25, 25), big, 10, [][2]int{{1, 4}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := merges(c.files, Plan(map[int32][]icebergmeta.DataFile{0: c.files}, map[int32]int64{0: c.logStart}, c.p))
			if !slices.Equal(got, c.want) {
				t.Fatalf("merges %v, want %v", got, c.want)
			}
		})
	}
	// A recipe change closes the run before it: it never gains a file, so it is packed
	// into one (below the target), whatever its tiers.
	fs := run(200, 100, 30, 5, 25)
	fs[4].Settings = settings(1)
	if got := merges(fs, Plan(map[int32][]icebergmeta.DataFile{0: fs}, nil, big)); !slices.Equal(got, [][2]int{{0, 3}}) {
		t.Fatalf("recipe change: merges %v, want [[0 3]]", got)
	}
}
