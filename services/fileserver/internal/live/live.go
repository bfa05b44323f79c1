// Package live makes live table loads: a load returns the committed metadata plus, per
// partition, the records Kafka holds beyond it as the tail files of a load snapshot, so a
// query sees what was produced a moment ago, not what the writer last committed. Loads
// share answers (stream.go), tails are built from uncommitted ranges, earlier tail files
// and newly measured files (build.go), and an upsert table's load replaces the position
// deletes its tail supersedes (deletes.go). The design is in docs/live-loads.md.
package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/flight"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
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

	contents *flight.Group[Result] // load snapshots being made, by content key

	mu      sync.Mutex
	closed  bool
	recent  map[string]recent  // by content key
	streams map[string]*stream // by stream key
	builds  sync.WaitGroup
	covs    *lru.Cache[string, map[int32]icebergmeta.Coverage] // by metadata key

	loads    metric.Int64Counter
	duration metric.Float64Histogram
	n        struct{ loads, reused, found, committed, disabled, failed, measures, cut, ahead atomic.Int64 }
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
	l := &Loader{o: o, log: o.Logger, base: base, stop: stop, contents: flight.New[Result](base), recent: map[string]recent{},
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
	l.contents.Close()
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
	if t.PartitionSpec != nil {
		// A spec Mink does not index by (stored by a newer node): nothing is indexed,
		// and a tail by _kafka_partition would not be what the table says.
		var schema *iceberg.Schema
		err := l.query(ctx, func(ctx context.Context) error {
			var err error
			schema, _, err = l.o.Codecs.Schemas(ctx, t)
			return err
		})
		if err != nil {
			l.count(ctx, "error", &l.n.failed)
			return Result{}, apierr.Postgres(err, "load table %s: read its schema", t.FullName())
		}
		if t.CheckPartitioning(schema) != nil {
			l.count(ctx, "disabled", &l.n.disabled)
			return committed, nil
		}
	}
	res, err := l.load(ctx, t, props, base)
	if err != nil {
		l.count(ctx, "error", &l.n.failed)
		return Result{}, err
	}
	return res, nil
}

// query runs one Postgres exchange within the lookup timeout.
func (l *Loader) query(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.o.LookupTimeout)
	defer cancel()
	return fn(ctx)
}
