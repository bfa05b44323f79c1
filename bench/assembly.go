package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/assembly"
	"github.com/minkhq/mink/pkg/devcluster"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Item 11: small files. make dev's demo table at its default rate, its ranges cut and
// committed on the table's schedule, and the writer's assembly planner (pkg/assembly)
// run on them round after round, beside the policy before it on the same ranges. Every
// range and every merged file is built by parquetbuild from the demo's own records, so
// the sizes are the bytes Mink would build; only the clock is simulated.

// assemblyGoal is issue 17's goal: files per partition of the demo table after 30 minutes.
const assemblyGoal = 20

// asmRun is one policy over the demo's ranges for a while.
type asmRun struct {
	name       string
	plan       func(live map[int32][]icebergmeta.DataFile) [][]icebergmeta.DataFile
	onCommit   bool // rounds after commits that add files, not only at maintenance
	files      map[int32][]icebergmeta.DataFile
	rewrites   map[int32][]int // per partition, per range: rewrites of its rows
	rangeBytes int64
	written    int64 // bytes of the files assembly built
	peak       int   // most files a partition held at any commit
}

// asmResult is what a run ends with.
type asmResult struct {
	minutes            int
	files, total, rows int64 // most files of a partition; of the table; rows of the table
	peak               int
	amplification      float64 // bytes assembly built ÷ bytes of ranges
	maxRewrites        int
	meanRewrites       float64 // per row
}

// demoData is the demo's records, by partition in offset order, and its ranges.
type demoData struct {
	spec     tableschema.Spec
	settings json.RawMessage
	recs     map[int32][]record.Record
	ranges   []demoRange       // in the order they are cut
	starts   map[int32][]int64 // each partition's ranges' first offsets, in order
	rows     map[int32][]int64 // and their rows
	cache    map[[3]int64]icebergmeta.DataFile
	building time.Duration
}

type demoRange struct {
	cut  time.Duration // when the indexer cuts it
	file icebergmeta.DataFile
}

// demoRecords makes the demo's records for minutes at devcluster's defaults (rate,
// partitions; the partition of a record is franz-go's default for its key, the user)
// and cuts them into ranges as the indexer does: a range closes range max-age after its
// first record.
func demoRecords(minutes int) (*demoData, error) {
	cfg := devcluster.Defaults
	d := &demoData{spec: tableschema.Spec{Format: tableschema.FormatJSON, Columns: devcluster.DemoColumns},
		recs: map[int32][]record.Record{}, starts: map[int32][]int64{}, rows: map[int32][]int64{}, cache: map[[3]int64]icebergmeta.DataFile{}}
	var err error
	if d.settings, err = json.Marshal(parquetbuild.DefaultSettings()); err != nil {
		return nil, err
	}
	part := kgo.StickyKeyPartitioner(nil).ForTopic(cfg.Topic)
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	n := int64(float64(minutes) * 60 * cfg.Rate)
	arrivals := map[int32][]time.Duration{} // of each partition's records, by offset
	for i := range n {
		t := time.Duration(float64(i) / cfg.Rate * float64(time.Second))
		kr := devcluster.NewEvent(i+1, start.Add(t)).Record(cfg.Topic)
		p := int32(part.Partition(kr, cfg.Partitions))
		d.recs[p] = append(d.recs[p], record.Record{Partition: p, Offset: int64(len(d.recs[p])), Timestamp: start.Add(t), Key: kr.Key, Value: kr.Value})
		arrivals[p] = append(arrivals[p], t)
	}
	for _, p := range slices.Sorted(maps.Keys(arrivals)) {
		ts := arrivals[p]
		for lo := 0; lo < len(ts); {
			hi := lo
			for hi < len(ts) && ts[hi] < ts[lo]+cfg.RangeMaxAge {
				hi++
			}
			f, err := d.build(p, int64(lo), int64(hi))
			if err != nil {
				return nil, err
			}
			d.ranges = append(d.ranges, demoRange{cut: ts[lo] + cfg.RangeMaxAge, file: f})
			d.starts[p], d.rows[p] = append(d.starts[p], f.Start), append(d.rows[p], f.Records)
			lo = hi
		}
	}
	slices.SortStableFunc(d.ranges, func(a, b demoRange) int { return int(a.cut - b.cut) })
	return d, nil
}

// build builds [start, end) of partition p as Mink does (into nothing, to measure it).
func (d *demoData) build(p int32, start, end int64) (icebergmeta.DataFile, error) {
	key := [3]int64{int64(p), start, end}
	if f, ok := d.cache[key]; ok {
		return f, nil
	}
	t0 := time.Now()
	b, err := parquetbuild.NewBuilder(io.Discard, d.spec, parquetbuild.DefaultSettings())
	if err != nil {
		return icebergmeta.DataFile{}, err
	}
	for _, r := range d.recs[p][start:end] {
		if err := b.Add(r); err != nil {
			return icebergmeta.DataFile{}, err
		}
	}
	fs, err := b.Close()
	if err != nil {
		return icebergmeta.DataFile{}, err
	}
	d.building += time.Since(t0)
	f := icebergmeta.DataFile{Key: fmt.Sprintf("%d/%d-%d", p, start, end), Partition: p, Start: start, End: end,
		Records: fs.RowCount, Size: fs.Size, SHA256: fs.SHA256, Settings: d.settings}
	d.cache[key] = f
	return f, nil
}

// simulate runs r over the ranges: a commit every commit interval takes the ranges cut
// by then; a round runs at every maintenance interval and, when r.onCommit, as the
// writer runs them: at the commit after one that added files or after a round that
// merged something. A round's merges are built and committed before the next commit
// (here they take milliseconds). It returns what r holds at each horizon (minutes,
// ascending).
func (d *demoData) simulate(ctx context.Context, r *asmRun, horizons []int) ([]asmResult, error) {
	cfg := devcluster.Defaults
	r.files, r.rewrites = map[int32][]icebergmeta.DataFile{}, map[int32][]int{}
	var out []asmResult
	next, lastMaint, due := 0, -time.Hour, false
	for now := time.Duration(0); len(out) < len(horizons); now += cfg.CommitInterval {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for ; next < len(d.ranges) && d.ranges[next].cut <= now; next++ {
			f := d.ranges[next].file
			r.files[f.Partition] = append(r.files[f.Partition], f)
			r.rewrites[f.Partition] = append(r.rewrites[f.Partition], 0)
			r.rangeBytes += f.Size
			due = true
		}
		for _, fs := range r.files {
			r.peak = max(r.peak, len(fs))
		}
		round := due && r.onCommit
		if now-lastMaint >= tables.DefaultProps.MaintenanceInterval {
			lastMaint, round = now, true
		}
		if round {
			merged, err := d.round(r)
			if err != nil {
				return nil, err
			}
			due = merged
		}
		if h := horizons[len(out)]; now+cfg.CommitInterval > time.Duration(h)*time.Minute {
			out = append(out, d.result(r, h))
		}
	}
	return out, nil
}

// result is what r holds now, at minutes.
func (d *demoData) result(r *asmRun, minutes int) asmResult {
	res := asmResult{minutes: minutes, peak: r.peak, amplification: float64(r.written) / float64(max(1, r.rangeBytes))}
	var rows, rewritten int64
	for p, fs := range r.files {
		res.files = max(res.files, int64(len(fs)))
		res.total += int64(len(fs))
		for _, f := range fs {
			res.rows += f.Records
		}
		for i, n := range r.rewrites[p] {
			res.maxRewrites = max(res.maxRewrites, n)
			rows += d.rows[p][i]
			rewritten += d.rows[p][i] * int64(n)
		}
	}
	res.meanRewrites = float64(rewritten) / float64(max(1, rows))
	return res
}

// round plans one round with r's policy and applies it, building every merged file; it
// reports whether it merged anything.
func (d *demoData) round(r *asmRun) (bool, error) {
	plan := r.plan(r.files)
	for _, g := range plan {
		first, last := g[0], g[len(g)-1]
		p := first.Partition
		m, err := d.build(p, first.Start, last.End)
		if err != nil {
			return false, err
		}
		if m.Records != sumRecords(g) {
			return false, fmt.Errorf("%s: merge of [%d, %d) holds %d rows, its files %d", r.name, first.Start, last.End, m.Records, sumRecords(g))
		}
		fs := r.files[p]
		i := slices.IndexFunc(fs, func(f icebergmeta.DataFile) bool { return f.Key == first.Key })
		if i < 0 || i+len(g) > len(fs) || fs[i+len(g)-1].Key != last.Key {
			return false, fmt.Errorf("%s: merge of [%d, %d) is not a run of partition %d's files", r.name, first.Start, last.End, p)
		}
		r.files[p] = slices.Replace(fs, i, i+len(g), m)
		r.written += m.Size
		// Ranges are in offset order: those inside the merge had their rows rewritten.
		starts := d.starts[p][:len(r.rewrites[p])]
		lo, _ := slices.BinarySearch(starts, first.Start)
		for j := lo; j < len(starts) && starts[j] < last.End; j++ {
			r.rewrites[p][j]++
		}
	}
	return len(plan) > 0, nil
}

func sumRecords(fs []icebergmeta.DataFile) int64 {
	var n int64
	for _, f := range fs {
		n += f.Records
	}
	return n
}

// legacyPlan is the assembly policy before issue 17, as it was in
// services/writer/internal/writer/assembly.go: per partition, runs of adjacent files
// below 3/4 of the target, merged once they add up to near the target or reach 100
// files; at most 4 targets of input per round; at maintenance only.
func legacyPlan(live map[int32][]icebergmeta.DataFile, target int64, logStart map[int32]int64) [][]icebergmeta.DataFile {
	const maxRunFiles, roundBudget = 100, 4
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
			if len(run) > 0 && (size+f.Size > target || len(run) >= maxRunFiles || !assembly.SameSettings(run[0], f)) {
				flush()
			}
			run = append(run, f)
			size += f.Size
		}
		flush()
	}
	return groups
}

// runAssembly is item 11.
func runAssembly(ctx context.Context, c Config, it *Item) error {
	horizons := slices.Sorted(slices.Values(c.AssemblyMinutes))
	if len(horizons) == 0 {
		return fmt.Errorf("assembly-minutes: want at least one horizon")
	}
	d, err := demoRecords(horizons[len(horizons)-1])
	if err != nil {
		return err
	}
	cfg, target, k := devcluster.Defaults, tables.DefaultProps.AssemblyTargetBytes, tables.DefaultProps.AssemblyTierFiles
	tiered := func(k int) func(map[int32][]icebergmeta.DataFile) [][]icebergmeta.DataFile {
		return func(live map[int32][]icebergmeta.DataFile) [][]icebergmeta.DataFile {
			// The writer's round budget: 4 targets.
			return assembly.Plan(live, nil, assembly.Policy{Target: target, Tier: k, Budget: 4 * target})
		}
	}
	legacy := func(live map[int32][]icebergmeta.DataFile) [][]icebergmeta.DataFile {
		return legacyPlan(live, target, nil)
	}
	t0 := time.Now()
	type pair struct{ mink, base, k8 asmResult }
	res := make([]pair, len(horizons))
	for _, x := range []struct {
		r   *asmRun
		out func(p *pair) *asmResult
	}{
		{&asmRun{name: "tiered", plan: tiered(k), onCommit: true}, func(p *pair) *asmResult { return &p.mink }},
		{&asmRun{name: "before", plan: legacy}, func(p *pair) *asmResult { return &p.base }},
		{&asmRun{name: "tiered k=8", plan: tiered(8), onCommit: true}, func(p *pair) *asmResult { return &p.k8 }},
	} {
		rs, err := d.simulate(ctx, x.r, horizons)
		if err != nil {
			return err
		}
		for i, r := range rs {
			*x.out(&res[i]) = r
		}
	}
	for i, p := range res {
		m := strconv.Itoa(p.mink.minutes) + " min"
		detail := i > 0
		if p.mink.minutes == 30 {
			it.Rows = append(it.Rows, Row{What: "demo table after 30 min: files per partition (the most of its " + strconv.Itoa(cfg.Partitions) + "), beside issue 17's goal",
				Mink: strconv.FormatInt(p.mink.files, 10), Baseline: fmt.Sprintf("%d (goal)", assemblyGoal),
				Ratio: fmt.Sprintf("%.2f of goal", float64(p.mink.files)/assemblyGoal)})
		}
		n := func(v int64) string { return strconv.FormatInt(v, 10) }
		it.Rows = append(it.Rows,
			fewer("demo table after "+m+": files per partition (the most of its partitions)", float64(p.mink.files), float64(p.base.files),
				n(p.mink.files), n(p.base.files), detail),
			fewer("demo table after "+m+": files per partition at any commit (the most)", float64(p.mink.peak), float64(p.base.peak),
				n(int64(p.mink.peak)), n(int64(p.base.peak)), true),
			fewer("demo table after "+m+": rewrite amplification (bytes assembly built ÷ bytes of the ranges)", p.mink.amplification, p.base.amplification,
				fmt.Sprintf("%.2f×", p.mink.amplification), fmt.Sprintf("%.2f×", p.base.amplification), detail),
			fewer("demo table after "+m+": rewrites of a row, most (mean)", float64(p.mink.maxRewrites), float64(p.base.maxRewrites),
				fmt.Sprintf("%d (%.2f)", p.mink.maxRewrites, p.mink.meanRewrites), fmt.Sprintf("%d (%.2f)", p.base.maxRewrites, p.base.meanRewrites), true),
			Row{What: "demo table after " + m + ": data files of the table, for its rows", Detail: true,
				Mink:     fmt.Sprintf("%d files, %s rows", p.mink.total, fmtNum(float64(p.mink.rows))),
				Baseline: fmt.Sprintf("%d files, %s rows", p.base.total, fmtNum(float64(p.base.rows))), Ratio: fmtRatio(float64(p.base.total) / float64(p.mink.total))},
			Info("demo table after "+m+", k = 8: files per partition (the most); rewrite amplification",
				fmt.Sprintf("%d; %.2f×", p.k8.files, p.k8.amplification)),
		)
	}
	var ranges, rows int64
	for _, rg := range d.ranges {
		ranges++
		rows += rg.file.Records
	}
	it.Notes = append(it.Notes,
		fmt.Sprintf("Input: make dev's demo table (pkg/devcluster: its events, %v records/s over %d partitions, keyed by user and partitioned as franz-go does), "+
			"%s records over %d min cut into %d ranges as the indexer cuts them (mink.range.max-age %v after a range's first record), "+
			"committed every %v (mink.commit.interval) and maintained every %v; target %d MiB, k = %d (the defaults). "+
			"Every range and every merged file is built by parquetbuild from these records in memory (%v of builds in all), so sizes are Mink's bytes; "+
			"only the clock is simulated, and a round's merges are committed before the next commit.",
			cfg.Rate, cfg.Partitions, fmtNum(float64(rows)), horizons[len(horizons)-1], ranges, cfg.RangeMaxAge, cfg.CommitInterval,
			tables.DefaultProps.MaintenanceInterval, target>>20, k, d.building.Round(time.Millisecond)),
		"Mink: pkg/assembly.Plan, the writer's planner, after every commit that adds files and at every maintenance. "+
			"Baseline: the policy before issue 17 (bench/assembly.go, legacyPlan: a run of small files merged once near the target or 100 files long; at maintenance only) on the same ranges. "+
			"Lower is better: the ratio is baseline ÷ Mink.",
		fmt.Sprintf("Rewrite amplification is the bytes of the merged files assembly built ÷ the bytes of the ranges committed; "+
			"a row's rewrites count the merged files it was written into. Simulated in %v.", time.Since(t0).Round(time.Millisecond)),
	)
	return nil
}

// fewer is a row where less is better (files, bytes rewritten): the ratio is
// baseline ÷ Mink, and mink and base are their figures as shown.
func fewer(what string, minkN, baseN float64, mink, base string, detail bool) Row {
	ratio := baseN / minkN
	return Row{What: what, Mink: mink, Baseline: base, Ratio: fmtRatio(ratio), Low: ratio < 0.5, Detail: detail}
}
