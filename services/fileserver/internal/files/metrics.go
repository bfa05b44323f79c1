package files

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/filecache"
)

// Stats are a store's counters since start, for status figures and tests; the same
// figures are exported as OpenTelemetry metrics.
type Stats struct {
	CacheHits      int64 // reads this node served from its cache without a build
	CacheMisses    int64 // reads this node had to build (or wait for a build) first
	Builds         int64 // files built into the cache (tail files included)
	TailBuilds     int64 // tail files of live loads built (measured) into the cache
	BuildFailures  int64
	Forwarded      int64 // reads sent to their owner (whatever the outcome)
	Fallbacks      int64 // reads served here because the owner did not answer
	BytesForwarded int64 // bytes this node streamed to other nodes as an owner
	Reported       int64 // files reported for replacement
}

type metrics struct {
	cacheHits, cacheMisses, builds, buildFailures metric.Int64Counter
	forwards, bytesServed, reports                metric.Int64Counter

	nHits, nMisses, nBuilt, nTail, nFailed, nFwd, nFallbacks, nBytesFwd, nReported atomic.Int64
}

func newMetrics(m metric.Meter, cache *filecache.Cache, s *Store) (*metrics, error) {
	var errs [13]error
	mt := &metrics{}
	mt.cacheHits, errs[0] = m.Int64Counter("mink.fileserver.cache.hits",
		metric.WithDescription("Reads the owner served from its disk cache."), metric.WithUnit("{read}"))
	mt.cacheMisses, errs[1] = m.Int64Counter("mink.fileserver.cache.misses",
		metric.WithDescription("Reads the owner had to build the file for (or wait for its build)."), metric.WithUnit("{read}"))
	mt.builds, errs[2] = m.Int64Counter("mink.fileserver.builds",
		metric.WithDescription("Files built into the cache, by kind (data, metadata, tail: a live load's tail file measured)."), metric.WithUnit("{file}"))
	mt.buildFailures, errs[3] = m.Int64Counter("mink.fileserver.build_failures",
		metric.WithDescription("Builds that failed, by kind and reason (unavailable, mismatch, offsets_gone, not_found, no_space, error)."), metric.WithUnit("{file}"))
	mt.forwards, errs[4] = m.Int64Counter("mink.fileserver.forwarded_reads",
		metric.WithDescription("Reads sent to the file's owner, by result (ok, error, fallback: served here because the owner did not answer)."), metric.WithUnit("{read}"))
	mt.bytesServed, errs[5] = m.Int64Counter("mink.fileserver.bytes_served",
		metric.WithDescription("File bytes sent, by api (s3: to clients; forward: to other file servers)."), metric.WithUnit("By"))
	mt.reports, errs[6] = m.Int64Counter("mink.fileserver.files_reported",
		metric.WithDescription("Files reported for replacement because they cannot be rebuilt with their recorded bytes, by reason."), metric.WithUnit("{file}"))
	cacheBytes, err7 := m.Int64ObservableGauge("mink.fileserver.cache.bytes",
		metric.WithDescription("Bytes in the disk cache."), metric.WithUnit("By"))
	cacheFiles, err8 := m.Int64ObservableGauge("mink.fileserver.cache.files",
		metric.WithDescription("Files in the disk cache."), metric.WithUnit("{file}"))
	cacheMax, err9 := m.Int64ObservableGauge("mink.fileserver.cache.limit",
		metric.WithDescription("The disk cache's bound (--cache-bytes)."), metric.WithUnit("By"))
	errs[7], errs[8], errs[9] = err7, err8, err9
	running, err10 := m.Int64ObservableGauge("mink.fileserver.builds.running",
		metric.WithDescription("Builds from Kafka running now (at most --build-concurrency; more wait for a slot)."), metric.WithUnit("{build}"))
	pageBytes, err11 := m.Int64ObservableGauge("mink.fileserver.build_page_bytes",
		metric.WithDescription("Bytes of finished Parquet pages the builds hold in memory (bounded by --build-memory)."), metric.WithUnit("By"))
	spilled, err12 := m.Int64ObservableCounter("mink.fileserver.build_page_spilled_bytes",
		metric.WithDescription("Bytes of finished Parquet pages written to temporary files because --build-memory was full."), metric.WithUnit("By"))
	errs[10], errs[11], errs[12] = err10, err11, err12
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := cache.Stats()
		o.ObserveInt64(cacheBytes, st.Bytes)
		o.ObserveInt64(cacheFiles, int64(st.Files))
		o.ObserveInt64(cacheMax, st.Max)
		b := s.BuildStats()
		o.ObserveInt64(running, b.Running)
		o.ObserveInt64(pageBytes, b.PagesInMemory)
		o.ObserveInt64(spilled, b.PagesSpilled)
		return nil
	}, cacheBytes, cacheFiles, cacheMax, running, pageBytes, spilled)
	return mt, err
}

func (m *metrics) hit(ctx context.Context)  { m.nHits.Add(1); m.cacheHits.Add(ctx, 1) }
func (m *metrics) miss(ctx context.Context) { m.nMisses.Add(1); m.cacheMisses.Add(ctx, 1) }

func (m *metrics) built(ctx context.Context, kind string) {
	m.nBuilt.Add(1)
	if kind == "tail" {
		m.nTail.Add(1)
	}
	m.builds.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", kind)))
}

func (m *metrics) buildFailed(ctx context.Context, kind, reason string) {
	m.nFailed.Add(1)
	m.buildFailures.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", kind), attribute.String("reason", reason)))
}

func (m *metrics) forwarded(ctx context.Context, result string) {
	if result == "fallback" {
		m.nFallbacks.Add(1)
	} else {
		m.nFwd.Add(1)
	}
	m.forwards.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
}

func (m *metrics) reportedFile(ctx context.Context, reason string) {
	m.nReported.Add(1)
	m.reports.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}

// Served counts n file bytes sent by api ("s3", "forward").
func (m *metrics) served(ctx context.Context, api string, n int64) {
	if n <= 0 {
		return
	}
	if api == "forward" {
		m.nBytesFwd.Add(n)
	}
	m.bytesServed.Add(ctx, n, metric.WithAttributes(attribute.String("api", api)))
}

func (m *metrics) stats() Stats {
	return Stats{
		CacheHits: m.nHits.Load(), CacheMisses: m.nMisses.Load(), Builds: m.nBuilt.Load(), TailBuilds: m.nTail.Load(),
		BuildFailures: m.nFailed.Load(), Forwarded: m.nFwd.Load(), Fallbacks: m.nFallbacks.Load(),
		BytesForwarded: m.nBytesFwd.Load(), Reported: m.nReported.Load(),
	}
}
