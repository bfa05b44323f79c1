package upsert

import (
	"errors"
	"fmt"
	"sort"
)

// Index is the keys of adjacent runs of one partition's offsets (its ranges), in offset
// order, with, for every row of every run, the next run that touches its key. A file's
// rows and its deletes up to any coverage are then read off its own rows, without
// merging the runs after it: Deleted costs the file's keys, not the partition's, and
// Append costs the new run's keys. Results equal Merge and Deleted over the same runs.
type Index struct {
	runs  []indexRun
	last  map[Hash]loc // each key's latest touch
	bytes int64
}

type indexRun struct {
	start, end int64
	keys       Keys
	next       []int32 // per Live key: the index of the next run touching it, -1 none yet
}

// loc is where a key was last touched: a run and its row there (-1: a dead key).
type loc struct{ run, pos int32 }

// ErrNotAdjacent: a run appended to an Index does not start where it ends.
var ErrNotAdjacent = errors.New("upsert: run does not start where the index ends")

// ErrRepeatedKey: a run touches a key twice (Latest never makes one): Merge keeps both
// rows, which an Index cannot say, so the caller merges instead.
var ErrRepeatedKey = errors.New("upsert: a run has a key twice")

// NewIndex is an Index of no runs.
func NewIndex() *Index { return &Index{last: map[Hash]loc{}} }

// Runs is the number of runs appended.
func (x *Index) Runs() int { return len(x.runs) }

// Start is the first run's start offset, End the last one's end (0 without runs).
func (x *Index) Start() int64 {
	if len(x.runs) == 0 {
		return 0
	}
	return x.runs[0].start
}

// End is where the next run must start.
func (x *Index) End() int64 {
	if len(x.runs) == 0 {
		return 0
	}
	return x.runs[len(x.runs)-1].end
}

// Bytes is about what x holds in memory: its hashes, next rows and key map.
func (x *Index) Bytes() int64 { return x.bytes }

// mapEntryBytes is about what a Go map entry of a Hash and a loc costs, buckets and
// overhead included.
const mapEntryBytes = 48

// Append adds the run [start, end) with keys k after x's last run; x is unchanged on
// an error. k is kept, not copied.
func (x *Index) Append(start, end int64, k Keys) error {
	if len(x.runs) > 0 && start != x.End() || end <= start {
		return fmt.Errorf("%w: [%d, %d) after %d", ErrNotAdjacent, start, end, x.End())
	}
	r := int32(len(x.runs))
	seen := make(map[Hash]bool, len(k.Live)+len(k.Dead))
	for _, hs := range [][]Hash{k.Live, k.Dead} {
		for _, h := range hs {
			if seen[h] {
				return fmt.Errorf("%w: [%d, %d)", ErrRepeatedKey, start, end)
			}
			seen[h] = true
		}
	}
	before := len(x.last)
	touch := func(h Hash, pos int32) {
		if l, ok := x.last[h]; ok && l.pos >= 0 {
			x.runs[l.run].next[l.pos] = r
		}
		x.last[h] = loc{run: r, pos: pos}
	}
	next := make([]int32, len(k.Live))
	x.runs = append(x.runs, indexRun{start: start, end: end, keys: k, next: next})
	for i, h := range k.Live {
		next[i] = -1
		touch(h, int32(i))
	}
	for _, h := range k.Dead {
		touch(h, -1)
	}
	x.bytes += int64(HashSize*(len(k.Live)+len(k.Dead))+4*len(k.Live)) + 64 + int64(len(x.last)-before)*mapEntryBytes
	return nil
}

// Deleted returns the positions of the rows of the file [start, end) of partition (the
// rows Merge of its runs has) whose key a run of [end, cover) touches, or, for a key
// no such run touches, one beyond cover does (beyond; nil: none), ascending. The runs
// must tile [start, cover); the first may begin before start (a file that begins at
// Kafka's log start, inside a range), as for Merge of the runs that tile a span.
func (x *Index) Deleted(partition int32, start, end, cover int64, beyond func(Hash) bool) ([]int64, error) {
	first := sort.Search(len(x.runs), func(i int) bool { return x.runs[i].end > start })
	if first == len(x.runs) || x.runs[first].start > start {
		return nil, gap(partition, start, end)
	}
	last := first
	for last < len(x.runs) && x.runs[last].end <= end {
		last++
	}
	if last == first || x.runs[last-1].end != end {
		return nil, gap(partition, start, end)
	}
	if cover < end || cover > end && x.runEnding(cover) < 0 {
		return nil, gap(partition, end, cover)
	}
	var out []int64
	pos := int64(0)
	for _, r := range x.runs[first:last] {
		for i, h := range r.keys.Live {
			n := r.next[i]
			if n >= 0 && x.runs[n].start < end {
				continue // a later run of the file itself supersedes it: no row
			}
			if n >= 0 && x.runs[n].start < cover || beyond != nil && beyond(h) {
				out = append(out, pos)
			}
			pos++
		}
	}
	return out, nil
}

// Each calls f with every run's offsets and keys, in offset order.
func (x *Index) Each(f func(start, end int64, k Keys)) {
	for _, r := range x.runs {
		f(r.start, r.end, r.keys)
	}
}

// runEnding is the index of the run that ends at off, -1 if none does.
func (x *Index) runEnding(off int64) int {
	i := sort.Search(len(x.runs), func(i int) bool { return x.runs[i].end >= off })
	if i < len(x.runs) && x.runs[i].end == off {
		return i
	}
	return -1
}

// gap is the error of a span [start, end) the runs do not tile.
func gap(partition int32, start, end int64) error {
	return fmt.Errorf("the index of partition %d has no ranges tiling [%d, %d)", partition, start, end)
}
