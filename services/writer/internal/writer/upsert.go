package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/services/writer/internal/store"
)

// pendingDeletes are the position delete files of the change being committed (upsert
// tables): stored with its data files, applied to the state once it is current.
type pendingDeletes struct {
	add, remove []icebergmeta.DataFile
}

// commit builds the metadata version that applies ch, with, for an upsert table, the
// position delete files the change needs (withDeletes); tw.store then stores both.
func (tw *tableWriter) commit(ctx context.Context, ch icebergmeta.Change) (*icebergmeta.Result, error) {
	tw.pending = pendingDeletes{}
	if err := tw.withDeletes(ctx, &ch); err != nil {
		return nil, err
	}
	res, err := icebergmeta.Commit(ctx, tw.reader, tw.meta, tw.st.base, ch)
	if err != nil {
		tw.pending = pendingDeletes{}
		return nil, err
	}
	tw.pending = pendingDeletes{add: ch.AddDeletes, remove: ch.RemoveDeletes}
	return res, nil
}

// withDeletes adds to a change of an upsert table the delete files it needs: for every
// data file of a partition the change touches, as the snapshot will have it, the
// positions whose key a later record of the partition up to the new coverage touches,
// from the index's key hashes alone. A file whose dead set grew gets a new delete file
// (replacing its old one); a file the change removes loses its delete file. Dead sets
// only grow as coverage grows, so an unchanged count is an unchanged set.
func (tw *tableWriter) withDeletes(ctx context.Context, ch *icebergmeta.Change) error {
	if !tw.tbl.Upsert() || ch.Operation == "" {
		return nil
	}
	removed := map[string]bool{}
	parts := map[int32]bool{}
	for _, f := range ch.Remove {
		removed[f.Key] = true
		parts[f.Partition] = true
		if d, ok := tw.st.deletes[f.Key]; ok {
			ch.RemoveDeletes = append(ch.RemoveDeletes, d)
		}
	}
	for _, f := range ch.Add {
		parts[f.Partition] = true
	}
	for p := range ch.Coverage {
		parts[p] = true
	}
	settings := parquetbuild.DefaultSettings()
	recorded, err := json.Marshal(settings)
	if err != nil {
		return err
	}
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		cover, ok := ch.Coverage[p]
		if !ok {
			cover, ok = tw.st.cover[p]
		}
		if !ok {
			continue
		}
		var files []icebergmeta.DataFile
		for _, f := range tw.st.live[p] {
			if !removed[f.Key] {
				files = append(files, f)
			}
		}
		for _, f := range ch.Add {
			if f.Partition == p {
				files = append(files, f)
			}
		}
		if len(files) == 0 {
			continue
		}
		from := files[0].Start
		for _, f := range files {
			from = min(from, f.Start)
		}
		rs, err := ranges.KeysOf(ctx, tw.w.db, tw.l.Table, p, from, cover.End)
		if err != nil {
			return err
		}
		krs, err := rangefile.DecodeKeys(rs)
		if err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		for _, f := range files {
			old, had := tw.st.deletes[f.Key]
			d := rangefile.Deletes{Table: tw.l.Table, Partition: p, Start: f.Start, End: f.End, DataKey: f.Key, CoverEnd: cover.End}
			pos, err := rangefile.DeletePositions(krs, d)
			if err != nil {
				return err
			}
			if int64(len(pos)) == old.Records {
				continue
			}
			fs, err := parquetbuild.WritePositionDeletes(io.Discard, settings, layout.URI(f.Key), pos)
			if err != nil {
				return err
			}
			stats, err := json.Marshal(fs.Columns)
			if err != nil {
				return err
			}
			ch.AddDeletes = append(ch.AddDeletes, icebergmeta.DataFile{
				Key:       layout.DeleteKey(tw.tbl.Namespace, tw.tbl.Name, p, f.Start, f.End, cover.End, fs.SHA256),
				Partition: p, Start: f.Start, End: f.End, Records: fs.RowCount, Size: fs.Size, SHA256: fs.SHA256,
				Settings: recorded, Stats: stats, DeletesOf: f.Key, CoverEnd: cover.End,
			})
			if had {
				ch.RemoveDeletes = append(ch.RemoveDeletes, old)
			}
		}
	}
	return nil
}

// applyPending records in the state the delete files of the change just made current.
func (st *state) applyPending(p pendingDeletes) {
	for _, f := range p.remove {
		if st.deletes[f.DeletesOf].Key == f.Key {
			delete(st.deletes, f.DeletesOf)
		}
	}
	for _, f := range p.add {
		st.deletes[f.DeletesOf] = f
	}
}

// loadDeletes reads the position delete files of st's current snapshot into st.
func (tw *tableWriter) loadDeletes(ctx context.Context, st *state) error {
	uris, err := tw.reader.SnapshotDeletes(ctx, st.base.Metadata.CurrentSnapshot())
	if err != nil || len(uris) == 0 {
		return err
	}
	keys := make([]string, 0, len(uris))
	for _, u := range uris {
		k, err := layout.KeyOf(u)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	files, err := store.DataFiles(ctx, tw.w.db, keys)
	if err != nil {
		return err
	}
	if len(files) != len(keys) {
		return fmt.Errorf("current snapshot names %d delete files, mink_data_files has %d of them", len(keys), len(files))
	}
	for _, f := range files {
		if !f.IsDeletes() {
			return fmt.Errorf("%s is named as a delete file but recorded as a data file", f.Key)
		}
		st.deletes[f.DeletesOf] = f
	}
	return nil
}

// upsertRows is the number of rows a file of an upsert table over [start, end) of a
// partition has: its distinct keys whose latest record is not a tombstone, by the index.
func upsertRows(ctx context.Context, db lease.DB, table int64, partition int32, start, end int64) (int64, error) {
	rs, err := ranges.KeysOf(ctx, db, table, partition, start, end)
	if err != nil {
		return 0, err
	}
	krs, err := rangefile.DecodeKeys(rs)
	if err != nil {
		return 0, err
	}
	k, err := rangefile.SpanKeys(krs, partition, start, end)
	return int64(len(k.Live)), err
}
