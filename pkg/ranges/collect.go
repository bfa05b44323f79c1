package ranges

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/pg"
)

// Rederive gives ranges of an upsert table rebuilt from what Kafka holds after
// compaction their new counts, checksum, statistics and keys (same offsets), in tx: the
// writer's fenced transaction of the commit that lists them.
func Rederive(ctx context.Context, tx pgx.Tx, table int64, rs []Range) error {
	if len(rs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, r := range rs {
		b.Queue(`UPDATE mink_ranges SET record_count = $5, decode_errors = $6, file_size = $7, sha256 = $8, stats = $9, keys = $10
			WHERE table_id = $1 AND partition = $2 AND start_offset = $3 AND end_offset = $4`,
			table, r.Partition, r.Start, r.End, r.Records, r.DecodeErrors, r.Size, r.SHA256, r.Stats, r.Keys)
	}
	return tx.SendBatch(ctx, b).Close()
}

// Leading are up to n of a partition's first ranges that end at or below limit and
// before the partition's indexed end (its last range stays, where indexing resumes):
// their offsets and checksums, without keys.
func Leading(ctx context.Context, db pg.DB, table int64, partition int32, limit int64, n int) ([]RangeKeys, error) {
	rows, err := db.Query(ctx, `SELECT start_offset, end_offset, sha256 FROM mink_ranges
		WHERE table_id = $1 AND partition = $2 AND end_offset <= $3
		  AND end_offset < (SELECT indexed_end FROM mink_partitions WHERE table_id = $1 AND partition = $2)
		ORDER BY start_offset LIMIT $4`, table, partition, limit, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (RangeKeys, error) {
		var x RangeKeys
		err := r.Scan(&x.Start, &x.End, &x.SHA256)
		return x, err
	})
}

// DeleteLeading deletes a partition's ranges by start offset, in tx (the writer's fenced
// transaction), and moves its first offset to the first range left. It returns the
// ranges it deleted.
func DeleteLeading(ctx context.Context, tx pgx.Tx, table int64, partition int32, starts []int64) (int64, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM mink_ranges WHERE table_id = $1 AND partition = $2 AND start_offset = ANY($3)`, table, partition, starts)
	if err != nil {
		return 0, err
	}
	_, err = tx.Exec(ctx, `UPDATE mink_partitions
		SET first_offset = (SELECT min(start_offset) FROM mink_ranges WHERE table_id = $1 AND partition = $2)
		WHERE table_id = $1 AND partition = $2`, table, partition)
	return tag.RowsAffected(), err
}

// Within returns a table's ranges that lie within spans, span i being [starts[i],
// ends[i]) of partitions[i]: offsets, counts, checksum, settings and statistics, without
// keys.
func Within(ctx context.Context, db pg.DB, table int64, partitions []int32, starts, ends []int64) ([]Range, error) {
	rows, err := db.Query(ctx, `SELECT r.partition, r.start_offset, r.end_offset, r.record_count, r.file_size, r.sha256, r.settings, r.stats
		FROM mink_ranges r JOIN unnest($2::int[], $3::bigint[], $4::bigint[]) AS s(p, lo, hi)
		  ON r.partition = s.p AND r.start_offset >= s.lo AND r.end_offset <= s.hi
		WHERE r.table_id = $1`, table, partitions, starts, ends)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Range, error) {
		r := Range{Table: table}
		err := row.Scan(&r.Partition, &r.Start, &r.End, &r.Records, &r.Size, &r.SHA256, &r.Settings, &r.Stats)
		return r, err
	})
}
