package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/iceberg-go/table"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/flight"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/tables"
)

// refresh is one read of what a stream's loads answer, which the loads of the stream
// that arrive within the reuse bound of its start share. It is not a single flight: a
// load that finds one begun longer ago begins another beside it.
type refresh struct {
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
	newest  *fresh
	refresh *refresh
}

// fresh is an answer and when its Kafka offsets were read, at the earliest.
type fresh struct {
	res    Result
	readAt time.Time
}

// streamIdle is how long a stream nobody loads is remembered.
const streamIdle = time.Minute

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
		if st.refresh == nil && !l.closed && arrived.Sub(st.newest.readAt) >= bound-props.LiveRefreshAhead() {
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
	f := st.refresh
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

// startRefresh begins stream st's next read (l.mu held).
func (l *Loader) startRefresh(t tables.Table, props tables.Props, base Base, cov map[int32]icebergmeta.Coverage, ttl time.Duration, sk string, st *stream, ahead bool) *refresh {
	f := &refresh{started: time.Now(), ahead: ahead, done: make(chan struct{})}
	st.refresh = f
	l.builds.Add(1)
	go l.refresh(t, props, base, cov, ttl, sk, st, f)
	return f
}

// refresh reads what a load of stream sk answers now, into f: the newest load snapshot
// another file server recorded within the reuse bound, or one for the tail Kafka holds
// now (shared by content key, built when new). It runs apart from the loads waiting for
// it, bounded by LoadTimeout: one that gives up leaves it to the next.
func (l *Loader) refresh(t tables.Table, props tables.Props, base Base, cov map[int32]icebergmeta.Coverage, ttl time.Duration, sk string, st *stream, f *refresh) {
	defer l.builds.Done()
	ctx, cancel := context.WithTimeout(l.base, l.o.LoadTimeout)
	defer cancel()
	res, readAt, err := l.read(ctx, t, props, base, cov, ttl, sk, f.started, f.ahead)
	if f.ahead && err == nil && res.Live && !res.Reused {
		l.n.loads.Add(1) // no load answers as its maker: the ones after it reuse it
	}
	l.mu.Lock()
	if st.refresh == f {
		st.refresh = nil
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
		if s.refresh == nil && (s.newest == nil || time.Since(s.newest.readAt) > streamIdle) {
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
	if res, ok := l.recentLoad(key, window); ok {
		return res, nil
	}
	res, joined, err := l.contents.Do(ctx, key, func(b *flight.Build) (Result, error) {
		if !b.Begin() {
			return Result{}, context.Canceled // every caller gave up at once
		}
		// One made since this caller looked is answered, not made again.
		if res, ok := l.recentLoad(key, window); ok {
			return res, nil
		}
		// Under the first caller's context: its refresh's bound.
		res, err := l.findOrBuild(ctx, t, props, ttl, base, sk, key, spans, readAt)
		if err == nil {
			l.mu.Lock()
			for k, r := range l.recent {
				if time.Since(r.at) >= window {
					delete(l.recent, k)
				}
			}
			l.recent[key] = recent{res: res, at: time.Now()}
			l.mu.Unlock()
		}
		return res, err
	})
	switch {
	case errors.Is(err, flight.ErrClosed):
		return Result{}, apierr.New(apierr.Unavailable, "file server is stopping")
	case err != nil && err == ctx.Err():
		return Result{}, apierr.Wrap(apierr.Unavailable, err, "load table %s: its tail is still being built", t.FullName())
	}
	if joined {
		res.Reused = true
	}
	return res, err
}

// recentLoad is the load snapshot of content key this node made or found within window.
func (l *Loader) recentLoad(key string, window time.Duration) (Result, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.recent[key]
	if !ok || time.Since(r.at) >= window {
		return Result{}, false
	}
	res := r.res
	res.Reused = true
	return res, true
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
