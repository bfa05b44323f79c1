package files

import (
	"context"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/objects"
)

// Warming: the owner of a newly committed data file builds it into its cache before
// anyone asks, so that a scan of recent data is a cache hit. Every WarmInterval, at each
// commit (LISTEN), and whenever a warm build ends, the store reads the data files
// committed since its last look, with the commits' manifest lists and manifests
// (objects.Recent: index scans of the newest commits; a live load's tail file counts
// from its commit, not its creation) and queues the ones it owns, newest first, each
// commit's manifests before its data files: what a scan is likeliest to read next. It
// builds up to WarmBuilds of them at once (a share of the build slots, so readers always
// find some), sharing each build with any reader who asks meanwhile, and only while the node is idle
// enough (fewer than WarmBusyReads reads in flight) and its cache has room (under
// WarmCacheShare full, so warming never evicts much of what readers use). A file skipped
// because the node is busy waits in the queue (bounded: the oldest go first); one
// skipped because the cache is full is dropped, and read on demand if ever asked for.
//
// The same look tells this node's negative cache of the new keys, so a commit elsewhere
// is served within WarmInterval even by a node that answered 404 for it just before.

// Default bounds of warming.
const (
	DefaultWarmInterval   = time.Second
	DefaultWarmLookback   = 10 * time.Minute
	DefaultWarmBusyReads  = 4
	DefaultWarmCacheShare = 0.8
	warmQueue             = 1000             // files waiting to be warmed, at most
	warmBatch             = 1000             // files one look reads, at most
	warmSlack             = 10 * time.Second // how long a commit's transaction may run
)

// WarmStats count what warming did since start.
type WarmStats struct {
	Looks       int64 // reads of the newly committed files
	Listening   bool  // told of commits as they happen (else it looks every WarmInterval only)
	Warmed      int64 // files built into the cache before anyone asked
	SkippedBusy int64 // rounds cut short because the node was serving reads
	SkippedFull int64 // files dropped because the cache was over WarmCacheShare full
	Failed      int64
}

// warmer is the store's queue of files to warm, and its builds under way.
type warmer struct {
	since time.Time // database clock: the next look reads files committed at or after it
	queue []objects.RecentFile
	seen  *lru.Cache[string, struct{}] // queued or done: a look overlaps the one before
	slots chan struct{}                // a token per warm build running: at most WarmBuilds
	ended chan struct{}                // a warm build ended: there is room for the next
	wg    sync.WaitGroup
}

func (s *Store) newWarmer() *warmer {
	seen, _ := lru.New[string, struct{}](4 * warmBatch)
	return &warmer{seen: seen, slots: make(chan struct{}, s.o.WarmBuilds), ended: make(chan struct{}, 1)}
}

// wait waits for the warm builds under way.
func (w *warmer) wait() { w.wg.Wait() }

func (s *Store) warmEnabled() bool { return s.o.WarmInterval > 0 }

// warm runs warming rounds until ctx ends.
func (s *Store) warm(ctx context.Context) {
	w := s.newWarmer()
	defer w.wait()
	kick := make(chan struct{}, 1)
	go s.watchCommits(ctx, kick)
	t := time.NewTicker(s.o.WarmInterval)
	defer t.Stop()
	for {
		s.warmRound(ctx, w)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		case <-w.ended:
		}
	}
}

// watchCommits kicks warming whenever a commit records data files, so that they are
// warmed at once rather than at the next tick; the ticker alone is the fallback while
// Postgres cannot be listened to.
func (s *Store) watchCommits(ctx context.Context, kick chan<- struct{}) {
	notify := func() {
		s.warmStats.Listening.Store(true)
		select {
		case kick <- struct{}{}:
		default: // a look is due already; it reads this commit too
		}
	}
	for ctx.Err() == nil {
		err := objects.WatchCommits(ctx, s.o.DB, notify)
		s.warmStats.Listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		if s.logOnce("warm watch", time.Minute) {
			s.log.WarnContext(ctx, "cannot listen for commits; warming looks every interval only (logged once a minute)",
				"interval", s.o.WarmInterval, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(max(s.o.WarmInterval, time.Second)):
		}
	}
}

// warmRound looks for new files and starts builds of the queued ones while it may; they
// run on after it returns (warmer.wait).
func (s *Store) warmRound(ctx context.Context, w *warmer) {
	if err := s.warmLook(ctx, w); err != nil && ctx.Err() == nil {
		if s.logOnce("warm look", time.Minute) {
			s.log.WarnContext(ctx, "could not read the newly committed files to warm (logged once a minute)", "error", err)
		}
	}
	for len(w.queue) > 0 && ctx.Err() == nil {
		if s.inflight.Load() >= int64(s.o.WarmBusyReads) {
			s.warmStats.SkippedBusy.Add(1)
			return // readers first; the queue waits for the next round
		}
		select {
		case w.slots <- struct{}{}:
		default:
			return // WarmBuilds are under way; the next to end starts a round
		}
		f := w.queue[0]
		w.queue = w.queue[1:]
		if !s.members.owns(f.Key) || s.o.Cache.Contains(f.Key) {
			<-w.slots
			continue
		}
		if st := s.o.Cache.Stats(); float64(st.Bytes+st.Reserved+f.Size) > s.o.WarmCacheShare*float64(st.Max) {
			<-w.slots
			s.warmStats.SkippedFull.Add(1)
			continue
		}
		w.wg.Go(func() {
			defer func() {
				<-w.slots
				select {
				case w.ended <- struct{}{}:
				default:
				}
			}()
			if err := s.fillShared(ctx, f.Key); err != nil {
				if ctx.Err() == nil && apierr.Classify(err) != apierr.NotFound { // collected meanwhile: nothing to warm
					s.warmStats.Failed.Add(1)
					s.log.DebugContext(ctx, "could not warm a file; it is built on demand", "key", f.Key, "error", err)
				}
				return
			}
			s.warmStats.Warmed.Add(1)
		})
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// warmLook reads the files committed since the last look and queues those this node
// owns, newest first.
func (s *Store) warmLook(ctx context.Context, w *warmer) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	defer cancel()
	since := w.since
	if since.IsZero() {
		since = time.Now().Add(-s.o.WarmLookback) // the first look: the node's clock is close enough
	}
	fs, now, err := objects.Recent(ctx, s.o.DB, since, warmBatch)
	if err != nil {
		return err
	}
	s.warmStats.Looks.Add(1)
	w.since = now.Add(-warmSlack)
	var keys []string
	for _, f := range fs {
		if w.seen.Contains(f.Key) {
			continue
		}
		w.seen.Add(f.Key, struct{}{})
		keys = append(keys, f.Key)
		if s.members.owns(f.Key) {
			w.queue = append(w.queue, f)
		}
	}
	if len(keys) > 0 {
		s.Created(keys...) // committed: whatever this node remembers as missing is not
	}
	slices.SortStableFunc(w.queue, func(a, b objects.RecentFile) int {
		if c := b.Committed.Compare(a.Committed); c != 0 {
			return c
		}
		return cmpBool(b.Meta, a.Meta) // a commit's manifests first: a scan reads them first
	})
	if len(w.queue) > warmQueue {
		w.queue = w.queue[:warmQueue]
	}
	return nil
}
