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
//     forwarded like a read) and cached there, one per schema point it spans. Its key is
//     layout.DataKey, built with parquetbuild.DefaultSettings and the decoding in force
//     at its start (pkg/schemapoints), as the indexer builds, so a later commit of the
//     identical range names the same file and the writer's insert clears its expiry.
//
// The load's metadata files (metadata JSON, manifest list, one manifest) go to
// mink_meta_files under metadata/live/ (icebergmeta.LiveDir), so every file server
// serves them, with expires_at = now + TTL; the tail files' rows get the same expiry (or
// keep a later one). The TTL is mink.live.ttl (15m), capped by the snapshot retention
// age, since the writer keeps a replaced snapshot for that long (icebergmeta.RetentionOf)
// and with it every file the load names. The writer's collection deletes both kinds of
// rows once expired and unnamed.
//
// Loads read rather than write (pkg/objects keeps the rows):
//
//   - A load snapshot has a content key: the table, the committed metadata, the
//     settings and the tail spans. Loads of the same tail share it: concurrent ones
//     one build in this process, later ones (through any file server, for TTL/4 and at
//     most a minute after it was made) the row recorded in Postgres. A burst of
//     identical loads writes nothing after the first.
//   - Loads of the same committed metadata form a stream. A load answers with the
//     stream's newest snapshot (this node's, else one any node recorded) whose Kafka
//     offsets were read less than mink.live.reuse-ms before it arrived, or waits for a
//     refresh begun within that bound; otherwise it reads Kafka's offsets itself. A
//     load that finds the newest in the last quarter of the bound
//     (Props.LiveRefreshAhead) begins the next refresh without waiting for it, so that
//     while loads keep coming they find a snapshot made rather than wait for one. So a
//     moving tail costs at most about one load snapshot per 3/4 of the bound
//     (Props.LiveSnapshotSpacing) and one per commit however many clients load, and a load that arrives at T has every record Kafka acknowledged
//     before T - bound. The bound is compared on one clock only: this node's, or the
//     database's for the snapshots of other nodes.
//
// An upsert table's tail files keep the latest record per key and record the keys they
// touch; its load snapshot also replaces the position delete files of the data files
// whose rows the tail supersedes (deletes), rebuildable from Postgres by any file server.
//
// With mink.live-load=false a load returns the committed metadata and never reads Kafka.
// With Kafka unreachable a live load answers 503 naming Kafka.
package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"golang.org/x/sync/errgroup"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/rangefile"
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
	DB     pg.DB
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
	// Keys are the decoded key hashes of upsert tables' partitions (nil: a cache of
	// rangefile.DefaultKeyCacheBytes of its own): a load reads from Postgres only the
	// keys of ranges it has not seen.
	Keys   *rangefile.KeyCache
	Meter  metric.Meter // nil: no metrics
	Logger *slog.Logger
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
	Reused    int64 // loads answered with another load's snapshot: the same tail, or one read within mink.live.reuse-ms
	Found     int64 // snapshots found in Postgres (recorded by any file server) rather than made
	Committed int64 // loads with no tail: the committed metadata
	Disabled  int64 // loads of tables with live loads off
	Failed    int64
	Measures  int64 // tail spans measured (here or by their owners)
	Cut       int64 // partition tails cut at a limit
	Ahead     int64 // refreshes begun by a load before the newest load snapshot expired
}

// loadBuckets are the load duration histogram's bounds in seconds (OpenTelemetry's
// defaults are for milliseconds): from a reused snapshot (about a millisecond) to a
// first load that builds a large tail from Kafka.
var loadBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Loader makes live loads. Close it after the catalog has stopped.
type Loader struct {
	o    Options
	log  *slog.Logger
	base context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	closed  bool
	flights map[string]*flight // by content key
	recent  map[string]recent  // by content key
	streams map[string]*stream // by stream key
	builds  sync.WaitGroup
	covs    *lru.Cache[string, map[int32]icebergmeta.Coverage] // by metadata key

	loads    metric.Int64Counter
	duration metric.Float64Histogram
	n        struct{ loads, reused, found, committed, disabled, failed, measures, cut, ahead atomic.Int64 }
}

// flight is one read of what loads answer, which concurrent loads share.
type flight struct {
	started time.Time // before it read anything
	ahead   bool      // begun before the stream's newest expired: no load waits for it
	done    chan struct{}
	res     Result
	err     error
}

// recent is a load snapshot this node made or found, by content key.
type recent struct {
	res Result
	at  time.Time
}

// stream is the loads of one table, committed metadata and settings: the newest answer
// and the refresh under way.
type stream struct {
	newest *fresh
	flight *flight
}

// fresh is an answer and when its Kafka offsets were read, at the earliest.
type fresh struct {
	res    Result
	readAt time.Time
}

// streamIdle is how long a stream nobody loads is remembered.
const streamIdle = time.Minute

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
	if o.Keys == nil {
		o.Keys = rangefile.NewKeyCache(0)
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
	l := &Loader{o: o, log: o.Logger, base: base, stop: stop, flights: map[string]*flight{}, recent: map[string]recent{},
		streams: map[string]*stream{}, covs: covs}
	var err1, err2 error
	l.loads, err1 = o.Meter.Int64Counter("mink.fileserver.live.loads",
		metric.WithDescription("Table loads, by result: live (a load snapshot made), reused (another load's: the same tail, or read within mink.live.reuse-ms), committed (no tail), disabled (mink.live-load=false), error."),
		metric.WithUnit("{load}"))
	l.duration, err2 = o.Meter.Float64Histogram("mink.fileserver.live.load.duration",
		metric.WithDescription("Time to make a load snapshot, tail builds included."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(loadBuckets...))
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
	return Stats{Loads: l.n.loads.Load(), Reused: l.n.reused.Load(), Found: l.n.found.Load(), Committed: l.n.committed.Load(),
		Disabled: l.n.disabled.Load(), Failed: l.n.failed.Load(), Measures: l.n.measures.Load(), Cut: l.n.cut.Load(), Ahead: l.n.ahead.Load()}
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
	arrived := time.Now()
	cov, err := l.coverage(t, base)
	if err != nil {
		return Result{}, err
	}
	ttl := icebergmeta.LiveTTLOf(t.Properties)
	sk := streamKey(t, props, ttl, base.Key)
	bound := props.LiveReuse

	l.mu.Lock()
	st := l.streams[sk]
	if st == nil {
		st = &stream{}
		l.streams[sk] = st
	}
	if st.newest != nil && arrived.Sub(st.newest.readAt) < bound {
		res := st.newest.res
		if st.flight == nil && !l.closed && arrived.Sub(st.newest.readAt) >= bound-props.LiveRefreshAhead() {
			// Refresh ahead: the newest expires soon and loads keep coming, so the next
			// one is read now, while this load and the next ones answer with the newest;
			// a load after the expiry finds it made (or joins it), rather than every load
			// of that moment waiting for a build.
			l.n.ahead.Add(1)
			l.startRefresh(t, props, base, cov, ttl, sk, st, true)
		}
		l.mu.Unlock()
		return l.answer(ctx, res, true), nil
	}
	f := st.flight
	joined := f != nil && arrived.Sub(f.started) < bound
	if !joined {
		if l.closed {
			l.mu.Unlock()
			return Result{}, apierr.New(apierr.Unavailable, "file server is stopping")
		}
		// A refresh older than the bound may end with offsets read too early for this
		// load: start one of its own beside it.
		f = l.startRefresh(t, props, base, cov, ttl, sk, st, false)
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
	return l.answer(ctx, f.res, joined || f.res.Reused), nil
}

// answer counts a load's result and marks it reused when it is another load's.
func (l *Loader) answer(ctx context.Context, res Result, reused bool) Result {
	switch {
	case !res.Live:
		l.count(ctx, "committed", &l.n.committed)
	case reused:
		l.count(ctx, "reused", &l.n.reused)
		res.Reused = true
	default:
		l.count(ctx, "live", &l.n.loads)
	}
	return res
}

// startRefresh begins stream st's next read (l.mu held) and returns its flight.
func (l *Loader) startRefresh(t tables.Table, props tables.Props, base Base, cov map[int32]icebergmeta.Coverage, ttl time.Duration, sk string, st *stream, ahead bool) *flight {
	f := &flight{started: time.Now(), ahead: ahead, done: make(chan struct{})}
	st.flight = f
	l.builds.Add(1)
	go l.refresh(t, props, base, cov, ttl, sk, st, f)
	return f
}

// refresh reads what a load of stream sk answers now, into f: the newest load snapshot
// another file server recorded within the reuse bound, or one for the tail Kafka holds
// now (shared by content key, built when new). It runs apart from the loads waiting for
// it, bounded by LoadTimeout: one that gives up leaves it to the next.
func (l *Loader) refresh(t tables.Table, props tables.Props, base Base, cov map[int32]icebergmeta.Coverage, ttl time.Duration, sk string, st *stream, f *flight) {
	defer l.builds.Done()
	ctx, cancel := context.WithTimeout(l.base, l.o.LoadTimeout)
	defer cancel()
	res, readAt, err := l.read(ctx, t, props, base, cov, ttl, sk, f.started, f.ahead)
	if f.ahead && err == nil && res.Live && !res.Reused {
		l.n.loads.Add(1) // no load answers as its maker: the ones after it reuse it
	}
	l.mu.Lock()
	if st.flight == f {
		st.flight = nil
	}
	if err == nil && (st.newest == nil || readAt.After(st.newest.readAt)) {
		st.newest = &fresh{res: res, readAt: readAt}
	}
	l.prune()
	l.mu.Unlock()
	f.res, f.err = res, err
	close(f.done)
}

// prune forgets streams nobody loaded for a while (l.mu held).
func (l *Loader) prune() {
	for k, s := range l.streams {
		if s.flight == nil && (s.newest == nil || time.Since(s.newest.readAt) > streamIdle) {
			delete(l.streams, k)
		}
	}
}

// read is refresh's work. readAt is when (on this node's clock) the answer's Kafka
// offsets were read at the earliest. A refresh ahead takes another node's snapshot only
// if it is younger than the one it is to replace.
func (l *Loader) read(ctx context.Context, t tables.Table, props tables.Props, base Base, cov map[int32]icebergmeta.Coverage, ttl time.Duration, sk string, started time.Time, ahead bool) (Result, time.Time, error) {
	var dbReadAt *time.Time
	if bound := props.LiveReuse; bound > 0 {
		if ahead {
			bound = props.LiveSnapshotSpacing()
		}
		var s objects.StoredLoad
		var age time.Duration
		var now time.Time
		var found bool
		err := l.query(ctx, func(ctx context.Context) (err error) {
			s, age, now, found, err = objects.NewestLoad(ctx, l.o.DB, t.ID, sk, bound)
			return err
		})
		if err != nil {
			return Result{}, time.Time{}, apierr.Postgres(err, "load table %s: look for a recent load", t.FullName())
		}
		if found {
			l.n.found.Add(1)
			// Its age by the database's clock, from before this node asked.
			return Result{Key: s.Key, Content: s.Content, Live: true, Reused: true}, started.Add(-age), nil
		}
		dbReadAt = &now // Kafka's offsets are read after it
	}
	kctx, kcancel := context.WithTimeout(ctx, l.o.KafkaTimeout)
	id, offs, err := l.o.Kafka.TopicOffsets(kctx, t.Topic)
	kcancel()
	switch {
	case err == nil:
		if err := topicChanged(t, id, offs, cov); err != nil {
			return Result{}, time.Time{}, err
		}
	case errors.Is(err, kafkasrc.ErrUnknownTopic):
		return Result{}, time.Time{}, apierr.Wrap(apierr.FailedPrecondition, err,
			"load table %s: its topic %q does not exist in Kafka: it was deleted, and with it the table's rows", t.FullName(), t.Topic)
	}
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, time.Time{}, apierr.Wrap(apierr.Unavailable, ctx.Err(), "load table %s: kafka is unavailable: no answer in time", t.FullName())
		}
		return Result{}, time.Time{}, apierr.Wrap(apierr.Unavailable, err,
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
		return Result{Key: base.Key, Content: base.Content}, started, nil
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.p - b.p) })
	res, err := l.byContent(ctx, t, props, ttl, base, sk, spans, dbReadAt)
	return res, started, err
}

// topicChanged is the error of a load of t whose topic is gone, or is not the one t
// indexed up to its committed coverage (deleted and created again, or truncated below
// it): the committed rows are no longer in Kafka, so they are not served as the table's
// (the indexer records it with the table soon; README, "When a topic is deleted or
// created again").
func topicChanged(t tables.Table, id kafkasrc.TopicID, offs []kafkasrc.PartitionOffsets, cov map[int32]icebergmeta.Coverage) error {
	high := make(map[int32]int64, len(offs))
	for _, o := range offs {
		high[o.Partition] = o.HighWatermark
	}
	covered := make(map[int32]int64, len(cov))
	for p, c := range cov {
		covered[p] = c.End
	}
	if why := tables.TopicChanged(t, id.String(), high, covered); why != "" {
		return tables.TopicLostError(t, why)
	}
	return nil
}

// byContent returns the load snapshot of spans: one made by this node within the reuse
// window, one recorded in Postgres (by any node) that stays readable long enough, or a
// new one. Concurrent calls for the same spans share one.
func (l *Loader) byContent(ctx context.Context, t tables.Table, props tables.Props, ttl time.Duration, base Base, sk string, spans []span, readAt *time.Time) (Result, error) {
	key := loadKey(sk, spans)
	window := reuseWindow(ttl)
	l.mu.Lock()
	if r, ok := l.recent[key]; ok && time.Since(r.at) < window {
		l.mu.Unlock()
		res := r.res
		res.Reused = true
		return res, nil
	}
	f, joined := l.flights[key]
	if !joined {
		f = &flight{started: time.Now(), done: make(chan struct{})}
		l.flights[key] = f
	}
	l.mu.Unlock()
	if joined {
		select {
		case <-f.done:
		case <-ctx.Done():
			return Result{}, apierr.Wrap(apierr.Unavailable, ctx.Err(), "load table %s: its tail is still being built", t.FullName())
		}
		res := f.res
		res.Reused = true
		return res, f.err
	}
	res, err := l.findOrBuild(ctx, t, props, ttl, base, sk, key, spans, readAt)
	l.mu.Lock()
	delete(l.flights, key)
	if err == nil {
		for k, r := range l.recent {
			if time.Since(r.at) >= window {
				delete(l.recent, k)
			}
		}
		l.recent[key] = recent{res: res, at: time.Now()}
	}
	l.mu.Unlock()
	f.res, f.err = res, err
	close(f.done)
	return res, err
}

// findOrBuild reads the load snapshot of key from Postgres, or builds and records it.
// Losing the race to record it to another node, it answers with the other's.
func (l *Loader) findOrBuild(ctx context.Context, t tables.Table, props tables.Props, ttl time.Duration, base Base, sk, key string, spans []span, readAt *time.Time) (Result, error) {
	find := func() (Result, bool, error) {
		var s objects.StoredLoad
		var found bool
		err := l.query(ctx, func(ctx context.Context) (err error) {
			s, found, err = objects.LoadByContent(ctx, l.o.DB, t.ID, key, ttl-reuseWindow(ttl))
			return err
		})
		if err != nil {
			return Result{}, false, apierr.Postgres(err, "load table %s: look for a load of the same tail", t.FullName())
		}
		return Result{Key: s.Key, Content: s.Content, Live: true, Reused: true}, found, nil
	}
	if res, found, err := find(); err != nil || found {
		if found {
			l.n.found.Add(1)
		}
		return res, err
	}
	began := time.Now()
	res, err := l.build(ctx, t, props, ttl, base, spans, objects.Load{Table: t.ID, LoadKey: key, Stream: sk, ReadAt: readAt,
		TTL: ttl, ReuseFrom: ttl - reuseWindow(ttl)})
	if errors.Is(err, objects.ErrLoadExists) {
		res, found, err := find()
		if err == nil && !found {
			err = apierr.New(apierr.Unavailable, "load table %s: another file server recorded this load and it is gone; load again", t.FullName())
		}
		if found {
			l.n.found.Add(1)
		}
		return res, err
	}
	if err == nil {
		l.duration.Record(ctx, time.Since(began).Seconds())
	}
	return res, err
}

// reuseWindow is how long after it was made a load snapshot stands for later loads of
// the same tail: a load reused then is still readable for at least ttl - window.
func reuseWindow(ttl time.Duration) time.Duration { return min(ttl/4, time.Minute) }

// streamKey names the loads one load snapshot may stand for within the reuse bound: the
// same table, committed metadata and settings.
func streamKey(t tables.Table, props tables.Props, ttl time.Duration, baseKey string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d|%s|%d|%d|%d", t.ID, baseKey, ttl.Milliseconds(), props.LiveMaxRecords, props.LiveMaxBytes))
	return hex.EncodeToString(sum[:])
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

// loadKey is a load snapshot's content key: its stream (table, committed metadata,
// settings) and its tail spans make the same load.
func loadKey(stream string, spans []span) string {
	b := []byte(stream)
	for _, s := range spans {
		b = fmt.Appendf(b, "|%d:%d-%d", s.p, s.start, s.end)
	}
	sum := sha256.Sum256(b)
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
	// keyed are the keys of the tail's files that are not indexed ranges, rows or not,
	// in offset order: an upsert table's deletes read their recorded keys.
	keyed []string
}

// build makes the load snapshot of spans and records it as rec (its files filled in):
// objects.ErrLoadExists when another node recorded the same first.
func (l *Loader) build(ctx context.Context, t tables.Table, props tables.Props, ttl time.Duration, base Base, spans []span, rec objects.Load) (Result, error) {
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
	reader := icebergmeta.NewReader(icebergmeta.StoreFunc(func(ctx context.Context, key string) ([]byte, error) {
		var b []byte
		err := l.query(ctx, func(ctx context.Context) (err error) {
			b, err = objects.MetaFile(ctx, l.o.DB, t.ID, key)
			return err
		})
		if errors.Is(err, icebergmeta.ErrNoMetaFile) {
			return nil, fmt.Errorf("metadata file %s is missing", key)
		}
		return b, apierr.Postgres(err, "read %s", key)
	}))
	var dels []objects.LoadDelete
	var replaced []icebergmeta.DataFile
	if t.Upsert() {
		if dels, replaced, err = l.deletes(ctx, t, md, reader, tails); err != nil {
			return Result{}, err
		}
	}

	var now time.Time
	if err := l.query(ctx, func(ctx context.Context) (err error) {
		now, err = pg.Now(ctx, l.o.DB)
		return err
	}); err != nil {
		return Result{}, apierr.Postgres(err, "load table %s", t.FullName())
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
		return Result{}, apierr.Postgres(err, "load table %s: read its schema", t.FullName())
	}
	meta := icebergmeta.Table{Namespace: t.Namespace, Name: t.Name, Schema: schema, Schemas: schemas, Properties: t.Properties}
	addDeletes := make([]icebergmeta.DataFile, len(dels))
	for i, d := range dels {
		addDeletes[i] = d.File
	}
	res, err := icebergmeta.Live(ctx, reader, meta, icebergmeta.Base{Key: base.Key, Metadata: md},
		icebergmeta.LiveChange{Add: add, AddDeletes: addDeletes, RemoveDeletes: replaced, Coverage: coverage, Summary: summary, Now: now})
	if err != nil {
		if apierr.Classify(err) == apierr.Unavailable {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("load table %s: %w", t.FullName(), err)
	}
	rec.Tail, rec.Deletes, rec.Meta = add, dels, res.Files
	err = l.query(ctx, func(ctx context.Context) error { return objects.SaveLoad(ctx, l.o.DB, rec) })
	if errors.Is(err, objects.ErrLoadExists) {
		return Result{}, err
	}
	if errors.Is(err, objects.ErrTailGone) {
		return Result{}, apierr.Wrap(apierr.Unavailable, err, "load table %s: a tail file expired while the load was made; load again", t.FullName())
	}
	if err != nil {
		return Result{}, apierr.Postgres(err, "load table %s: record its load snapshot", t.FullName())
	}
	keys := make([]string, 0, len(add)+len(dels)+len(res.Files))
	for _, f := range add {
		keys = append(keys, f.Key)
	}
	for _, d := range dels {
		keys = append(keys, d.File.Key)
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

// candidates reads, for every span, the indexed ranges and unexpired tail files within
// it, by partition.
func (l *Loader) candidates(ctx context.Context, t tables.Table, spans []span) (map[int32][]candidate, error) {
	ss := make([]objects.Span, len(spans))
	for i, s := range spans {
		ss[i] = objects.Span{Partition: s.p, Start: s.start, End: s.end}
	}
	var indexed, tails []icebergmeta.DataFile
	err := l.query(ctx, func(ctx context.Context) (err error) {
		indexed, tails, err = objects.LoadCandidates(ctx, l.o.DB, t.ID, ss, t.Upsert())
		return err
	})
	if err != nil {
		return nil, apierr.Postgres(err, "load table %s: read its tail files", t.FullName())
	}
	out := map[int32][]candidate{}
	for _, f := range indexed {
		f.Key = dataKey(t, f.Partition, f.Start, f.End, f.SHA256)
		out[f.Partition] = append(out[f.Partition], candidate{start: f.Start, end: f.End, file: f, indexed: true})
	}
	for _, f := range tails {
		out[f.Partition] = append(out[f.Partition], candidate{start: f.Start, end: f.End, file: f})
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
			if c := cands[best]; !c.indexed {
				tl.keyed = append(tl.keyed, c.file.Key)
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
		tl.keyed = append(tl.keyed, m.Key)
		pos = m.End
		if m.End < next && m.Cut == files.CutPoint {
			continue // a schema change takes effect there: the rest is another file
		}
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
	var rows map[string]icebergmeta.DataFile
	err := l.query(ctx, func(ctx context.Context) (err error) {
		rows, err = objects.DataFiles(ctx, l.o.DB, keys)
		return err
	})
	if err != nil {
		return apierr.Postgres(err, "load table %s: read its new tail files", t.FullName())
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

// query runs one Postgres exchange within the lookup timeout.
func (l *Loader) query(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.o.LookupTimeout)
	defer cancel()
	return fn(ctx)
}

// dataKey is the key of the data file of an indexed range.
func dataKey(t tables.Table, p int32, start, end int64, sha string) string {
	return layout.DataKey(t.Namespace, t.Name, p, start, end, sha)
}
