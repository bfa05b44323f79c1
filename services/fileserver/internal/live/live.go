// Package live makes live table loads: a load returns the committed metadata plus, per
// partition, the records Kafka holds beyond it (read_committed, up to the last stable
// offset) as tail data files of a load snapshot whose parent is the current snapshot.
// A query then sees what was produced a moment ago, not what the writer last committed.
//
// Per partition, the tail is [the current snapshot's covered end, the last stable
// offset). It is cut at mink.live.max-records offsets, and the record bytes one load
// reads from Kafka to build it at mink.live.max-bytes; the load snapshot's summary says
// where and why. The tail is made of, in order of preference:
//
//   - indexed ranges not committed yet (mink_ranges): measured already, no build, and the
//     very files the writer's next commit names;
//   - tail files earlier loads measured and that have not expired (mink_data_files rows
//     with expires_at);
//   - a new tail file for the rest, measured once by its owner (files.Store.Measure,
//     forwarded like a read) and cached there. Its key is layout.DataKey, built with
//     parquetbuild.DefaultSettings, so a later commit of the identical range names the
//     same file and the writer's insert clears its expiry.
//
// The load's metadata files (metadata JSON, manifest list, one manifest) go to
// mink_meta_files under metadata/live/ (icebergmeta.LiveDir), so every file server
// serves them, with expires_at = now + TTL; the tail files' rows get the same expiry (or
// keep a later one). The TTL is mink.live.ttl (15m), capped by the snapshot retention
// age, since the writer keeps a replaced snapshot for that long (icebergmeta.RetentionOf)
// and with it every file the load names. The writer's collection deletes both kinds of
// rows once expired and unnamed.
//
// Concurrent loads of the same tail share one build of the load; a load whose tail ends
// where a load of the last minute (at most TTL/4) ended reuses its metadata. With
// mink.live-load=false a load returns the committed metadata and never reads Kafka.
// With Kafka unreachable a live load answers 503 naming Kafka.
package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"golang.org/x/sync/errgroup"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/files"
)

// Summary keys of a load snapshot, besides icebergmeta's coverage keys
// (mink.partition.<p>.start-offset / end-offset: what the load snapshot covers,
// committed and tail together) and Iceberg's totals.
const (
	SummaryLive           = "mink.live"                  // "true"
	SummaryBaseSnapshot   = "mink.live.base-snapshot-id" // the committed snapshot, absent when none
	SummaryExpiresAt      = "mink.live.expires-at-ms"    // readable until (database clock, Unix ms)
	SummaryTailFiles      = "mink.live.tail-files"       // files of the tail
	SummaryTailRecords    = "mink.live.tail-records"     // rows of the tail
	SummaryCutPartitions  = "mink.live.cut-partitions"   // partitions whose tail was cut
	summaryPartitionLive  = "mink.live.partition."       // + <p> + one of:
	SuffixCommittedEnd    = ".committed-end-offset"      // [start-offset, this) is committed
	SuffixTailStart       = ".tail-start-offset"         // the tail: [this, tail-end-offset)
	SuffixTailEnd         = ".tail-end-offset"
	SuffixLastStable      = ".last-stable-offset" // Kafka's, when the load read it
	SuffixCut             = ".cut"                // absent, or why the tail ends before the last stable offset: max-records, max-bytes
	SuffixTailFiles       = ".tail-files"
	CutMaxRecords         = "max-records"
	CutMaxBytes           = "max-bytes"
	CutSchema             = files.CutSchema // a record whose schema is not known yet
	maxConcurrentMeasures = 8
	// coverageKeys bounds the coverages kept by metadata key: a few per table read at
	// once (the current metadata, and the one before while loads catch up).
	coverageKeys = 512
)

// PartitionKey is the summary key of one partition's live figure (a Suffix* constant).
func PartitionKey(p int32, suffix string) string {
	return summaryPartitionLive + strconv.FormatInt(int64(p), 10) + suffix
}

// Measurer measures tail files: *files.Store. Created tells it of the keys a load
// recorded, which it may have remembered as missing.
type Measurer interface {
	Measure(ctx context.Context, req files.MeasureRequest) (files.Measured, error)
	Created(keys ...string)
}

// Options configure a Loader.
type Options struct {
	DB     lease.DB
	Kafka  *kafkasrc.Client
	Files  Measurer
	Codecs *tablecodec.Codecs // the tables' schemas
	// LookupTimeout bounds each Postgres statement of a load (default 5s).
	LookupTimeout time.Duration
	// KafkaTimeout bounds the read of Kafka's offsets (default 5s): with Kafka
	// unreachable a load answers 503 within it.
	KafkaTimeout time.Duration
	// LoadTimeout bounds a load's build (default 2m). A load that waits for it gives
	// up with its own request; the build goes on for the next load.
	LoadTimeout time.Duration
	Meter       metric.Meter // nil: no metrics
	Logger      *slog.Logger
}

// Base is a table's committed metadata: the current metadata file.
type Base struct {
	Key     string
	Content []byte
}

// Result is what a load returns: a metadata file to hand out.
type Result struct {
	Key     string
	Content []byte
	Live    bool // a load snapshot; false: the committed metadata as it is
	Reused  bool // the metadata of an earlier load with the same tail
}

// Stats are a Loader's counters since start.
type Stats struct {
	Loads     int64 // load snapshots made
	Reused    int64 // loads answered with an earlier load's metadata (same tail), or sharing one build
	Committed int64 // loads with no tail: the committed metadata
	Disabled  int64 // loads of tables with live loads off
	Failed    int64
	Measures  int64 // tail spans measured (here or by their owners)
	Cut       int64 // partition tails cut at a limit
}

// Loader makes live loads. Close it after the catalog has stopped.
type Loader struct {
	o    Options
	log  *slog.Logger
	base context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	closed  bool
	flights map[string]*flight
	recent  map[string]recent
	builds  sync.WaitGroup
	covs    *lru.Cache[string, map[int32]icebergmeta.Coverage] // by metadata key

	loads    metric.Int64Counter
	duration metric.Float64Histogram
	n        struct{ loads, reused, committed, disabled, failed, measures, cut atomic.Int64 }
}

type flight struct {
	done chan struct{}
	res  Result
	err  error
}

type recent struct {
	res    Result
	at     time.Time
	window time.Duration
}

// New returns a Loader.
func New(o Options) (*Loader, error) {
	if o.DB == nil || o.Kafka == nil || o.Files == nil {
		return nil, errors.New("live: DB, Kafka and Files are required")
	}
	if o.Codecs == nil {
		o.Codecs = tablecodec.New(o.DB, nil)
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = 5 * time.Second
	}
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = 2 * time.Minute
	}
	if o.KafkaTimeout <= 0 {
		o.KafkaTimeout = 5 * time.Second
	}
	if o.Meter == nil {
		o.Meter = noop.NewMeterProvider().Meter("")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	base, stop := context.WithCancel(context.Background())
	covs, err := newCoverageCache()
	if err != nil {
		stop()
		return nil, err
	}
	l := &Loader{o: o, log: o.Logger, base: base, stop: stop, flights: map[string]*flight{}, recent: map[string]recent{}, covs: covs}
	var err1, err2 error
	l.loads, err1 = o.Meter.Int64Counter("mink.fileserver.live.loads",
		metric.WithDescription("Table loads, by result: live (a load snapshot made), reused (an earlier load's, same tail), committed (no tail), disabled (mink.live-load=false), error."),
		metric.WithUnit("{load}"))
	l.duration, err2 = o.Meter.Float64Histogram("mink.fileserver.live.load.duration",
		metric.WithDescription("Time to make a load snapshot, tail builds included."), metric.WithUnit("s"))
	if err := errors.Join(err1, err2); err != nil {
		stop()
		return nil, fmt.Errorf("live: metrics: %w", err)
	}
	return l, nil
}

// Close cancels the builds of loads under way and waits for them.
func (l *Loader) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stop()
	l.builds.Wait()
}

// Stats returns the Loader's counters.
func (l *Loader) Stats() Stats {
	return Stats{Loads: l.n.loads.Load(), Reused: l.n.reused.Load(), Committed: l.n.committed.Load(),
		Disabled: l.n.disabled.Load(), Failed: l.n.failed.Load(), Measures: l.n.measures.Load(), Cut: l.n.cut.Load()}
}

func (l *Loader) count(ctx context.Context, result string, c *atomic.Int64) {
	c.Add(1)
	l.loads.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
}

// span is one partition's part of a load.
type span struct {
	p          int32
	covered    bool // the base snapshot covers the partition
	cov        icebergmeta.Coverage
	start, end int64 // the tail to add, after the records cut
	lso        int64
	cut        string // CutMaxRecords, CutMaxBytes or ""
}

// Load returns what a load of t answers, given its committed metadata: the committed
// metadata itself when live loads are off or Kafka holds nothing beyond it, otherwise a
// load snapshot's. Errors are apierr kinds: Unavailable naming Kafka or Postgres.
func (l *Loader) Load(ctx context.Context, t tables.Table, base Base) (Result, error) {
	props := t.Props()
	committed := Result{Key: base.Key, Content: base.Content}
	if !props.LiveLoad {
		l.count(ctx, "disabled", &l.n.disabled)
		return committed, nil
	}
	res, err := l.load(ctx, t, props, base)
	if err != nil {
		l.count(ctx, "error", &l.n.failed)
		return Result{}, err
	}
	return res, nil
}

func (l *Loader) load(ctx context.Context, t tables.Table, props tables.Props, base Base) (Result, error) {
	cov, err := l.coverage(t, base)
	if err != nil {
		return Result{}, err
	}
	kctx, kcancel := context.WithTimeout(ctx, l.o.KafkaTimeout)
	offs, err := l.o.Kafka.Offsets(kctx, t.Topic)
	kcancel()
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, apierr.Wrap(apierr.Unavailable, ctx.Err(), "load table %s: kafka is unavailable: no answer in time", t.FullName())
		}
		return Result{}, apierr.Wrap(apierr.Unavailable, err,
			"load table %s: kafka is unavailable: a live load reads the last stable offsets of topic %q (table property %s=false serves the committed snapshot without Kafka)",
			t.FullName(), t.Topic, tables.PropLiveLoad)
	}
	var spans []span
	for _, o := range offs {
		c, covered := cov[o.Partition]
		s := span{p: o.Partition, covered: covered, cov: c, start: max(o.LogStart, c.End), lso: o.LastStable}
		if !covered {
			s.start = o.LogStart
		}
		s.end = o.LastStable
		if s.end-s.start > props.LiveMaxRecords {
			s.end, s.cut = s.start+props.LiveMaxRecords, CutMaxRecords
		}
		if s.end > s.start {
			spans = append(spans, s)
		}
	}
	if len(spans) == 0 {
		l.count(ctx, "committed", &l.n.committed)
		return Result{Key: base.Key, Content: base.Content}, nil
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.p - b.p) })
	ttl := icebergmeta.LiveTTLOf(t.Properties)
	key := loadKey(t, props, ttl, base.Key, spans)
	window := min(ttl/4, time.Minute)

	l.mu.Lock()
	if r, ok := l.recent[key]; ok && time.Since(r.at) < r.window {
		l.mu.Unlock()
		l.count(ctx, "reused", &l.n.reused)
		res := r.res
		res.Reused = true
		return res, nil
	}
	f, joined := l.flights[key]
	if !joined {
		if l.closed {
			l.mu.Unlock()
			return Result{}, apierr.New(apierr.Unavailable, "file server is stopping")
		}
		f = &flight{done: make(chan struct{})}
		l.flights[key] = f
		l.builds.Add(1)
		go func() {
			defer l.builds.Done()
			bctx, cancel := context.WithTimeout(l.base, l.o.LoadTimeout)
			defer cancel()
			began := time.Now()
			res, err := l.build(bctx, t, props, ttl, base, spans)
			if err == nil {
				l.duration.Record(bctx, time.Since(began).Seconds())
			}
			l.mu.Lock()
			delete(l.flights, key)
			if err == nil {
				for k, r := range l.recent {
					if time.Since(r.at) >= r.window {
						delete(l.recent, k)
					}
				}
				l.recent[key] = recent{res: res, at: time.Now(), window: window}
			}
			l.mu.Unlock()
			f.res, f.err = res, err
			close(f.done)
		}()
	}
	l.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return Result{}, apierr.Wrap(apierr.Unavailable, ctx.Err(), "load table %s: its tail is still being built", t.FullName())
	}
	if f.err != nil {
		return Result{}, f.err
	}
	if joined {
		l.count(ctx, "reused", &l.n.reused)
		res := f.res
		res.Reused = true
		return res, nil
	}
	l.count(ctx, "live", &l.n.loads)
	return f.res, nil
}

// coverage is what the current snapshot of base covers, by partition (read only: the
// map is shared). A metadata file never changes once named, so each is parsed once;
// the coverage of the last coverageKeys keys is kept.
func (l *Loader) coverage(t tables.Table, base Base) (map[int32]icebergmeta.Coverage, error) {
	if cov, ok := l.covs.Get(base.Key); ok {
		return cov, nil
	}
	md, err := parseMetadata(t, base)
	if err != nil {
		return nil, err
	}
	var summary *table.Summary
	if s := md.CurrentSnapshot(); s != nil {
		summary = s.Summary
	}
	cov, err := icebergmeta.ParseCoverage(summary)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.FullName(), err)
	}
	l.covs.Add(base.Key, cov)
	return cov, nil
}

func newCoverageCache() (*lru.Cache[string, map[int32]icebergmeta.Coverage], error) {
	return lru.New[string, map[int32]icebergmeta.Coverage](coverageKeys)
}

func parseMetadata(t tables.Table, base Base) (table.Metadata, error) {
	md, err := table.ParseMetadataBytes(base.Content)
	if err != nil {
		return nil, fmt.Errorf("table %s: current metadata %s: %w", t.FullName(), base.Key, err)
	}
	return md, nil
}

// loadKey names a load's outcome: the same committed metadata, settings and tail
// spans make the same load.
func loadKey(t tables.Table, props tables.Props, ttl time.Duration, baseKey string, spans []span) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%s|%d|%d|%d", t.ID, baseKey, ttl.Milliseconds(), props.LiveMaxRecords, props.LiveMaxBytes)
	for _, s := range spans {
		fmt.Fprintf(&b, "|%d:%d-%d", s.p, s.start, s.end)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// candidate is a file (or a run of offsets without rows) that can be part of a tail.
type candidate struct {
	start, end int64
	file       icebergmeta.DataFile // Records 0: offsets without rows, no file to name
	indexed    bool                 // an indexed range (preferred: the writer commits it)
}

// tail is one partition's tail as built.
type tail struct {
	span
	files    []icebergmeta.DataFile // with rows, in offset order
	measured []string               // keys of files measured for this load
	keyOf    map[string]int         // measured key -> index in files, filled after reading rows
}

// build makes the load snapshot of spans.
func (l *Loader) build(ctx context.Context, t tables.Table, props tables.Props, ttl time.Duration, base Base, spans []span) (Result, error) {
	md, err := parseMetadata(t, base)
	if err != nil {
		return Result{}, err
	}
	cands, err := l.candidates(ctx, t, spans)
	if err != nil {
		return Result{}, err
	}
	tails := make([]*tail, len(spans))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxConcurrentMeasures)
	for i, s := range spans {
		tails[i] = &tail{span: s}
		g.Go(func() error { return l.chain(gctx, t, props, ttl, tails[i], cands[s.p]) })
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	if err := l.fillMeasured(ctx, t, tails); err != nil {
		return Result{}, err
	}

	var now time.Time
	if err := l.query(ctx, func(ctx context.Context) error {
		return l.o.DB.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
	}); err != nil {
		return Result{}, postgresErr(err, "load table %s", t.FullName())
	}
	expires := now.Add(ttl)
	summary := map[string]string{
		SummaryLive:      "true",
		SummaryExpiresAt: strconv.FormatInt(expires.UnixMilli(), 10),
	}
	if s := md.CurrentSnapshot(); s != nil {
		summary[SummaryBaseSnapshot] = strconv.FormatInt(s.SnapshotID, 10)
	}
	var add []icebergmeta.DataFile
	coverage := map[int32]icebergmeta.Coverage{}
	var records int64
	cut := 0
	for _, tl := range tails {
		add = append(add, tl.files...)
		for _, f := range tl.files {
			records += f.Records
		}
		committedEnd, covStart := tl.start, tl.start
		if tl.covered {
			committedEnd, covStart = tl.cov.End, tl.cov.Start
		}
		if tl.end > tl.start {
			coverage[tl.p] = icebergmeta.Coverage{Start: covStart, End: tl.end}
		}
		summary[PartitionKey(tl.p, SuffixCommittedEnd)] = strconv.FormatInt(committedEnd, 10)
		summary[PartitionKey(tl.p, SuffixTailStart)] = strconv.FormatInt(tl.start, 10)
		summary[PartitionKey(tl.p, SuffixTailEnd)] = strconv.FormatInt(tl.end, 10)
		summary[PartitionKey(tl.p, SuffixLastStable)] = strconv.FormatInt(tl.lso, 10)
		summary[PartitionKey(tl.p, SuffixTailFiles)] = strconv.Itoa(len(tl.files))
		if tl.cut != "" {
			summary[PartitionKey(tl.p, SuffixCut)] = tl.cut
			cut++
			l.n.cut.Add(1)
			l.log.InfoContext(ctx, "live load tail cut at its limit", "table", t.FullName(), "partition", tl.p,
				"tail_start", tl.start, "tail_end", tl.end, "last_stable_offset", tl.lso, "limit", tl.cut)
		}
	}
	summary[SummaryTailFiles] = strconv.Itoa(len(add))
	summary[SummaryTailRecords] = strconv.FormatInt(records, 10)
	summary[SummaryCutPartitions] = strconv.Itoa(cut)

	var schema *iceberg.Schema
	var schemas []*iceberg.Schema
	err = l.query(ctx, func(ctx context.Context) error {
		var err error
		schema, schemas, err = l.o.Codecs.Schemas(ctx, t)
		return err
	})
	if err != nil {
		return Result{}, postgresErr(err, "load table %s: read its schema", t.FullName())
	}
	meta := icebergmeta.Table{Namespace: t.Namespace, Name: t.Name, Schema: schema, Schemas: schemas, Properties: t.Properties}
	reader := icebergmeta.NewReader(icebergmeta.StoreFunc(func(ctx context.Context, key string) ([]byte, error) {
		var b []byte
		err := l.query(ctx, func(ctx context.Context) error {
			return l.o.DB.QueryRow(ctx, `SELECT content FROM mink_meta_files WHERE key = $1`, key).Scan(&b)
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("metadata file %s is missing", key)
		}
		return b, postgresErr(err, "read %s", key)
	}))
	res, err := icebergmeta.Live(ctx, reader, meta, icebergmeta.Base{Key: base.Key, Metadata: md},
		icebergmeta.LiveChange{Add: add, Coverage: coverage, Summary: summary, Now: now})
	if err != nil {
		if apierr.Classify(err) == apierr.Unavailable {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("load table %s: %w", t.FullName(), err)
	}
	if err := l.store(ctx, t, ttl, add, res.Files); err != nil {
		return Result{}, err
	}
	keys := make([]string, 0, len(add)+len(res.Files))
	for _, f := range add {
		keys = append(keys, f.Key)
	}
	for _, f := range res.Files {
		keys = append(keys, f.Key)
	}
	l.o.Files.Created(keys...)
	content := res.Files[len(res.Files)-1].Content // the metadata JSON, last
	l.log.DebugContext(ctx, "made a live load", "table", t.FullName(), "metadata", res.Key, "base", base.Key,
		"tail_files", len(add), "tail_records", records, "cut_partitions", cut)
	return Result{Key: res.Key, Content: content, Live: true}, nil
}

// candidates reads, for every span, the indexed ranges and unexpired tail files within
// it, by partition.
func (l *Loader) candidates(ctx context.Context, t tables.Table, spans []span) (map[int32][]candidate, error) {
	ps, los, his := make([]int32, len(spans)), make([]int64, len(spans)), make([]int64, len(spans))
	for i, s := range spans {
		ps[i], los[i], his[i] = s.p, s.start, s.end
	}
	out := map[int32][]candidate{}
	scan := func(indexed bool) func(pgx.CollectableRow) (candidate, error) {
		return func(r pgx.CollectableRow) (candidate, error) {
			c := candidate{indexed: indexed}
			f := &c.file
			err := r.Scan(&f.Key, &f.Partition, &f.Start, &f.End, &f.Records, &f.Size, &f.SHA256, &f.Settings, &f.Stats)
			c.start, c.end = f.Start, f.End
			if indexed {
				f.Key = dataKey(t, f.Partition, f.Start, f.End, f.SHA256)
			}
			return c, err
		}
	}
	for _, q := range []struct {
		indexed bool
		sql     string
	}{
		{true, `SELECT '', r.partition, r.start_offset, r.end_offset, r.record_count, r.file_size, r.sha256, r.settings, r.stats
			FROM mink_ranges r JOIN unnest($2::int[], $3::bigint[], $4::bigint[]) AS s(p, lo, hi)
			  ON r.partition = s.p AND r.start_offset >= s.lo AND r.end_offset <= s.hi
			WHERE r.table_id = $1`},
		{false, `SELECT f.key, f.partition, f.start_offset, f.end_offset, f.record_count, f.file_size, f.sha256, f.settings, f.stats
			FROM mink_data_files f JOIN unnest($2::int[], $3::bigint[], $4::bigint[]) AS s(p, lo, hi)
			  ON f.partition = s.p AND f.start_offset >= s.lo AND f.end_offset <= s.hi
			WHERE f.table_id = $1 AND f.expires_at > now()`},
	} {
		var cs []candidate
		err := l.query(ctx, func(ctx context.Context) error {
			rows, err := l.o.DB.Query(ctx, q.sql, t.ID, ps, los, his)
			if err != nil {
				return err
			}
			cs, err = pgx.CollectRows(rows, scan(q.indexed))
			return err
		})
		if err != nil {
			return nil, postgresErr(err, "load table %s: read its tail files", t.FullName())
		}
		for _, c := range cs {
			out[c.file.Partition] = append(out[c.file.Partition], c)
		}
	}
	return out, nil
}

// chain makes one partition's tail from its candidates: from the tail's start, the
// longest candidate that starts there (an indexed range on a tie), again and again;
// where none starts, a new file up to the next candidate (or the end), measured by its
// owner. A measure cut at the byte budget ends the tail there.
func (l *Loader) chain(ctx context.Context, t tables.Table, props tables.Props, ttl time.Duration, tl *tail, cands []candidate) error {
	pos, budget := tl.start, props.LiveMaxBytes
	for pos < tl.end {
		best := -1
		for i, c := range cands {
			if c.start != pos || c.end > tl.end {
				continue
			}
			if best < 0 || c.end > cands[best].end || c.end == cands[best].end && c.indexed && !cands[best].indexed {
				best = i
			}
		}
		if best >= 0 {
			if c := cands[best]; c.file.Records > 0 {
				tl.files = append(tl.files, c.file)
			}
			pos = cands[best].end
			continue
		}
		next := tl.end
		for _, c := range cands {
			if c.start > pos && c.start < next {
				next = c.start
			}
		}
		if budget <= 0 { // an earlier gap of this tail read the whole budget
			tl.end, tl.cut = pos, CutMaxBytes
			break
		}
		l.n.measures.Add(1)
		m, err := l.o.Files.Measure(ctx, files.MeasureRequest{Table: t, Partition: tl.p, Start: pos, End: next,
			MaxBytes: budget, TTL: ttl})
		if err != nil {
			return err
		}
		budget -= m.Read
		if m.End == pos && m.Cut == files.CutSchema {
			tl.end, tl.cut = pos, CutSchema
			break
		}
		if m.End <= pos || m.End > next {
			return fmt.Errorf("measure of %s partition %d [%d, %d) ended at %d", t.FullName(), tl.p, pos, next, m.End)
		}
		// Placeholder until its row is read: rows, size and statistics.
		tl.files = append(tl.files, icebergmeta.DataFile{Key: m.Key, Partition: tl.p, Start: pos, End: m.End})
		tl.measured = append(tl.measured, m.Key)
		pos = m.End
		if m.End < next {
			tl.end, tl.cut = m.End, CutMaxBytes
			if m.Cut == files.CutSchema {
				tl.cut = CutSchema
			}
			break
		}
	}
	return nil
}

// fillMeasured reads the rows of the files measured for this load and puts them in
// place; files without rows leave the tail.
func (l *Loader) fillMeasured(ctx context.Context, t tables.Table, tails []*tail) error {
	var keys []string
	for _, tl := range tails {
		keys = append(keys, tl.measured...)
	}
	if len(keys) == 0 {
		return nil
	}
	rows := map[string]icebergmeta.DataFile{}
	err := l.query(ctx, func(ctx context.Context) error {
		rs, err := l.o.DB.Query(ctx, `SELECT key, partition, start_offset, end_offset, record_count, file_size, sha256, settings, stats
			FROM mink_data_files WHERE key = ANY($1)`, keys)
		if err != nil {
			return err
		}
		fs, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (icebergmeta.DataFile, error) {
			var f icebergmeta.DataFile
			err := r.Scan(&f.Key, &f.Partition, &f.Start, &f.End, &f.Records, &f.Size, &f.SHA256, &f.Settings, &f.Stats)
			return f, err
		})
		for _, f := range fs {
			rows[f.Key] = f
		}
		return err
	})
	if err != nil {
		return postgresErr(err, "load table %s: read its new tail files", t.FullName())
	}
	for _, tl := range tails {
		if len(tl.measured) == 0 {
			continue
		}
		out := tl.files[:0]
		for _, f := range tl.files {
			if slices.Contains(tl.measured, f.Key) {
				r, ok := rows[f.Key]
				if !ok {
					// Collected in between (it expired): measure again at the next load.
					return apierr.New(apierr.Unavailable, "load table %s: tail file %s vanished while the load was made; load again", t.FullName(), f.Key)
				}
				f = r
			}
			if f.Records > 0 {
				out = append(out, f)
			}
		}
		tl.files = out
	}
	return nil
}

// store records the load: its tail files' rows expire no sooner than now + ttl (a row
// collected meanwhile is written again), and its metadata files expire then.
func (l *Loader) store(ctx context.Context, t tables.Table, ttl time.Duration, add []icebergmeta.DataFile, meta []icebergmeta.File) error {
	ms := float64(ttl.Milliseconds())
	err := l.query(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, l.o.DB, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			for _, f := range add {
				b.Queue(`INSERT INTO mink_data_files (table_id, key, partition, start_offset, end_offset, record_count,
						file_size, sha256, settings, stats, expires_at, live)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + $11::float8 * interval '1 millisecond', true)
					ON CONFLICT (key) DO UPDATE SET expires_at = GREATEST(mink_data_files.expires_at, EXCLUDED.expires_at)`,
					t.ID, f.Key, f.Partition, f.Start, f.End, f.Records, f.Size, f.SHA256, f.Settings, f.Stats, ms)
			}
			for _, f := range meta {
				b.Queue(`INSERT INTO mink_meta_files (table_id, key, content, expires_at)
					VALUES ($1, $2, $3, now() + $4::float8 * interval '1 millisecond')`, t.ID, f.Key, f.Content, ms)
			}
			return tx.SendBatch(ctx, b).Close()
		})
	})
	if err != nil {
		return postgresErr(err, "load table %s: record its load snapshot", t.FullName())
	}
	return nil
}

// query runs one Postgres exchange within the lookup timeout.
func (l *Loader) query(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.o.LookupTimeout)
	defer cancel()
	return fn(ctx)
}

// postgresErr names Postgres when it cannot be reached in time.
func postgresErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	switch apierr.Classify(err) {
	case apierr.Unavailable, apierr.DeadlineExceeded:
		return apierr.Wrap(apierr.Unavailable, err, "%s: postgres is unavailable", fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// dataKey is the key of the data file of an indexed range.
func dataKey(t tables.Table, p int32, start, end int64, sha string) string {
	return layout.DataKey(t.Namespace, t.Name, p, start, end, sha)
}
