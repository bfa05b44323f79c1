package objects

import (
	"context"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/pg"
)

// Default bounds of a Lookups' negative cache.
const (
	DefaultMissTTL  = 2 * time.Second
	DefaultMissKeys = 100_000
)

// Lookups is Lookup with a negative cache: a key Postgres recorded nothing for is
// answered NotFound from memory for MissTTL, so a flood of GETs of unknown keys costs one
// query per key and TTL, not one per GET.
//
// The price is freshness: a key created after a miss (a commit, a live load) is
// answered 404 for up to MissTTL by a node that looked it up just before. Created
// forgets keys at once where the creating path runs in this process (a tail file
// measured here, a load snapshot recorded here, a commit seen by the warmer); elsewhere
// the TTL is the bound. Engines only ask for keys a snapshot or a load has named, after
// it was recorded, so a miss that turns into a file is rare: a client guessing ahead.
type Lookups struct {
	db  pg.DB
	ttl time.Duration

	mu     sync.Mutex
	misses *lru.Cache[string, time.Time] // key -> when the miss expires
	gen    uint64                        // bumped by Created: a lookup that began before is not cached
}

// NewLookups makes a Lookups over db: misses kept for ttl (DefaultMissTTL when 0; a
// negative ttl caches none), at most keys of them (DefaultMissKeys when 0; the least
// recently asked go first).
func NewLookups(db pg.DB, ttl time.Duration, keys int) *Lookups {
	if ttl == 0 {
		ttl = DefaultMissTTL
	}
	if keys <= 0 {
		keys = DefaultMissKeys
	}
	c, _ := lru.New[string, time.Time](keys) // only fails for a size <= 0
	return &Lookups{db: db, ttl: ttl, misses: c}
}

// MissTTL is how long a miss is remembered: the longest a created key can be answered
// NotFound by this node.
func (l *Lookups) MissTTL() time.Duration { return max(0, l.ttl) }

// Lookup is Lookup, answered from the negative cache when key was missing within MissTTL.
func (l *Lookups) Lookup(ctx context.Context, key string) (Record, error) {
	l.mu.Lock()
	until, ok := l.misses.Get(key)
	if ok && time.Now().After(until) {
		l.misses.Remove(key)
		ok = false
	}
	gen := l.gen
	l.mu.Unlock()
	if ok {
		return Record{Key: key}, notFound(key)
	}
	r, err := Lookup(ctx, l.db, key)
	if l.ttl > 0 && err != nil && apierr.Classify(err) == apierr.NotFound {
		l.mu.Lock()
		if l.gen == gen { // no key was created meanwhile: the miss may still be true
			l.misses.Add(key, time.Now().Add(l.ttl))
		}
		l.mu.Unlock()
	}
	return r, err
}

// Created forgets the misses of keys just recorded, and keeps a lookup under way from
// caching a miss read before they were.
func (l *Lookups) Created(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	for _, k := range keys {
		l.misses.Remove(k)
	}
}
