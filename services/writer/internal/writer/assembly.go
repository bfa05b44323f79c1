package writer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/parquetbuild"
)

// merge is one assembly result: adjacent files of a partition and the one file that
// holds exactly their rows.
type merge struct {
	old []icebergmeta.DataFile
	new icebergmeta.DataFile
}

const (
	// maxRunFiles merges a run of small files even below the target size once it is this
	// long, so a quiet partition does not keep many tiny files forever.
	maxRunFiles = 100
	// roundBudget bounds one assembly round's input to this many target sizes, so a
	// backlog is worked off over several rounds.
	roundBudget = 4
)

// planAssembly picks, per partition, runs of adjacent small files (below 3/4 of the
// target) whose sizes add up to near the target: each becomes one file. Runs are only
// merged once near the target, so a row is rewritten about once, not every round. Files
// not wholly in Kafka (below logStart) are left to expiry.
func planAssembly(live map[int32][]icebergmeta.DataFile, target int64, logStart map[int32]int64) [][]icebergmeta.DataFile {
	small := target / 4 * 3
	var groups [][]icebergmeta.DataFile
	var budget int64
	parts := make([]int32, 0, len(live))
	for p := range live {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		var run []icebergmeta.DataFile
		var size int64
		flush := func() {
			if len(run) >= 2 && (size >= small || len(run) >= maxRunFiles) && budget < roundBudget*target {
				groups = append(groups, run)
				budget += size
			}
			run, size = nil, 0
		}
		for _, f := range live[p] {
			if f.Size >= small || f.Start < logStart[p] {
				flush()
				continue
			}
			if len(run) > 0 && (size+f.Size > target || len(run) >= maxRunFiles || !sameSettings(run[0], f)) {
				flush()
			}
			run = append(run, f)
			size += f.Size
		}
		flush()
	}
	return groups
}

func sameSettings(a, b icebergmeta.DataFile) bool {
	if bytes.Equal(a.Settings, b.Settings) {
		return true
	}
	var sa, sb parquetbuild.Settings
	return json.Unmarshal(a.Settings, &sa) == nil && json.Unmarshal(b.Settings, &sb) == nil && sa == sb
}

// startAssembly plans a round and builds it beside the loop, which goes on committing;
// the loop commits the result when it arrives. One round runs at a time.
func (tw *tableWriter) startAssembly(ctx context.Context) {
	if tw.assembling {
		return
	}
	groups := planAssembly(tw.st.live, tw.cfg.assemblyTarget, tw.logStart)
	if len(groups) == 0 {
		return
	}
	tw.assembling = true
	kc, codecs, tbl, log, m, attrs := tw.w.kafka, tw.w.codecs, tw.tbl, tw.log, tw.w.m, tw.attrs
	tw.wg.Add(1)
	go func() {
		defer tw.wg.Done()
		var out []merge
		for _, g := range groups {
			first, last := g[0], g[len(g)-1]
			f, err := buildFile(ctx, kc, codecs, tbl, first.Partition, first.Start, last.End, first.Settings)
			if err == nil {
				var want int64
				for _, x := range g {
					want += x.Records
				}
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
	res, err := icebergmeta.Commit(ctx, tw.reader, tw.meta, tw.st.base, icebergmeta.Change{
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
