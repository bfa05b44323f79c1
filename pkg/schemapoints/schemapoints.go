// Package schemapoints holds where a table's schema changes take effect (the store of
// mink_version_points): per partition, points every build agrees on, each an offset and
// the decoding records decode with from there to the next point. A range or tail file
// decodes with the point in force at its start and never spans another (Check, run in
// the transaction that records it); a point is added past every record a build has
// recorded (Add). Both hold the partition's mink_partitions row, so a build in flight
// when a point is added is refused and built again, never recorded across the point.
package schemapoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/pg"
)

// Decoding is what a file's rows were decoded with besides its records: the table's
// schema version and, in latest mode, the registry ids of values and keys. The JSON
// names are those of parquetbuild.Settings, where every file records them.
type Decoding struct {
	Version       int `json:"table_version,omitempty"`
	ValueSchemaID int `json:"value_schema_id,omitempty"`
	KeySchemaID   int `json:"key_schema_id,omitempty"`
}

func (d Decoding) String() string {
	return fmt.Sprintf("version %d, value schema %d, key schema %d", d.Version, d.ValueSchemaID, d.KeySchemaID)
}

// Of is the decoding a file's recorded settings (parquetbuild.Settings as JSON) name.
func Of(settings []byte) (Decoding, error) {
	var d Decoding
	if err := json.Unmarshal(settings, &d); err != nil {
		return d, fmt.Errorf("schemapoints: recorded settings: %w", err)
	}
	return d, nil
}

// Point is a decoding in force from offset From of its partition on.
type Point struct {
	From int64
	Decoding
}

// Points are one partition's points, by offset. The first is at offset 0.
type Points []Point

// At is the decoding in force at offset o; ok is false before the first point.
func (ps Points) At(o int64) (d Decoding, ok bool) {
	i := sort.Search(len(ps), func(i int) bool { return ps[i].From > o })
	if i == 0 {
		return Decoding{}, false
	}
	return ps[i-1].Decoding, true
}

// Next is the offset of the first point after o: where a file that starts at o ends at
// the latest (math.MaxInt64 when there is none).
func (ps Points) Next(o int64) int64 {
	i := sort.Search(len(ps), func(i int) bool { return ps[i].From > o })
	if i == len(ps) {
		return math.MaxInt64
	}
	return ps[i].From
}

// ErrDecodingMoved: a file is not recorded because it does not decode as the point in
// force at its start says, or a point lies inside it (a schema change took effect while
// it was built). Its builder builds it again with the points as they are now.
var ErrDecodingMoved = errors.New("schemapoints: a schema change took effect inside the file; build it again")

// List returns a partition's points, by offset.
func List(ctx context.Context, db pg.DB, table int64, partition int32) (Points, error) {
	rows, err := db.Query(ctx, `SELECT from_offset, version, value_schema_id, key_schema_id FROM mink_version_points
		WHERE table_id = $1 AND partition = $2 ORDER BY from_offset`, table, partition)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Point, error) {
		var p Point
		err := r.Scan(&p.From, &p.Version, &p.ValueSchemaID, &p.KeySchemaID)
		return p, err
	})
}

// Ensure returns a partition's points, first adding its first one (offset 0, decoding
// first: the table's current one) when it has none, as a partition of a table created
// before points existed, or new, has. Whichever build asks first decides, under the
// partition's row lock; the others read what it stored.
func Ensure(ctx context.Context, db pg.DB, table int64, partition int32, first Decoding) (Points, error) {
	ps, err := List(ctx, db, table, partition)
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
	return List(ctx, db, table, partition)
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

// Add makes a new decoding take effect on some partitions of a table, each from offset
// from[p] or, if a build has recorded records there already, past them: at the greatest
// of from[p], the partition's indexed end, the end of its recorded files (tail files
// included) and its last point. The new decoding is change applied to the one in force
// there (first, for a partition without points: its first point, at 0, is stored too).
// Where change keeps the decoding nothing is added; a point at the very offset is
// replaced (nothing was recorded after it yet). It runs in tx, which holds the
// partitions' rows from then on: a range or tail file recorded after it sees the new
// points (Check), one recorded before it is past. It returns each partition's last
// point afterwards (none for a partition that had none and still has none).
func Add(ctx context.Context, tx pgx.Tx, table int64, from map[int32]int64, first Decoding, change func(Decoding) Decoding) (map[int32]Point, error) {
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
	rows, err := tx.Query(ctx, `SELECT partition, max(end_offset) FROM mink_data_files
		WHERE table_id = $1 AND partition = ANY($2) GROUP BY partition`, table, parts)
	if err != nil {
		return nil, err
	}
	var p int32
	var end int64
	if _, err := pgx.ForEachRow(rows, []any{&p, &end}, func() error { at[p] = max(at[p], end); return nil }); err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, `SELECT DISTINCT ON (partition) partition, from_offset, version, value_schema_id, key_schema_id
		FROM mink_version_points WHERE table_id = $1 AND partition = ANY($2) ORDER BY partition, from_offset DESC`, table, parts)
	if err != nil {
		return nil, err
	}
	last := map[int32]Point{}
	var pt Point
	if _, err := pgx.ForEachRow(rows, []any{&p, &pt.From, &pt.Version, &pt.ValueSchemaID, &pt.KeySchemaID}, func() error {
		last[p] = pt
		return nil
	}); err != nil {
		return nil, err
	}
	out := map[int32]Point{}
	insert := func(p int32, pt Point) error {
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
			in = Point{From: 0, Decoding: first}
		}
		next := Point{From: max(at[p], in.From), Decoding: change(in.Decoding)}
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

// Check is what every insert of a range or tail file of rows rows over [start, end) of a
// partition runs in its transaction, before it commits: the file's recorded settings
// decode as the point in force at start, and no point lies in (start, end). Otherwise
// ErrDecodingMoved, and the caller rolls back. A file without rows decodes nothing and
// passes, as does any file of a partition without points (Ensure makes its first before
// any build). It holds the partition's row (FOR SHARE) until tx ends, so an Add waits for the
// insert or the insert sees the Add's points.
func Check(ctx context.Context, tx pgx.Tx, table int64, partition int32, start, end, rows int64, settings []byte) error {
	if rows == 0 {
		return nil
	}
	d, err := Of(settings)
	if err != nil {
		return err
	}
	if err := lockPartitions(ctx, tx, table, []int32{partition}, "FOR SHARE", nil); err != nil {
		return err
	}
	// A statement of its own after the lock: it sees a point an Add committed meanwhile.
	var pt Point
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
		return fmt.Errorf("%w: [%d, %d) of partition %d of table %d spans a point at %d (%v)", ErrDecodingMoved, start, end, partition, table, pt.From, pt.Decoding)
	case pt.Decoding != d:
		return fmt.Errorf("%w: [%d, %d) of partition %d of table %d decodes with %v, the point in force at %d with %v", ErrDecodingMoved, start, end, partition, table, d, pt.From, pt.Decoding)
	}
	return nil
}

// AddUnder is Add for the one partition of partition lease l, written under the lease
// (lease.Fenced: a holder that lost it changes nothing). It returns the partition's last
// point afterwards.
func AddUnder(ctx context.Context, db pg.DB, l lease.Lease, from int64, first Decoding, change func(Decoding) Decoding) (Point, error) {
	var pt Point
	err := lease.Fenced(ctx, db, l, func(tx pgx.Tx) error {
		out, err := Add(ctx, tx, l.Table, map[int32]int64{l.Partition: from}, first, change)
		pt = out[l.Partition]
		return err
	})
	return pt, err
}
