package writer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
)

// Summary keys of a snapshot that removed files Kafka no longer holds.
const (
	SummaryDroppedFiles   = "mink.log-start.dropped-files"   // files removed: wholly or partly below the log start
	SummaryDroppedRecords = "mink.log-start.dropped-records" // their rows
	SummaryTailFiles      = "mink.log-start.tail-files"      // files rebuilt from the retained part of a partly deleted file
	SummaryTailRecords    = "mink.log-start.tail-records"    // their rows: dropped-records minus tail-records left the table
	SummaryAssembledFiles = "mink.assembly.replaced-files"   // files an assembly snapshot merged
	SummaryAssemblyFiles  = "mink.assembly.merged-files"     // files it merged them into
)

// expireFiles removes from the current snapshot every file whose offsets Kafka no longer
// holds entirely (its log start offset moved past them by retention or DeleteRecords),
// so the current snapshot never names a file that cannot be built. A file that straddles
// the log start cannot be built either; it is replaced by a file of its retained offsets
// [log start, end), built from Kafka and measured like a range, so the rows Kafka still
// has stay in the table exactly once. If that build fails (Kafka unreachable, or the log
// start moved again meanwhile) the partition waits for the next maintenance. The same
// commit expires every older snapshot that names a file with offsets below the log
// start (a metadata-only commit when the current snapshot has none), so that every
// listed snapshot can be read.
func (tw *tableWriter) expireFiles(ctx context.Context, offs []kafkasrc.PartitionOffsets) error {
	var remove, add []icebergmeta.DataFile
	var rederived []ranges.Range
	cover := map[int32]icebergmeta.Coverage{}
	logStart := map[int32]int64{}
	moved, skipped := false, false
	for _, o := range offs {
		logStart[o.Partition] = o.LogStart
		if was, ok := tw.expiredBelow[o.Partition]; !ok || o.LogStart > was {
			moved = true
		}
	}
	for _, o := range offs {
		c, ok := tw.st.cover[o.Partition]
		files := tw.st.live[o.Partition]
		if !ok || len(files) == 0 || files[0].Start >= o.LogStart {
			continue
		}
		var drop, tails []icebergmeta.DataFile
		var rds []ranges.Range
		ok = true
		for _, f := range files {
			if f.Start >= o.LogStart {
				break
			}
			drop = append(drop, f)
			if f.End <= o.LogStart {
				continue
			}
			tail, err := tw.build(ctx, f.Partition, o.LogStart, f.End, f.Settings)
			if err == nil && tw.tbl.Upsert() {
				// The tail's rows are what Kafka holds now (maybe compacted): its
				// ranges' keys must say the same, for its deletes and others'.
				var rs []ranges.Range
				if rs, err = rederive(ctx, tw.w.db, tw.w.kafka, tw.w.codecs, tw.tbl, tail); err == nil {
					rds = append(rds, rs...)
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				tw.log.Warn("cannot rebuild the retained part of a file Kafka partly deleted; retrying at the next maintenance",
					"partition", o.Partition, "file", f.Key, "log_start", o.LogStart, "error", err)
				ok = false
				break
			}
			if tail.Records > 0 {
				tails = append(tails, tail)
			}
		}
		if !ok {
			skipped = true
			continue
		}
		remove = append(remove, drop...)
		add = append(add, tails...)
		rederived = append(rederived, rds...)
		cover[o.Partition] = icebergmeta.Coverage{Start: min(max(c.Start, o.LogStart), c.End), End: c.End}
	}
	var expire []int64
	if moved || len(remove) > 0 {
		bad := map[string]bool{}
		for _, f := range remove {
			bad[f.Key] = true
		}
		var err error
		if expire, err = tw.unreadable(ctx, bad, logStart); err != nil {
			return err
		}
	}
	done := func() {
		if !skipped {
			tw.expiredBelow = logStart
		}
	}
	if len(remove) == 0 && len(expire) == 0 {
		done()
		return nil
	}
	now, err := tw.dbNow(ctx)
	if err != nil {
		return err
	}
	if len(remove) == 0 {
		res, err := tw.expireOnly(ctx, now, expire, nil)
		switch {
		case errors.Is(err, icebergmeta.ErrNoChange): // only the current one names them
			done()
			return nil
		case errors.Is(err, errNotBuilt):
			return nil // the next maintenance tries again
		case err != nil:
			return err
		}
		done()
		tw.log.Info("expired snapshots naming offsets Kafka deleted", "snapshots", len(res.Expired), "version", res.Version)
		return nil
	}
	op := table.OpDelete
	if len(add) > 0 {
		op = table.OpOverwrite
	}
	var dropped, kept int64
	for _, f := range remove {
		dropped += f.Records
	}
	for _, f := range add {
		kept += f.Records
	}
	res, err := tw.commit(ctx, icebergmeta.Change{
		Operation: op, Add: add, Remove: remove, Coverage: cover, Now: now, Expire: expire,
		Summary: map[string]string{
			SummaryDroppedFiles: strconv.Itoa(len(remove)), SummaryDroppedRecords: strconv.FormatInt(dropped, 10),
			SummaryTailFiles: strconv.Itoa(len(add)), SummaryTailRecords: strconv.FormatInt(kept, 10),
		},
	}, rederived...)
	if err != nil {
		return err
	}
	if err := tw.store(ctx, string(op), res, add, remove); err != nil {
		return err
	}
	tw.st.apply(add, remove)
	for p, c := range cover {
		tw.st.cover[p] = c
	}
	done()
	tw.w.m.filesRemoved.Add(ctx, int64(len(remove)), tw.attrs)
	tw.w.m.filesAdded.Add(ctx, int64(len(add)), tw.attrs)
	tw.log.Info("removed files whose offsets Kafka deleted", "files", len(remove), "records", dropped,
		"tail_files", len(add), "tail_records", kept, "expired_snapshots", len(res.Expired), "version", res.Version)
	return nil
}

// build builds the file of offsets [start, end) of a partition once, into nothing, to
// measure it: the same deterministic build the file servers repeat on demand.
func (tw *tableWriter) build(ctx context.Context, partition int32, start, end int64, settings json.RawMessage) (icebergmeta.DataFile, error) {
	return buildFile(ctx, tw.w.kafka, tw.w.codecs, tw.tbl, partition, start, end, settings)
}

// buildFile builds a file with the recipe (settings) of the files it replaces: the same
// schema version and registry schemas, so its rows are theirs.
func buildFile(ctx context.Context, kc *kafkasrc.Client, codecs *tablecodec.Codecs, t tables.Table, partition int32, start, end int64, settings json.RawMessage) (icebergmeta.DataFile, error) {
	var s parquetbuild.Settings
	if err := json.Unmarshal(settings, &s); err != nil {
		return icebergmeta.DataFile{}, fmt.Errorf("bad recorded settings: %w", err)
	}
	fs, err := rangefile.BuildOffsets(ctx, kc, codecs, t, s, partition, start, end, io.Discard)
	if err != nil {
		return icebergmeta.DataFile{}, err
	}
	stats, err := json.Marshal(fs.Columns)
	if err != nil {
		return icebergmeta.DataFile{}, err
	}
	return icebergmeta.DataFile{
		Key: layout.DataKey(t.Namespace, t.Name, partition, start, end, fs.SHA256), Partition: partition,
		Start: start, End: end, Records: fs.RowCount, Size: fs.Size, SHA256: fs.SHA256, Settings: settings, Stats: stats,
	}, nil
}

// expireSnapshots removes snapshots past retention in a metadata-only version, when no
// commit has done it on the way (every commit expires what it can).
func (tw *tableWriter) expireSnapshots(ctx context.Context) error {
	now, err := tw.dbNow(ctx)
	if err != nil {
		return err
	}
	md := tw.st.base.Metadata
	if len(icebergmeta.Expirable(md, nil, now, icebergmeta.RetentionOf(tw.meta.Properties))) == 0 {
		return nil
	}
	// A metadata-only version is stamped by this node's clock (expireOnly); should it
	// not build, commits expire snapshots on their way too.
	_, err = tw.expireOnly(ctx, now, nil, nil)
	if errors.Is(err, icebergmeta.ErrNoChange) || errors.Is(err, errNotBuilt) {
		return nil
	}
	return err
}
