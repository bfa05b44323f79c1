// Package indexer is the indexer role's work under one partition lease: consume the
// partition from where its index ends, build each range's Parquet file once to measure it,
// and store the range under the lease (a fenced write). Losing the lease ends the work at
// once; the next holder resumes from the index, so no offset is indexed twice or skipped.
package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tables"
)

// Indexer runs the partition workers of one indexer node.
type Indexer struct {
	DB       lease.DB
	Kafka    *kafkasrc.Client
	Log      *slog.Logger
	Settings parquetbuild.Settings // how range files are built; recorded with each range
	// GrowthCheck is how often the holder of a table's partition 0 asks Kafka whether the
	// topic has gained partitions.
	GrowthCheck time.Duration

	metrics metrics
}

type metrics struct {
	records, bytes, ranges, decodeErrors metric.Int64Counter
	lag                                  metric.Int64Gauge
}

// New prepares an indexer that reports its metrics to m.
func New(db lease.DB, kc *kafkasrc.Client, m metric.Meter, log *slog.Logger) (*Indexer, error) {
	ix := &Indexer{DB: db, Kafka: kc, Log: log, Settings: parquetbuild.DefaultSettings(), GrowthCheck: 30 * time.Second}
	var err error
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		err = errors.Join(err, e)
		return c
	}
	ix.metrics.records = counter("mink.indexer.records", "Kafka records indexed", "{record}")
	ix.metrics.bytes = counter("mink.indexer.bytes", "bytes of Kafka record keys and values indexed", "By")
	ix.metrics.ranges = counter("mink.indexer.ranges", "ranges cut and stored", "{range}")
	ix.metrics.decodeErrors = counter("mink.indexer.decode_errors", "records that did not fit the table schema (stored with _mink_error)", "{record}")
	g, e := m.Int64Gauge("mink.indexer.lag", metric.WithDescription("records between the indexed position and the last stable offset"), metric.WithUnit("{record}"))
	ix.metrics.lag = g
	return ix, errors.Join(err, e)
}

// Work is the lease.Worker of partition leases: it indexes until ctx ends, retrying after
// failures (Kafka or Postgres unreachable) from the index, which is always consistent.
func (ix *Indexer) Work(ctx context.Context, l lease.Lease) {
	log := ix.Log.With("table", l.TableName, "partition", l.Partition, "epoch", l.Epoch)
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := ix.index(ctx, l, log)
		if ctx.Err() != nil || errors.Is(err, lease.ErrLeaseLost) {
			return
		}
		log.Warn("indexing failed; resuming from the index", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// cut is the range being built: [start, next) with its records measured so far.
type cut struct {
	start, next int64
	opened      time.Time // when the range first had something in it
	bytes       int64
	b           *parquetbuild.Builder
}

func (ix *Indexer) index(ctx context.Context, l lease.Lease, log *slog.Logger) error {
	tbl, err := tables.GetByID(ctx, ix.DB, l.Table)
	if err != nil {
		return err
	}
	props := tbl.Props()
	st, err := ranges.State(ctx, ix.DB, l.Table, l.Partition)
	if err != nil {
		return err
	}
	offs, err := ix.Kafka.Offsets(ctx, tbl.Topic)
	if err != nil {
		return err
	}
	if int(l.Partition) >= len(offs) {
		return fmt.Errorf("partition %d not in topic %s (%d partitions)", l.Partition, tbl.Topic, len(offs))
	}
	logStart := offs[l.Partition].LogStart
	start := st.IndexedEnd
	if !st.Indexed {
		// A new table starts at the earliest offset Kafka still has.
		start = logStart
	}
	if start < logStart {
		// Kafka deleted records before they were indexed (retention, DeleteRecords): they
		// can never be rows. An empty range keeps the index contiguous and says so.
		log.Warn("offsets deleted by Kafka before they were indexed", "from", start, "to", logStart)
		b, err := parquetbuild.NewBuilder(io.Discard, tbl.Spec, ix.Settings)
		if err != nil {
			return err
		}
		gone := &cut{start: start, next: logStart, b: b}
		if err := ix.store(ctx, l, gone, metric.WithAttributes(), log); err != nil {
			return err
		}
		start = logStart
	}
	var nextGrowthCheck time.Time
	checkGrowth := func() {
		if l.Partition != 0 || time.Now().Before(nextGrowthCheck) {
			return
		}
		// The holder of partition 0 keeps the table's partition count current.
		nextGrowthCheck = time.Now().Add(ix.GrowthCheck)
		n, err := ix.Kafka.Partitions(ctx, tbl.Topic)
		if err != nil || n <= tbl.Partitions {
			return
		}
		if grew, err := tables.Grow(ctx, ix.DB, tbl.ID, n); err != nil {
			log.Warn("could not record new partitions", "error", err, "partitions", n)
		} else if grew {
			log.Info("topic grew: new partition leases", "partitions", n)
			tbl.Partitions = n
		}
	}
	checkGrowth()
	log.Info("indexing", "from", start)
	tail := kafkasrc.NewTailer(ix.Kafka, tbl.Topic, l.Partition, start)
	defer tail.Close()
	attrs := metric.WithAttributes(attribute.String("table", tbl.FullName()), attribute.Int("partition", int(l.Partition)))

	var c *cut
	open := func(at int64) error {
		b, err := parquetbuild.NewBuilder(io.Discard, tbl.Spec, ix.Settings)
		if err != nil {
			return err
		}
		c = &cut{start: at, next: at, b: b}
		return nil
	}
	if err := open(start); err != nil {
		return err
	}
	for {
		// Poll until the open range is due, or the next growth check (partition 0).
		var deadline time.Time
		if !c.opened.IsZero() {
			deadline = c.opened.Add(props.RangeMaxAge)
		}
		if l.Partition == 0 && (deadline.IsZero() || nextGrowthCheck.Before(deadline)) {
			deadline = nextGrowthCheck
		}
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if !deadline.IsZero() {
			pollCtx, cancel = context.WithDeadline(ctx, deadline)
		}
		recs, next, err := tail.Poll(pollCtx)
		cancel()
		checkGrowth()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		for _, r := range recs {
			if err := c.b.Add(r); err != nil {
				return fmt.Errorf("build range at offset %d: %w", r.Offset, err)
			}
			c.bytes += recordBytes(r)
		}
		if len(recs) > 0 {
			ix.metrics.records.Add(ctx, int64(len(recs)), attrs)
		}
		if next > c.next {
			if c.opened.IsZero() {
				c.opened = time.Now()
			}
			c.next = next
		}
		if lso := tail.LastStable(); lso >= 0 {
			ix.metrics.lag.Record(ctx, max(0, lso-c.next), attrs)
		}
		if c.next > c.start && (c.bytes >= props.RangeTargetBytes || time.Since(c.opened) >= props.RangeMaxAge) {
			if err := ix.store(ctx, l, c, attrs, log); err != nil {
				return err
			}
			if err := open(c.next); err != nil {
				return err
			}
		}
	}
}

// store finishes the range's measuring build and stores it under the lease.
func (ix *Indexer) store(ctx context.Context, l lease.Lease, c *cut, attrs metric.MeasurementOption, log *slog.Logger) error {
	fs, err := c.b.Close()
	if err != nil {
		return fmt.Errorf("build range [%d, %d): %w", c.start, c.next, err)
	}
	settings, err := json.Marshal(ix.Settings)
	if err != nil {
		return err
	}
	stats, err := json.Marshal(fs.Columns)
	if err != nil {
		return err
	}
	r := ranges.Range{Table: l.Table, Partition: l.Partition, Start: c.start, End: c.next,
		Records: fs.RowCount, DecodeErrors: fs.DecodeErrors, Size: fs.Size, SHA256: fs.SHA256,
		Settings: settings, Stats: stats}
	if err := ranges.Append(ctx, ix.DB, l, r); err != nil {
		return err
	}
	ix.metrics.ranges.Add(ctx, 1, attrs)
	ix.metrics.bytes.Add(ctx, c.bytes, attrs)
	if fs.DecodeErrors > 0 {
		ix.metrics.decodeErrors.Add(ctx, fs.DecodeErrors, attrs)
	}
	log.Debug("range stored", "start", c.start, "end", c.next, "records", fs.RowCount, "size", fs.Size)
	return nil
}

func recordBytes(r record.Record) int64 {
	n := int64(len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}
