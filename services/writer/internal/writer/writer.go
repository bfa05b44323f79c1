// Package writer is the writer role's work under one table's writer lease: it turns the
// table's indexed ranges into Iceberg snapshots and keeps them healthy.
//
// Every write is one transaction fenced by the writer lease that also compare-and-sets
// the table's commit pointer (mink_table_meta.version): a snapshot becomes current whole
// or not at all, and a writer that lost its lease changes nothing. All state lives in
// Postgres (the current snapshot's summary says what it covers), so a new holder resumes
// exactly where the last commit left off.
//
// Design notes: docs/design/writer.md.
package writer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/tablecodec"
)

// Writer runs the writer-lease workers of one writer node.
type Writer struct {
	db     pg.DB
	kafka  *kafkasrc.Client
	codecs *tablecodec.Codecs
	keys   *rangefile.KeyCache
	log    *slog.Logger
	m      metrics
	held   sync.Map // lease.Scope → *heldTable, for every table this node writes now

	// beforeStore, when set (tests), runs after a commit's files are built and before
	// they are stored, and before file problems are cleared ("clear-problems"): where a
	// lease can be lost mid-commit.
	beforeStore func(ctx context.Context, op string)
}

type metrics struct {
	commits, conflicts, filesAdded, filesRemoved, records, assembled, collected, repaired metric.Int64Counter
	commitTime                                                                            metric.Float64Histogram
}

// heldTable is one table while this node holds its writer lease: what the metrics say
// of it (a table handed to another node leaves this node's figures with its worker),
// and where its worker hears of file problems.
type heldTable struct {
	table    string
	id       int64
	lag      atomic.Int64  // -1 until the first commit round has measured it
	reported chan struct{} // buffered: a report while one is pending is the same news
}

// commitBuckets are the commit duration histogram's bounds in seconds (OpenTelemetry's
// defaults are for milliseconds): from a quick transaction to one that waited out a
// slow Postgres.
var commitBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30}

// Options are what a Writer needs.
type Options struct {
	DB    pg.DB
	Kafka *kafkasrc.Client
	// Codecs decode the records of files the writer builds (assembly, expiry, repairs);
	// nil: over DB, without a schema registry (rebuilds never need one).
	Codecs *tablecodec.Codecs
	// Keys are the decoded key hashes of upsert tables' partitions that commits compute
	// delete files from (nil: a cache of rangefile.DefaultKeyCacheBytes).
	Keys   *rangefile.KeyCache
	Meter  metric.Meter // nil: the global OpenTelemetry meter provider's
	Logger *slog.Logger // nil: slog.Default()
}

// New prepares a writer. Kafka is read only for log start offsets (expiry) and to
// build merged and tail files (assembly, expiry).
func New(o Options) (*Writer, error) {
	log, m := o.Logger, o.Meter
	if log == nil {
		log = slog.Default()
	}
	if m == nil {
		m = otel.Meter("github.com/minkhq/mink/writer")
	}
	if o.Codecs == nil {
		o.Codecs = tablecodec.New(o.DB, nil)
	}
	if o.Keys == nil {
		o.Keys = rangefile.NewKeyCache(0)
	}
	w := &Writer{db: o.DB, kafka: o.Kafka, codecs: o.Codecs, keys: o.Keys, log: log}
	var err error
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		err = errors.Join(err, e)
		return c
	}
	w.m.commits = counter("mink.writer.commits", "snapshots and metadata versions committed, by operation", "{commit}")
	w.m.conflicts = counter("mink.writer.commit_failures", "commits that did not become current (lease lost or version moved)", "{commit}")
	w.m.filesAdded = counter("mink.writer.files_added", "data files added to snapshots", "{file}")
	w.m.filesRemoved = counter("mink.writer.files_removed", "data files removed from snapshots (assembly, expiry, repairs)", "{file}")
	w.m.records = counter("mink.writer.records_committed", "rows newly committed by append snapshots", "{record}")
	w.m.assembled = counter("mink.writer.assembled_bytes", "bytes of merged files built by assembly", "By")
	w.m.repaired = counter("mink.writer.files_repaired", "data files the file servers reported (rebuild differs, offsets gone) and the others of their compacted partitions that did not rebuild as recorded, by outcome: rebuilt (replaced), emptied (dropped: no row left), expired (left to expiry), unreadable (named by older snapshots only, which were expired), intact or stale (report cleared)", "{file}")
	w.m.collected = counter("mink.writer.collected_rows", "rows deleted by collection, by kind (data_file, meta_file, range)", "{row}")
	var e1, e2 error
	w.m.commitTime, e1 = m.Float64Histogram("mink.writer.commit.duration",
		metric.WithDescription("Time of the fenced transaction that stores a commit and makes it current, by operation and result (ok, failed)."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(commitBuckets...))
	lag, e2 := m.Int64ObservableGauge("mink.writer.snapshot_lag",
		metric.WithDescription("Offsets indexed but not yet in the current snapshot, over all partitions of a table this node writes."),
		metric.WithUnit("{offset}"))
	if err = errors.Join(err, e1, e2, o.Keys.Observe(m, "mink.writer")); err != nil {
		return nil, err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		w.held.Range(func(_, v any) bool {
			t := v.(*heldTable)
			if n := t.lag.Load(); n >= 0 {
				o.ObserveInt64(lag, n, metric.WithAttributes(attribute.String("table", t.table)))
			}
			return true
		})
		return nil
	}, lag)
	return w, err
}

// Work is the lease.Worker of writer leases: it works on the table until ctx ends (the
// lease is lost or released), starting over from Postgres after failures such as
// Postgres or Kafka being unreachable.
func (w *Writer) Work(ctx context.Context, l lease.Lease) {
	log := w.log.With("table", l.TableName, "table_id", l.Table, "epoch", l.Epoch) // the node's logger carries "node"
	ht := &heldTable{table: l.TableName, id: l.Table, reported: make(chan struct{}, 1)}
	ht.lag.Store(-1)
	w.held.Store(l.Scope, ht)
	defer w.held.CompareAndDelete(l.Scope, ht)
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := w.run(ctx, l, log, ht.reported)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, lease.ErrLeaseLost):
			log.Info("writer lease lost; stopping", "error", err)
			return
		case errors.Is(err, errTableGone):
			log.Info("table is gone; stopping", "error", err)
			return
		}
		log.Warn("writer failed; starting over from the committed metadata", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// run works on the table until ctx ends or something fails.
func (w *Writer) run(ctx context.Context, l lease.Lease, log *slog.Logger, reported <-chan struct{}) error {
	tw, err := w.open(ctx, l, log, reported)
	if err != nil {
		return err
	}
	return tw.loop(ctx)
}

// WatchProblems tells the tables this node writes of file problems as the file servers
// report them (objects.WatchProblems), so that each repairs at once rather than at its
// next maintenance, until ctx ends. It listens again whenever the connection fails
// (Postgres restarted, say), and then tells every table, so that reports made meanwhile
// are not left for the maintenance either. A pkg/node actor.
func (w *Writer) WatchProblems(ctx context.Context) error {
	wait := minListenWait
	for {
		err := objects.WatchProblems(ctx, w.db, func(table int64) {
			wait = minListenWait // listening
			w.held.Range(func(_, v any) bool {
				if ht := v.(*heldTable); table == 0 || ht.id == table {
					select {
					case ht.reported <- struct{}{}:
					default:
					}
				}
				return true
			})
		})
		if ctx.Err() != nil {
			return nil
		}
		w.log.Warn("cannot listen for file problems; listening again soon (repairs wait for maintenance meanwhile)", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, maxListenWait)
	}
}

// How soon WatchProblems listens again after its connection failed: at first, and at
// most (the wait doubles while Postgres stays away).
const (
	minListenWait = 200 * time.Millisecond
	maxListenWait = 5 * time.Second
)
