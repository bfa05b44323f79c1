// Package files is a file server's read path. Every file (data or metadata) has one owner
// among the live file servers (pkg/owner over the member list, by OwnerKey: a data
// file's table, partition and offsets). Open sends a read to the
// owner: this node, or another one over gRPC (mink.file.v1.FileService). The owner serves
// the file from its disk cache, or builds it first: a data file from its Kafka offsets,
// checked against the size and checksum recorded in mink_data_files; a metadata file from
// mink_meta_files (pkg/objects looks both up). Concurrent reads of a file being built
// share the build. Measure builds the tail files of live table loads at their owners
// (tail.go). List reads a page of the bucket's listing (list.go). Run also warms: the
// owner of a newly committed data file builds it before anyone asks (warm.go). A key
// Postgres records nothing for is answered 404 from memory for Options.MissTTL
// (objects.Lookups), so a flood of unknown keys costs no query per GET.
//
// What a read needs when the file is cached is all in the cache, and the member list is
// held in memory, so cached files are still served while Postgres or Kafka is down. So is
// what says a cached file is gone (its table dropped, or the file collected): gone.go.
package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/minkhq/mink/pkg/atomicmax"
	"github.com/minkhq/mink/pkg/filecache"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/peers"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/upsert"
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

	mu       sync.Mutex
	closed   bool
	flights  map[string]*flight
	measures map[string]*measureFlight // tail builds under way, by span and budget
	measured map[string]recalled       // tail builds of the last minute
	problems map[string]problem
	logged   map[string]time.Time // rate-limited log lines: when last logged
	created  time.Time            // the bucket's creation date, once read
	builds   sync.WaitGroup
}

// flight is one build that every concurrent reader of the file waits for.
type flight struct {
	claim
	done chan struct{}
	err  error
}

// claim is what the readers waiting for a build hold on it until it starts: a build
// waits for a slot only while one of them still wants it, so readers that give up (their
// context ends) while builds queue leave no build behind them. Once started, a build runs
// to its end under the store's context: the next reader will want the file. Guarded by
// Store.mu.
type claim struct {
	waiters   int
	started   bool
	abandoned bool
	wait      context.Context // ends when abandoned (or the store closes)
	cancel    context.CancelFunc
}

func (s *Store) newClaim() claim {
	ctx, cancel := context.WithCancel(s.base)
	return claim{wait: ctx, cancel: cancel}
}

// leave drops one waiter of c and reports whether c is abandoned now: no one waits, and
// its build has not started (it will not).
func (s *Store) leave(c *claim) bool {
	c.waiters--
	if c.waiters == 0 && !c.started {
		c.abandoned = true
		c.cancel()
	}
	return c.abandoned
}

// begin marks c's build started, unless every reader has gone: then it must not start
// (another reader's build of the same file may be under way).
func (s *Store) begin(c *claim) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.abandoned {
		return false
	}
	c.started = true
	return true
}

// buildSlot waits for one of the BuildConcurrency build slots for c's build of what (a
// key, or a tail's span); release it when the build ends. It fails when every reader of
// the build has gone first.
func (s *Store) buildSlot(c *claim, what string) (release func(), err error) {
	select {
	case s.slots <- struct{}{}:
	case <-c.wait.Done():
		return nil, c.wait.Err()
	}
	if !s.begin(c) { // the slot came as the last reader left
		<-s.slots
		return nil, context.Canceled
	}
	atomicmax.Store(&s.buildsPeak, s.buildsRunning.Add(1))
	if s.slotTaken != nil {
		s.slotTaken(what)
	}
	return func() {
		s.buildsRunning.Add(-1)
		<-s.slots
	}, nil
}

// BuildStats are the builds from Kafka running now and the most that ran at once.
type BuildStats struct {
	Running, Peak int64
	PagesInMemory int64 // bytes of finished pages the builds hold in memory now
	PagesPeak     int64 // the most they held at once
	PagesSpilled  int64 // bytes of pages written to temporary files, in all
}

// BuildStats reads the build counters.
func (s *Store) BuildStats() BuildStats {
	return BuildStats{Running: s.buildsRunning.Load(), Peak: s.buildsPeak.Load(),
		PagesInMemory: s.pages.InMemory(), PagesPeak: s.pages.Peak(), PagesSpilled: s.pages.Spilled()}
}

// problem is a file known not to be rebuildable with its recorded bytes.
type problem struct {
	err   error
	until time.Time
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
		flights:  map[string]*flight{},
		measures: map[string]*measureFlight{},
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
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.builds.Wait()
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

// known returns the error of a file recently found not rebuildable, if any.
func (s *Store) known(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.problems[key]
	if !ok {
		return nil
	}
	if time.Now().After(p.until) {
		delete(s.problems, key)
		return nil
	}
	return p.err
}

// fillShared builds key into the cache, or waits for the build already under way. The
// build runs under the store's context, not the caller's: a reader that hangs up does
// not waste the build the next reader will want. A build that has not started yet (it
// waits for a slot) is dropped when every reader waiting for it has gone.
func (s *Store) fillShared(ctx context.Context, key string) error {
	s.mu.Lock()
	f, ok := s.flights[key]
	if !ok {
		if s.closed {
			s.mu.Unlock()
			return apierr.Wrap(apierr.Unavailable, errStopping, "file server %s", s.o.NodeID)
		}
		f = &flight{claim: s.newClaim(), done: make(chan struct{})}
		s.flights[key] = f
		s.builds.Add(1)
		go func() {
			defer s.builds.Done()
			defer f.cancel()
			err := s.fill(key, &f.claim)
			s.mu.Lock()
			if s.flights[key] == f {
				delete(s.flights, key)
			}
			s.mu.Unlock()
			f.err = err
			close(f.done)
		}()
	}
	f.waiters++
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		s.mu.Lock()
		if s.leave(&f.claim) && s.flights[key] == f {
			delete(s.flights, key) // the next reader starts a build of its own
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

// lookup reads what Postgres records of key.
func (s *Store) lookup(ctx context.Context, key string) (objects.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	defer cancel()
	r, err := s.objects.Lookup(ctx, key)
	if err != nil && apierr.Classify(err) != apierr.NotFound {
		return r, apierr.Postgres(err, "look up %s", key)
	}
	return r, err
}

// fill builds key into the cache; a data file's build waits for a slot (c's).
func (s *Store) fill(key string, c *claim) error {
	ctx, cancel := context.WithTimeout(s.base, s.o.BuildTimeout)
	defer cancel()
	r, err := s.lookup(ctx, key)
	if err != nil {
		if apierr.Classify(err) != apierr.NotFound { // an unknown key is no build
			s.met.buildFailed(ctx, "unknown", reasonOf(err))
		}
		return err
	}
	if !r.Data {
		if !s.begin(c) { // no slot to wait for: a copy of r.Content
			return context.Canceled
		}
		return s.fillMeta(ctx, r)
	}
	if r.DeletesOf != "" {
		// From the index alone, not Kafka: no build slot, as for metadata.
		if !s.begin(c) {
			return context.Canceled
		}
		return s.fillDeletes(ctx, r)
	}
	return s.fillData(ctx, r, c)
}

// fillDeletes builds an upsert table's position delete file from the index alone (the
// key hashes of the partition's ranges), checked against its recorded bytes.
func (s *Store) fillDeletes(ctx context.Context, r objects.Record) error {
	var settings parquetbuild.Settings
	if err := json.Unmarshal(r.Settings, &settings); err != nil {
		s.met.buildFailed(ctx, "deletes", "error")
		return apierr.Wrap(apierr.Internal, err, "file %s: its recorded settings do not decode", r.Key)
	}
	d := rangefile.Deletes{Table: r.TableID, Partition: r.Partition, Start: r.Start, End: r.End, DataKey: r.DeletesOf, CoverEnd: r.CoverEnd, Tail: r.DeletesTail}
	err := s.commit(r, r.SHA256, func(w io.Writer) (int64, error) {
		fs, err := rangefile.BuildDeletes(ctx, s.o.DB, s.o.Keys, d, settings, w)
		if err != nil {
			if c := apierr.Classify(err); c == apierr.Unavailable || c == apierr.DeadlineExceeded {
				return 0, apierr.Postgres(err, "build %s", r.Key)
			}
			return 0, apierr.Failed(err, "build %s", r.Key)
		}
		if fs.Size != r.Size || fs.SHA256 != r.SHA256 {
			// Only a changed index can do this (a range re-derived after compaction, for
			// the snapshots before it): never serve other bytes than the manifest
			// describes, and tell the writer, which expires the snapshots naming it.
			detail := fmt.Sprintf("delete file rebuilt from the index as %d bytes with sha256 %s, but %d bytes with sha256 %s were recorded; its partition's ranges were re-derived since (compaction)",
				fs.Size, fs.SHA256, r.Size, r.SHA256)
			err := replacing(fmt.Errorf("%w: %s", rangefile.ErrMismatch, detail), "the index of its records changed since (compaction)")
			s.reportProblem(r, "", "mismatch", detail, err) // the log names the table by id
			return 0, err
		}
		return fs.Size, nil
	})
	if err != nil {
		s.met.buildFailed(ctx, "deletes", reasonOf(err))
		return err
	}
	s.met.built(ctx, "deletes")
	return nil
}

func (s *Store) fillMeta(ctx context.Context, r objects.Record) error {
	sum := sha256.Sum256(r.Content)
	err := s.commit(r, hex.EncodeToString(sum[:]), func(w io.Writer) (int64, error) {
		n, err := w.Write(r.Content)
		return int64(n), err
	})
	if err != nil {
		s.met.buildFailed(ctx, "metadata", reasonOf(err))
		return err
	}
	s.met.built(ctx, "metadata")
	return nil
}

func (s *Store) fillData(ctx context.Context, r objects.Record, c *claim) error {
	release, err := s.buildSlot(c, r.Key)
	if err != nil {
		return err // no reader wants it any more
	}
	defer release()
	start := time.Now()
	t, err := tables.GetByID(ctx, s.o.DB, r.TableID)
	if err != nil {
		if apierr.Classify(err) == apierr.NotFound {
			err = apierr.New(apierr.NotFound, "no file %s in bucket mink: its table (id %d) was dropped", r.Key, r.TableID)
		} else {
			err = apierr.Postgres(err, "look up the table of %s", r.Key)
		}
		s.met.buildFailed(ctx, "data", reasonOf(err))
		return err
	}
	if t.TopicLost != "" {
		// Its topic was created again: Kafka holds other records at these offsets, so a
		// build would only find bytes that differ (and report them for repair).
		err := tables.TopicLostError(t, t.TopicLost)
		s.met.buildFailed(ctx, "data", reasonOf(err))
		return err
	}
	var settings parquetbuild.Settings
	if err := json.Unmarshal(r.Settings, &settings); err != nil {
		err = apierr.Wrap(apierr.Internal, err, "file %s: its recorded settings do not decode", r.Key)
		s.met.buildFailed(ctx, "data", "error")
		return err
	}
	err = s.commit(r, r.SHA256, func(w io.Writer) (int64, error) {
		fs, err := rangefile.BuildOffsets(ctx, s.o.Kafka, s.o.Codecs, t, settings, r.Partition, r.Start, r.End, w, parquetbuild.WithPages(s.pages))
		if err != nil {
			return 0, s.buildErr(ctx, t, r, err)
		}
		if fs.Size != r.Size || fs.SHA256 != r.SHA256 {
			detail := fmt.Sprintf("rebuilt from topic %q partition %d offsets [%d, %d) it is %d bytes with sha256 %s, but %d bytes with sha256 %s were recorded; Kafka no longer yields the indexed records (compacted or rewritten?)",
				t.Topic, r.Partition, r.Start, r.End, fs.Size, fs.SHA256, r.Size, r.SHA256)
			err := replacing(fmt.Errorf("%w: %s", rangefile.ErrMismatch, detail), "Kafka no longer yields the records it was built from (compaction)")
			s.reportProblem(r, t.FullName(), "mismatch", detail, err)
			return 0, err
		}
		return fs.Size, nil
	})
	if err != nil {
		s.met.buildFailed(ctx, "data", reasonOf(err))
		return err
	}
	s.met.built(ctx, "data")
	s.log.Debug("built a data file", "key", r.Key, "table", t.FullName(), "partition", r.Partition,
		"start_offset", r.Start, "end_offset", r.End, "bytes", r.Size, "elapsed", time.Since(start))
	return nil
}

// commit writes a file into the cache through write, which checks what it wrote and
// returns its size; only a file whose written size matches the record is committed.
func (s *Store) commit(r objects.Record, sha string, write func(io.Writer) (int64, error)) error {
	if limit := s.o.Cache.Stats().Max; r.Size > limit {
		return apierr.New(apierr.ResourceExhausted, "file %s is %d bytes, more than this node's whole cache (--cache-bytes %d)", r.Key, r.Size, limit)
	}
	p, err := s.o.Cache.Create(r.Size)
	if err != nil {
		if errors.Is(err, filecache.ErrNoSpace) {
			return apierr.Wrap(apierr.ResourceExhausted, err, "no cache space to build %s now", r.Key)
		}
		return apierr.Wrap(apierr.Unavailable, err, "cannot build %s now: this node's cache cannot be written", r.Key)
	}
	n, err := write(p)
	if err == nil && (n != r.Size || p.Written() != r.Size) {
		err = apierr.New(apierr.Internal, "build %s: wrote %d bytes (measured %d), want %d", r.Key, p.Written(), n, r.Size)
	}
	if err != nil {
		p.Abort()
		return err
	}
	return p.Commit(filecache.Entry{Key: r.Key, Size: r.Size, ETag: objects.ETag(sha), LastModified: objects.LastModified(r.Created), TableID: r.TableID})
}

// buildErr says why a build from Kafka failed, naming Kafka when it is Kafka's doing.
func (s *Store) buildErr(ctx context.Context, t tables.Table, r objects.Record, err error) error {
	where := fmt.Sprintf("topic %q partition %d offsets [%d, %d)", t.Topic, r.Partition, r.Start, r.End)
	switch {
	case errors.Is(err, kafkasrc.ErrOffsetsGone):
		detail := where + " are no longer in Kafka (retention or deleted records)"
		e := replacing(fmt.Errorf("%s: %w", detail, err), "Kafka no longer holds the records it was built from (retention)")
		s.reportProblem(r, t.FullName(), "offsets_gone", detail, e)
		return e
	case errors.Is(err, kafkasrc.ErrUnavailable), errors.Is(err, kafkasrc.ErrUnknownTopic), errors.Is(err, kafkasrc.ErrNotStable):
		return apierr.Wrap(apierr.Unavailable, err, "cannot build %s from %s: kafka is unavailable", r.Key, where)
	case errors.Is(err, upsert.ErrChanged):
		// An upsert file read twice (too many latest records to hold) and compacted in
		// between: the next build reads what Kafka has now, and its check decides.
		return apierr.Wrap(apierr.Unavailable, err, "cannot build %s from %s: kafka changed while it was read; try again", r.Key, where)
	case errors.Is(err, kafkasrc.ErrClosed), s.base.Err() != nil:
		return apierr.Wrap(apierr.Unavailable, errors.Join(errStopping, err), "cannot build %s: file server %s", r.Key, s.o.NodeID)
	case ctx.Err() != nil:
		return apierr.Wrap(apierr.Unavailable, err, "building %s took longer than %v", r.Key, s.o.BuildTimeout)
	}
	return apierr.Failed(err, "build %s from %s", r.Key, where)
}

// replacing is the error of a file that Kafka no longer yields as recorded, why saying
// so in a client's words: retryable (apierr.DataLossErr), as the writer replaces the file
// at once. Nothing of the file (key, offsets, digests) is in what clients are told.
func replacing(cause error, why string) error {
	return apierr.DataLossErr(cause, "the file cannot be served now: %s; the table's writer is replacing it: retry, or load the table again", why)
}

// reportProblem reports a file that cannot be served with its recorded bytes, so that the
// table's writer replaces it: an error log line, a metric, and a row in
// mink_file_problems, which notifies the writer. The error is also remembered for
// ProblemTTL so that retries do not each rebuild the file.
func (s *Store) reportProblem(r objects.Record, table, reason, detail string, err error) {
	s.mu.Lock()
	s.problems[r.Key] = problem{err: err, until: time.Now().Add(s.o.ProblemTTL)}
	s.mu.Unlock()
	s.log.Error("file cannot be served with its recorded bytes; reported for replacement",
		"key", r.Key, "table", table, "table_id", r.TableID, "partition", r.Partition,
		"start_offset", r.Start, "end_offset", r.End, "reason", reason, "detail", detail)
	ctx, cancel := context.WithTimeout(s.base, s.o.LookupTimeout)
	defer cancel()
	s.met.reportedFile(ctx, reason)
	dbErr := objects.ReportProblem(ctx, s.o.DB, r.Key, r.TableID, reason, detail, s.o.NodeID)
	switch {
	case pg.Code(dbErr) == pg.UndefinedTable:
		s.log.Warn("mink_file_problems does not exist (schema older than the file-problems migration): the problem is only logged", "key", r.Key)
	case dbErr != nil:
		s.log.Warn("could not record the file problem in Postgres; it is logged only", "key", r.Key, "error", dbErr)
	}
}

// reasonOf labels a failure for metrics.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, rangefile.ErrMismatch):
		return "mismatch"
	case errors.Is(err, kafkasrc.ErrOffsetsGone):
		return "offsets_gone"
	}
	switch apierr.Classify(err) {
	case apierr.NotFound:
		return "not_found"
	case apierr.Unavailable:
		return "unavailable"
	case apierr.ResourceExhausted:
		return "no_space"
	}
	return "error"
}
