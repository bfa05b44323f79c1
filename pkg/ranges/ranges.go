// Package ranges is the index: per partition of a table, contiguous Kafka offset ranges,
// each with what is needed to rebuild its Parquet file exactly and to describe it in an
// Iceberg manifest. It is what indexing resumes from after a handoff or a crash.
//
// Ranges of a partition tile [first offset, indexed end) with no gap and no overlap: a
// range is stored only under the partition lease (a fenced write) and only if it starts
// exactly where the partition's index ends, checked by Postgres in the same transaction.
package ranges

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/pg"
)

// Range is one indexed offset range [Start, End) of one partition.
type Range struct {
	Table        int64
	Partition    int32
	Start, End   int64 // offsets; End is exclusive and where the next range starts
	Epoch        int64 // partition lease epoch it was stored under
	Records      int64 // rows in its file (control records and aborted ones are not rows)
	DecodeErrors int64 // rows whose value did not fit the schema (_mink_error set)
	Size         int64 // exact byte size of its Parquet file
	SHA256       string
	Settings     json.RawMessage // parquetbuild.Settings: rebuild with exactly these
	Stats        json.RawMessage // []parquetbuild.ColumnStats: Iceberg column statistics
	// Keys are, for a range of an upsert table, the keys it touches (upsert.Keys.Encode):
	// what its position deletes and those of earlier files are computed from. Nil for
	// append tables. List does not read them; KeysOf does.
	Keys      []byte
	CreatedAt time.Time
}

// AddPartitions makes the index rows of partitions 0 to partitions-1 of a table, in tx
// (the one creating or growing the table); those that exist are kept.
func AddPartitions(ctx context.Context, tx pgx.Tx, table int64, partitions int32) error {
	_, err := tx.Exec(ctx, `INSERT INTO mink_partitions (table_id, partition)
		SELECT $1::bigint, p FROM generate_series(0, $2::int - 1) AS p ON CONFLICT DO NOTHING`, table, partitions)
	return err
}

// ErrNotContiguous: the range does not start where the partition's index ends. Nothing
// was stored.
var ErrNotContiguous = errors.New("range does not start where the index ends")

// Append stores r under partition lease l, if l still holds, r starts exactly at the
// partition's indexed end (or the partition has no range yet) and r decodes as the
// schema points of the partition say (CheckPoints). Otherwise nothing changes:
// lease.ErrLeaseLost, ErrNotContiguous or schemapoints.ErrDecodingMoved.
func Append(ctx context.Context, db pg.DB, l lease.Lease, r Range) error {
	if l.Kind != lease.KindPartition || l.Table != r.Table || l.Partition != r.Partition {
		return fmt.Errorf("ranges: lease %s does not cover partition %d of table %d", l.Scope, r.Partition, r.Table)
	}
	if r.End <= r.Start || r.Start < 0 {
		return fmt.Errorf("ranges: empty or negative range [%d, %d)", r.Start, r.End)
	}
	r.Epoch = l.Epoch
	return lease.Fenced(ctx, db, l, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE mink_partitions
			SET indexed_end = $3, first_offset = coalesce(first_offset, $4), last_range_at = now(),
			    index_error = NULL, index_error_at = NULL
			WHERE table_id = $1 AND partition = $2 AND (indexed_end = $4 OR indexed_end IS NULL)`,
			r.Table, r.Partition, r.End, r.Start)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			var end *int64
			tx.QueryRow(ctx, `SELECT indexed_end FROM mink_partitions WHERE table_id = $1 AND partition = $2`, r.Table, r.Partition).Scan(&end)
			if end == nil {
				return fmt.Errorf("%w: partition %d of table %d has no index row", ErrNotContiguous, r.Partition, r.Table)
			}
			return fmt.Errorf("%w: [%d, %d) of partition %d of table %d, indexed end is %d", ErrNotContiguous, r.Start, r.End, r.Partition, r.Table, *end)
		}
		if err := CheckPoints(ctx, tx, r.Table, r.Partition, r.Start, r.End, r.Records, r.Settings); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO mink_ranges (table_id, partition, start_offset, end_offset, epoch,
				record_count, decode_errors, file_size, sha256, settings, stats, keys)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			r.Table, r.Partition, r.Start, r.End, r.Epoch, r.Records, r.DecodeErrors, r.Size, r.SHA256, r.Settings, r.Stats, r.Keys)
		return err
	})
}

// Partition is one partition's index state.
type Partition struct {
	Table       int64
	Partition   int32
	Indexed     bool  // false until its first range
	FirstOffset int64 // start of its first range
	IndexedEnd  int64 // end of its last range: where indexing resumes
	Ranges      int64
	LastRangeAt time.Time
	// Idle is how long ago, by the database's clock, indexing last moved the end (since
	// the table's creation when it never has).
	Idle time.Duration
	// IndexError is why indexing of the partition is paused ("" when it is not), and
	// IndexErrorAt since when, as its indexer last reported.
	IndexError   string
	IndexErrorAt time.Time
}

// SetIndexError records why the holder of partition lease l cannot index now (msg; ""
// clears it), under the lease (lease.Fenced: a holder that lost it changes nothing and
// gets lease.ErrLeaseLost).
func SetIndexError(ctx context.Context, db pg.DB, l lease.Lease, msg string) error {
	return lease.Fenced(ctx, db, l, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE mink_partitions p
			SET index_error = nullif($3, ''),
			    index_error_at = CASE WHEN $3 = '' THEN NULL ELSE coalesce(CASE WHEN p.index_error = $3 THEN p.index_error_at END, now()) END
			WHERE p.table_id = $1 AND p.partition = $2`, l.Table, l.Partition, msg)
		return err
	})
}

// Partitions returns the index state of every partition of a table, by partition.
func Partitions(ctx context.Context, db pg.DB, table int64) ([]Partition, error) {
	rows, err := db.Query(ctx, `SELECT p.partition, p.first_offset, p.indexed_end, p.last_range_at,
			(SELECT count(*) FROM mink_ranges r WHERE r.table_id = p.table_id AND r.partition = p.partition),
			coalesce(p.index_error, ''), p.index_error_at,
			extract(epoch FROM now() - coalesce(p.last_range_at, t.created_at))::float8
		FROM mink_partitions p JOIN mink_tables t ON t.id = p.table_id
		WHERE p.table_id = $1 ORDER BY p.partition`, table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		p := Partition{Table: table}
		var first, end *int64
		var last, errAt *time.Time
		var idle float64
		err := r.Scan(&p.Partition, &first, &end, &last, &p.Ranges, &p.IndexError, &errAt, &idle)
		p.Idle = time.Duration(max(0, idle) * float64(time.Second))
		if first != nil && end != nil {
			p.Indexed, p.FirstOffset, p.IndexedEnd = true, *first, *end
		}
		if last != nil {
			p.LastRangeAt = *last
		}
		if errAt != nil {
			p.IndexErrorAt = *errAt
		}
		return p, err
	})
}

// State returns one partition's index state.
func State(ctx context.Context, db pg.DB, table int64, partition int32) (Partition, error) {
	p := Partition{Table: table, Partition: partition}
	var first, end *int64
	var last *time.Time
	err := db.QueryRow(ctx, `SELECT first_offset, indexed_end, last_range_at,
			(SELECT count(*) FROM mink_ranges r WHERE r.table_id = $1 AND r.partition = $2)
		FROM mink_partitions WHERE table_id = $1 AND partition = $2`, table, partition).Scan(&first, &end, &last, &p.Ranges)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, apierr.New(apierr.NotFound, "partition %d of table %d does not exist", partition, table)
	}
	if first != nil && end != nil {
		p.Indexed, p.FirstOffset, p.IndexedEnd = true, *first, *end
	}
	if last != nil {
		p.LastRangeAt = *last
	}
	return p, err
}

// List returns the ranges of one partition that end after offset from, in offset order.
func List(ctx context.Context, db pg.DB, table int64, partition int32, from int64) ([]Range, error) {
	rows, err := db.Query(ctx, `SELECT table_id, partition, start_offset, end_offset, epoch, record_count,
			decode_errors, file_size, sha256, settings, stats, created_at
		FROM mink_ranges WHERE table_id = $1 AND partition = $2 AND end_offset > $3
		ORDER BY start_offset`, table, partition, from)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Range, error) {
		var r Range
		err := row.Scan(&r.Table, &r.Partition, &r.Start, &r.End, &r.Epoch, &r.Records, &r.DecodeErrors,
			&r.Size, &r.SHA256, &r.Settings, &r.Stats, &r.CreatedAt)
		return r, err
	})
}

// RangeKeys are one range's offsets and the keys it touches (Range.Keys).
type RangeKeys struct {
	Start, End int64
	Keys       []byte
	// SHA256 is the range's file checksum: with its offsets, what changes when its row
	// is replaced (re-derived after compaction), so its keys are the same while it is.
	SHA256 string
}

// KeysOf returns the keys of a partition's ranges that overlap [from, to), in offset
// order: an upsert table's deletes are computed from them alone.
func KeysOf(ctx context.Context, db pg.DB, table int64, partition int32, from, to int64) ([]RangeKeys, error) {
	return rangeKeys(ctx, db, table, partition, from, to, true)
}

// IdentsOf is KeysOf without the keys: which ranges overlap [from, to) (offsets and
// SHA256), for a cache of their keys to tell what it holds already.
func IdentsOf(ctx context.Context, db pg.DB, table int64, partition int32, from, to int64) ([]RangeKeys, error) {
	return rangeKeys(ctx, db, table, partition, from, to, false)
}

func rangeKeys(ctx context.Context, db pg.DB, table int64, partition int32, from, to int64, withKeys bool) ([]RangeKeys, error) {
	rows, err := db.Query(ctx, `SELECT start_offset, end_offset, sha256, CASE WHEN $5 THEN keys END FROM mink_ranges
		WHERE table_id = $1 AND partition = $2 AND end_offset > $3 AND start_offset < $4
		ORDER BY start_offset`, table, partition, from, to, withKeys)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (RangeKeys, error) {
		var r RangeKeys
		err := row.Scan(&r.Start, &r.End, &r.SHA256, &r.Keys)
		return r, err
	})
}
