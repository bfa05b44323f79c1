package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
)

// pendingDeletes are the position delete files of the change being committed (upsert
// tables): stored with its data files, applied to the state once it is current.
type pendingDeletes struct {
	add, remove []icebergmeta.DataFile
	ranges      []ranges.Range // re-derived ranges, stored with the change (repairs)
}

// commit builds the metadata version that applies ch, with, for an upsert table, the
// position delete files the change needs (withDeletes), computed with the keys of the
// re-derived ranges given (which the change stores); tw.store then stores it all.
func (tw *tableWriter) commit(ctx context.Context, ch icebergmeta.Change, rederived ...ranges.Range) (*icebergmeta.Result, error) {
	tw.pending = pendingDeletes{}
	if err := tw.withDeletes(ctx, &ch, rederived); err != nil {
		return nil, err
	}
	res, err := icebergmeta.Commit(ctx, tw.reader, tw.meta, tw.st.base, ch)
	if err != nil {
		tw.pending = pendingDeletes{}
		return nil, err
	}
	tw.pending = pendingDeletes{add: ch.AddDeletes, remove: ch.RemoveDeletes, ranges: rederived}
	return res, nil
}

// withDeletes adds to a change of an upsert table the delete files it needs: for every
// data file of a partition the change touches, as the snapshot will have it, the
// positions whose key a later record of the partition up to the new coverage touches,
// from the index's key hashes alone. A file whose dead set grew gets a new delete file
// (replacing its old one); a file the change removes loses its delete file. Dead sets
// only grow as coverage grows, so an unchanged count is an unchanged set.
func (tw *tableWriter) withDeletes(ctx context.Context, ch *icebergmeta.Change, rederived []ranges.Range) error {
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
		pk, err := tw.partitionKeys(ctx, p, from, cover.End, rederived)
		if err != nil {
			return err
		}
		for _, f := range files {
			old, had := tw.st.deletes[f.Key]
			d := rangefile.Deletes{Table: tw.l.Table, Partition: p, Start: f.Start, End: f.End, DataKey: f.Key, CoverEnd: cover.End}
			pos, err := pk.Deletes(d)
			if err != nil {
				return err
			}
			if int64(len(pos)) == old.Records && len(rederived) == 0 {
				continue // without re-derived ranges a dead set only grows
			}
			if len(pos) == 0 {
				if had { // re-derived: nothing of the file is superseded any more
					ch.RemoveDeletes = append(ch.RemoveDeletes, old)
				}
				continue
			}
			fs, err := parquetbuild.WritePositionDeletes(io.Discard, settings, layout.URI(f.Key), pos)
			if err != nil {
				return err
			}
			if fs.SHA256 == old.SHA256 {
				continue
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

// partitionKeys are the keys partition p's deletes up to to are computed from, its files
// starting at from: the writer's cache's, or, with re-derived ranges (which the change
// is to store), the index's read anew with theirs in place.
func (tw *tableWriter) partitionKeys(ctx context.Context, p int32, from, to int64, rederived []ranges.Range) (*rangefile.PartitionKeys, error) {
	if len(rederived) == 0 {
		pk, err := tw.w.keys.Partition(ctx, tw.w.db, tw.l.Table, p, from, to, nil)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		return pk, nil
	}
	rs, err := ranges.KeysOf(ctx, tw.w.db, tw.l.Table, p, from, to)
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		for _, x := range rederived {
			if x.Partition == p && x.Start == r.Start && x.End == r.End {
				rs[i].Keys = x.Keys
			}
		}
	}
	krs, err := rangefile.DecodeKeys(rs)
	if err != nil {
		return nil, fmt.Errorf("partition %d: %w", p, err)
	}
	return rangefile.Exact(p, krs), nil
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
	files, err := tw.rowsOf(ctx, "delete", uris)
	if err != nil {
		return err
	}
	for _, f := range files {
		if !f.IsDeletes() {
			return fmt.Errorf("%s is named as a delete file but recorded as a data file", f.Key)
		}
		st.deletes[f.DeletesOf] = f
	}
	return nil
}

// rowsOf reads the mink_data_files rows of the files a snapshot names by URI (kind says
// which, for the error when some are missing).
func (tw *tableWriter) rowsOf(ctx context.Context, kind string, uris []string) ([]icebergmeta.DataFile, error) {
	keys := make([]string, 0, len(uris))
	for _, u := range uris {
		k, err := layout.KeyOf(u)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	rows, err := objects.DataFiles(ctx, tw.w.db, keys)
	if err != nil {
		return nil, err
	}
	if len(rows) != len(keys) {
		return nil, fmt.Errorf("current snapshot names %d %s files, mink_data_files has %d of them", len(keys), kind, len(rows))
	}
	files := make([]icebergmeta.DataFile, len(keys))
	for i, k := range keys {
		files[i] = rows[k]
	}
	return files, nil
}

// upsertRows is the number of rows a file of an upsert table over [start, end) of a
// partition has: its distinct keys whose latest record is not a tombstone, by the index.
func upsertRows(ctx context.Context, db pg.DB, table int64, partition int32, start, end int64) (int64, error) {
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

// rederive rebuilds from what Kafka holds now the ranges of an upsert table's file f
// (one range, or the run of ranges an assembled file spans): their rows, checksums,
// statistics and keys as they are after compaction. Compaction only removes records a
// later record of their key supersedes, so the latest record per key, and hence the
// table, is unchanged by it.
func rederive(ctx context.Context, db pg.DB, kc *kafkasrc.Client, codecs *tablecodec.Codecs, t tables.Table, f icebergmeta.DataFile) ([]ranges.Range, error) {
	rs, err := ranges.List(ctx, db, t.ID, f.Partition, f.Start)
	if err != nil {
		return nil, err
	}
	var out []ranges.Range
	next := f.Start
	for _, r := range rs {
		if r.Start >= f.End {
			break
		}
		if len(out) == 0 && r.Start < f.Start {
			next = r.Start // f begins at the log start, inside this range
		}
		if r.Start != next || r.End > f.End {
			return nil, fmt.Errorf("file %s: the index has no range [%d, ...) within [%d, %d)", f.Key, next, f.Start, f.End)
		}
		var s parquetbuild.Settings
		if err := json.Unmarshal(r.Settings, &s); err != nil {
			return nil, fmt.Errorf("range [%d, %d): bad recorded settings: %w", r.Start, r.End, err)
		}
		// A range the log start cuts keeps the keys of what Kafka still holds of it.
		fs, keys, err := rangefile.BuildKeyed(ctx, kc, codecs, t, s, r.Partition, max(r.Start, f.Start), r.End, io.Discard)
		if err != nil {
			return nil, err
		}
		stats, err := json.Marshal(fs.Columns)
		if err != nil {
			return nil, err
		}
		r.Records, r.DecodeErrors, r.Size, r.SHA256, r.Stats, r.Keys = fs.RowCount, fs.DecodeErrors, fs.Size, fs.SHA256, stats, keys.Encode()
		out = append(out, r)
		next = r.End
	}
	if next != f.End {
		return nil, fmt.Errorf("file %s: the index ends at %d, before %d", f.Key, next, f.End)
	}
	return out, nil
}
