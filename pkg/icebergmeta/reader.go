package icebergmeta

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/layout"
)

// Store reads metadata files already stored, by key.
type Store interface {
	MetaFile(ctx context.Context, key string) ([]byte, error)
}

// StoreFunc adapts a function to Store.
type StoreFunc func(ctx context.Context, key string) ([]byte, error)

// MetaFile calls f.
func (f StoreFunc) MetaFile(ctx context.Context, key string) ([]byte, error) { return f(ctx, key) }

// Reader reads manifest lists and manifests through a Store, caching what it learns:
// metadata files are immutable, so a cached answer never goes stale. It is safe for
// concurrent use.
type Reader struct {
	store Store

	mu    sync.Mutex
	lists map[string][]iceberg.ManifestFile // manifest list URI → its manifests
	live  map[string][]string               // manifest URI → URIs of its live (added, existing) data files
}

// NewReader returns a Reader over s.
func NewReader(s Store) *Reader {
	return &Reader{store: s, lists: map[string][]iceberg.ManifestFile{}, live: map[string][]string{}}
}

func (r *Reader) read(ctx context.Context, uri string) ([]byte, error) {
	key, err := layout.KeyOf(uri)
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: %w", err)
	}
	b, err := r.store.MetaFile(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: read %s: %w", key, err)
	}
	return b, nil
}

// ManifestList returns the manifests a snapshot lists.
func (r *Reader) ManifestList(ctx context.Context, s *table.Snapshot) ([]iceberg.ManifestFile, error) {
	if s == nil || s.ManifestList == "" {
		return nil, nil
	}
	r.mu.Lock()
	l, ok := r.lists[s.ManifestList]
	r.mu.Unlock()
	if ok {
		return l, nil
	}
	b, err := r.read(ctx, s.ManifestList)
	if err != nil {
		return nil, err
	}
	l, err = iceberg.ReadManifestList(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: manifest list %s: %w", s.ManifestList, err)
	}
	r.mu.Lock()
	r.lists[s.ManifestList] = l
	r.mu.Unlock()
	return l, nil
}

// Entries reads every entry of a manifest (deleted ones too unless discardDeleted).
func (r *Reader) Entries(ctx context.Context, m iceberg.ManifestFile, discardDeleted bool) ([]iceberg.ManifestEntry, error) {
	b, err := r.read(ctx, m.FilePath())
	if err != nil {
		return nil, err
	}
	es, err := iceberg.ReadManifest(m, bytes.NewReader(b), discardDeleted)
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: manifest %s: %w", m.FilePath(), err)
	}
	return es, nil
}

// LivePaths returns the URIs of the data files a manifest adds or keeps (not those it
// records as deleted).
func (r *Reader) LivePaths(ctx context.Context, m iceberg.ManifestFile) ([]string, error) {
	r.mu.Lock()
	p, ok := r.live[m.FilePath()]
	r.mu.Unlock()
	if ok {
		return p, nil
	}
	es, err := r.Entries(ctx, m, true)
	if err != nil {
		return nil, err
	}
	p = make([]string, 0, len(es))
	for _, e := range es {
		p = append(p, e.DataFile().FilePath())
	}
	r.mu.Lock()
	r.live[m.FilePath()] = p
	r.mu.Unlock()
	return p, nil
}

// SnapshotFiles returns the URIs of the data files of a snapshot; none for nil.
func (r *Reader) SnapshotFiles(ctx context.Context, s *table.Snapshot) ([]string, error) {
	return r.snapshotPaths(ctx, s, iceberg.ManifestContentData)
}

// SnapshotDeletes returns the URIs of the position delete files of a snapshot (upsert
// tables); none for nil.
func (r *Reader) SnapshotDeletes(ctx context.Context, s *table.Snapshot) ([]string, error) {
	return r.snapshotPaths(ctx, s, iceberg.ManifestContentDeletes)
}

// snapshotPaths returns the URIs of the files of a snapshot's manifests of one content.
func (r *Reader) snapshotPaths(ctx context.Context, s *table.Snapshot, content iceberg.ManifestContent) ([]string, error) {
	ms, err := r.ManifestList(ctx, s)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.ManifestContent() != content {
			continue
		}
		p, err := r.LivePaths(ctx, m)
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	return out, nil
}

// Refs are the keys that a table's metadata names, directly or through its snapshots.
type Refs struct {
	Data map[string]bool // data files of every live snapshot
	Meta map[string]bool // the metadata JSON, those in its metadata log, and every live snapshot's manifest list and manifests
}

// Referenced returns every key the metadata stored at key names: what collection must
// keep. It also forgets cached manifests no longer named, so the cache stays bounded.
func (r *Reader) Referenced(ctx context.Context, md table.Metadata, key string) (Refs, error) {
	refs := Refs{Data: map[string]bool{}, Meta: map[string]bool{key: true}}
	addKey := func(set map[string]bool, uri string) error {
		k, err := layout.KeyOf(uri)
		if err != nil {
			return fmt.Errorf("icebergmeta: %w", err)
		}
		set[k] = true
		return nil
	}
	for e := range md.PreviousFiles() {
		if err := addKey(refs.Meta, e.MetadataFile); err != nil {
			return Refs{}, err
		}
	}
	lists := map[string]bool{}
	manifests := map[string]bool{}
	for _, s := range md.Snapshots() {
		if s.ManifestList == "" {
			continue
		}
		lists[s.ManifestList] = true
		if err := addKey(refs.Meta, s.ManifestList); err != nil {
			return Refs{}, err
		}
		ms, err := r.ManifestList(ctx, &s)
		if err != nil {
			return Refs{}, err
		}
		for _, m := range ms {
			if manifests[m.FilePath()] {
				continue // carried from an earlier snapshot: read once
			}
			manifests[m.FilePath()] = true
			if err := addKey(refs.Meta, m.FilePath()); err != nil {
				return Refs{}, err
			}
			paths, err := r.LivePaths(ctx, m)
			if err != nil {
				return Refs{}, err
			}
			for _, p := range paths {
				if err := addKey(refs.Data, p); err != nil {
					return Refs{}, err
				}
			}
		}
	}
	r.mu.Lock()
	for k := range r.lists {
		if !lists[k] {
			delete(r.lists, k)
		}
	}
	for k := range r.live {
		if !manifests[k] {
			delete(r.live, k)
		}
	}
	r.mu.Unlock()
	return refs, nil
}
