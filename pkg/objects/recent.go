package objects

import (
	"context"
	"time"

	"github.com/minkhq/mink/pkg/pg"
)

// RecentFile is a committed data file as Recent names it.
type RecentFile struct {
	Key       string
	Size      int64
	Committed time.Time // when it became part of its table (a tail file: its commit, not its measure)
	Meta      bool      // a manifest list or manifest, which a scan reads before the data files
}

// Recent reads the data files committed at since or later, and the manifest lists and
// manifests (the .avro metadata files) committed with them, newest first, at most limit
// of each, and the database's clock now: the since of the next call, less the longest a
// commit's transaction may run (committed_at and created_at are its start). A live
// load's tail files are left out until a commit names them (they are built where they
// are measured, but the owner may have evicted them by then), and so are the metadata
// files of load snapshots (they expire).
func Recent(ctx context.Context, db pg.DB, since time.Time, limit int) ([]RecentFile, time.Time, error) {
	rows, err := db.Query(ctx, `
		SELECT n.now, f.key, f.size, f.committed, f.meta
		  FROM (SELECT clock_timestamp() AS now) n
		  LEFT JOIN LATERAL (
			(SELECT key, file_size AS size, committed_at AS committed, false AS meta FROM mink_data_files
			 WHERE NOT live AND committed_at >= $1
			 ORDER BY committed_at DESC LIMIT $2)
			UNION ALL
			(SELECT key, octet_length(content)::bigint, created_at, true FROM mink_meta_files
			 WHERE expires_at IS NULL AND created_at >= $1 AND key LIKE '%.avro'
			 ORDER BY created_at DESC LIMIT $2)) f ON true
		 ORDER BY f.committed DESC, f.meta DESC`, since, limit)
	if err != nil {
		return nil, time.Time{}, err
	}
	var now time.Time
	var out []RecentFile
	for rows.Next() {
		var key *string
		var size *int64
		var committed *time.Time
		var meta *bool
		if err := rows.Scan(&now, &key, &size, &committed, &meta); err != nil {
			rows.Close()
			return nil, time.Time{}, err
		}
		if key != nil { // the left join's one row when nothing is recent
			out = append(out, RecentFile{Key: *key, Size: *size, Committed: *committed, Meta: *meta})
		}
	}
	return out, now, rows.Err()
}

// WatchCommits calls notify each time a transaction that recorded committed data files
// commits (the mink_data_files_notify trigger), and once when it starts listening, until
// ctx ends or the connection fails: its error. It holds one connection of db (pg.Listen).
func WatchCommits(ctx context.Context, db pg.DB, notify func()) error {
	return pg.Listen(ctx, db, func(string, string) { notify() }, "mink_data_files")
}

// RemovedChannel is told of every file row deleted while its table lives on (migration
// 0017): read them with Removed.
const RemovedChannel = "mink_removed_files"

// RemovedKeepsFor is how long a removed file is recorded (migration 0017): a file server
// cut off from Postgres longer may miss the removal of a file it caches.
const RemovedKeepsFor = time.Hour

// Removed reads the keys of the files removed at since or later (while their tables
// lived on: collected), and the database's clock now: the since of the next call, less
// the longest a removing transaction may run (removed_at is when it removed the row).
func Removed(ctx context.Context, db pg.DB, since time.Time) ([]string, time.Time, error) {
	rows, err := db.Query(ctx, `SELECT n.now, r.key FROM (SELECT clock_timestamp() AS now) n
		LEFT JOIN mink_removed_files r ON r.removed_at >= $1`, since)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	var now time.Time
	var keys []string
	for rows.Next() {
		var key *string
		if err := rows.Scan(&now, &key); err != nil {
			return nil, time.Time{}, err
		}
		if key != nil {
			keys = append(keys, *key)
		}
	}
	return keys, now, rows.Err()
}
