// Package indexer is the indexer role's work under one partition lease: consume the
// partition from where its index ends, build each range's Parquet file once to measure it,
// and store the range under the lease (a fenced write). Losing the lease ends the work at
// once; the next holder resumes from the index, so no offset is indexed twice or skipped.
// A range decodes with the schema point in force at its start and ends at the next one
// (pkg/schemapoints); one that a point added meanwhile falls inside is indexed again.
package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/schemapoints"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/pkg/upsert"
)

// Indexer runs the partition workers of one indexer node.
type Indexer struct {
	DB     pg.DB
	Kafka  *kafkasrc.Client
	Codecs *tablecodec.Codecs
	Log    *slog.Logger
	// Settings are how range files are built (the schema version and registry ids are
	// set per range); recorded with each range.
	Settings parquetbuild.Settings
	// GrowthCheck is how often the holder of a table's partition 0 asks Kafka whether the
	// topic has gained partitions.
	GrowthCheck time.Duration

	// Pages hold the finished pages of every open range's build, within the node's
	// --build-memory; the rest wait in temporary files.
	Pages *parquetbuild.Pages
	// UpsertHold bounds the bytes of latest records an open upsert range holds (past it,
	// each key's latest offset; the range is read from Kafka again when stored), and
	// UpsertMaxKeys its distinct keys (the range is closed at that many), so what a busy
	// upsert partition holds does not grow with mink.range.target-bytes.
	UpsertHold    int64
	UpsertMaxKeys int

	upsertPeak atomic.Int64 // the most bytes of records any upsert range held

	metrics metrics
	paused  sync.Map // "ns.table/partition" → why its indexing is paused
	held    sync.Map // lease.Scope → *partition, for every partition this node indexes now
}

// partition is what the metrics say of one partition while this node holds its lease:
// a partition handed to another node leaves this node's figures with its worker.
type partition struct {
	table     string
	partition int32
	lag       atomic.Int64 // -1 until the first poll has measured it
	paused    atomic.Bool
	topicLost atomic.Bool // the table's topic was deleted (and maybe created again): topic.go
}

// Options are what an Indexer needs.
type Options struct {
	DB     pg.DB
	Kafka  *kafkasrc.Client
	Codecs *tablecodec.Codecs // decoders, schema versions, the schema registry
	Meter  metric.Meter
	Logger *slog.Logger
	// BuildMemory bounds the finished pages the builds of all partitions keep in
	// memory (0: none, every page waits in a temporary file).
	BuildMemory int64
}

type metrics struct {
	records, bytes, ranges, decodeErrors, rereads metric.Int64Counter
}

// New prepares an indexer that reports its metrics to o.Meter.
func New(o Options) (*Indexer, error) {
	m := o.Meter
	ix := &Indexer{DB: o.DB, Kafka: o.Kafka, Codecs: o.Codecs, Log: o.Logger, Settings: parquetbuild.DefaultSettings(), GrowthCheck: 30 * time.Second,
		UpsertHold: upsert.DefaultHold, UpsertMaxKeys: upsert.DefaultMaxKeys}
	if ix.Codecs == nil {
		ix.Codecs = tablecodec.New(o.DB, nil)
	}
	var err error
	if ix.Pages, err = parquetbuild.NewPages(o.BuildMemory, ""); err != nil {
		return nil, err
	}
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		err = errors.Join(err, e)
		return c
	}
	ix.metrics.records = counter("mink.indexer.records", "Kafka records indexed", "{record}")
	ix.metrics.bytes = counter("mink.indexer.bytes", "bytes of Kafka record keys and values indexed", "By")
	ix.metrics.ranges = counter("mink.indexer.ranges", "ranges cut and stored", "{range}")
	ix.metrics.rereads = counter("mink.indexer.upsert_rereads", "upsert ranges whose latest records passed the hold bound and were read from Kafka a second time to be stored", "{range}")
	ix.metrics.decodeErrors = counter("mink.indexer.decode_errors", "records that did not fit the table schema (stored with _mink_error)", "{record}")
	lag, e1 := m.Int64ObservableGauge("mink.indexer.lag",
		metric.WithDescription("Records between the indexed position and the last stable offset, per partition this node indexes."),
		metric.WithUnit("{record}"))
	paused, e2 := m.Int64ObservableGauge("mink.indexer.paused",
		metric.WithDescription("1 while indexing of a partition this node holds is paused, retrying after a failure (GetStatus says why); 0 while it runs."))
	topicLost, e5 := m.Int64ObservableGauge("mink.indexer.topic_lost",
		metric.WithDescription("1 while the topic of a partition this node holds is not the one its table indexed: deleted, or deleted and created again (DescribeTable says which; the table needs a reset); 0 while it is."))
	_, e3 := m.Int64ObservableGauge("mink.indexer.build_page_bytes",
		metric.WithDescription("Bytes of finished Parquet pages the open ranges' builds hold in memory (bounded by --build-memory)."),
		metric.WithUnit("By"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(ix.Pages.InMemory())
			return nil
		}))
	_, e4 := m.Int64ObservableCounter("mink.indexer.build_page_spilled_bytes",
		metric.WithDescription("Bytes of finished Parquet pages written to temporary files because --build-memory was full."),
		metric.WithUnit("By"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(ix.Pages.Spilled())
			return nil
		}))
	if err = errors.Join(err, e1, e2, e3, e4, e5); err != nil {
		return nil, err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		ix.held.Range(func(_, v any) bool {
			p := v.(*partition)
			attrs := metric.WithAttributes(attribute.String("table", p.table), attribute.Int("partition", int(p.partition)))
			if n := p.lag.Load(); n >= 0 {
				o.ObserveInt64(lag, n, attrs)
			}
			o.ObserveInt64(paused, boolGauge(p.paused.Load()), attrs)
			o.ObserveInt64(topicLost, boolGauge(p.topicLost.Load()), attrs)
			return true
		})
		return nil
	}, lag, paused, topicLost)
	return ix, err
}

// Work is the lease.Worker of partition leases: it indexes until ctx ends, retrying after
// failures (Kafka, Postgres or the schema registry unreachable) from the index, which is
// always consistent. While it fails, the partition's index row says why (DescribeTable)
// and so do the node's figures (GetStatus).
func (ix *Indexer) Work(ctx context.Context, l lease.Lease) {
	log := ix.Log.With("table", l.TableName, "partition", l.Partition, "epoch", l.Epoch)
	name := fmt.Sprintf("%s/%d", l.TableName, l.Partition)
	defer ix.paused.Delete(name)
	ps := &partition{table: l.TableName, partition: l.Partition}
	ps.lag.Store(-1)
	ix.held.Store(l.Scope, ps)
	defer ix.held.CompareAndDelete(l.Scope, ps)
	paused := false
	backoff := 200 * time.Millisecond
	resumed := func() {
		if !paused {
			return
		}
		paused = false
		backoff = 200 * time.Millisecond // the next failure is a new one: retry it soon
		ix.paused.Delete(name)
		ps.paused.Store(false)
		if err := ranges.SetIndexError(ctx, ix.DB, l, ""); err != nil {
			log.Debug("could not clear why indexing paused", "error", err)
		}
		log.Info("indexing resumed")
	}
	rebuilds := 0 // ranges indexed again in a row because a schema change overtook them
	for ctx.Err() == nil {
		err := ix.index(ctx, l, ps, log, func() { rebuilds = 0; resumed() })
		if ctx.Err() != nil || errors.Is(err, lease.ErrLeaseLost) {
			return
		}
		if errors.Is(err, schemapoints.ErrDecodingMoved) && rebuilds < maxRebuilds {
			// A schema change took effect inside the open range (an AlterTable): it is
			// indexed again from its start, cut where the change takes effect.
			rebuilds++
			log.Info("a schema change took effect inside the open range; indexing it again", "error", err)
			continue
		}
		why := pauseReason(err)
		paused = true
		ix.paused.Store(name, why)
		ps.paused.Store(true)
		if serr := ranges.SetIndexError(ctx, ix.DB, l, why); serr != nil {
			log.Debug("could not record why indexing paused", "error", serr)
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

// maxRebuilds bounds the ranges indexed again in a row, with no poll between, because a
// schema change overtook them; past it indexing pauses and retries as after a failure.
const maxRebuilds = 3

// boolGauge is a gauge's value of a state: 1 while it holds.
func boolGauge(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Paused reports the partitions whose indexing is paused on this node, and why, for the
// node's status figures.
func (ix *Indexer) Paused() map[string]string {
	out := map[string]string{}
	ix.paused.Range(func(k, v any) bool {
		out[k.(string)] = v.(string)
		return true
	})
	return out
}

// Figures are the node's status figures: how many partitions are paused, and why each.
func (ix *Indexer) Figures() map[string]string {
	p := ix.Paused()
	out := map[string]string{"partitions_paused": strconv.Itoa(len(p))}
	for k, why := range p {
		out["paused "+k] = why
	}
	return out
}

// pauseReason says why indexing failed in words fit for a node's status, which clients
// read: what apierr tells of a dependency that cannot be reached, or of a state to fix;
// otherwise a pointer to the log.
func pauseReason(err error) string {
	switch {
	case apierr.Classify(err) == apierr.Unavailable, apierr.Classify(err) == apierr.FailedPrecondition:
		return apierr.Message(err)
	case errors.Is(err, tablecodec.ErrUnknownSchema):
		return "a record names a schema the table has not stored yet (is a schema registry configured, --schema-registry-url?); " +
			"indexing resumes once it is known, and the indexer's log names the schema"
	}
	return "indexing failed and is retried; the indexer's log says why"
}

// cut is the range being built: [start, next) of topic with its records measured so far.
type cut struct {
	topic       string
	start, next int64
	// until is the partition's next schema point after start: the range ends there at
	// the latest, and the next decodes as the point says.
	until    int64
	opened   time.Time // when the range first had something in it
	bytes    int64
	b        *parquetbuild.Builder
	dec      *tablecodec.Decoder
	decoding schemapoints.Decoding // the point in force at start
	settings parquetbuild.Settings
	latestAt time.Time // when latest-mode ids were last compared with the registry's (zero: never)
	// latest holds an upsert table's range until it is stored: only the latest record
	// of each key is built, and the keys are stored with the range. It holds at most
	// UpsertHold bytes of records (then offsets) and the range at most UpsertMaxKeys keys.
	latest *upsert.Latest
}

// add adds r to the range: to its build, or for an upsert table to its latest records.
func (c *cut) add(r record.Record) error {
	if c.latest != nil {
		c.latest.Add(r)
		return nil
	}
	return c.b.Add(r)
}

func (ix *Indexer) index(ctx context.Context, l lease.Lease, ps *partition, log *slog.Logger, resumed func()) error {
	tbl, err := tables.GetByID(ctx, ix.DB, l.Table)
	if err != nil {
		return err
	}
	if tbl.PartitionSpec != nil {
		v, err := ix.Codecs.Version(ctx, tbl, tbl.Version)
		if err != nil {
			return err
		}
		if err := tbl.CheckPartitioning(v.Schema); err != nil {
			return err // paused, saying why, until a node that can index it holds it
		}
	}
	props := tbl.Props()
	st, err := ranges.State(ctx, ix.DB, l.Table, l.Partition)
	if err != nil {
		return err
	}
	topicID, offs, err := ix.topicOffsets(ctx, l, ps, &tbl, st, log)
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
		points, err := ix.Codecs.Points(ctx, tbl, l.Partition)
		if err != nil {
			return err
		}
		gone, err := ix.newCut(ctx, tbl, points, start)
		if err != nil {
			return err
		}
		gone.next = logStart
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
		if grew, err := tables.Grow(ctx, ix.DB, l, n); err != nil {
			log.Warn("could not record new partitions", "error", err, "partitions", n)
		} else if grew {
			log.Info("topic grew: new partition leases", "partitions", n)
			tbl.Partitions = n
		}
	}
	checkGrowth()
	log.Info("indexing", "from", start)
	tail := kafkasrc.NewTailer(ix.Kafka, tbl.Topic, l.Partition, start)
	tail.Pin(topicID)
	defer tail.Close()
	polls, stopPolls := pollAhead(ctx, tail)
	defer stopPolls()
	attrs := metric.WithAttributes(attribute.String("table", tbl.FullName()), attribute.Int("partition", int(l.Partition)))

	var c *cut
	defer func() {
		if c != nil {
			c.b.Abort() // the lease lost or a failure: give the open range's pages back
		}
	}()
	open := func(at int64) error {
		// Each range reads the table afresh (new properties apply from the next range
		// on) and the partition's schema points: it decodes as the one in force at its
		// start says, and ends at the next.
		if t, err := tables.GetByID(ctx, ix.DB, l.Table); err != nil {
			return err
		} else {
			tbl, props = t, t.Props()
		}
		points, err := ix.Codecs.Points(ctx, tbl, l.Partition)
		if err != nil {
			return err
		}
		nc, err := ix.newCut(ctx, tbl, points, at)
		if err != nil {
			return err
		}
		c = nc
		return nil
	}
	if err := open(start); err != nil {
		return err
	}
	// cutAt stores the open range as [start, at) (when it covers anything) and opens the
	// next at at, decoding as the schema point in force there says.
	cutAt := func(at int64) error {
		if at > c.start {
			c.next = at
			if err := ix.store(ctx, l, c, attrs, log); err != nil {
				return err
			}
		}
		return open(at)
	}
	for {
		// Wait for the next answer until the open range is due, or the next growth check
		// (partition 0).
		var deadline time.Time
		if !c.opened.IsZero() {
			deadline = c.opened.Add(props.RangeMaxAge)
		}
		if l.Partition == 0 && (deadline.IsZero() || nextGrowthCheck.Before(deadline)) {
			deadline = nextGrowthCheck
		}
		// A latest-mode range compares its schema with the registry's latest every
		// latestCheck even while no record arrives: an idle partition must not decode
		// its next record with a version replaced long before.
		if c.settings.ValueSchemaID != 0 || c.settings.KeySchemaID != 0 {
			if due := c.latestAt.Add(latestCheck); deadline.IsZero() || due.Before(deadline) {
				deadline = due
			}
		}
		p := nextAnswer(ctx, polls, deadline)
		recs, next, err := p.recs, p.next, p.err
		checkGrowth()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		for _, r := range recs {
			for r.Offset >= c.until {
				if err := cutAt(c.until); err != nil {
					return err
				}
			}
			for {
				need := c.dec.Check(r)
				if need.Kind == tablecodec.NeedNothing {
					break
				}
				if need.Kind == tablecodec.NeedSchema {
					// The first record of a registry schema: store the schema with the
					// table (a rebuild then never needs the registry).
					if err := ix.Codecs.Learn(ctx, tbl, need.ID, need.Key); err != nil {
						return err
					}
					continue
				}
				// The schema has what the range's version lacks: the table evolves
				// (the writer commits the new schema), and the new version takes
				// effect at this record (a schema point), which starts a range.
				var v tableschema.Version
				if need.Kind == tablecodec.NeedColumns {
					// An inferred table's record with fields the version lacks: the
					// version with them is made once, whichever indexer meets them first.
					v, err = ix.Codecs.Infer(ctx, &l, tbl, r.Value, fmt.Sprintf("partition %d offset %d", l.Partition, r.Offset))
					if err == nil && v.ID <= c.decoding.Version {
						// No newer version to decode with (a bound): the rest of the
						// range keeps the new fields in _mink_unfit.
						log.Warn("inferred columns not added (a bound of inference)", "at_offset", r.Offset)
						c.dec.StopInferring()
						break
					}
				} else {
					v, err = ix.Codecs.Evolve(ctx, &l, tbl, need.ID, need.Key)
				}
				if err != nil {
					return err
				}
				pt, err := ranges.AddPointsUnder(ctx, ix.DB, l, r.Offset, c.decoding, func(d schemapoints.Decoding) schemapoints.Decoding {
					d.Version = max(d.Version, v.ID)
					return d
				}, objects.RecordedEnds)
				if err != nil {
					return err
				}
				log.Info("schema evolved", "schema_id", need.ID, "key", need.Key, "version", v.ID, "iceberg_schema_id", v.Schema.ID,
					"at_offset", r.Offset, "point", pt.From)
				if pt.From != r.Offset || pt.Decoding == c.decoding {
					// Builds have recorded the record with the range's version
					// already: the new one takes effect after it (the range ends
					// there), and the record decodes as they decoded it.
					if pt.From > r.Offset {
						c.until = min(c.until, pt.From)
					}
					break
				}
				if err := cutAt(r.Offset); err != nil {
					return err
				}
			}
			if c.latest != nil && c.latest.Len() >= ix.UpsertMaxKeys {
				// The range's keys are at their bound: r starts the next range.
				if err := cutAt(r.Offset); err != nil {
					return err
				}
			}
			if err := c.add(r); err != nil {
				return fmt.Errorf("build range at offset %d: %w", r.Offset, err)
			}
			c.bytes += recordBytes(r)
		}
		if len(recs) > 0 {
			ix.metrics.records.Add(ctx, int64(len(recs)), attrs)
		}
		for next > c.until {
			// Offsets without records up to a schema point: the range ends there.
			if err := cutAt(c.until); err != nil {
				return err
			}
		}
		if next > c.next {
			if c.opened.IsZero() {
				c.opened = time.Now()
			}
			c.next = next
		}
		resumed() // a poll and its records went through
		if lso := tail.LastStable(); lso >= 0 {
			ps.lag.Store(max(0, lso-c.next))
		}
		if c.next > c.start && (c.bytes >= props.RangeTargetBytes || time.Since(c.opened) >= props.RangeMaxAge) {
			if err := ix.store(ctx, l, c, attrs, log); err != nil {
				return err
			}
			if err := open(c.next); err != nil {
				return err
			}
		} else if pt, moved, err := ix.follow(ctx, l, &tbl, c); err != nil {
			return err
		} else if moved && pt.From <= c.next {
			// The subject's new latest version takes effect here: the range ends.
			if err := cutAt(c.next); err != nil {
				return err
			}
		} else if moved {
			c.until = min(c.until, pt.From) // past records builds decoded already
		}
	}
}

// nextAnswer waits for the next answer of pollAhead until deadline (none: zero). A deadline
// that has passed comes first, as a Poll under it would have failed at once; one that
// passes while waiting is an answer with context.DeadlineExceeded and no records, as
// such a Poll returned.
func nextAnswer(ctx context.Context, polls <-chan polled, deadline time.Time) polled {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		wait := time.Until(deadline)
		if wait <= 0 {
			return polled{err: context.DeadlineExceeded}
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		expired = t.C
	}
	select {
	case p := <-polls:
		return p
	case <-expired:
		return polled{err: context.DeadlineExceeded}
	case <-ctx.Done():
		return polled{err: ctx.Err()}
	}
}

// polled is one Tailer.Poll's answer.
type polled struct {
	recs []record.Record
	next int64
	err  error
}

// pollAhead polls t on a goroutine of its own, one answer ahead of the caller: the next
// fetch is in flight (and decoded by the Kafka client) while the caller builds the
// records of the last one, so indexing costs about max(fetch, build) rather than their
// sum, as kafkasrc.ReadRange does for rebuilds. Answers come in Poll's order, so the
// positions a range is cut at are those Poll returned, in turn; at most two answers'
// records are held at once. stop ends the goroutine and waits for it.
func pollAhead(ctx context.Context, t *kafkasrc.Tailer) (answers <-chan polled, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan polled)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			recs, next, err := t.Poll(ctx)
			select {
			case ch <- polled{recs, next, err}:
			case <-ctx.Done():
			}
		}
	})
	return ch, func() {
		cancel()
		wg.Wait()
	}
}

// newCut opens a range at offset at of table tbl, decoding as the schema point in force
// there says and ending at the next.
func (ix *Indexer) newCut(ctx context.Context, tbl tables.Table, points schemapoints.Points, at int64) (*cut, error) {
	d, ok := points.At(at)
	if !ok {
		return nil, fmt.Errorf("partition of table %s: no schema point at or before offset %d", tbl.FullName(), at)
	}
	settings := ix.Settings
	settings.TableVersion, settings.ValueSchemaID, settings.KeySchemaID = d.Version, d.ValueSchemaID, d.KeySchemaID
	dec, err := ix.Codecs.Decoder(ctx, tbl, settings)
	if err != nil {
		return nil, err
	}
	b, err := parquetbuild.NewBuilderFor(io.Discard, dec, settings, parquetbuild.WithPages(ix.Pages))
	if err != nil {
		return nil, err
	}
	c := &cut{topic: tbl.Topic, start: at, next: at, until: points.Next(at), b: b, dec: dec, decoding: d, settings: settings}
	if tbl.Upsert() {
		c.latest = upsert.NewBounded(dec.KeyHash, ix.UpsertHold)
	}
	return c, nil
}

// follow makes the open range's latest-mode decodings follow their subjects (asked every
// latestCheck): when the registry's latest version of a subject is not the one the range
// decodes with, the new one takes effect at a schema point of the partition, at the
// range's end or past every record a build has recorded with the old one, the table
// evolving first when the new schema has what its version lacks. moved says whether a
// point was added; pt is the partition's last point.
func (ix *Indexer) follow(ctx context.Context, l lease.Lease, tbl *tables.Table, c *cut) (pt schemapoints.Point, moved bool, err error) {
	if !c.latestAt.IsZero() && time.Since(c.latestAt) < latestCheck {
		return pt, false, nil
	}
	c.latestAt = time.Now()
	want := c.decoding
	for i, dec := range []*tableschema.Decoding{tbl.Spec.Value, tbl.Spec.Key} {
		if dec == nil || dec.Mode != tableschema.ModeLatest {
			continue
		}
		id, err := ix.Codecs.Latest(ctx, *tbl, dec.Subject, i == 1)
		if err != nil {
			return pt, false, err
		}
		if i == 0 {
			want.ValueSchemaID = id
		} else {
			want.KeySchemaID = id
		}
	}
	if want == c.decoding {
		return pt, false, nil
	}
	// A latest-mode schema newer than the version: evolve first, so the new decoding's
	// version has its fields.
	dec, err := ix.Codecs.Decoder(ctx, *tbl, tablecodec.SettingsOf(want))
	if err != nil {
		return pt, false, err
	}
	for i, id := range []int{want.ValueSchemaID, want.KeySchemaID} {
		if id == 0 || dec.Covers(id, i == 1) {
			continue
		}
		v, err := ix.Codecs.Evolve(ctx, &l, *tbl, id, i == 1)
		if err != nil {
			return pt, false, err
		}
		tbl.Version = v.ID
		want.Version = max(want.Version, v.ID)
		if dec, err = ix.Codecs.Decoder(ctx, *tbl, tablecodec.SettingsOf(want)); err != nil {
			return pt, false, err
		}
	}
	pt, err = ranges.AddPointsUnder(ctx, ix.DB, l, c.next, c.decoding, func(d schemapoints.Decoding) schemapoints.Decoding {
		return schemapoints.Decoding{Version: max(d.Version, want.Version), ValueSchemaID: want.ValueSchemaID, KeySchemaID: want.KeySchemaID}
	}, objects.RecordedEnds)
	if err != nil {
		return pt, false, err
	}
	return pt, true, nil
}

// latestCheck is how often a latest-mode range compares its schema with the registry's
// latest: how long after a new version records may still decode with the old one.
const latestCheck = 2 * time.Second

// store finishes the range's measuring build and stores it under the lease.
func (ix *Indexer) store(ctx context.Context, l lease.Lease, c *cut, attrs metric.MeasurementOption, log *slog.Logger) error {
	var keys []byte
	reread := false
	if c.latest != nil {
		reread = !c.latest.Holding()
		for peak := c.latest.Peak(); ; {
			if had := ix.upsertPeak.Load(); peak <= had || ix.upsertPeak.CompareAndSwap(had, peak) {
				break
			}
		}
		k, err := c.latest.Emit(rangefile.Reread(ctx, ix.Kafka, c.topic, l.Partition), c.b.Add)
		if err != nil {
			return fmt.Errorf("build range [%d, %d): %w", c.start, c.next, err)
		}
		keys = k.Encode()
	}
	fs, err := c.b.Close()
	if err != nil {
		return fmt.Errorf("build range [%d, %d): %w", c.start, c.next, err)
	}
	settings, err := json.Marshal(c.settings)
	if err != nil {
		return err
	}
	stats, err := json.Marshal(fs.Columns)
	if err != nil {
		return err
	}
	r := ranges.Range{Table: l.Table, Partition: l.Partition, Start: c.start, End: c.next,
		Records: fs.RowCount, DecodeErrors: fs.DecodeErrors, Size: fs.Size, SHA256: fs.SHA256,
		Settings: settings, Stats: stats, Keys: keys}
	if err := ranges.Append(ctx, ix.DB, l, r); err != nil {
		return err
	}
	ix.metrics.ranges.Add(ctx, 1, attrs)
	if reread {
		ix.metrics.rereads.Add(ctx, 1, attrs)
	}
	ix.metrics.bytes.Add(ctx, c.bytes, attrs)
	if fs.DecodeErrors > 0 {
		ix.metrics.decodeErrors.Add(ctx, fs.DecodeErrors, attrs)
	}
	log.Debug("range stored", "start", c.start, "end", c.next, "records", fs.RowCount, "size", fs.Size)
	return nil
}

// UpsertPeak is the most bytes of records an upsert range of this node held (within
// UpsertHold and one record).
func (ix *Indexer) UpsertPeak() int64 { return ix.upsertPeak.Load() }

func recordBytes(r record.Record) int64 {
	n := int64(len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}
