package rangefile

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/upsert"
)

// Sizes of the upsert benchmarks: a partition of benchRanges ranges of benchKeys keys
// each (5% of them tombstoned), drawn from benchPool distinct keys; every range is a
// data file.
const (
	benchRanges = 200
	benchKeys   = 10_000
	benchPool   = 100_000
)

// benchKeysOf draws a range's keys: benchKeys distinct keys of the pool, in random
// order, one in twenty dead.
func benchKeysOf(rnd *rand.Rand, pool []upsert.Hash) upsert.Keys {
	var k upsert.Keys
	for i, j := range rnd.Perm(len(pool))[:benchKeys] {
		if i%20 == 0 {
			k.Dead = append(k.Dead, pool[j])
		} else {
			k.Live = append(k.Live, pool[j])
		}
	}
	slices.SortFunc(k.Dead, func(a, b upsert.Hash) int { return cmp.Compare(string(a[:]), string(b[:])) })
	return k
}

// benchHashes are the hashes of the benchmarks' benchPool keys.
func benchHashes() []upsert.Hash {
	pool := make([]upsert.Hash, benchPool)
	for i := range pool {
		pool[i] = upsert.KeyHash(fmt.Appendf(nil, "key-%06d", i))
	}
	return pool
}

// benchPartition stores benchRanges ranges of an upsert partition in a database of its
// own, the same every time, and returns how to append one more.
func benchPartition(b *testing.B) (*keyPartition, func() int64) {
	k := newKeyPartition(b)
	rnd := rand.New(rand.NewPCG(19, 15))
	pool := benchHashes()
	next := func() int64 { // appends one range, returns its end
		start := k.ends[len(k.ends)-1]
		end := start + benchKeys
		r := ranges.Range{Table: k.tbl.ID, Partition: 0, Start: start, End: end, Records: benchKeys, Size: 1,
			SHA256: fmt.Sprint("sha", start), Settings: []byte(`{}`), Stats: []byte(`[]`), Keys: benchKeysOf(rnd, pool).Encode()}
		if err := ranges.Append(context.Background(), k.db, k.l, r); err != nil {
			b.Fatal(err)
		}
		k.ends = append(k.ends, end)
		return end
	}
	for range benchRanges {
		next()
	}
	k.rnd = rnd
	return k, next
}

// deletesOfAll computes every file's deletes up to cover (the files are the ranges
// below tailStart, then the tail files), as a commit or a load does.
func deletesOfAll(b *testing.B, k *keyPartition, c *KeyCache, cover int64, tail []string, tailEnds []int64) int {
	pk, err := c.Partition(context.Background(), k.db, k.tbl.ID, 0, 0, cover, tail)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	files := slices.Clone(k.ends)
	files = append(files, tailEnds...)
	for i := 0; i+1 < len(files) && files[i+1] <= cover; i++ {
		d := Deletes{Table: k.tbl.ID, Start: files[i], End: files[i+1], CoverEnd: cover, DataKey: "f", Tail: tail}
		pos, err := pk.Deletes(d)
		if err != nil {
			b.Fatal(err)
		}
		n += len(pos)
	}
	return n
}

// BenchmarkUpsertCommitDeletes: what a writer's commit of one new range of an upsert
// partition of 200 ranges of 10k keys computes, every data file's position deletes up to
// the new coverage: merged from Postgres each time (before the key cache) or from a warm
// KeyCache, which reads the new range's keys only.
func BenchmarkUpsertCommitDeletes(b *testing.B) {
	for _, cached := range []bool{false, true} {
		b.Run(map[bool]string{false: "merged", true: "cached"}[cached], func(b *testing.B) {
			k, next := benchPartition(b)
			var c *KeyCache
			if cached {
				c = NewKeyCache(0)
				deletesOfAll(b, k, c, k.ends[len(k.ends)-1], nil, nil)
			}
			pos := 0
			for b.Loop() {
				b.StopTimer()
				end := next()
				b.StartTimer()
				pos = deletesOfAll(b, k, c, end, nil, nil)
			}
			b.ReportMetric(float64(pos), "positions")
		})
	}
}

// BenchmarkUpsertLiveLoadDeletes: what a live load of the same partition with two tail
// files of 10k keys beyond the index computes: every file's deletes up to the tail's
// end, merged from Postgres each time or from a warm KeyCache.
func BenchmarkUpsertLiveLoadDeletes(b *testing.B) {
	for _, cached := range []bool{false, true} {
		b.Run(map[bool]string{false: "merged", true: "cached"}[cached], func(b *testing.B) {
			k, _ := benchPartition(b)
			pool := benchHashes()
			var tail []string
			var tailEnds []int64
			start := k.ends[len(k.ends)-1]
			for range 2 {
				key := fmt.Sprintf("tail/%d", start)
				if _, _, _, err := objects.RecordTail(context.Background(), k.db, objects.Tail{Table: k.tbl.ID, Key: key, Start: start, End: start + benchKeys,
					Records: 1, Size: 1, SHA256: key, Settings: []byte(`{}`), Stats: []byte(`[]`), Keys: benchKeysOf(k.rnd, pool).Encode()}, time.Hour, time.Hour); err != nil {
					b.Fatal(err)
				}
				tail, start = append(tail, key), start+benchKeys
				tailEnds = append(tailEnds, start)
			}
			var c *KeyCache
			if cached {
				c = NewKeyCache(0)
				deletesOfAll(b, k, c, start, tail, tailEnds)
			}
			pos := 0
			for b.Loop() {
				pos = deletesOfAll(b, k, c, start, tail, tailEnds)
			}
			b.ReportMetric(float64(pos), "positions")
		})
	}
}
