package writer

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/assembly"
	"github.com/minkhq/mink/pkg/icebergmeta"
)

// merge is one assembly result: adjacent files of a partition and the one file that
// holds exactly their rows.
type merge struct {
	old []icebergmeta.DataFile
	new icebergmeta.DataFile
}

// roundBudget bounds one assembly round's input to about this many target sizes, so a
// backlog is worked off over several rounds (the loop commits between them).
const roundBudget = 4

// startAssembly plans a round (pkg/assembly: size-tiered merges of adjacent files) and
// builds it beside the loop, which goes on committing; the loop commits the result when
// it arrives. One round runs at a time.
func (tw *tableWriter) startAssembly(ctx context.Context) {
	if tw.assembling {
		return
	}
	groups := assembly.Plan(tw.st.live, tw.logStart, assembly.Policy{
		Target: tw.cfg.assemblyTarget, Tier: tw.cfg.assemblyTier, Budget: roundBudget * tw.cfg.assemblyTarget})
	if len(groups) == 0 {
		return
	}
	tw.assembling = true
	kc, codecs, tbl, log, m, attrs := tw.w.kafka, tw.w.codecs, tw.tbl, tw.log, tw.w.m, tw.attrs
	db := tw.w.db
	tw.wg.Add(1)
	go func() {
		defer tw.wg.Done()
		var out []merge
		for _, g := range groups {
			first, last := g[0], g[len(g)-1]
			f, err := buildFile(ctx, kc, codecs, tbl, first.Partition, first.Start, last.End, first.Settings)
			var want int64
			if err == nil {
				for _, x := range g {
					want += x.Records
				}
				if tbl.Upsert() {
					// The merged file keeps the latest record per key of the whole
					// span: as many rows as the index's keys of the span say.
					want, err = upsertRows(ctx, db, tbl.ID, first.Partition, first.Start, last.End)
				}
			}
			if err == nil {
				if f.Records != want {
					// Kafka no longer yields the rows the files hold (compaction): the
					// files stay as they are.
					err = fmt.Errorf("kafka yields %d rows, the %d files hold %d", f.Records, len(g), want)
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				log.Warn("assembly: not merging", "partition", first.Partition, "from", first.Start, "to", last.End, "error", err)
				continue
			}
			m.assembled.Add(ctx, f.Size, attrs)
			out = append(out, merge{old: g, new: f})
		}
		tw.assemblyDone <- out // buffered: the loop may have stopped
	}()
}

// commitAssembly commits an assembly round as one replace snapshot, leaving out merges
// whose files left the table meanwhile (expiry).
func (tw *tableWriter) commitAssembly(ctx context.Context, ms []merge) error {
	var add, remove []icebergmeta.DataFile
	for _, m := range ms {
		if !slices.ContainsFunc(m.old, func(f icebergmeta.DataFile) bool { return !tw.st.keys[f.Key] }) {
			add = append(add, m.new)
			remove = append(remove, m.old...)
		}
	}
	if len(add) == 0 {
		return nil
	}
	now, err := tw.dbNow(ctx)
	if err != nil {
		return err
	}
	res, err := tw.commit(ctx, icebergmeta.Change{
		Operation: table.OpReplace, Add: add, Remove: remove, Now: now,
		Summary: map[string]string{SummaryAssembledFiles: strconv.Itoa(len(remove)), SummaryAssemblyFiles: strconv.Itoa(len(add))},
	})
	if err != nil {
		return err
	}
	if err := tw.store(ctx, string(table.OpReplace), res, add, remove); err != nil {
		return err
	}
	tw.st.apply(add, remove)
	tw.w.m.filesAdded.Add(ctx, int64(len(add)), tw.attrs)
	tw.w.m.filesRemoved.Add(ctx, int64(len(remove)), tw.attrs)
	tw.log.Info("assembled files", "replaced", len(remove), "into", len(add), "version", res.Version)
	return nil
}
