// Package flight runs one build per key at a time: callers that ask for a key while its
// build runs wait for that build and share its result. It is the one "single flight" of
// the repository (file builds, tail measures, load snapshots, registry fetches); unlike
// golang.org/x/sync/singleflight, a build runs apart from its callers and a Group
// waits for its builds when closed.
package flight

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is what Do answers once the group is closed or its context has ended.
var ErrClosed = errors.New("flight: closed")

// Group holds the builds under way, by key. The zero value is not usable: call New.
type Group[V any] struct {
	base   context.Context
	mu     sync.Mutex
	closed bool
	calls  map[string]*call[V]
	wg     sync.WaitGroup
}

// call is one build and the callers waiting for it.
type call[V any] struct {
	b    Build
	done chan struct{}
	v    V
	err  error
}

// Build is a build under way, as its function sees it. Until Begin it is provisional:
// when every caller waiting for it gives up first, it is dropped (its Context ends, Begin
// answers false) and the next caller of its key starts another. Once begun it runs to its
// end whoever waits: the next caller will want its result.
type Build struct {
	mu        *sync.Mutex // the group's
	ctx       context.Context
	cancel    context.CancelFunc
	waiters   int
	begun     bool
	abandoned bool
}

// Context ends when the build is dropped before it began, or when the group's context
// ends. A build waits for what it needs to begin (a slot, say) under it.
func (b *Build) Context() context.Context { return b.ctx }

// Begin marks the build begun, unless every caller has given up: then it answers false
// and the build must not begin (another caller's build of the key may be under way).
func (b *Build) Begin() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.abandoned {
		return false
	}
	b.begun = true
	return true
}

// New returns a Group whose builds run under base: they are told to stop (their Context
// ends) when base ends. Cancel base, then Close.
func New[V any](base context.Context) *Group[V] {
	return &Group[V]{base: base, calls: map[string]*call[V]{}}
}

// Do returns the result of key's build: the one under way, or a new one running build.
// joined reports that another caller began it. A caller whose ctx ends stops waiting at
// once with ctx's error; the build goes on for the others (or is dropped, when nobody
// waits and it has not begun). After Close, or once the group's context has ended, Do
// answers ErrClosed.
func (g *Group[V]) Do(ctx context.Context, key string, build func(*Build) (V, error)) (v V, joined bool, err error) {
	g.mu.Lock()
	c, joined := g.calls[key]
	if !joined {
		if g.closed || g.base.Err() != nil {
			g.mu.Unlock()
			return v, false, ErrClosed
		}
		c = &call[V]{done: make(chan struct{})}
		c.b.mu = &g.mu
		c.b.ctx, c.b.cancel = context.WithCancel(g.base)
		g.calls[key] = c
		g.wg.Add(1)
		go g.run(key, c, build)
	}
	c.b.waiters++
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.v, joined, c.err
	case <-ctx.Done():
		g.mu.Lock()
		b := &c.b
		b.waiters--
		if b.waiters == 0 && !b.begun && !b.abandoned {
			b.abandoned = true
			b.cancel()
			if g.calls[key] == c {
				delete(g.calls, key) // the next caller starts a build of its own
			}
		}
		g.mu.Unlock()
		return v, joined, ctx.Err()
	}
}

func (g *Group[V]) run(key string, c *call[V], build func(*Build) (V, error)) {
	defer g.wg.Done()
	defer c.b.cancel()
	v, err := build(&c.b)
	g.mu.Lock()
	if g.calls[key] == c {
		delete(g.calls, key)
	}
	g.mu.Unlock()
	c.v, c.err = v, err
	close(c.done)
}

// Len is how many keys have a build under way (a provisional one included).
func (g *Group[V]) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.calls)
}

// Has reports whether key has a build under way.
func (g *Group[V]) Has(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.calls[key]
	return ok
}

// Waiting is how many callers wait for key's build now.
func (g *Group[V]) Waiting(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.calls[key]; ok {
		return c.b.waiters
	}
	return 0
}

// Close refuses new builds and waits for those under way (cancel the group's context
// first to hurry them).
func (g *Group[V]) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
