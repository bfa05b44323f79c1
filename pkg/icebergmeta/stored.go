package icebergmeta

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/pg"
)

// ErrNoMetaFile: no metadata file is stored at the key, or a live load's has expired.
var ErrNoMetaFile = errors.New("no such metadata file")

// MetaFile reads a metadata file of table tableID from mink_meta_files. A live load's
// file reads as missing once it has expired (by the database's clock), even before
// collection deletes it: what a plan or a token names never outlives its load's TTL.
func MetaFile(ctx context.Context, db pg.DB, tableID int64, key string) ([]byte, error) {
	var b []byte
	err := db.QueryRow(ctx, `SELECT content FROM mink_meta_files
		WHERE table_id = $1 AND key = $2 AND (expires_at IS NULL OR expires_at > now())`, tableID, key).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNoMetaFile
	}
	return b, err
}

// TableStore is a Store over the stored metadata files of table tableID, each read
// bounded by timeout.
func TableStore(db pg.DB, tableID int64, timeout time.Duration) Store {
	return StoreFunc(func(ctx context.Context, key string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return MetaFile(ctx, db, tableID, key)
	})
}

// FileIO serves s as an Iceberg FileIO (read only) for iceberg-go's readers: the
// manifest lists and manifests that a table's metadata names, by their s3:// URIs.
// ctx bounds every read (FileIO's Open takes none).
func FileIO(ctx context.Context, s Store) iceio.IO { return storeIO{ctx: ctx, s: s} }

type storeIO struct {
	ctx context.Context
	s   Store
}

func (s storeIO) Open(name string) (iceio.File, error) {
	key, err := layout.KeyOf(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	b, err := s.s.MetaFile(s.ctx, key)
	if errors.Is(err, ErrNoMetaFile) {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return memFile{Reader: bytes.NewReader(b), name: name, size: int64(len(b))}, nil
}

func (storeIO) Remove(name string) error {
	return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrPermission}
}

// memFile is a metadata file read whole: metadata files are small and read whole by
// iceberg-go anyway.
type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (memFile) Close() error                 { return nil }
func (f memFile) Stat() (fs.FileInfo, error) { return fileInfo(f), nil }

type fileInfo memFile

func (f fileInfo) Name() string     { return f.name }
func (f fileInfo) Size() int64      { return f.size }
func (fileInfo) Mode() fs.FileMode  { return 0o444 }
func (fileInfo) ModTime() time.Time { return time.Time{} }
func (fileInfo) IsDir() bool        { return false }
func (fileInfo) Sys() any           { return nil }
