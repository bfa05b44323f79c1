package objects

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// rowCounter counts the single-row queries (Lookup's) that reach Postgres.
type rowCounter struct {
	pg.DB
	n atomic.Int64
}

func (c *rowCounter) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

// TestLookupsCacheMisses: 10,000 lookups of a few unknown keys from many goroutines
// reach Postgres about once per key; a key recorded after its miss is found once the
// TTL has passed, or at once when Created says so; a known key is never cached as a miss.
func TestLookupsCacheMisses(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, false)
	tbl, err := tables.Create(ctx, db, tables.Table{Namespace: "ns", Name: "t", Topic: "t",
		Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := &bucket{db: db, tables: map[string]tables.Table{}}
	b.addData(t, tbl, "ns/t/data/_kafka_partition=0/known.parquet", 0, 0, committed)
	cdb := &rowCounter{DB: db}
	const ttl = 300 * time.Millisecond
	l := NewLookups(cdb, ttl, 100)
	unknown := []string{"ns/t/data/a.parquet", "ns/t/data/b.parquet", "ns/other/x.parquet", "nope/y", "ns/t/data/_kafka_partition=0/late.parquet"}
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for g := range 20 {
		wg.Go(func() {
			for i := range 500 {
				_, err := l.Lookup(ctx, unknown[(g+i)%len(unknown)])
				if apierr.Classify(err) != apierr.NotFound {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if wrong.Load() > 0 {
		t.Fatalf("%d lookups of unknown keys did not answer NotFound", wrong.Load())
	}
	// Concurrent first lookups of one key may each query before the first miss is kept.
	if n := cdb.n.Load(); n > 20*int64(len(unknown)) || n < int64(len(unknown)) {
		t.Fatalf("10,000 lookups of %d unknown keys made %d queries", len(unknown), n)
	}
	t.Logf("10,000 lookups of %d unknown keys: %d queries", len(unknown), cdb.n.Load())

	// A known key is looked up every time: only misses are cached.
	before := cdb.n.Load()
	for range 3 {
		if r, err := l.Lookup(ctx, "ns/t/data/_kafka_partition=0/known.parquet"); err != nil || !r.Data {
			t.Fatalf("known key: %+v, %v", r, err)
		}
	}
	if got := cdb.n.Load() - before; got != 3 {
		t.Fatalf("3 lookups of a known key made %d queries", got)
	}

	// A key recorded after its miss: NotFound from memory until the TTL, then found.
	late := unknown[4]
	missed := time.Now()
	if _, err := l.Lookup(ctx, late); apierr.Classify(err) != apierr.NotFound {
		t.Fatalf("late key before it exists: %v", err)
	}
	b.addData(t, tbl, late, 0, 5, committed)
	await.For(t, 5*time.Second, "the late key to be found after it was recorded", func() (error, bool) {
		_, err := l.Lookup(ctx, late)
		if err != nil && apierr.Classify(err) != apierr.NotFound {
			t.Fatalf("late key after it was recorded: %v", err)
		}
		return err, err == nil
	})
	if waited := time.Since(missed); waited > ttl+time.Second {
		t.Fatalf("a key recorded after its miss was found %v later, TTL %v", waited, ttl)
	}

	// Created forgets a miss at once.
	soon := "ns/t/data/_kafka_partition=0/soon.parquet"
	if _, err := l.Lookup(ctx, soon); apierr.Classify(err) != apierr.NotFound {
		t.Fatalf("soon before it exists: %v", err)
	}
	b.addData(t, tbl, soon, 0, 6, committed)
	l.Created(soon)
	if _, err := l.Lookup(ctx, soon); err != nil {
		t.Fatalf("a key Created forgot the miss of: %v", err)
	}
}

// TestLookupsBounded: the negative cache holds at most its size, the least recently
// asked key going first; a negative TTL caches nothing.
func TestLookupsBounded(t *testing.T) {
	ctx := context.Background()
	cdb := &rowCounter{DB: newDB(t, false)}
	l := NewLookups(cdb, time.Minute, 2)
	for _, k := range []string{"a/1", "a/2", "a/3", "a/1"} {
		l.Lookup(ctx, k)
	}
	if n := cdb.n.Load(); n != 4 {
		t.Fatalf("with room for 2 misses, a/1 after a/2 and a/3 should be queried again: %d queries, want 4", n)
	}
	none := NewLookups(cdb, -1, 0)
	before := cdb.n.Load()
	none.Lookup(ctx, "a/1")
	none.Lookup(ctx, "a/1")
	if got := cdb.n.Load() - before; got != 2 || none.MissTTL() != 0 {
		t.Fatalf("with no negative cache: %d queries, want 2; MissTTL %v", got, none.MissTTL())
	}
}
