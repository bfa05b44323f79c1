package rangefile

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/upsert"
)

// DefaultKeyCacheBytes bounds a process's KeyCache unless told otherwise: about 3
// million key hashes of ranges (20 bytes each with their next rows, plus 48 per
// distinct key), enough for a few busy upsert partitions.
const DefaultKeyCacheBytes = 128 << 20

// KeyCache keeps, per partition of an upsert table, the decoded key hashes of its
// ranges as an upsert.Index, least recently used evicted first beyond a byte bound. A
// range's row never changes once stored except when it is replaced (re-derived after
// compaction), which changes its checksum: the cache holds a range's keys under its
// offsets and SHA256, reads from Postgres only the identities of a partition's ranges
// and the keys of those it has not seen, and starts a partition over when one it holds
// was replaced. A nil *KeyCache caches nothing and computes as DeletePositions does.
type KeyCache struct {
	max          int64
	mu           sync.Mutex
	lru          *list.List // of *keyEntry, most recent first
	parts        map[keyPart]*list.Element
	bytes        int64
	hits, misses atomic.Int64
}

type keyPart struct {
	table     int64
	partition int32
}

// keyEntry is one partition's index; mu orders its appends and its readers.
type keyEntry struct {
	part      keyPart
	accounted int64 // its bytes in KeyCache.bytes, under KeyCache.mu; -1 once evicted

	mu  sync.RWMutex
	idx *upsert.Index
	ids []ranges.RangeKeys // idx's runs' identities (no keys)
}

// NewKeyCache is an empty cache of at most maxBytes (DefaultKeyCacheBytes if <= 0).
func NewKeyCache(maxBytes int64) *KeyCache {
	if maxBytes <= 0 {
		maxBytes = DefaultKeyCacheBytes
	}
	return &KeyCache{max: maxBytes, lru: list.New(), parts: map[keyPart]*list.Element{}}
}

// KeyCacheStats are what a KeyCache did: ranges whose keys it had (Hits) or read from
// Postgres (Misses), and the bytes it holds.
type KeyCacheStats struct {
	Hits, Misses, Bytes, Max int64
}

// Stats says what c did so far.
func (c *KeyCache) Stats() KeyCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return KeyCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Bytes: c.bytes, Max: c.max}
}

// Observe exports c's figures on m as <prefix>.key_cache.{hits,misses,bytes}.
func (c *KeyCache) Observe(m metric.Meter, prefix string) error {
	hits, e1 := m.Int64ObservableCounter(prefix+".key_cache.hits",
		metric.WithDescription("Upsert ranges whose key hashes were in this process's key cache."), metric.WithUnit("{range}"))
	misses, e2 := m.Int64ObservableCounter(prefix+".key_cache.misses",
		metric.WithDescription("Upsert ranges whose key hashes were read from Postgres."), metric.WithUnit("{range}"))
	bytes, e3 := m.Int64ObservableGauge(prefix+".key_cache.bytes",
		metric.WithDescription("Bytes of key hashes (and their indexes) the key cache holds."), metric.WithUnit("By"))
	if err := errors.Join(e1, e2, e3); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(hits, s.Hits)
		o.ObserveInt64(misses, s.Misses)
		o.ObserveInt64(bytes, s.Bytes)
		return nil
	}, hits, misses, bytes)
	return err
}

// PartitionKeys are the keys a partition's deletes up to one coverage are computed from
// (KeyCache.Partition).
type PartitionKeys struct {
	partition int32
	// exact, when merge, are the ranges (and tail files) the deletes are merged from, as
	// DeletePositions does: no cache, or a shape the index does not take.
	merge bool
	exact []KeyedRange
	entry *keyEntry
	idx   *upsert.Index
	// With tail files: the index holds the ranges before tailStart; tail are the ranges
	// and tail files from there to the coverage, touched their keys (or tailErr why they
	// do not tile it).
	tailStart int64
	tail      []KeyedRange
	touched   map[upsert.Hash]bool
	tailErr   error
}

// Partition reads what the deletes of a partition's files within [from, to) up to
// coverage to need: its ranges' keys and, for a live load, those of its tail files
// (keys of mink_data_files rows, in offset order) in place of the ranges they overlap.
// Through a cache it holds all of the partition's ranges up to to.
func (c *KeyCache) Partition(ctx context.Context, db pg.DB, table int64, partition int32, from, to int64, tail []string) (*PartitionKeys, error) {
	var tailKeys []ranges.RangeKeys
	if len(tail) > 0 {
		var err error
		if tailKeys, err = objects.TailKeys(ctx, db, tail); err != nil {
			return nil, err
		}
	}
	if c == nil {
		return exactKeys(ctx, db, table, partition, from, to, tailKeys)
	}
	limit := to
	for _, f := range tailKeys {
		limit = min(limit, f.Start)
	}
	// The index holds the partition from its first range whatever from is: every
	// caller (a commit, a load, each delete file built on its own) then shares one.
	ids, err := ranges.IdentsOf(ctx, db, table, partition, -1, limit)
	if err != nil {
		return nil, err
	}
	if len(tailKeys) > 0 && len(ids) > 0 && ids[len(ids)-1].End != limit {
		// A range straddles the tail's start (or the index ends before it): left to
		// the merge, which says what is wrong if anything is.
		return exactKeys(ctx, db, table, partition, from, to, tailKeys)
	}
	pk := &PartitionKeys{partition: partition, tailStart: limit}
	if len(ids) > 0 {
		e, idx, err := c.index(ctx, db, keyPart{table, partition}, ids)
		if errors.Is(err, upsert.ErrRepeatedKey) || errors.Is(err, upsert.ErrNotAdjacent) {
			return exactKeys(ctx, db, table, partition, from, to, tailKeys)
		}
		if err != nil {
			return nil, err
		}
		pk.entry, pk.idx = e, idx
	} else {
		pk.idx = upsert.NewIndex()
	}
	if len(tailKeys) > 0 {
		rs, err := ranges.KeysOf(ctx, db, table, partition, limit, to)
		if err != nil {
			return nil, err
		}
		if pk.tail, err = DecodeKeys(WithTail(rs, tailKeys)); err != nil {
			return nil, err
		}
		later, err := SpanKeys(pk.tail, partition, limit, to)
		pk.tailErr = err
		pk.touched = make(map[upsert.Hash]bool, len(later.Live)+len(later.Dead))
		for _, hs := range [][]upsert.Hash{later.Live, later.Dead} {
			for _, h := range hs {
				pk.touched[h] = true
			}
		}
	}
	return pk, nil
}

// exactKeys are a partition's keys read and merged as DeletePositions takes them.
func exactKeys(ctx context.Context, db pg.DB, table int64, partition int32, from, to int64, tail []ranges.RangeKeys) (*PartitionKeys, error) {
	rs, err := ranges.KeysOf(ctx, db, table, partition, from, to)
	if err != nil {
		return nil, err
	}
	krs, err := DecodeKeys(WithTail(rs, tail))
	if err != nil {
		return nil, err
	}
	return &PartitionKeys{partition: partition, merge: true, exact: krs}, nil
}

// Exact are PartitionKeys of given ranges' keys (re-derived ones, not stored yet).
func Exact(partition int32, krs []KeyedRange) *PartitionKeys {
	return &PartitionKeys{partition: partition, merge: true, exact: krs}
}

// Deletes are d's positions (d.Partition is pk's, d.CoverEnd at most the to pk was
// read up to): those DeletePositions gives over the same keys.
func (pk *PartitionKeys) Deletes(d Deletes) ([]int64, error) {
	if pk.merge {
		return DeletePositions(pk.exact, d)
	}
	if pk.tail != nil && d.Start >= pk.tailStart {
		return DeletePositions(pk.tail, d) // a file of the tail: the tail's keys alone
	}
	if pk.entry != nil {
		pk.entry.mu.RLock()
		defer pk.entry.mu.RUnlock()
	}
	if pk.tail != nil && d.End > pk.tailStart {
		// A file across the tail's start (a load's file never is): merged, as then.
		var krs []KeyedRange
		pk.idx.Each(func(start, end int64, k upsert.Keys) {
			if end <= pk.tailStart {
				krs = append(krs, KeyedRange{Start: start, End: end, Keys: k})
			}
		})
		return DeletePositions(append(krs, pk.tail...), d)
	}
	var beyond func(upsert.Hash) bool
	cover := d.CoverEnd
	if pk.tail != nil {
		if pk.tailErr != nil {
			return nil, fmt.Errorf("deletes of %s: %w", d.DataKey, pk.tailErr)
		}
		cover, beyond = pk.tailStart, func(h upsert.Hash) bool { return pk.touched[h] }
	}
	pos, err := pk.idx.Deleted(pk.partition, d.Start, d.End, cover, beyond)
	if err != nil {
		return nil, fmt.Errorf("deletes of %s: %w", d.DataKey, err)
	}
	return pos, nil
}

// index is the partition's index holding the ranges ids (their offsets and SHA256, in
// offset order, adjacent): the cached one, extended by the keys of ranges it has not
// seen, or one read anew when it has not the first of ids or one of them was replaced.
func (c *KeyCache) index(ctx context.Context, db pg.DB, part keyPart, ids []ranges.RangeKeys) (*keyEntry, *upsert.Index, error) {
	c.mu.Lock()
	el, ok := c.parts[part]
	if !ok {
		el = c.lru.PushFront(&keyEntry{part: part})
		c.parts[part] = el
	} else {
		c.lru.MoveToFront(el)
	}
	e := el.Value.(*keyEntry)
	c.mu.Unlock()

	e.mu.Lock()
	idx, err := e.update(ctx, db, ids, c)
	size := int64(0)
	if e.idx != nil {
		size = e.idx.Bytes()
	}
	e.mu.Unlock()

	c.mu.Lock()
	defer c.mu.Unlock()
	if e.accounted >= 0 {
		c.bytes += size - e.accounted
		e.accounted = size
	}
	// Evict least recent first; the entry just used may go too (its caller keeps it).
	for c.bytes > c.max && c.lru.Len() > 0 {
		old := c.lru.Remove(c.lru.Back()).(*keyEntry)
		delete(c.parts, old.part)
		c.bytes -= old.accounted
		old.accounted = -1
	}
	return e, idx, err
}

// update makes e.idx hold ids (under e.mu), counting c's hits and misses.
func (e *keyEntry) update(ctx context.Context, db pg.DB, ids []ranges.RangeKeys, c *KeyCache) (*upsert.Index, error) {
	if e.idx != nil {
		// Runs before ids's first were collected: kept while they are not most of it.
		if k := e.runOf(ids[0]); k >= 0 && k <= len(e.ids)/2 {
			same := true
			for j := k; j < len(e.ids) && j-k < len(ids); j++ {
				a, b := e.ids[j], ids[j-k]
				same = same && a.Start == b.Start && a.End == b.End && a.SHA256 == b.SHA256
			}
			seen := min(len(ids), len(e.ids)-k)
			if same && (seen == len(ids) || ids[seen].Start == e.idx.End()) {
				err := e.extend(ctx, db, ids[seen:], c)
				if err == nil {
					c.hits.Add(int64(seen))
					return e.idx, nil
				}
				if !errors.Is(err, upsert.ErrNotAdjacent) {
					return nil, err
				} // the ranges after it changed meanwhile: read anew
			}
		}
	}
	// Not held, or replaced: read the partition's keys anew, from ids's first range.
	e.idx, e.ids = upsert.NewIndex(), nil
	if err := e.extend(ctx, db, ids, c); err != nil {
		e.idx, e.ids = nil, nil
		return nil, err
	}
	return e.idx, nil
}

// extend appends to e.idx the ranges ids, which start where it ends, read from Postgres.
func (e *keyEntry) extend(ctx context.Context, db pg.DB, ids []ranges.RangeKeys, c *KeyCache) error {
	if len(ids) == 0 {
		return nil
	}
	p := e.part
	rs, err := ranges.KeysOf(ctx, db, p.table, p.partition, ids[0].Start, ids[len(ids)-1].End)
	if err != nil {
		return err
	}
	// What KeysOf read is what the index holds (a range replaced since IdentsOf is
	// read as it is now; the next call sees its new checksum).
	krs, err := DecodeKeys(rs)
	if err != nil {
		return fmt.Errorf("partition %d: %w", p.partition, err)
	}
	for i, r := range krs {
		if err := e.idx.Append(r.Start, r.End, r.Keys); err != nil {
			e.idx, e.ids = nil, nil // half extended: start over next time
			return err
		}
		e.ids = append(e.ids, ranges.RangeKeys{Start: r.Start, End: r.End, SHA256: rs[i].SHA256})
	}
	c.misses.Add(int64(len(krs)))
	return nil
}

// runOf is the index of the run of e.idx that id is, -1 if none.
func (e *keyEntry) runOf(id ranges.RangeKeys) int {
	lo, hi := 0, len(e.ids)
	for lo < hi {
		m := (lo + hi) / 2
		if e.ids[m].Start < id.Start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(e.ids) && e.ids[lo].Start == id.Start {
		return lo
	}
	return -1
}
