package icebergmeta

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/minkhq/mink/pkg/layout"
)

// ErrNoMetaFile: no metadata file is stored at the key, or a live load's has expired
// (objects.MetaFile).
var ErrNoMetaFile = errors.New("no such metadata file")

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
