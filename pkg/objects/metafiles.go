package objects

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/pg"
)

// MetaFile reads a metadata file of table tableID from mink_meta_files. A live load's
// file reads as missing (icebergmeta.ErrNoMetaFile) once it has expired (by the
// database's clock), even before collection deletes it: what a plan or a token names
// never outlives its load's TTL.
func MetaFile(ctx context.Context, db pg.DB, tableID int64, key string) ([]byte, error) {
	var b []byte
	err := db.QueryRow(ctx, `SELECT content FROM mink_meta_files
		WHERE table_id = $1 AND key = $2 AND (expires_at IS NULL OR expires_at > now())`, tableID, key).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, icebergmeta.ErrNoMetaFile
	}
	return b, err
}

// MetaStore is an icebergmeta.Store over the stored metadata files of table tableID
// (MetaFile), each read bounded by timeout.
func MetaStore(db pg.DB, tableID int64, timeout time.Duration) icebergmeta.Store {
	return icebergmeta.StoreFunc(func(ctx context.Context, key string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return MetaFile(ctx, db, tableID, key)
	})
}

// dataFilesChunk bounds the keys one statement of DataFiles names.
const dataFilesChunk = 5000

// DataFiles returns the rows of the data files keys, by key (missing ones absent); a
// position delete file's (upsert tables) with DeletesOf and CoverEnd. It reads them
// dataFilesChunk keys at a time.
func DataFiles(ctx context.Context, db pg.DB, keys []string) (map[string]icebergmeta.DataFile, error) {
	out := make(map[string]icebergmeta.DataFile, len(keys))
	for chunk := range slices.Chunk(keys, dataFilesChunk) {
		rows, err := db.Query(ctx, `SELECT key, `+fileColumns+`, coalesce(deletes_of, ''), coalesce(cover_end, 0)
			FROM mink_data_files WHERE key = ANY($1)`, chunk)
		if err != nil {
			return nil, err
		}
		fs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (icebergmeta.DataFile, error) {
			var f icebergmeta.DataFile
			err := r.Scan(&f.Key, &f.Partition, &f.Start, &f.End, &f.Records, &f.Size, &f.SHA256, &f.Settings, &f.Stats,
				&f.DeletesOf, &f.CoverEnd)
			return f, err
		})
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			out[f.Key] = f
		}
	}
	return out, nil
}

const fileColumns = `partition, start_offset, end_offset, record_count, file_size, sha256, settings, stats`
