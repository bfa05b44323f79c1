package writer

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/ranges"
)

const (
	// collectBatch rows are deleted per transaction, so collection never holds locks
	// or a transaction long enough to hold up a commit.
	collectBatch = 500
	// collectBatches bounds one round; the rest waits for the next maintenance.
	collectBatches = 20
)

// collect deletes what no live snapshot names any more: mink_data_files rows (and
// live-load tail rows past their expiry), this writer's metadata files outside the
// current metadata chain (the current JSON, its metadata log, live snapshots' manifest
// lists and manifests), live loads' metadata files past their expiry, and index
// ranges Kafka no longer holds that no live snapshot
// names, except each partition's last range, where indexing resumes. Each batch is
// fenced by the lease and checks that the metadata is still the version it was read
// from, so nothing a newer commit names can go.
func (tw *tableWriter) collect(ctx context.Context) error {
	refs, err := tw.reader.Referenced(ctx, tw.st.base.Metadata, tw.st.base.Key)
	if err != nil {
		return err
	}
	budget := collectBatches
	if err := tw.capExpiries(ctx); err != nil {
		return err
	}

	keys, err := objects.ListCollectable(ctx, tw.w.db, tw.l.Table)
	if err != nil {
		return err
	}
	dataKeys := slices.DeleteFunc(keys.Data, func(k string) bool { return refs.Data[k] })
	if err := tw.deleteKeys(ctx, "data_file", dataKeys, &budget, func(tx pgx.Tx, chunk []string) (int64, error) {
		return objects.DeleteDataFiles(ctx, tx, tw.l.Table, chunk)
	}); err != nil {
		return err
	}
	metaKeys := slices.DeleteFunc(keys.Meta, func(k string) bool {
		return refs.Meta[k] || !icebergmeta.IsWriterKey(tw.tbl.Namespace, tw.tbl.Name, k)
	})
	if err := tw.deleteKeys(ctx, "meta_file", metaKeys, &budget, func(tx pgx.Tx, chunk []string) (int64, error) {
		return objects.DeleteMetaFiles(ctx, tx, tw.l.Table, chunk, false)
	}); err != nil {
		return err
	}
	// Live loads' metadata files (metadata/live/, stored by file servers) expire: they
	// go once expired, never before. The writer's own never expire.
	if err := tw.deleteKeys(ctx, "meta_file", keys.ExpiredMeta, &budget, func(tx pgx.Tx, chunk []string) (int64, error) {
		return objects.DeleteMetaFiles(ctx, tx, tw.l.Table, chunk, true)
	}); err != nil {
		return err
	}
	return tw.collectRanges(ctx, refs, &budget)
}

// fencedAtVersion runs fn under the lease if the current metadata is still the one this
// writer holds.
func (tw *tableWriter) fencedAtVersion(ctx context.Context, fn func(pgx.Tx) error) error {
	return lease.Fenced(ctx, tw.w.db, tw.l, func(tx pgx.Tx) error {
		v, err := objects.MetaVersion(ctx, tx, tw.l.Table)
		if err != nil {
			return err
		}
		if v != tw.st.base.Version {
			return fmt.Errorf("%w: read at version %d, the table is at %d", ErrConflict, tw.st.base.Version, v)
		}
		return fn(tx)
	})
}

// capExpiries brings live-load rows that expire later than the table's live TTL from
// now back to it: whatever set them (a client of an older version asked for a TTL of a
// century), every row a load made is collected after at most that long.
func (tw *tableWriter) capExpiries(ctx context.Context) error {
	return lease.Fenced(ctx, tw.w.db, tw.l, func(tx pgx.Tx) error {
		if err := objects.CapExpiries(ctx, tx, tw.l.Table, icebergmeta.LiveTTLOf(tw.tbl.Properties)); err != nil {
			return fmt.Errorf("cap live-load expiries: %w", err)
		}
		return nil
	})
}

func (tw *tableWriter) deleteKeys(ctx context.Context, kind string, keys []string, budget *int, del func(pgx.Tx, []string) (int64, error)) error {
	for chunk := range slices.Chunk(keys, collectBatch) {
		if *budget <= 0 {
			return nil
		}
		*budget--
		var n int64
		err := tw.fencedAtVersion(ctx, func(tx pgx.Tx) error {
			var err error
			n, err = del(tx, chunk)
			return err
		})
		if err != nil {
			return fmt.Errorf("collect %s rows: %w", kind, err)
		}
		tw.w.m.collected.Add(ctx, n, metric.WithAttributes(attribute.String("table", tw.tbl.FullName()), attribute.String("kind", kind)))
	}
	return nil
}

// collectRanges deletes, per partition, the leading ranges that end at or below both
// Kafka's log start and the committed coverage, that no live snapshot names, and that
// are not the partition's last. Only a prefix goes, so the index still tiles
// [first offset, indexed end) with no gap.
func (tw *tableWriter) collectRanges(ctx context.Context, refs icebergmeta.Refs, budget *int) error {
	parts := make([]int32, 0, len(tw.st.cover))
	for p := range tw.st.cover {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		ls, ok := tw.logStart[p]
		if !ok || *budget <= 0 {
			continue
		}
		limit := min(ls, tw.st.cover[p].End)
		rs, err := ranges.Leading(ctx, tw.w.db, tw.l.Table, p, limit, collectBatch)
		if err != nil {
			return err
		}
		var starts []int64
		for _, r := range rs {
			if refs.Data[layout.DataKey(tw.tbl.Namespace, tw.tbl.Name, p, r.Start, r.End, r.SHA256)] {
				break // an older snapshot still names it: keep it and all after it
			}
			starts = append(starts, r.Start)
		}
		if len(starts) == 0 {
			continue
		}
		*budget--
		var n int64
		err = tw.fencedAtVersion(ctx, func(tx pgx.Tx) error {
			var err error
			n, err = ranges.DeleteLeading(ctx, tx, tw.l.Table, p, starts)
			return err
		})
		if err != nil {
			return fmt.Errorf("collect ranges of partition %d: %w", p, err)
		}
		tw.w.m.collected.Add(ctx, n, metric.WithAttributes(attribute.String("table", tw.tbl.FullName()), attribute.String("kind", "range")))
	}
	return nil
}
