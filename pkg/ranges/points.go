package ranges

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/schemapoints"
)

// The schema points of a partition (mink_version_points) are stored with the partition's
// row, which every point's writer and every file's recorder locks (see pkg/schemapoints).

// schemapoints.Points returns a partition's points, by offset.
func Points(ctx context.Context, db pg.DB, table int64, partition int32) (schemapoints.Points, error) {
	rows, err := db.Query(ctx, `SELECT from_offset, version, value_schema_id, key_schema_id FROM mink_version_points
		WHERE table_id = $1 AND partition = $2 ORDER BY from_offset`, table, partition)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (schemapoints.Point, error) {
		var p schemapoints.Point
		err := r.Scan(&p.From, &p.Version, &p.ValueSchemaID, &p.KeySchemaID)
		return p, err
	})
}

// EnsurePoints returns a partition's points, first adding its first one (offset 0, decoding
// first: the table's current one) when it has none, as a partition of a table created
// before points existed, or new, has. Whichever build asks first decides, under the
// partition's row lock; the others read what it stored.
func EnsurePoints(ctx context.Context, db pg.DB, table int64, partition int32, first schemapoints.Decoding) (schemapoints.Points, error) {
	ps, err := Points(ctx, db, table, partition)
	if err != nil || len(ps) > 0 {
		return ps, err
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := lockPartitions(ctx, tx, table, []int32{partition}, "FOR NO KEY UPDATE", nil); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO mink_version_points (table_id, partition, from_offset, version, value_schema_id, key_schema_id)
			VALUES ($1, $2, 0, $3, $4, $5) ON CONFLICT DO NOTHING`, table, partition, first.Version, first.ValueSchemaID, first.KeySchemaID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return Points(ctx, db, table, partition)
}

// lockPartitions locks the mink_partitions rows of a table's partitions, in partition
// order (so two lockers of several never deadlock), calling each (when not nil) with a
// partition and its indexed end (-1 before its first range). A partition without a row
// is NotFound.
func lockPartitions(ctx context.Context, tx pgx.Tx, table int64, partitions []int32, mode string, each func(p int32, indexedEnd int64)) error {
	rows, err := tx.Query(ctx, `SELECT partition, coalesce(indexed_end, -1) FROM mink_partitions
		WHERE table_id = $1 AND partition = ANY($2) ORDER BY partition `+mode, table, partitions)
	if err != nil {
		return err
	}
	n := 0
	var p int32
	var end int64
	_, err = pgx.ForEachRow(rows, []any{&p, &end}, func() error {
		n++
		if each != nil {
			each(p, end)
		}
		return nil
	})
	if err == nil && n != len(partitions) {
		err = apierr.New(apierr.NotFound, "table %d lacks one of partitions %v (dropped?)", table, partitions)
	}
	return err
}

// AddPoints makes a new decoding take effect on some partitions of a table, each from offset
// from[p] or, if a build has recorded records there already, past them: at the greatest
// of from[p], the partition's indexed end, the end of its recorded files (tail files
// included) and its last point. The new decoding is change applied to the one in force
// there (first, for a partition without points: its first point, at 0, is stored too).
// Where change keeps the decoding nothing is added; a point at the very offset is
// replaced (nothing was recorded after it yet). It runs in tx, which holds the
// partitions' rows from then on: a range or tail file recorded after it sees the new
// points (Check), one recorded before it is past. It returns each partition's last
// point afterwards (none for a partition that had none and still has none).
func AddPoints(ctx context.Context, tx pgx.Tx, table int64, from map[int32]int64, first schemapoints.Decoding, change func(schemapoints.Decoding) schemapoints.Decoding,
	recorded Recorded) (map[int32]schemapoints.Point, error) {
	parts := make([]int32, 0, len(from))
	for p := range from {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	at := map[int32]int64{}
	err := lockPartitions(ctx, tx, table, parts, "FOR NO KEY UPDATE", func(p int32, indexedEnd int64) {
		at[p] = max(from[p], indexedEnd)
	})
	if err != nil {
		return nil, err
	}
	// Statements after the lock: they see every file and point committed before it.
	// The ends of recorded files come from their owner (objects.RecordedEnds), read after
	// the lock like the points.
	ends, err := recorded(ctx, tx, table, parts)
	if err != nil {
		return nil, err
	}
	for p, end := range ends {
		at[p] = max(at[p], end)
	}
	var p int32
	rows, err := tx.Query(ctx, `SELECT DISTINCT ON (partition) partition, from_offset, version, value_schema_id, key_schema_id
		FROM mink_version_points WHERE table_id = $1 AND partition = ANY($2) ORDER BY partition, from_offset DESC`, table, parts)
	if err != nil {
		return nil, err
	}
	last := map[int32]schemapoints.Point{}
	var pt schemapoints.Point
	if _, err := pgx.ForEachRow(rows, []any{&p, &pt.From, &pt.Version, &pt.ValueSchemaID, &pt.KeySchemaID}, func() error {
		last[p] = pt
		return nil
	}); err != nil {
		return nil, err
	}
	out := map[int32]schemapoints.Point{}
	insert := func(p int32, pt schemapoints.Point) error {
		_, err := tx.Exec(ctx, `INSERT INTO mink_version_points (table_id, partition, from_offset, version, value_schema_id, key_schema_id)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (table_id, partition, from_offset) DO UPDATE SET version = EXCLUDED.version,
				value_schema_id = EXCLUDED.value_schema_id, key_schema_id = EXCLUDED.key_schema_id, created_at = now()`,
			table, p, pt.From, pt.Version, pt.ValueSchemaID, pt.KeySchemaID)
		return err
	}
	for _, p := range parts {
		in, had := last[p]
		if !had {
			in = schemapoints.Point{From: 0, Decoding: first}
		}
		next := schemapoints.Point{From: max(at[p], in.From), Decoding: change(in.Decoding)}
		if next.Decoding == in.Decoding {
			if had {
				out[p] = in
			}
			continue
		}
		if !had && next.From > 0 {
			if err := insert(p, in); err != nil {
				return nil, err
			}
		}
		if err := insert(p, next); err != nil {
			return nil, err
		}
		out[p] = next
	}
	return out, nil
}

// CheckPoints is what every insert of a range or tail file of rows rows over [start, end) of a
// partition runs in its transaction, before it commits: the file's recorded settings
// decode as the point in force at start, and no point lies in (start, end). Otherwise
// schemapoints.ErrDecodingMoved, and the caller rolls back. A file without rows decodes nothing and
// passes, as does any file of a partition without points (Ensure makes its first before
// any build). It holds the partition's row (FOR SHARE) until tx ends, so an Add waits for the
// insert or the insert sees the Add's points.
func CheckPoints(ctx context.Context, tx pgx.Tx, table int64, partition int32, start, end, rows int64, settings []byte) error {
	if rows == 0 {
		return nil
	}
	d, err := schemapoints.Of(settings)
	if err != nil {
		return err
	}
	if err := lockPartitions(ctx, tx, table, []int32{partition}, "FOR SHARE", nil); err != nil {
		return err
	}
	// A statement of its own after the lock: it sees a point an Add committed meanwhile.
	var pt schemapoints.Point
	err = tx.QueryRow(ctx, `SELECT from_offset, version, value_schema_id, key_schema_id FROM mink_version_points
		WHERE table_id = $1 AND partition = $2 AND from_offset < $3 ORDER BY from_offset DESC LIMIT 1`,
		table, partition, end).Scan(&pt.From, &pt.Version, &pt.ValueSchemaID, &pt.KeySchemaID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// No point at all (the first is at 0): the file's builder did not read them (a
		// node from before points existed); nothing disagrees with it yet.
		return nil
	case err != nil:
		return err
	case pt.From > start:
		return fmt.Errorf("%w: [%d, %d) of partition %d of table %d spans a point at %d (%v)", schemapoints.ErrDecodingMoved, start, end, partition, table, pt.From, pt.Decoding)
	case pt.Decoding != d:
		return fmt.Errorf("%w: [%d, %d) of partition %d of table %d decodes with %v, the point in force at %d with %v", schemapoints.ErrDecodingMoved, start, end, partition, table, d, pt.From, pt.Decoding)
	}
	return nil
}

// Recorded reads the ends of a table's recorded files per partition, in tx (after
// AddPoints' lock): objects.RecordedEnds, their owner's.
type Recorded func(ctx context.Context, tx pgx.Tx, table int64, parts []int32) (map[int32]int64, error)

// AddPointsUnder is AddPoints for the one partition of partition lease l, written under the lease
// (lease.Fenced: a holder that lost it changes nothing). It returns the partition's last
// point afterwards.
func AddPointsUnder(ctx context.Context, db pg.DB, l lease.Lease, from int64, first schemapoints.Decoding, change func(schemapoints.Decoding) schemapoints.Decoding,
	recorded Recorded) (schemapoints.Point, error) {
	var pt schemapoints.Point
	err := lease.Fenced(ctx, db, l, func(tx pgx.Tx) error {
		out, err := AddPoints(ctx, tx, l.Table, map[int32]int64{l.Partition: from}, first, change, recorded)
		pt = out[l.Partition]
		return err
	})
	return pt, err
}
