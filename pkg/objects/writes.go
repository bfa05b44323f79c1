package objects

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/ranges"
)

// Tail is a live load's tail data file as a file server measured it.
type Tail struct {
	Table           int64
	Key             string
	Partition       int32
	Start, End      int64
	Records, Size   int64
	SHA256          string
	Settings, Stats []byte
	Keys            []byte // an upsert table's: the keys it touches (upsert.Keys.Encode); else nil
}

// RecordTail writes a tail file's row, readable for ttl at least and marked live (not
// listed until a commit names it), if it decodes as the schema points of its partition
// say (ranges.CheckPoints; else schemapoints.ErrDecodingMoved and nothing is written).
// The row may exist (the same span measured before, or committed: same offsets, same
// bytes): an expiry already set is kept when later, but never beyond maxTTL from now. It
// returns what the row records.
func RecordTail(ctx context.Context, db pg.DB, t Tail, ttl, maxTTL time.Duration) (created time.Time, size int64, sha string, err error) {
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := ranges.CheckPoints(ctx, tx, t.Table, t.Partition, t.Start, t.End, t.Records, t.Settings); err != nil {
			return err
		}
		return recordTail(ctx, tx, t, ttl, maxTTL).Scan(&created, &size, &sha)
	})
	return created, size, sha, err
}

func recordTail(ctx context.Context, tx pgx.Tx, t Tail, ttl, maxTTL time.Duration) pgx.Row {
	return tx.QueryRow(ctx, `INSERT INTO mink_data_files (table_id, key, partition, start_offset, end_offset,
			record_count, file_size, sha256, settings, stats, expires_at, live, keys)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + $11::bigint * interval '1 millisecond', true, $13)
		ON CONFLICT (key) DO UPDATE SET keys = coalesce(mink_data_files.keys, EXCLUDED.keys), expires_at = LEAST(
			GREATEST(mink_data_files.expires_at, EXCLUDED.expires_at),
			now() + $12::bigint * interval '1 millisecond')
		RETURNING created_at, file_size, sha256`,
		t.Table, t.Key, t.Partition, t.Start, t.End, t.Records, t.Size, t.SHA256, t.Settings, t.Stats,
		max(1, ttl.Milliseconds()), maxTTL.Milliseconds(), t.Keys)
}

// problemsChannel is where ReportProblem tells the tables' writers of a report: the
// payload is the table's id.
const problemsChannel = "mink_file_problems"

// ReportProblem records that node could not serve key with its recorded bytes, for
// the table's writer to replace: a report again counts up. The writer holding the
// table's lease is told when the report commits (WatchProblems).
func ReportProblem(ctx context.Context, db pg.DB, key string, table int64, reason, detail, node string) error {
	_, err := db.Exec(ctx, `WITH r AS (
			INSERT INTO mink_file_problems (key, table_id, reason, detail, reported_by)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (key) DO UPDATE SET reason = EXCLUDED.reason, detail = EXCLUDED.detail,
				reported_by = EXCLUDED.reported_by, last_seen = now(), reports = mink_file_problems.reports + 1
			RETURNING table_id)
		SELECT pg_notify($6, table_id::text) FROM r`,
		key, table, reason, detail, node, problemsChannel)
	return err
}

// WatchProblems calls notify with a table's id each time a file problem of the table is
// reported (ReportProblem), and with 0 once when it starts listening (every table:
// reports made while nobody listened wait), until ctx ends or the connection fails: its
// error. It holds one connection of db, as WatchCommits does.
func WatchProblems(ctx context.Context, db pg.DB, notify func(table int64)) error {
	return pg.Listen(ctx, db, func(_, payload string) {
		id, _ := strconv.ParseInt(payload, 10, 64) // "" (listening): 0
		notify(id)
	}, problemsChannel)
}

// RecordedEnds is the end of each partition's recorded files (tail files included), of
// those of parts that have any: where a schema point added now must start at the
// earliest (ranges.AddPoints reads it after locking the partitions).
func RecordedEnds(ctx context.Context, tx pgx.Tx, table int64, parts []int32) (map[int32]int64, error) {
	rows, err := tx.Query(ctx, `SELECT partition, max(end_offset) FROM mink_data_files
		WHERE table_id = $1 AND partition = ANY($2) GROUP BY partition`, table, parts)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	var p int32
	var end int64
	_, err = pgx.ForEachRow(rows, []any{&p, &end}, func() error { ends[p] = end; return nil })
	return ends, err
}
