package objects

import (
	"context"
	"time"

	"github.com/minkhq/mink/pkg/lease"
)

// RecentFile is a committed data file as Recent names it.
type RecentFile struct {
	Key     string
	Size    int64
	Created time.Time
}

// Recent reads the committed data files recorded at since or later, newest first, at most
// limit of them, and the database's clock now: the since of the next call, less the
// longest a commit's transaction may run (created_at is its start). A live load's tail
// files are left out (they are built where they are measured).
func Recent(ctx context.Context, db lease.DB, since time.Time, limit int) ([]RecentFile, time.Time, error) {
	rows, err := db.Query(ctx, `
		SELECT n.now, f.key, f.file_size, f.created_at
		  FROM (SELECT clock_timestamp() AS now) n
		  LEFT JOIN LATERAL (
			SELECT key, file_size, created_at FROM mink_data_files
			 WHERE NOT live AND created_at >= $1
			 ORDER BY created_at DESC LIMIT $2) f ON true`, since, limit)
	if err != nil {
		return nil, time.Time{}, err
	}
	var now time.Time
	var out []RecentFile
	for rows.Next() {
		var key *string
		var size *int64
		var created *time.Time
		if err := rows.Scan(&now, &key, &size, &created); err != nil {
			rows.Close()
			return nil, time.Time{}, err
		}
		if key != nil { // the left join's one row when nothing is recent
			out = append(out, RecentFile{Key: *key, Size: *size, Created: *created})
		}
	}
	return out, now, rows.Err()
}
