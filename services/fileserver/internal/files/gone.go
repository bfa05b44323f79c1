package files

import (
	"context"
	"sync"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/filecache"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/tables"
)

// Files that are gone. A cache hit is served without asking Postgres, so the store keeps
// in memory what tells it a file no longer exists: the live tables (tables.Live), read
// again when a table is created or dropped (LISTEN mink_tables) and every TableRefresh,
// and the keys of files removed from live tables (objects.Removed: the writer's
// collection, LISTEN mink_removed_files). Every cached file records its table's id, so a
// dropped table's files, and removed files, leave the cache as soon as this node hears
// of it; a hit on one still there (a build that ended after) is evicted and read as a
// miss, which the lookup answers: 404, or the file a re-created table of the same name
// records under that key, built anew. Keys of a new table are never served from an old
// one's cached bytes, since table ids are never reused.

// DefaultTableRefresh is Options.TableRefresh unless told otherwise.
const DefaultTableRefresh = 5 * time.Second

// goneFiles is what the store knows of files that are gone.
type goneFiles struct {
	mu    sync.Mutex
	known bool           // a look at the live tables has succeeded
	live  tables.LiveSet // as of the last look, plus tables found since (alive)
	since time.Time      // database clock: removals are read from here on
}

// gone reports whether table id was dropped, as far as the last look knows.
func (g *goneFiles) gone(id int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.known && g.live.Gone(id)
}

// alive records that table id exists (found after the last look). The set is copied, not
// changed: a look may be reading the one it replaces.
func (g *goneFiles) alive(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.known {
		return
	}
	ids := make(map[int64]bool, len(g.live.IDs)+1)
	for k := range g.live.IDs {
		ids[k] = true
	}
	ids[id] = true
	g.live.IDs = ids
}

// cachedGone reports whether the cached file e must not be served, and then evicts it:
// its table was dropped, or (a file cached by an older version, without its table) the
// key is no longer recorded or must be built again to record its table. It asks Postgres
// only about a file the last look says is gone (once: the file leaves the cache), or
// one cached without its table.
func (s *Store) cachedGone(ctx context.Context, e filecache.Entry) bool {
	ctx, cancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	defer cancel()
	if e.TableID == 0 {
		if _, err := s.objects.Lookup(ctx, e.Key); err != nil && apierr.Classify(err) != apierr.NotFound {
			return false // Postgres cannot say: cached bytes are served through its outage
		}
		s.o.Cache.Remove(e.Key)
		return true
	}
	if !s.gone.gone(e.TableID) {
		return false
	}
	// A table whose creation committed just after the last look reads as dropped by it:
	// Postgres settles that, once per such table.
	if exists, err := tables.Exists(ctx, s.o.DB, e.TableID); err == nil && exists {
		s.gone.alive(e.TableID)
		return false
	}
	s.o.Cache.Remove(e.Key)
	return true
}

// watchGone keeps goneFiles current until ctx ends: a look at once, at each notification,
// and every TableRefresh.
func (s *Store) watchGone(ctx context.Context) {
	kick := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.listenGone(ctx, kick) })
	t := time.NewTicker(s.o.TableRefresh)
	defer t.Stop()
	for {
		s.lookGone(ctx)
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-t.C:
		}
	}
}

// listenGone kicks a look whenever a table is created or dropped or a file removed; the
// ticker alone is the fallback while Postgres cannot be listened to.
func (s *Store) listenGone(ctx context.Context, kick chan<- struct{}) {
	notify := func(string, string) {
		select {
		case kick <- struct{}{}:
		default: // a look is due already; it reads this change too
		}
	}
	for ctx.Err() == nil {
		err := pg.Listen(ctx, s.o.DB, notify, tables.Channel, objects.RemovedChannel)
		if ctx.Err() != nil {
			return
		}
		if s.logOnce("gone watch", time.Minute) {
			s.log.WarnContext(ctx, "cannot listen for dropped tables and removed files; looking every interval only (logged once a minute)",
				"interval", s.o.TableRefresh, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(max(s.o.TableRefresh, time.Second)):
		}
	}
}

// lookGone reads the live tables and the files removed since the last look, and evicts
// what is gone from the cache. A failed read keeps what the last one found: cached files
// are served through a Postgres outage.
func (s *Store) lookGone(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	defer cancel()
	if live, err := tables.Live(ctx, s.o.DB); err != nil {
		s.log.DebugContext(ctx, "cannot read the live tables", "error", err)
	} else {
		s.gone.mu.Lock()
		changed := !s.gone.known || !sameTables(s.gone.live, live)
		s.gone.live, s.gone.known = live, true
		s.gone.mu.Unlock()
		if changed {
			if n := s.o.Cache.RemoveFunc(func(e filecache.Entry) bool { return live.Gone(e.TableID) }); n > 0 {
				s.log.InfoContext(ctx, "evicted the cached files of dropped tables", "files", n)
			}
		}
	}
	s.gone.mu.Lock()
	since := s.gone.since
	s.gone.mu.Unlock()
	keys, now, err := objects.Removed(ctx, s.o.DB, since)
	if err != nil {
		s.log.DebugContext(ctx, "cannot read the removed files", "error", err)
		return
	}
	n := 0
	for _, k := range keys {
		if s.o.Cache.Contains(k) {
			s.o.Cache.Remove(k)
			n++
		}
	}
	if n > 0 {
		s.log.DebugContext(ctx, "evicted removed files", "files", n)
	}
	s.gone.mu.Lock()
	s.gone.since = now.Add(-warmSlack) // a removal committed late is read again
	s.gone.mu.Unlock()
}

// sameTables reports whether two looks found the same tables.
func sameTables(a, b tables.LiveSet) bool {
	if len(a.IDs) != len(b.IDs) {
		return false
	}
	for id := range a.IDs {
		if !b.IDs[id] {
			return false
		}
	}
	return true
}
