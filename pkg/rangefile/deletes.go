package rangefile

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/upsert"
)

// Deletes names the position delete file of an upsert table's data file: the rows of
// the data file (DataKey, offsets [Start, End) of Partition) whose key a record of
// [End, CoverEnd) touches.
type Deletes struct {
	Table      int64
	Partition  int32
	Start, End int64
	DataKey    string
	CoverEnd   int64
	// Tail is, for a live load's delete file, the tail files (keys, offset order) whose
	// recorded keys stand for the offsets they span, in place of the index's ranges
	// there: the tail need not be indexed yet.
	Tail []string
}

// KeyedRange is one range's offsets and its decoded keys.
type KeyedRange struct {
	Start, End int64
	Keys       upsert.Keys
}

// DecodeKeys decodes the keys ranges.KeysOf read.
func DecodeKeys(rs []ranges.RangeKeys) ([]KeyedRange, error) {
	out := make([]KeyedRange, len(rs))
	for i, r := range rs {
		k, err := upsert.DecodeKeys(r.Keys)
		if err != nil {
			return nil, fmt.Errorf("range [%d, %d): %w", r.Start, r.End, err)
		}
		out[i] = KeyedRange{Start: r.Start, End: r.End, Keys: k}
	}
	return out, nil
}

// WithTail is the partition's ranges rs with the tail files tail put in: the ranges that
// overlap a tail file left out, in offset order.
func WithTail(rs, tail []ranges.RangeKeys) []ranges.RangeKeys {
	if len(tail) == 0 {
		return rs
	}
	out := slices.Clone(tail)
	for _, r := range rs {
		if !slices.ContainsFunc(tail, func(f ranges.RangeKeys) bool { return r.Start < f.End && f.Start < r.End }) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b ranges.RangeKeys) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// SpanKeys are the keys of the run [start, end) of a partition, merged from those of
// the ranges rs that tile it (others in rs are skipped): the rows a rebuild of the run
// has, in position order, and the keys it tombstones. The first range may begin before
// start: the run then begins at Kafka's log start, inside it, and the writer re-derived
// that range's keys from the offsets Kafka still holds (rederive).
func SpanKeys(rs []KeyedRange, partition int32, start, end int64) (upsert.Keys, error) {
	var ks []upsert.Keys
	next := start
	for _, r := range rs {
		if r.End <= start || r.Start >= end {
			continue
		}
		if len(ks) == 0 && r.Start < start {
			next = r.Start
		}
		if r.Start != next || r.End > end {
			return upsert.Keys{}, fmt.Errorf("the index of partition %d has no range [%d, ...) within [%d, %d)", partition, next, start, end)
		}
		ks = append(ks, r.Keys)
		next = r.End
	}
	if next != end {
		return upsert.Keys{}, fmt.Errorf("the index of partition %d ends at %d, before %d", partition, next, end)
	}
	return upsert.Merge(ks), nil
}

// DeletePositions computes d's positions from the keys of the partition's ranges rs,
// which must tile [d.Start, d.CoverEnd): the data file's rows are SpanKeys of
// [d.Start, d.End), and those whose key [d.End, d.CoverEnd) touches are deleted.
func DeletePositions(rs []KeyedRange, d Deletes) ([]int64, error) {
	file, err := SpanKeys(rs, d.Partition, d.Start, d.End)
	if err != nil {
		return nil, fmt.Errorf("deletes of %s: %w", d.DataKey, err)
	}
	later, err := SpanKeys(rs, d.Partition, d.End, d.CoverEnd)
	if err != nil {
		return nil, fmt.Errorf("deletes of %s: %w", d.DataKey, err)
	}
	return upsert.Deleted(file, []upsert.Keys{later}), nil
}

// BuildDeletes writes d's position delete file with settings s to w, computed from the
// index (and d.Tail's recorded keys) alone, no Kafka read, with the keys keys holds
// (nil: none), and returns its statistics.
func BuildDeletes(ctx context.Context, db pg.DB, keys *KeyCache, d Deletes, s parquetbuild.Settings, w io.Writer) (parquetbuild.FileStats, error) {
	pk, err := keys.Partition(ctx, db, d.Table, d.Partition, d.Start, d.CoverEnd, d.Tail)
	if err != nil {
		return parquetbuild.FileStats{}, fmt.Errorf("deletes of %s: %w", d.DataKey, err)
	}
	pos, err := pk.Deletes(d)
	if err != nil {
		return parquetbuild.FileStats{}, err
	}
	return parquetbuild.WritePositionDeletes(w, s, layout.URI(d.DataKey), pos)
}
