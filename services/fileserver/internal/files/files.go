// Package files is a file server's read path: every file has one owner among the live
// file servers, which serves it from its disk cache or builds it first (build.go: a data
// file from Kafka, a metadata file from Postgres); reads elsewhere are forwarded to it
// (forward.go). It also measures live loads' tail files (tail.go), lists the bucket
// (list.go) and warms newly committed files (warm.go). The design is in docs/files.md.
package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"

	filev1 "github.com/minkhq/mink/gen/mink/file/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/filecache"
	"github.com/minkhq/mink/pkg/flight"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/peers"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/tablecodec"
)

// errStopping: the store is closing. An owner that is stopping answers a forwarded read
// it cannot serve from its cache as if unreachable, so the forwarding node serves it
// itself rather than fail it.
var errStopping = errors.New("stopping")

// DefaultBuildMemory is Options.BuildMemory unless told otherwise.
const DefaultBuildMemory = 128 << 20

// Options configure a Store.
type Options struct {
	NodeID string
	DB     pg.DB
	Kafka  *kafkasrc.Client
	Codecs *tablecodec.Codecs // how tables' files decode; nil: over DB, without a registry
	Cache  *filecache.Cache
	// DialOptions are added to the connections to other file servers: the node's
	// (pkg/node's Deps.DialOptions): the otelgrpc client handler, so that a forwarded
	// read is one trace; this node's peer token, without which another file server's
	// gRPC door refuses the file service when auth is on; TLS when configured.
	DialOptions []grpc.DialOption
	// MemberRefresh is how often the member list is read (default 1s).
	MemberRefresh time.Duration
	// TableRefresh is how often the live tables and the removed files are read besides
	// when Postgres tells of a change (gone.go; default DefaultTableRefresh).
	TableRefresh time.Duration
	// LookupTimeout bounds each Postgres lookup (default 5s): an unreachable Postgres
	// answers 503 within it even when the network drops packets silently.
	LookupTimeout time.Duration
	// BuildTimeout bounds one build (default 10m).
	BuildTimeout time.Duration
	// ProblemTTL is how long a file that could not be rebuilt with its recorded bytes is
	// refused without trying again (default 1m): a rebuild costs a full Kafka read.
	ProblemTTL time.Duration
	// MissTTL is how long a key Postgres recorded nothing for is answered 404 without
	// asking again (default objects.DefaultMissTTL, 2s; negative: never cached), and so
	// the longest a file created meanwhile by another process (a commit) can be answered
	// 404 by this node. MissKeys bounds how many such keys are kept (LRU; default
	// objects.DefaultMissKeys).
	MissTTL  time.Duration
	MissKeys int
	// BuildConcurrency bounds the builds from Kafka (data and tail files) that run at
	// once (default max(1, GOMAXPROCS)); more wait for a slot. A build is CPU-bound, and
	// each one holds a page being filled per leaf column and a Kafka fetch, so the bound
	// caps both the CPU and the memory a burst of cold reads takes.
	BuildConcurrency int
	// BuildMemory bounds the finished Parquet pages that all builds together keep in
	// memory (parquetbuild.Pages; default DefaultBuildMemory; negative: none, every page
	// waits in a temporary file); beyond it they wait in unlinked temporary files in
	// $TMPDIR. The bytes of the files are the same either way.
	BuildMemory int64
	// Warming (warm.go): every WarmInterval (default 1s; negative: no warming) this node
	// builds the data files committed since its last look that it owns, newest first,
	// up to WarmBuilds at a time (default half of BuildConcurrency, at least 1), while
	// fewer than WarmBusyReads reads are in flight (default 4) and its cache is under
	// WarmCacheShare full (default 0.8). Its first look goes back WarmLookback (default
	// 10m).
	WarmInterval   time.Duration
	WarmLookback   time.Duration
	WarmBusyReads  int
	WarmBuilds     int
	WarmCacheShare float64
	// Keys are the decoded key hashes of upsert tables' partitions that delete files
	// are built from, shared with the live loader (nil: a cache of
	// rangefile.DefaultKeyCacheBytes of its own).
	Keys   *rangefile.KeyCache
	Meter  metric.Meter // nil: no metrics
	Logger *slog.Logger
}

// Info is what a reader needs before a file's bytes: the S3 headers and where they came
// from.
type Info struct {
	Size         int64
	ETag         string
	LastModified time.Time
	Offset       int64 // first byte of the range
	Length       int64 // bytes in the range (and in Body, unless only the info was asked)
	ServedBy     string
	CacheHit     bool // served from the owner's cache without a build
	Forwarded    bool // served by another node
}

// Object is an open file or range of it. Body holds Length bytes (nil when only the info
// was asked). Close it.
type Object struct {
	Info
	Body  io.Reader
	close func() error
}

// Close releases the file (or ends the forwarded stream).
func (o *Object) Close() error {
	if o.close == nil {
		return nil
	}
	return o.close()
}

// Store is one node's read path. Run refreshes its member list; Close ends its builds
// and connections.
type Store struct {
	filev1.UnimplementedFileServiceServer
	o       Options
	log     *slog.Logger
	members *members
	peers   *peers.Pool
	met     *metrics
	objects *objects.Lookups
	gone    goneFiles

	inflight  atomic.Int64 // reads being served (opened and not yet closed): how busy the node is
	warmStats struct {
		Looks, Warmed, SkippedBusy, SkippedFull, Failed atomic.Int64
		Listening                                       atomic.Bool
	}

	base context.Context // builds run under it, not under a caller's request
	stop context.CancelFunc

	slots         chan struct{}       // a token per build running: at most BuildConcurrency
	pages         *parquetbuild.Pages // the finished pages of every build, within BuildMemory
	buildsRunning atomic.Int64
	buildsPeak    atomic.Int64      // the most builds that ran at once
	slotTaken     func(what string) // tests: called by each build once it holds its slot

	// Builds by key (fills) and tail measures by span and budget (measures): readers of
	// one file share its build, and a build waits for a slot only while one of them
	// still wants it (flight.Build), so readers that give up while builds queue leave no
	// build behind them. Once begun, a build runs to its end under the store's context:
	// the next reader will want the file.
	fills    *flight.Group[struct{}]
	measures *flight.Group[Measured]

	mu       sync.Mutex
	measured map[string]recalled // tail builds of the last minute
	problems map[string]problem
	logged   map[string]time.Time // rate-limited log lines: when last logged
	created  time.Time            // the bucket's creation date, once read
}

// New makes a Store. Run it, and Close it after the servers using it have stopped.
func New(o Options) (*Store, error) {
	if o.NodeID == "" || o.DB == nil || o.Kafka == nil || o.Cache == nil {
		return nil, errors.New("files: NodeID, DB, Kafka and Cache are required")
	}
	if o.Codecs == nil {
		o.Codecs = tablecodec.New(o.DB, nil)
	}
	if o.MemberRefresh <= 0 {
		o.MemberRefresh = time.Second
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = 5 * time.Second
	}
	if o.TableRefresh <= 0 {
		o.TableRefresh = DefaultTableRefresh
	}
	if o.BuildTimeout <= 0 {
		o.BuildTimeout = 10 * time.Minute
	}
	if o.ProblemTTL <= 0 {
		o.ProblemTTL = time.Minute
	}
	if o.BuildConcurrency <= 0 {
		o.BuildConcurrency = max(1, runtime.GOMAXPROCS(0))
	}
	switch {
	case o.BuildMemory == 0:
		o.BuildMemory = DefaultBuildMemory
	case o.BuildMemory < 0:
		o.BuildMemory = 0
	}
	if o.WarmBuilds <= 0 {
		o.WarmBuilds = max(1, o.BuildConcurrency/2)
	}
	if o.WarmInterval == 0 {
		o.WarmInterval = DefaultWarmInterval
	}
	if o.WarmLookback <= 0 {
		o.WarmLookback = DefaultWarmLookback
	}
	if o.WarmBusyReads <= 0 {
		o.WarmBusyReads = DefaultWarmBusyReads
	}
	if o.WarmCacheShare <= 0 || o.WarmCacheShare > 1 {
		o.WarmCacheShare = DefaultWarmCacheShare
	}
	if o.Meter == nil {
		o.Meter = noop.NewMeterProvider().Meter("")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Keys == nil {
		o.Keys = rangefile.NewKeyCache(0)
	}
	log := o.Logger // the node's: it carries "node" already
	pages, err := parquetbuild.NewPages(o.BuildMemory, "")
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	base, stop := context.WithCancel(context.Background())
	s := &Store{
		o:        o,
		log:      log,
		members:  &members{db: o.DB, self: o.NodeID, interval: o.MemberRefresh, log: log},
		peers:    peers.New(append(relayDialOptions(), o.DialOptions...)...),
		objects:  objects.NewLookups(o.DB, o.MissTTL, o.MissKeys),
		base:     base,
		stop:     stop,
		slots:    make(chan struct{}, o.BuildConcurrency),
		pages:    pages,
		fills:    flight.New[struct{}](base),
		measures: flight.New[Measured](base),
		measured: map[string]recalled{},
		problems: map[string]problem{},
		logged:   map[string]time.Time{},
	}
	if s.met, err = newMetrics(o.Meter, o.Cache, s); err != nil {
		stop()
		return nil, fmt.Errorf("files: metrics: %w", err)
	}
	return s, nil
}

// Run keeps the member list and what is gone fresh, and warms newly committed files,
// until ctx ends.
func (s *Store) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.members.run(ctx) })
	wg.Go(func() { s.watchGone(ctx) })
	if s.warmEnabled() {
		wg.Go(func() { s.warm(ctx) })
	}
	wg.Wait()
}

// WarmStats are warming's counters since start.
func (s *Store) WarmStats() WarmStats {
	w := &s.warmStats
	return WarmStats{Looks: w.Looks.Load(), Listening: w.Listening.Load(), Warmed: w.Warmed.Load(), SkippedBusy: w.SkippedBusy.Load(), SkippedFull: w.SkippedFull.Load(), Failed: w.Failed.Load()}
}

// track counts a read in flight from its open to its close (or its failure).
func (s *Store) track(obj *Object, err error) (*Object, error) {
	if err != nil {
		s.inflight.Add(-1)
		return nil, err
	}
	done := obj.close
	var once sync.Once
	obj.close = func() error {
		once.Do(func() { s.inflight.Add(-1) })
		if done == nil {
			return nil
		}
		return done()
	}
	return obj, nil
}

// RefreshMembers reads the member list now (tests; Run does it every MemberRefresh).
func (s *Store) RefreshMembers(ctx context.Context) error { return s.members.refresh(ctx) }

// Close cancels builds in progress, waits for them, and closes the connections to other
// nodes. Reads after Close fail.
func (s *Store) Close() error {
	s.stop()
	s.fills.Close()
	s.measures.Close()
	return s.peers.Close()
}

// Stats are the store's counters since start.
func (s *Store) Stats() Stats { return s.met.stats() }

// Owner returns the node that owns key now and whether that is this node.
func (s *Store) Owner(key string) (node string, self bool) {
	n, _ := s.members.ownerOf(key)
	return n, n == s.o.NodeID
}

// Members are the file servers known now (the last member list read), with their gRPC
// addresses.
func (s *Store) Members() map[string]string { return s.members.snapshot() }

// Created tells the store that keys were just recorded in Postgres (by this process), so
// that a miss it remembers of them (Options.MissTTL) does not hide them.
func (s *Store) Created(keys ...string) { s.objects.Created(keys...) }

// Open opens key, or the range rng of it (nil: all of it), at its owner. With infoOnly the
// object has no Body (HEAD). The owner's errors come back as they were answered there.
func (s *Store) Open(ctx context.Context, key string, rng *Range, infoOnly bool) (*Object, error) {
	if err := ValidKey(key); err != nil {
		return nil, err
	}
	s.inflight.Add(1)
	return s.track(s.open(ctx, key, rng, infoOnly))
}

func (s *Store) open(ctx context.Context, key string, rng *Range, infoOnly bool) (*Object, error) {
	node, addr := s.members.ownerOf(key)
	if node == s.o.NodeID || addr == "" {
		return s.openLocal(ctx, key, rng, infoOnly)
	}
	obj, err := s.forward(ctx, node, addr, key, rng, infoOnly)
	var un *unreachedError
	if errors.As(err, &un) && ctx.Err() == nil {
		// The owner did not answer at all (it crashed and its membership has not
		// expired yet, say). Ownership only keeps one copy of each file in the fleet's
		// caches; any node builds the same verified bytes, so serve it here.
		if s.logOnce("unreachable "+node, 10*time.Second) {
			s.log.WarnContext(ctx, "owner unreachable; serving its files here (logged once per 10s per owner)",
				"key", key, "owner", node, "addr", addr, "error", un.err)
		}
		s.met.forwarded(ctx, "fallback")
		return s.openLocal(ctx, key, rng, infoOnly)
	}
	return obj, err
}

// logOnce reports whether a line about what may be logged now: at most once per every.
func (s *Store) logOnce(what string, every time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.logged[what]) < every {
		return false
	}
	s.logged[what] = time.Now()
	return true
}

// openLocal serves key from this node's cache, building it first when needed.
func (s *Store) openLocal(ctx context.Context, key string, rng *Range, infoOnly bool) (*Object, error) {
	// A file evicted between its build and our open (a cache far too small for the
	// builds in flight) is built again, a bounded number of times.
	for attempt := range 3 {
		if f, ok := s.o.Cache.Get(key); ok {
			if !s.cachedGone(ctx, f.Entry) {
				if attempt == 0 {
					s.met.hit(ctx)
				}
				return s.fromFile(f, rng, infoOnly, attempt == 0)
			}
			f.Close() // dropped or removed, and evicted: read as a miss
		}
		if attempt == 0 {
			s.met.miss(ctx)
		}
		if err := s.known(key); err != nil {
			return nil, err
		}
		if err := s.fillShared(ctx, key); err != nil {
			return nil, err
		}
	}
	return nil, apierr.New(apierr.ResourceExhausted, "file %s was evicted from the cache before it could be served: --cache-bytes is too small for the reads in flight", key)
}

func (s *Store) fromFile(f *filecache.File, rng *Range, infoOnly, hit bool) (*Object, error) {
	off, n, err := rng.Resolve(f.Size)
	if err != nil {
		f.Close()
		return nil, err
	}
	obj := &Object{Info: Info{Size: f.Size, ETag: f.ETag, LastModified: f.LastModified, Offset: off, Length: n,
		ServedBy: s.o.NodeID, CacheHit: hit}}
	if infoOnly {
		f.Close()
		return obj, nil
	}
	body, err := f.Section(off, n)
	if err != nil {
		f.Close()
		return nil, err
	}
	obj.Body, obj.close = body, f.Close
	return obj, nil
}

// stopping is err, or the error of a read the store no longer serves once it closes.
func (s *Store) stopping(err error) error {
	if errors.Is(err, flight.ErrClosed) {
		return apierr.Wrap(apierr.Unavailable, errStopping, "file server %s", s.o.NodeID)
	}
	return err
}
