package objects

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/pg"
)

// ErrStale: the commit pointer is no longer at the version the commit was made from.
var ErrStale = errors.New("the table's metadata version moved")

// Current is a table's commit pointer: its metadata file and version; found is false
// before its first metadata.
func Current(ctx context.Context, db pg.DB, table int64) (key string, version int64, found bool, err error) {
	err = db.QueryRow(ctx, `SELECT metadata_key, version FROM mink_table_meta WHERE table_id = $1`, table).Scan(&key, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, false, nil
	}
	return key, version, err == nil, err
}

// CurrentMetadata is the commit pointer of table: the key of its current metadata file
// and, with content, the file's bytes (nil when the file is missing). found is false
// while the table's writer has stored no metadata yet.
func CurrentMetadata(ctx context.Context, db pg.DB, table int64, content bool) (key string, body []byte, found bool, err error) {
	err = db.QueryRow(ctx, `SELECT tm.metadata_key, CASE WHEN $2 THEN mf.content END
		FROM mink_table_meta tm LEFT JOIN mink_meta_files mf ON mf.key = tm.metadata_key
		WHERE tm.table_id = $1`, table, content).Scan(&key, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, err
	}
	return key, body, true, nil
}

// MetaVersion is a table's metadata version, read in tx (a fenced call checks it has not
// moved).
func MetaVersion(ctx context.Context, tx pgx.Tx, table int64) (int64, error) {
	var v int64
	err := tx.QueryRow(ctx, `SELECT version FROM mink_table_meta WHERE table_id = $1`, table).Scan(&v)
	return v, err
}

// Commit is what one commit stores: the data files it adds, its new metadata files,
// the keys of the files it removes (their problem reports go), and the move of the
// commit pointer to Key at Version (from Version-1; version 1 creates it).
type Commit struct {
	Table      int64
	Add        []icebergmeta.DataFile
	MetaFiles  []icebergmeta.File
	Removed    []string
	Key        string
	Version    int64
	SnapshotID *int64
}

// StoreCommit writes c in tx, all or nothing; ErrStale when the pointer moved meanwhile.
func StoreCommit(ctx context.Context, tx pgx.Tx, c Commit) error {
	b := &pgx.Batch{}
	for _, f := range c.Add {
		// A live-load tail file with the same key (same offsets and bytes) may exist:
		// once committed it no longer expires, and it is committed (listed) for good;
		// committed_at tells the owners' warmers it is new (objects.Recent). A live load's
		// delete file of the same bytes is rebuilt from the index from then on, not from
		// tail files that expire (deletes_tail).
		var deletesOf, coverEnd any // NULL for data files
		if f.IsDeletes() {
			deletesOf, coverEnd = f.DeletesOf, f.CoverEnd
		}
		b.Queue(`INSERT INTO mink_data_files (table_id, key, partition, start_offset, end_offset, record_count,
				file_size, sha256, settings, stats, deletes_of, cover_end)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT (key) DO UPDATE SET expires_at = NULL, live = false, deletes_tail = NULL,
				committed_at = CASE WHEN mink_data_files.live THEN now() ELSE mink_data_files.committed_at END`,
			c.Table, f.Key, f.Partition, f.Start, f.End, f.Records, f.Size, f.SHA256, f.Settings, f.Stats, deletesOf, coverEnd)
	}
	for _, f := range c.MetaFiles {
		b.Queue(`INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, $2, $3)`, c.Table, f.Key, f.Content)
	}
	if len(c.Removed) > 0 {
		b.Queue(`DELETE FROM mink_file_problems WHERE table_id = $1 AND key = ANY($2)`, c.Table, c.Removed)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	sql := `UPDATE mink_table_meta SET metadata_key = $2, version = $3, snapshot_id = $4, committed_at = now()
		WHERE table_id = $1 AND version = $3 - 1`
	if c.Version == 1 {
		sql = `INSERT INTO mink_table_meta (table_id, metadata_key, version, snapshot_id) VALUES ($1, $2, $3, $4)
			ON CONFLICT (table_id) DO NOTHING`
	}
	tag, err := tx.Exec(ctx, sql, c.Table, c.Key, c.Version, c.SnapshotID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: version %d is no longer current", ErrStale, c.Version-1)
	}
	return nil
}

// Collectable is what collection may consider of a table, sorted: its data files that
// are committed or whose live-load expiry passed, its metadata files, and its live-load
// metadata files that expired.
type Collectable struct{ Data, Meta, ExpiredMeta []string }

// ListCollectable reads a table's Collectable keys.
func ListCollectable(ctx context.Context, db pg.DB, table int64) (Collectable, error) {
	var c Collectable
	for _, q := range []struct {
		out *[]string
		sql string
	}{
		{&c.Data, `SELECT key FROM mink_data_files WHERE table_id = $1 AND (expires_at IS NULL OR expires_at < now())`},
		{&c.Meta, `SELECT key FROM mink_meta_files WHERE table_id = $1`},
		{&c.ExpiredMeta, `SELECT key FROM mink_meta_files WHERE table_id = $1 AND expires_at < now()`},
	} {
		rows, err := db.Query(ctx, q.sql, table)
		if err != nil {
			return c, err
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return c, err
		}
		sort.Strings(keys)
		*q.out = keys
	}
	return c, nil
}

// DeleteDataFiles deletes a table's data file rows by key, those not live meanwhile.
func DeleteDataFiles(ctx context.Context, tx pgx.Tx, table int64, keys []string) (int64, error) {
	return execCount(ctx, tx, `DELETE FROM mink_data_files
		WHERE table_id = $1 AND key = ANY($2) AND (expires_at IS NULL OR expires_at < now())`, table, keys)
}

// DeleteMetaFiles deletes a table's metadata file rows by key (expired: only those whose
// live-load expiry passed).
func DeleteMetaFiles(ctx context.Context, tx pgx.Tx, table int64, keys []string, expired bool) (int64, error) {
	if expired {
		return execCount(ctx, tx, `DELETE FROM mink_meta_files WHERE table_id = $1 AND key = ANY($2) AND expires_at < now()`, table, keys)
	}
	return execCount(ctx, tx, `DELETE FROM mink_meta_files WHERE table_id = $1 AND key = ANY($2)`, table, keys)
}

// CapExpiries brings a table's live-load rows that expire later than ttl from now back
// to it.
func CapExpiries(ctx context.Context, tx pgx.Tx, table int64, ttl time.Duration) error {
	ms := float64(ttl.Milliseconds())
	for _, sql := range []string{
		`UPDATE mink_data_files SET expires_at = now() + $2::float8 * interval '1 millisecond'
			WHERE table_id = $1 AND expires_at > now() + $2::float8 * interval '1 millisecond'`,
		`UPDATE mink_meta_files SET expires_at = now() + $2::float8 * interval '1 millisecond'
			WHERE table_id = $1 AND expires_at > now() + $2::float8 * interval '1 millisecond'`,
	} {
		if _, err := tx.Exec(ctx, sql, table, ms); err != nil {
			return err
		}
	}
	return nil
}

// Problem is a file a file server reported it could not serve as recorded.
type Problem struct {
	Key, Reason, Detail string
	Reports             int64
}

// Problems reads a table's file problems, by key.
func Problems(ctx context.Context, db pg.DB, table int64) ([]Problem, error) {
	rows, err := db.Query(ctx, `SELECT key, reason, detail, reports FROM mink_file_problems WHERE table_id = $1 ORDER BY key`, table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Problem, error) {
		var p Problem
		err := r.Scan(&p.Key, &p.Reason, &p.Detail, &p.Reports)
		return p, err
	})
}

// ClearProblems deletes problems as they were read: one reported again since (its
// report count moved) stays.
func ClearProblems(ctx context.Context, tx pgx.Tx, table int64, ps []Problem) (int64, error) {
	keys := make([]string, len(ps))
	reports := make([]int64, len(ps))
	for i, p := range ps {
		keys[i], reports[i] = p.Key, p.Reports
	}
	return execCount(ctx, tx, `DELETE FROM mink_file_problems p USING unnest($2::text[], $3::bigint[]) AS r (key, reports)
		WHERE p.table_id = $1 AND p.key = r.key AND p.reports = r.reports`, table, keys, reports)
}

func execCount(ctx context.Context, tx pgx.Tx, sql string, args ...any) (int64, error) {
	tag, err := tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}
