package rangefile

import (
	"context"
	"fmt"
	"io"

	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/parquetbuild"
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

// DeletePositions computes d's positions from the keys of the partition's ranges rs,
// which must tile [d.Start, d.CoverEnd) (more around them is skipped): the data file's
// rows are those of the ranges within [d.Start, d.End) merged (upsert.Merge), in order.
func DeletePositions(rs []KeyedRange, d Deletes) ([]int64, error) {
	var file, later []upsert.Keys
	next := d.Start
	for _, r := range rs {
		if r.Start < d.Start || r.End > d.CoverEnd {
			continue
		}
		if r.Start != next {
			return nil, fmt.Errorf("deletes of %s: the index has no range at offset %d of partition %d", d.DataKey, next, d.Partition)
		}
		if r.End <= d.End {
			file = append(file, r.Keys)
		} else {
			if r.Start < d.End {
				return nil, fmt.Errorf("deletes of %s: range [%d, %d) straddles the file's end %d", d.DataKey, r.Start, r.End, d.End)
			}
			later = append(later, r.Keys)
		}
		next = r.End
	}
	if next != d.CoverEnd {
		return nil, fmt.Errorf("deletes of %s: the index of partition %d ends at %d, before %d", d.DataKey, d.Partition, next, d.CoverEnd)
	}
	return upsert.Deleted(upsert.Merge(file), later), nil
}

// BuildDeletes writes d's position delete file with settings s to w, computed from the
// index alone (no Kafka read), and returns its statistics.
func BuildDeletes(ctx context.Context, db lease.DB, d Deletes, s parquetbuild.Settings, w io.Writer) (parquetbuild.FileStats, error) {
	rs, err := ranges.KeysOf(ctx, db, d.Table, d.Partition, d.Start, d.CoverEnd)
	if err != nil {
		return parquetbuild.FileStats{}, err
	}
	krs, err := DecodeKeys(rs)
	if err != nil {
		return parquetbuild.FileStats{}, err
	}
	pos, err := DeletePositions(krs, d)
	if err != nil {
		return parquetbuild.FileStats{}, err
	}
	return parquetbuild.WritePositionDeletes(w, s, layout.URI(d.DataKey), pos)
}
