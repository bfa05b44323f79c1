package live

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/tables"
)

// deletes are the position delete files an upsert table's load snapshot adds, and the
// current snapshot's they replace: for each data file of a partition with a tail (the
// committed ones, then the tail's), the positions whose key a later record up to the
// tail's end touches, computed from Postgres alone as any file server rebuilds them
// (rangefile.BuildDeletes: the index's key hashes, and the recorded ones of the tail's
// files it has not indexed). A file gets one only where the tail deletes more of it than
// its committed delete file does (dead sets only grow with coverage).
func (l *Loader) deletes(ctx context.Context, t tables.Table, md table.Metadata, reader *icebergmeta.Reader, tails []*tail) ([]objects.LoadDelete, []icebergmeta.DataFile, error) {
	var withTail []*tail
	for _, tl := range tails {
		if tl.end > tl.start {
			withTail = append(withTail, tl)
		}
	}
	if len(withTail) == 0 {
		return nil, nil, nil
	}
	committed := map[int32][]icebergmeta.DataFile{}
	files, err := l.snapshotRows(ctx, t, reader, md.CurrentSnapshot(), false)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		committed[f.Partition] = append(committed[f.Partition], f)
	}
	deleteRows, err := l.snapshotRows(ctx, t, reader, md.CurrentSnapshot(), true)
	if err != nil {
		return nil, nil, err
	}
	deletesOf := map[string]icebergmeta.DataFile{}
	for _, f := range deleteRows {
		deletesOf[f.DeletesOf] = f
	}
	settings := parquetbuild.DefaultSettings()
	recorded, err := json.Marshal(settings)
	if err != nil {
		return nil, nil, err
	}
	var out []objects.LoadDelete
	var replaced []icebergmeta.DataFile
	for _, tl := range withTail {
		fs := append(slices.Clip(committed[tl.p]), tl.files...)
		if len(fs) == 0 {
			continue
		}
		from := fs[0].Start
		for _, f := range fs {
			from = min(from, f.Start)
		}
		var pk *rangefile.PartitionKeys
		err := l.query(ctx, func(ctx context.Context) (err error) {
			pk, err = l.o.Keys.Partition(ctx, l.o.DB, t.ID, tl.p, from, tl.end, tl.keyed)
			return err
		})
		if err != nil {
			return nil, nil, apierr.Postgres(err, "load table %s: read the keys of partition %d", t.FullName(), tl.p)
		}
		for _, f := range fs {
			d := rangefile.Deletes{Table: t.ID, Partition: tl.p, Start: f.Start, End: f.End, DataKey: f.Key, CoverEnd: tl.end, Tail: tl.keyed}
			pos, err := pk.Deletes(d)
			if err != nil {
				return nil, nil, fmt.Errorf("load table %s: %w", t.FullName(), err)
			}
			old, had := deletesOf[f.Key]
			if int64(len(pos)) <= old.Records {
				continue
			}
			st, err := parquetbuild.WritePositionDeletes(io.Discard, settings, layout.URI(f.Key), pos)
			if err != nil {
				return nil, nil, err
			}
			stats, err := json.Marshal(st.Columns)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, objects.LoadDelete{Tail: tl.keyed, File: icebergmeta.DataFile{
				Key:       layout.DeleteKey(t.Namespace, t.Name, tl.p, f.Start, f.End, tl.end, st.SHA256),
				Partition: tl.p, Start: f.Start, End: f.End, Records: st.RowCount, Size: st.Size, SHA256: st.SHA256,
				Settings: recorded, Stats: stats, DeletesOf: f.Key, CoverEnd: tl.end,
			}})
			if had {
				replaced = append(replaced, old)
			}
		}
	}
	return out, replaced, nil
}

// snapshotRows reads the mink_data_files rows of the data files (or, deletes, the
// position delete files) snapshot s names.
func (l *Loader) snapshotRows(ctx context.Context, t tables.Table, reader *icebergmeta.Reader, s *table.Snapshot, deletes bool) ([]icebergmeta.DataFile, error) {
	list, kind := reader.SnapshotFiles, "data"
	if deletes {
		list, kind = reader.SnapshotDeletes, "delete"
	}
	uris, err := list(ctx, s)
	if err != nil {
		if apierr.Classify(err) == apierr.Unavailable {
			return nil, err
		}
		return nil, fmt.Errorf("load table %s: read its committed %s files: %w", t.FullName(), kind, err)
	}
	if len(uris) == 0 {
		return nil, nil
	}
	keys := make([]string, len(uris))
	for i, u := range uris {
		if keys[i], err = layout.KeyOf(u); err != nil {
			return nil, fmt.Errorf("load table %s: %w", t.FullName(), err)
		}
	}
	var rows map[string]icebergmeta.DataFile
	if err := l.query(ctx, func(ctx context.Context) (err error) {
		rows, err = objects.DataFiles(ctx, l.o.DB, keys)
		return err
	}); err != nil {
		return nil, apierr.Postgres(err, "load table %s: read its committed %s files", t.FullName(), kind)
	}
	if len(rows) != len(keys) {
		return nil, fmt.Errorf("load table %s: its current snapshot names %d %s files, mink_data_files has %d", t.FullName(), len(keys), kind, len(rows))
	}
	out := make([]icebergmeta.DataFile, len(keys))
	for i, k := range keys {
		out[i] = rows[k]
	}
	return out, nil
}
