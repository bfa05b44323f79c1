package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
)

// Config is one run's sizes. The defaults finish within 10 minutes on 2 cores.
type Config struct {
	Items []int // which items to run: issue 10's 1-8, 9 and 10 (Schema Registry indexing), 11 (small files)

	Compression string // producer batch codec of the benchmark topics
	Reps        int    // repetitions of each measurement; the best is reported

	// 1, 2: indexing and builds.
	OneRecords       int           // records in the one-partition topic
	Partitions       int           // partitions of the all-partitions topic
	PartitionRecords int           // records per partition of it
	Procs            []int         // indexer process counts for all partitions
	RangeBytes       int64         // mink.range.target-bytes
	RangeMaxAge      time.Duration // mink.range.max-age
	IndexTTL         time.Duration // lease_ttl of the indexing processes (rounds every TTL/3)

	// 9, 10: indexing Schema Registry tables (one partition each).
	AvroRecords  int // records of the Avro topic
	ProtoRecords int // records of the Protobuf topic

	// 3-6: the file server.
	FS FSConfig

	// 13: memory.
	Mem MemConfig

	// 16: an indexer's memory at scale (issue 32).
	Scale ScaleConfig

	// 7: coordination.
	CoordNodes        []int // simulated cluster sizes
	CoordTables       int
	CoordPartitions   int
	CoordSteadyPasses int // steady passes measured at least
	CoordSteadyRounds int // and at least this many node rounds (more passes for small clusters)
	// CoordCheckPartitions is the partition count of one more cold start and steady
	// phase at the smallest cluster size, to show what a round reads does not depend on
	// partitions; 0 skips it.
	CoordCheckPartitions int

	// 11: concurrent live loads.
	Live LiveConfig

	// 15: upsert beside append.
	Upsert UpsertConfig

	// 8: failover.
	FailoverTrials     int
	FailoverTTL        time.Duration
	FailoverPartitions int
	FailoverMaxAge     time.Duration

	// 11: small files: simulated minutes of the demo table at its default rate.
	AssemblyMinutes []int

	ProfileDir string // CPU profiles of in-process runs; "" is the Env's work folder
	Timeout    time.Duration
}

// DefaultConfig is what make bench runs.
func DefaultConfig() Config {
	return Config{
		Items:       []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		Compression: "none",
		Reps:        3,

		OneRecords:       200_000,
		Partitions:       4,
		PartitionRecords: 150_000,
		Procs:            []int{1, 2, 4},
		RangeBytes:       8 << 20,
		RangeMaxAge:      2 * time.Second,
		IndexTTL:         900 * time.Millisecond,

		AvroRecords:  200_000,
		ProtoRecords: 200_000,

		FS:     DefaultFSConfig(),
		Mem:    DefaultMemConfig(),
		Live:   DefaultLiveConfig(),
		Upsert: DefaultUpsertConfig(),
		Scale:  DefaultScaleConfig(),

		CoordNodes:           []int{10, 100, 1000},
		CoordTables:          1000,
		CoordPartitions:      100,
		CoordSteadyPasses:    3,
		CoordSteadyRounds:    3000,
		CoordCheckPartitions: 10,

		FailoverTrials:     3,
		FailoverTTL:        3 * time.Second,
		FailoverPartitions: 4,
		FailoverMaxAge:     100 * time.Millisecond,

		AssemblyMinutes: []int{30, 120},

		Timeout: 10 * time.Minute,
	}
}

// Validate checks the sizes.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, it := range c.Items {
		if !slices.Contains(DefaultConfig().Items, it) {
			bad("items: %d is not one of the items %v", it, DefaultConfig().Items)
		}
	}
	if c.Reps < 1 {
		bad("reps: %d, want at least 1", c.Reps)
	}
	if c.OneRecords < 1000 || c.PartitionRecords < 1000 || c.Partitions < 1 {
		bad("records and partitions: want at least 1000 records per partition and 1 partition")
	}
	if c.AvroRecords < 1000 || c.ProtoRecords < 1000 {
		bad("avro-records, proto-records: want at least 1000")
	}
	if c.RangeBytes < 1024 {
		bad("range-bytes: %d, want at least 1024", c.RangeBytes)
	}
	for _, n := range c.Procs {
		if n < 1 {
			bad("procs: %d, want at least 1", n)
		}
	}
	for _, n := range c.CoordNodes {
		if n < 1 {
			bad("coord-nodes: %d, want at least 1", n)
		}
	}
	if c.has(7) && len(c.CoordNodes) == 0 {
		bad("coord-nodes: want at least one cluster size")
	}
	if c.CoordTables < 1 || c.CoordPartitions < 1 || c.CoordCheckPartitions < 0 {
		bad("coord-tables, coord-partitions: want at least 1 (coord-check-partitions: 0 or more)")
	}
	if c.CoordSteadyPasses < 1 || c.CoordSteadyRounds < 0 {
		bad("coord-steady-passes: want at least 1 (coord-steady-rounds: 0 or more)")
	}
	if c.FailoverTrials < 1 || c.FailoverPartitions < 2 {
		bad("failover: want at least 1 trial and 2 partitions")
	}
	if c.has(11) && (len(c.AssemblyMinutes) == 0 || slices.Min(c.AssemblyMinutes) < 1) {
		bad("assembly-minutes: want at least one horizon, each of 1 minute or more")
	}
	if c.Live.Clients < 1 || c.Live.Duration < time.Second || c.Live.Rate < 1 {
		bad("live-clients, live-duration, live-rate: want at least 1 client, 1s and 1 record/s")
	}
	if c.Live.Steady != 0 && (c.Live.Steady < 4*time.Second || c.Live.Every <= 0 || c.Live.Every > c.Live.Steady/4) {
		bad("live-steady, live-every: want a paced run of at least 4s (or 0: none) and each client loading at least 4 times in it")
	}
	if err := c.Upsert.validate(); c.has(15) && err != nil {
		errs = append(errs, err)
	}
	if err := c.Scale.validate(); c.has(16) && err != nil {
		errs = append(errs, err)
	}
	if c.IndexTTL < 300*time.Millisecond || c.FailoverTTL < 300*time.Millisecond {
		bad("lease TTLs: want at least 300ms")
	}
	return errors.Join(errs...)
}

func (c *Config) has(item int) bool { return slices.Contains(c.Items, item) }

// Run measures every configured item and returns the report; an item that fails is
// reported as failed and the others still run.
func Run(ctx context.Context, e *Env, c Config) *Report {
	r := &Report{Started: time.Now(), LoadStart: loadAvg()}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	if c.ProfileDir == "" {
		c.ProfileDir = e.Work + "/profiles"
	}
	item := func(n int, title string) *Item {
		it := &Item{N: n, Title: title}
		r.Items = append(r.Items, it)
		return it
	}
	fail := func(it *Item, err error) {
		e.Log.Error("item failed", "item", it.N, "error", err)
		it.Status = "failed: " + err.Error()
	}
	var idx *indexingResult
	if c.has(1) || c.has(2) || c.has(3) || c.has(4) || c.has(5) || c.has(6) || c.has(12) {
		it1 := item(1, "Indexing")
		it2 := item(2, "Builds")
		var err error
		idx, err = runIndexing(ctx, e, c, it1, it2)
		if err != nil && idx != nil {
			if idx.run != nil {
				idx.run.Close()
			}
			idx = nil
		}
		if err != nil {
			if it1.Status == "" {
				fail(it1, err)
			}
			if it2.Status == "" {
				fail(it2, err)
			}
		}
		if !c.has(1) {
			r.Items = slices.DeleteFunc(r.Items, func(i *Item) bool { return i == it1 })
		}
		if !c.has(2) {
			r.Items = slices.DeleteFunc(r.Items, func(i *Item) bool { return i == it2 })
		}
	}
	if c.has(3) || c.has(4) || c.has(5) || c.has(6) || c.has(12) {
		its := map[int]*Item{}
		for n, title := range map[int]string{3: "Cached reads", 4: "Table load latency", 5: "End-to-end freshness", 6: "Scans with iceberg-go", 12: "Unknown keys"} {
			if c.has(n) {
				its[n] = &Item{N: n, Title: title}
			}
		}
		if idx == nil {
			for _, it := range its {
				it.Status = "skipped: needs the indexed table of item 1"
			}
		} else {
			runFileServer(ctx, e, c, idx, its)
		}
		for _, n := range slices.Sorted(maps.Keys(its)) {
			r.Items = append(r.Items, its[n])
		}
	}
	if c.has(7) {
		it := item(7, "Coordination")
		if err := runCoord(ctx, e, c, it); err != nil {
			fail(it, err)
		}
	}
	if c.has(8) {
		it := item(8, "Failover")
		if err := runFailover(ctx, e, c, it); err != nil {
			fail(it, err)
		}
	}
	for _, f := range []struct {
		n       int
		title   string
		format  RegFormat
		records int
	}{{9, "Indexing an Avro topic (Schema Registry)", AvroFormat, c.AvroRecords},
		{10, "Indexing a Protobuf topic (Schema Registry)", ProtoFormat, c.ProtoRecords}} {
		if !c.has(f.n) {
			continue
		}
		it := item(f.n, f.title)
		if err := runRegIndexing(ctx, e, c, it, f.format, f.records); err != nil {
			fail(it, err)
		}
	}
	if c.has(11) {
		it := item(11, "Small files: size-tiered assembly")
		if err := runAssembly(ctx, c, it); err != nil {
			fail(it, err)
		}
	}
	if c.has(13) {
		it := item(13, "Memory")
		if err := runMemory(ctx, e, c, it); err != nil {
			fail(it, err)
		}
	}
	if c.has(14) {
		it := item(14, "Concurrent live loads")
		if err := runLiveLoads(ctx, e, c, it); err != nil {
			fail(it, err)
		}
	}
	if c.has(15) {
		it := item(15, "Upsert tables beside append")
		if err := runUpsert(ctx, e, c, it); err != nil {
			fail(it, err)
		}
	}
	if c.has(16) {
		it := item(16, "Indexer memory at scale")
		if err := runScale(ctx, e, c, it); err != nil {
			fail(it, err)
		}
	}
	if idx != nil {
		idx.run.Close()
	}
	r.Duration = time.Since(r.Started)
	r.Describe(context.WithoutCancel(ctx), e)
	return r
}

// indexingResult is what items 3-6 reuse: the one-partition table, indexed.
type indexingResult struct {
	topic     string
	sizes     Sizes
	run       *IndexRun
	buildMBps float64 // item 2's rate, MB of records per second

	buildProfile Profile // item 2's builds, profiled
}

// props are the benchmark tables' properties: ranges cut by size (the age only cuts the
// last one), and, for the writer of items 3-6, quick commits and no assembly, so the
// data files are the indexed ranges.
func props(c Config) map[string]string {
	return map[string]string{
		tables.PropRangeTargetBytes: strconv.FormatInt(c.RangeBytes, 10),
		tables.PropRangeMaxAge:      c.RangeMaxAge.String(),
		tables.PropCommitInterval:   benchCommitInterval.String(),
		propAssemblyTarget:          "1024",
		propMaintenance:             "24h",
	}
}

// best runs fn reps times and returns the shortest time.
func best(reps int, fn func() (time.Duration, error)) (time.Duration, error) {
	var b time.Duration
	for range reps {
		d, err := fn()
		if err != nil {
			return 0, err
		}
		if b == 0 || d < b {
			b = d
		}
	}
	return b, nil
}

func runIndexing(ctx context.Context, e *Env, c Config, it1, it2 *Item) (*indexingResult, error) {
	loadStart := loadAvg()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	one, all := "bench-one-"+suffix, "bench-all-"+suffix
	if err := e.CreateTopic(ctx, one, 1); err != nil {
		return nil, err
	}
	if err := e.CreateTopic(ctx, all, int32(c.Partitions)); err != nil {
		return nil, err
	}
	t0 := time.Now()
	oneSizes, err := e.Produce(ctx, one, 1, c.OneRecords, c.Compression, 1)
	if err != nil {
		return nil, err
	}
	allSizes, err := e.Produce(ctx, all, int32(c.Partitions), c.PartitionRecords, c.Compression, 2)
	if err != nil {
		return nil, err
	}
	n1, b1 := oneSizes.Total()
	n2, b2 := allSizes.Total()
	e.Log.Info("produced", "records", n1+n2, "MB", (b1+b2)/1e6, "in", time.Since(t0).Round(time.Millisecond))
	kc, err := e.Kafka()
	if err != nil {
		return nil, err
	}
	defer kc.Close()

	// One partition: each repetition runs Mink's indexer process, then the bare loop,
	// the indexer's read path in-process and the range builds over the same offsets,
	// so that load from elsewhere on the machine hits Mink and its baselines alike.
	// The best of each is reported; the first run's ranges are the cuts of all.
	jsonFiles, err := JSONFiles()
	if err != nil {
		return nil, err
	}
	var (
		mink               Measured
		keep               *IndexRun
		res                = &indexingResult{topic: one, sizes: oneSizes}
		bare, tail, builds time.Duration
		bareMink           time.Duration // the bare loop with Mink's decoder
		same               string        // what the identity check of the bare loop's files found
		cuts               Cuts
		idxOpt             = IndexOptions{Procs: 1, Topic: one, Partitions: 1, TTL: c.IndexTTL, Props: props(c), Timeout: 5 * time.Minute}
		buildRanges        []ranges.Range
		buildTable         tables.Table
		buildCodecs        *tablecodec.Codecs
	)
	defer func() {
		if res.run == nil && keep != nil {
			keep.Close()
		}
	}()
	for rep := range c.Reps {
		run, err := e.RunIndexers(ctx, idxOpt)
		if err != nil {
			return nil, err
		}
		m, err := run.Measure(oneSizes)
		if err != nil {
			run.Close()
			return nil, err
		}
		e.Log.Info("indexed one partition", "MB/s", MBps(m.Bytes, m.Took), "ranges", len(m.Ranges))
		if rep == 0 {
			// Items 2-6 use the first run's table and ranges.
			keep, cuts, buildRanges, buildTable = run, m.Cuts[0], m.Ranges, run.Table
			buildCodecs = tablecodec.New(run.DB, nil)
		} else {
			run.Close()
		}
		if rep == 0 || m.Took < mink.Took {
			mink = m
		}
		d, built, err := e.BareLoopFor(ctx, one, jsonFiles, cuts)
		if err != nil {
			return nil, err
		}
		if rep == 0 {
			want := make([]rangeFile, len(buildRanges))
			for i, r := range buildRanges {
				want[i] = rangeFile{size: r.Size, sha: r.SHA256}
			}
			same = sameFiles(want, built)
		}
		bare = minPos(bare, d)
		if d, err = e.BareLoop(ctx, one, EventSpec, cuts); err != nil {
			return nil, err
		}
		bareMink = minPos(bareMink, d)
		if d, err = TailerLoop(ctx, kc, one, EventSpec, cuts); err != nil {
			return nil, err
		}
		tail = minPos(tail, d)
		if d, err = RangeBuilds(ctx, kc, buildCodecs, buildTable, buildRanges); err != nil {
			return nil, err
		}
		builds = minPos(builds, d)
	}
	res.run = keep
	// The baselines ran over the first run's ranges: rates are over those bytes.
	var cutBytes, cutRecords, fileBytes int64
	for _, r := range buildRanges {
		cutBytes += oneSizes.Bytes(0, r.Start, r.End)
		cutRecords += r.End - r.Start
		fileBytes += r.Size
	}
	res.buildMBps = MBps(cutBytes, builds)
	consume, err := best(c.Reps, func() (time.Duration, error) { return e.ConsumeOnly(ctx, one, cuts) })
	if err != nil {
		return res, err
	}
	recs, err := e.Fetch(ctx, one, cuts)
	if err != nil {
		return res, err
	}
	// Decoders on records in memory, with and without the encode: no consumer, no broker.
	minkDec, err := rowcodec.NewDecoder(EventSpec)
	if err != nil {
		return res, err
	}
	jsonDec, err := NewJSONRows()
	if err != nil {
		return res, err
	}
	var decMink, decJSON, encMink, encJSON time.Duration
	for range c.Reps {
		d, err := decodeOnly(minkDec, nil, recs)
		if err != nil {
			return res, err
		}
		decMink = minPos(decMink, d)
		if d, err = decodeOnly(jsonDec, nil, recs); err != nil {
			return res, err
		}
		decJSON = minPos(decJSON, d)
		if d, err = EncodeOnly(EventSpec, cuts, recs); err != nil {
			return res, err
		}
		encMink = minPos(encMink, d)
		if d, err = EncodeOnlyFor(jsonFiles, nil, cuts, recs); err != nil {
			return res, err
		}
		encJSON = minPos(encJSON, d)
	}

	it1.Rows = append(it1.Rows,
		Speed("one partition, 1 indexer process: MB/s", MBps(mink.Bytes, mink.Took), MBps(cutBytes, bare), "MB/s"),
		Speed("one partition, 1 indexer process: records/s", PerSec(mink.Records, mink.Took), PerSec(cutRecords, bare), "rec/s"),
		Speed("indexer read path in-process (kafkasrc.Tailer + builder, no Postgres)", MBps(cutBytes, tail), MBps(cutBytes, bare), "MB/s"),
		Speed("one partition, 1 indexer process, beside the bare loop with Mink's decoder (rowcodec)", MBps(mink.Bytes, mink.Took), MBps(cutBytes, bareMink), "MB/s"),
		detail(Speed("decode only, records in memory: rowcodec vs encoding/json", MBps(cutBytes, decMink), MBps(cutBytes, decJSON), "MB/s")),
		detail(Speed("decode + encode, records in memory: rowcodec + builder vs encoding/json + builder", MBps(cutBytes, encMink), MBps(cutBytes, encJSON), "MB/s")),
		Info("bare loop stage: franz-go consume only", fmtNum(MBps(cutBytes, consume))+" MB/s"),
		Info("load average (1, 5, 15 min)", "at start "+loadStart+"; at end "+loadAvg()),
	)
	it1.Notes = append(it1.Notes,
		fmt.Sprintf("Data: %s records (%.1f MB of keys and values, JSON events of ~%d bytes, producer compression %s) in one partition; "+
			"%d ranges of mink.range.target-bytes %d measured (%.1f MB of Parquet), the last range (cut by age) left out.",
			fmtNum(float64(cutRecords)), float64(cutBytes)/1e6, cutBytes/max(1, cutRecords), c.Compression,
			len(buildRanges), c.RangeBytes, float64(fileBytes)/1e6),
		"Mink: a real mink-indexer process; time from its partition lease's acquisition to the store of its last measured range, both by the database clock. "+
			"Baseline (bare loop): a franz-go consumer, encoding/json's Unmarshal into a struct declared for the event (the amount a string, the timestamp a time.Time), "+
			"hand-written conversion to rowcodec values, and the same parquetbuild builder into io.Discard in this process, cutting files at the same offsets; no Postgres, no leases. "+
			"The bare loop with Mink's decoder is the same loop decoding with pkg/rowcodec: what the indexer process adds to its decoder and encoder.",
		"Same rows: "+same,
		fmt.Sprintf("Best of %d runs each, Mink and its baselines interleaved; MB are 10^6 bytes of record keys and values.", c.Reps),
	)

	if err := runAllPartitions(ctx, e, c, all, allSizes, it1); err != nil {
		e.Log.Error("all partitions failed", "error", err)
		it1.Notes = append(it1.Notes, "All partitions: **failed**: "+err.Error())
	}

	it2.Rows = append(it2.Rows,
		Speed("uncached build (rangefile.Build per range): MB/s of records", MBps(cutBytes, builds), MBps(cutBytes, bareMink), "MB/s"),
		Speed("uncached build: MB/s of Parquet written", float64(fileBytes)/1e6/builds.Seconds(), float64(fileBytes)/1e6/bareMink.Seconds(), "MB/s"),
	)
	it2.Notes = append(it2.Notes,
		fmt.Sprintf("The %d ranges of item 1 rebuilt one after another by rangefile.Build (kafkasrc.ReadRange with one fetch ahead, "+
			"the builder, and the size and SHA-256 check against the index) into io.Discard, as an owner builds an uncached file; the file server's "+
			"disk write is not included. Baseline: item 1's bare loop with Mink's decoder (rowcodec) over the same offsets, interleaved: what a build adds to decode and encode.", len(buildRanges)))

	// Profiles of the in-process paths, kept for go tool pprof and shown where Mink is
	// below half its baseline.
	profiles := map[string]func() error{
		"bare-loop":    func() error { _, _, err := e.BareLoopFor(ctx, one, jsonFiles, cuts); return err },
		"mink-encode":  func() error { _, err := EncodeOnly(EventSpec, cuts, recs); return err },
		"tailer-loop":  func() error { _, err := TailerLoop(ctx, kc, one, EventSpec, cuts); return err },
		"range-builds": func() error { _, err := RangeBuilds(ctx, kc, buildCodecs, buildTable, buildRanges); return err },
	}
	got := map[string]Profile{}
	for _, name := range slices.Sorted(maps.Keys(profiles)) {
		p, err := ProfileCPU(c.ProfileDir, name, func() error { return repeatFor(2*time.Second, profiles[name]) })
		if err != nil {
			return res, err
		}
		got[name] = p
	}
	recs = nil
	res.buildProfile = got["range-builds"]
	for _, it := range []*Item{it1, it2} {
		// Item 1 shows them below issue 17's goal, its bare loop's speed.
		if lowRows(it) || (it == it1 && MBps(mink.Bytes, mink.Took) < MBps(cutBytes, bare)) {
			it.Profile = append(it.Profile, got["bare-loop"], got["tailer-loop"], got["mink-encode"], got["range-builds"])
		}
	}
	// The indexer processes themselves, recorded with perf when they are slow.
	for _, row := range it1.Rows {
		if !row.Low || !strings.Contains(row.What, "indexer process") {
			continue
		}
		run, err := e.RunIndexers(ctx, IndexOptions{Procs: 1, Topic: one, Partitions: 1, TTL: c.IndexTTL, Props: props(c),
			Timeout: 5 * time.Minute, PerfDir: c.ProfileDir})
		if err != nil {
			return res, err
		}
		run.Close()
		it1.Profile = append(it1.Profile, run.Perf)
		break
	}
	return res, nil
}

// runAllPartitions indexes every partition of topic all with 1, 2 and 4 processes,
// beside one bare loop per partition at once, interleaved likewise.
func runAllPartitions(ctx context.Context, e *Env, c Config, all string, allSizes Sizes, it1 *Item) error {
	var allCuts []Cuts
	for _, n := range c.Procs {
		var m Measured
		var bareAll time.Duration
		for rep := range c.Reps {
			run, err := e.RunIndexers(ctx, IndexOptions{Procs: n, Topic: all, Partitions: int32(c.Partitions), TTL: c.IndexTTL, Props: props(c), Timeout: 5 * time.Minute})
			if err != nil {
				return err
			}
			got, err := run.Measure(allSizes)
			run.Close()
			if err != nil {
				return err
			}
			if rep == 0 || got.Took < m.Took {
				m = got
			}
			if allCuts == nil {
				allCuts = got.Cuts
			}
			d, err := e.BareLoopParallel(ctx, all, JSONFiles, allCuts)
			if err != nil {
				return err
			}
			bareAll = minPos(bareAll, d)
		}
		var allBytes int64
		for _, ct := range allCuts {
			allBytes += allSizes.Bytes(ct.Partition, ct.From, ct.End())
		}
		it1.Rows = append(it1.Rows, Speed(fmt.Sprintf("%d partitions, %d indexer process(es): MB/s", c.Partitions, n),
			MBps(m.Bytes, m.Took), MBps(allBytes, bareAll), "MB/s"))
		it1.Notes = append(it1.Notes, fmt.Sprintf("%d process(es): partitions per process %v, leases taken within %s of each other.",
			n, spreadOf(m.Spread), fmtDur(m.Stagger)))
	}
	it1.Notes = append(it1.Notes, fmt.Sprintf("All partitions: %d partitions x %s records; real processes (lease_ttl %s, rounds every %s), "+
		"all registered before the table is created so each takes its share in its next round. Baseline: one bare loop per partition, all at once.",
		c.Partitions, fmtNum(float64(c.PartitionRecords)), c.IndexTTL, c.IndexTTL/3))
	return nil
}

func minPos(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

func spreadOf(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func runCoord(ctx context.Context, e *Env, c Config, it *Item) error {
	it.Notes = append(it.Notes,
		fmt.Sprintf("Simulated nodes: lease.Manager instances (indexer and writer roles) in this process, each with its own Register/Round/Leave, against one real Postgres, as pkg/lease/sim_test.go does. "+
			"A pass runs one round of every node in turn (by node id; a joining node last); \"rounds to converge\" counts passes until one moves no lease (that quiet pass included), so in a real cluster it is that many lease_ttl/3 intervals. "+
			"The simulated lease_ttl is %s, only so that no member row expires within a pass; a crash expires the victim's row in SQL (`UPDATE mink_members SET expires_at = now()`), as lease_ttl passing would.", coordTTL),
		"A round: the renewal of the node's member row, alone in its transaction (the row is what every lease it holds is valid through, so this one row renews them all); "+
			"then one batch of 3 statements: the janitor (deletes expired member rows and frees their leases), the members' and tables' generations, and the free lease counts per table; "+
			"then only when needed: the members and the tables read again when their generation moved, the free leases fetched of the tables the node is below its share of, one release and one acquire statement. "+
			"Statements and rows are counted by lease.Stats (rows read: rows returned to the client; rows written: rows inserted, updated or deleted); the figures are exact averages over every round of the phase.",
		"Phases: cold start (every node registered at once, every lease free), steady (passes after the cold start converged, nothing moving), join (one more node: shares drop and nodes above theirs hand back one partition per table per round), "+
			"clean leave (one node leaves: its leases are free at once), crash (one node stops and its member row expires: the next round of any other node deletes it and frees its leases). "+
			"A node takes nothing in its first round after registering (it watches the membership once), so a cold start and a join take one pass more than the moves themselves.",
		"Baselines, on the same data: for rows written, the earlier design that renewed each held lease's row every round (leases held per node + the member row); "+
			"for rows read, a round that reads every lease row of every table and every member; for rounds to converge, the fewest the rules allow "+
			"(hand-backs one per table per round, the settle round, the quiet pass). Ratios are baseline ÷ Mink: above 1 Mink does that many times less.",
		fmt.Sprintf("Postgres CPU: user + system time of the private cluster's postmaster and all its processes (backends, checkpointer, autovacuum, ...; /proc/<pid>/stat, and the postmaster's cutime and cstime for those that exited) "+
			"from before to after the steady passes, divided by the passes: the whole cluster's Postgres work per lease_ttl/3, against the goal of %s, 10%% of a round at the default lease_ttl %s. "+
			"The idle cluster's CPU over as long a wall time with no rounds is shown beside it (it is included, not subtracted). Postgres shares the machine's cores with this process, which runs the nodes' side.",
			fmtDur(roundInterval/10), lease.DefaultTTL),
	)
	var got []CoordResult
	for _, n := range c.CoordNodes {
		load0 := loadAvg()
		res, err := e.Coordinate(ctx, CoordOptions{Nodes: n, Tables: c.CoordTables, Partitions: c.CoordPartitions,
			SteadyPasses: max(c.CoordSteadyPasses, ceilDiv(c.CoordSteadyRounds, n)), Changes: true})
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		got = append(got, res)
		it.Rows = append(it.Rows, coordRows(res)...)
		it.Notes = append(it.Notes, coordNote(res, load0, loadAvg()))
		e.Log.Info("coordination", "nodes", n, "took", res.Took.Round(time.Millisecond))
	}
	it.Rows = append(it.Rows, coordGrowth(got)...)
	if p := c.CoordCheckPartitions; p > 0 && p != c.CoordPartitions {
		ref := got[0]
		for _, r := range got {
			if r.Nodes < ref.Nodes {
				ref = r
			}
		}
		res, err := e.Coordinate(ctx, CoordOptions{Nodes: ref.Nodes, Tables: c.CoordTables, Partitions: p,
			SteadyPasses: max(c.CoordSteadyPasses, ceilDiv(c.CoordSteadyRounds, ref.Nodes))})
		if err != nil {
			return fmt.Errorf("%d nodes x %d partitions: %w", ref.Nodes, p, err)
		}
		figs := func(s CoordSteady) string {
			v := fmt.Sprintf("%.2f / %.2f / %.2f", s.Read, s.Written, s.Stmts)
			if s.CPUErr == nil {
				v += ", Postgres CPU per pass " + fmtDur(s.CPUPerPass())
			}
			return v
		}
		it.Rows = append(it.Rows, Info(fmt.Sprintf("%d nodes x %d tables x %d partitions, steady: rows read / rows written / statements per node per round", ref.Nodes, c.CoordTables, p),
			fmt.Sprintf("%s (with %d partitions: %s)", figs(res.Steady), c.CoordPartitions, figs(ref.Steady))))
		e.Log.Info("coordination", "nodes", ref.Nodes, "partitions", p, "took", res.Took.Round(time.Millisecond))
	}
	return nil
}

// coordRows are one cluster size's rows: the steady round's costs, then convergence.
func coordRows(res CoordResult) []Row {
	st, n := res.Steady, res.Nodes
	passes := time.Duration(max(1, st.Passes))
	atMost := func(avg float64, most int64) string { return fmt.Sprintf("%.2f (at most %d in a round)", avg, most) }
	writeBase, readBase := st.Held+1, float64(st.LeaseRows+int64(st.Nodes))
	rows := []Row{
		{What: fmt.Sprintf("%d nodes x %d tables x %d partitions, steady: rows written per node per round", n, res.Tables, res.Partitions),
			Mink: atMost(st.Written, st.MaxWritten), Baseline: fmt.Sprintf("%s (one row per held lease, %s held per node, and the member row)", fmtCount(writeBase), fmtCount(st.Held)),
			Ratio: bigRatio(writeBase / st.Written)},
		{What: fmt.Sprintf("%d nodes, steady: rows read per node per round", n),
			Mink: atMost(st.Read, st.MaxRead), Baseline: fmt.Sprintf("%s (every lease row, %s, and every member, %d)", fmtCount(readBase), fmtCount(float64(st.LeaseRows)), st.Nodes),
			Ratio: bigRatio(readBase / st.Read)},
	}
	cpuWhat := fmt.Sprintf("%d nodes, steady: Postgres CPU time per pass (one round of every node)", n)
	if st.CPUErr != nil {
		rows = append(rows, Info(cpuWhat, st.CPUErr.Error()))
	} else {
		per, goal := st.CPUPerPass(), roundInterval/10
		rows = append(rows,
			Row{What: cpuWhat, Mink: fmt.Sprintf("%s (%s of a %s round)", fmtDur(per), fmtPct(float64(per)/float64(roundInterval)), fmtDur(roundInterval)),
				Baseline: fmt.Sprintf("%s (goal: 10%% of a round at lease_ttl %s)", fmtDur(goal), lease.DefaultTTL),
				Ratio:    fmt.Sprintf("%.2g of goal", float64(per)/float64(goal))},
			Info(fmt.Sprintf("%d nodes, steady: Postgres CPU per pass, of it: the nodes' backends / other processes; the idle cluster over as long a wall time", n),
				fmt.Sprintf("%s / %s; %s", fmtDur(st.PGClients/passes), fmtDur((st.PGCPU-st.PGClients)/passes), fmtDur(st.PGIdle/passes))))
	}
	fr := res.Fresh
	rows = append(rows,
		Info(fmt.Sprintf("%d nodes, steady right after the cold start, before VACUUM: rows read / rows written / statements per node per round; Postgres CPU per pass", n),
			fmt.Sprintf("%.2f / %.2f / %.2f; %s", fr.Read, fr.Written, fr.Stmts, cpuOrWhy(fr))),
		Info(fmt.Sprintf("%d nodes, steady: statements per node per round", n), fmt.Sprintf("%.2f", st.Stmts)),
		Info(fmt.Sprintf("%d nodes, steady: one round's duration p50 / p99; this process's CPU per round", n),
			fmt.Sprintf("%s / %s; %s", fmtDur(st.RoundP50), fmtDur(st.RoundP99), fmtDur(st.ClientCPU/time.Duration(max(1, st.Rounds))))))
	var names, minka, base []string
	sumMin, sumPasses := 0, 0
	for _, ph := range res.Phases {
		names = append(names, ph.Name)
		minka, base = append(minka, strconv.Itoa(ph.Passes)), append(base, strconv.Itoa(ph.MinPasses))
		sumMin, sumPasses = sumMin+ph.MinPasses, sumPasses+ph.Passes
	}
	rows = append(rows, Row{What: fmt.Sprintf("%d nodes: rounds to converge after a %s", n, strings.Join(names, " / ")),
		Mink: strings.Join(minka, " / "), Baseline: strings.Join(base, " / ") + " (fewest the rules allow)",
		Ratio: fmtRatio(float64(sumMin) / float64(sumPasses))})
	for _, ph := range res.Phases {
		rows = append(rows, Row{What: fmt.Sprintf("%d nodes, %s (%d nodes in the passes): rounds to converge", n, ph.Name, ph.Nodes),
			Mink: strconv.Itoa(ph.Passes), Baseline: fmt.Sprintf("%d (fewest the rules allow: %s)", ph.MinPasses, fewestWhy(ph)),
			Ratio: fmtRatio(float64(ph.MinPasses) / float64(ph.Passes)), Detail: true})
	}
	return rows
}

// cpuOrWhy is a steady phase's Postgres CPU per pass, or why it is unknown.
func cpuOrWhy(s CoordSteady) string {
	if s.CPUErr != nil {
		return s.CPUErr.Error()
	}
	return fmtDur(s.CPUPerPass())
}

// fewestWhy says what the fewest passes of a phase are made of.
func fewestWhy(ph CoordPhase) string {
	moving := ph.MinPasses - 1 - ph.Settle
	var parts []string
	switch {
	case ph.MinPasses == ph.Settle+1:
		parts = append(parts, "nothing to move")
	case ph.Excess > 1:
		parts = append(parts, fmt.Sprintf("%d handing back one lease per table per round", ph.Excess))
		if ph.Settle > 0 {
			parts[0] += ", the new node taking them from its second"
		}
	default:
		if ph.Settle > 0 {
			parts = append(parts, "the settle pass")
		}
		parts = append(parts, fmt.Sprintf("%d moving", moving))
	}
	return strings.Join(append(parts, "1 quiet"), ", ")
}

// coordNote is one cluster size's note: what each phase moved and cost, and the load.
func coordNote(res CoordResult, load0, load1 string) string {
	var ps []string
	for _, ph := range res.Phases {
		ps = append(ps, fmt.Sprintf("%s %s leases moved in %s (per node per round: %.2f statements, %s rows read, %s rows written)",
			ph.Name, fmtCount(float64(ph.Moved)), fmtDur(ph.Took), ph.Stmts, fmtCount(ph.Read), fmtCount(ph.Written)))
	}
	st := res.Steady
	return fmt.Sprintf("%d nodes x %d tables x %d partitions: %s in all, load average %s at start and %s at end. %s. Steady: %d passes (%d rounds) in %s, %s leases held per node, %d moved.",
		res.Nodes, res.Tables, res.Partitions, fmtDur(res.Took), load0, load1, strings.Join(ps, "; "),
		st.Passes, st.Rounds, fmtDur(st.Wall), fmtCount(st.Held), st.Moved)
}

// coordGrowth shows how the steady figures grow with the cluster size.
func coordGrowth(rs []CoordResult) []Row {
	if len(rs) < 2 {
		return nil
	}
	var sizes []string
	for _, r := range rs {
		sizes = append(sizes, strconv.Itoa(r.Nodes))
	}
	grow := func(what string, v func(CoordResult) float64, show func(float64) string) Row {
		var vals, factors []string
		for i, r := range rs {
			vals = append(vals, show(v(r)))
			if i > 0 {
				factors = append(factors, "×"+fmtFactor(v(r)/v(rs[i-1])))
			}
		}
		return Info(fmt.Sprintf("steady %s, %s nodes", what, strings.Join(sizes, " → ")),
			strings.Join(vals, " → ")+" ("+strings.Join(factors, ", ")+")")
	}
	f2 := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	dur := func(v float64) string { return fmtDur(time.Duration(v)) }
	rows := []Row{
		grow("rows read per node per round", func(r CoordResult) float64 { return r.Steady.Read }, f2),
		grow("rows written per node per round", func(r CoordResult) float64 { return r.Steady.Written }, f2),
	}
	for _, r := range rs {
		if r.Steady.CPUErr != nil {
			return rows
		}
	}
	return append(rows,
		grow("Postgres CPU per pass", func(r CoordResult) float64 { return float64(r.Steady.CPUPerPass()) }, dur),
		grow("Postgres CPU per node round", func(r CoordResult) float64 {
			return float64(r.Steady.PGCPU) / float64(max(1, r.Steady.Rounds))
		}, dur))
}

// fmtCount prints a count with thousands separators, and a fraction when it has one.
func fmtCount(v float64) string {
	if v != float64(int64(v)) && v < 1000 {
		return fmt.Sprintf("%.1f", v)
	}
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtPct(f float64) string { return fmt.Sprintf("%.2g%%", 100*f) }

// bigRatio is fmtRatio for ratios that may run into the thousands.
func bigRatio(r float64) string {
	if r >= 100 && !math.IsInf(r, 0) {
		return fmtNum(r) + "×"
	}
	return fmtRatio(r)
}

func fmtFactor(f float64) string {
	if f >= 10 {
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.2f", f)
}

func runFailover(ctx context.Context, e *Env, c Config, it *Item) error {
	trials, err := e.Failover(ctx, FailoverOptions{Trials: c.FailoverTrials, TTL: c.FailoverTTL, Partitions: int32(c.FailoverPartitions),
		MaxAge: c.FailoverMaxAge, Timeout: max(30*time.Second, 5*c.FailoverTTL)})
	if err != nil {
		return err
	}
	bound := c.FailoverTTL + c.FailoverTTL/3
	var idx, taken []time.Duration
	for i, t := range trials {
		row := Bound(fmt.Sprintf("trial %d: SIGKILL %s (%d partitions) to indexing again elsewhere", i+1, t.Victim, t.Partitions), t.Indexing, bound)
		row.Detail = true
		it.Rows = append(it.Rows, row)
		idx, taken = append(idx, t.Indexing), append(taken, t.Taken)
	}
	it.Rows = append(it.Rows,
		Bound(fmt.Sprintf("median of %d: to indexing again", len(trials)), Percentile(idx, 50), bound),
		Bound(fmt.Sprintf("worst of %d: to indexing again", len(trials)), slices.Max(idx), bound),
		Bound(fmt.Sprintf("worst of %d: to lease taken over", len(trials)), slices.Max(taken), bound),
	)
	for i, t := range trials {
		if len(t.Diag) > 0 {
			it.Notes = append(it.Notes, fmt.Sprintf("Trial %d exceeded the bound; the surviving processes' last warnings: `%s`", i+1, strings.Join(t.Diag, "` · `")))
		}
	}
	it.Notes = append(it.Notes,
		fmt.Sprintf("Two real mink-indexer processes (lease_ttl %s, rounds every %s) over a %d-partition topic receiving a record per partition every 10 ms; "+
			"mink.range.max-age %s, so a range is stored that often. The process holding leases gets SIGKILL; a fresh process replaces it and the leases rebalance before the next trial.",
			c.FailoverTTL, c.FailoverTTL/3, c.FailoverPartitions, c.FailoverMaxAge),
		fmt.Sprintf("Measured by the database clock from just before the SIGKILL to the first range stored under a new epoch for every partition the victim held. "+
			"Bound: the seed's lease_ttl + one round = %s. The new holder's first range also waits up to mink.range.max-age.", bound),
	)
	return nil
}
