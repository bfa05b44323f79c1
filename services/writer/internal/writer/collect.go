package writer

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
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

	dataKeys, err := tw.keys(ctx, `SELECT key FROM mink_data_files
		WHERE table_id = $1 AND (expires_at IS NULL OR expires_at < now())`)
	if err != nil {
		return err
	}
	dataKeys = slices.DeleteFunc(dataKeys, func(k string) bool { return refs.Data[k] })
	if err := tw.deleteKeys(ctx, "data_file", `DELETE FROM mink_data_files
		WHERE table_id = $1 AND key = ANY($2) AND (expires_at IS NULL OR expires_at < now())`, dataKeys, &budget); err != nil {
		return err
	}

	metaKeys, err := tw.keys(ctx, `SELECT key FROM mink_meta_files WHERE table_id = $1`)
	if err != nil {
		return err
	}
	metaKeys = slices.DeleteFunc(metaKeys, func(k string) bool {
		return refs.Meta[k] || !icebergmeta.IsWriterKey(tw.tbl.Namespace, tw.tbl.Name, k)
	})
	if err := tw.deleteKeys(ctx, "meta_file", `DELETE FROM mink_meta_files WHERE table_id = $1 AND key = ANY($2)`, metaKeys, &budget); err != nil {
		return err
	}
	// Live loads' metadata files (metadata/live/, stored by file servers) expire: they
	// go once expired, never before. The writer's own never expire.
	liveKeys, err := tw.keys(ctx, `SELECT key FROM mink_meta_files WHERE table_id = $1 AND expires_at < now()`)
	if err != nil {
		return err
	}
	if err := tw.deleteKeys(ctx, "meta_file", `DELETE FROM mink_meta_files
		WHERE table_id = $1 AND key = ANY($2) AND expires_at < now()`, liveKeys, &budget); err != nil {
		return err
	}
	return tw.collectRanges(ctx, refs, &budget)
}

func (tw *tableWriter) keys(ctx context.Context, sql string) ([]string, error) {
	rows, err := tw.w.db.Query(ctx, sql, tw.l.Table)
	if err != nil {
		return nil, err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	sort.Strings(keys)
	return keys, err
}

// fencedAtVersion runs fn under the lease if the current metadata is still the one this
// writer holds.
func (tw *tableWriter) fencedAtVersion(ctx context.Context, fn func(pgx.Tx) error) error {
	return lease.Fenced(ctx, tw.w.db, tw.l, func(tx pgx.Tx) error {
		var v int64
		if err := tx.QueryRow(ctx, `SELECT version FROM mink_table_meta WHERE table_id = $1`, tw.l.Table).Scan(&v); err != nil {
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
	ms := float64(icebergmeta.LiveTTLOf(tw.tbl.Properties).Milliseconds())
	return lease.Fenced(ctx, tw.w.db, tw.l, func(tx pgx.Tx) error {
		for _, sql := range []string{
			`UPDATE mink_data_files SET expires_at = now() + $2::float8 * interval '1 millisecond'
				WHERE table_id = $1 AND expires_at > now() + $2::float8 * interval '1 millisecond'`,
			`UPDATE mink_meta_files SET expires_at = now() + $2::float8 * interval '1 millisecond'
				WHERE table_id = $1 AND expires_at > now() + $2::float8 * interval '1 millisecond'`,
		} {
			if _, err := tx.Exec(ctx, sql, tw.l.Table, ms); err != nil {
				return fmt.Errorf("cap live-load expiries: %w", err)
			}
		}
		return nil
	})
}

func (tw *tableWriter) deleteKeys(ctx context.Context, kind, sql string, keys []string, budget *int) error {
	for chunk := range slices.Chunk(keys, collectBatch) {
		if *budget <= 0 {
			return nil
		}
		*budget--
		var n int64
		err := tw.fencedAtVersion(ctx, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, sql, tw.l.Table, chunk)
			n = tag.RowsAffected()
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
		rows, err := tw.w.db.Query(ctx, `SELECT start_offset, end_offset, sha256 FROM mink_ranges
			WHERE table_id = $1 AND partition = $2 AND end_offset <= $3
			  AND end_offset < (SELECT indexed_end FROM mink_partitions WHERE table_id = $1 AND partition = $2)
			ORDER BY start_offset LIMIT $4`, tw.l.Table, p, limit, collectBatch)
		if err != nil {
			return err
		}
		type rng struct {
			start, end int64
			sha        string
		}
		rs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rng, error) {
			var x rng
			err := r.Scan(&x.start, &x.end, &x.sha)
			return x, err
		})
		if err != nil {
			return err
		}
		var starts []int64
		for _, r := range rs {
			if refs.Data[layout.DataKey(tw.tbl.Namespace, tw.tbl.Name, p, r.start, r.end, r.sha)] {
				break // an older snapshot still names it: keep it and all after it
			}
			starts = append(starts, r.start)
		}
		if len(starts) == 0 {
			continue
		}
		*budget--
		var n int64
		err = tw.fencedAtVersion(ctx, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `DELETE FROM mink_ranges WHERE table_id = $1 AND partition = $2 AND start_offset = ANY($3)`, tw.l.Table, p, starts)
			if err != nil {
				return err
			}
			n = tag.RowsAffected()
			_, err = tx.Exec(ctx, `UPDATE mink_partitions
				SET first_offset = (SELECT min(start_offset) FROM mink_ranges WHERE table_id = $1 AND partition = $2)
				WHERE table_id = $1 AND partition = $2`, tw.l.Table, p)
			return err
		})
		if err != nil {
			return fmt.Errorf("collect ranges of partition %d: %w", p, err)
		}
		tw.w.m.collected.Add(ctx, n, metric.WithAttributes(attribute.String("table", tw.tbl.FullName()), attribute.String("kind", "range")))
	}
	return nil
}
