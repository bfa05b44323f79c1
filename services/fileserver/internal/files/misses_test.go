package files

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pg"
)

// countingDB counts every exchange with Postgres.
type countingDB struct {
	pg.DB
	n atomic.Int64
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.n.Add(1)
	return c.DB.Exec(ctx, sql, args...)
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n.Add(1)
	return c.DB.Query(ctx, sql, args...)
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

func (c *countingDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	c.n.Add(1)
	return c.DB.SendBatch(ctx, b)
}

func (c *countingDB) Begin(ctx context.Context) (pgx.Tx, error) {
	c.n.Add(1)
	return c.DB.Begin(ctx)
}

// TestUnknownKeysCostNoQueries: 10,000 GETs of a few unknown keys, sent to two file
// servers (half of them forwarded to the key's owner), ask Postgres about once per key;
// a key recorded after its miss (a commit elsewhere) is served within the miss TTL, and at
// once when this process recorded it (Created).
func TestUnknownKeysCostNoQueries(t *testing.T) {
	var cdb countingDB
	e := newMeasureEnvOver(t, func(db pg.DB) pg.DB { cdb.DB = db; return &cdb }, "fs-1", "fs-2")
	ctx := e.ctx
	var unknown []string
	for i := range 8 {
		unknown = append(unknown, layout.MetadataKey("default", "clicks", fmt.Sprintf("snap-%d-unknown.avro", i)))
	}
	owners := map[string]int{}
	for _, k := range unknown {
		n, _ := e.stores["fs-1"].Owner(k)
		owners[n]++
	}
	if len(owners) != 2 {
		t.Fatalf("the unknown keys should be owned by both nodes, got %v", owners)
	}
	cdb.n.Store(0)
	began := time.Now()
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for g := range 16 {
		s := e.stores[fmt.Sprintf("fs-%d", g%2+1)]
		wg.Go(func() {
			for i := range 10_000 / 16 {
				_, err := s.Open(ctx, unknown[(g+i)%len(unknown)], nil, false)
				if apierr.Classify(err) != apierr.NotFound {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if wrong.Load() > 0 {
		t.Fatalf("%d GETs of unknown keys did not answer NotFound", wrong.Load())
	}
	// Concurrent first reads of a key share one lookup at its owner; a run longer than the
	// miss TTL (a slow machine, the race detector) asks once more per TTL passed.
	ttls := int64(time.Since(began)/objects.DefaultMissTTL) + 1
	if n := cdb.n.Load(); n > (ttls+2)*int64(len(unknown)) {
		t.Fatalf("10,000 GETs of %d unknown keys made %d Postgres queries", len(unknown), n)
	}
	t.Logf("10,000 GETs of %d unknown keys: %d Postgres queries", len(unknown), cdb.n.Load())

	// Recorded after its miss by another process: served within the TTL.
	late := unknown[0]
	missed := time.Now()
	addMeta := func(key string) {
		t.Helper()
		if _, err := e.db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, $2, $3)`,
			e.table.ID, key, []byte("content of "+key)); err != nil {
			t.Fatal(err)
		}
	}
	addMeta(late)
	obj := await.For(t, objects.DefaultMissTTL+2*time.Second, "a key recorded after its miss to be served (404 until its TTL passes)", func() (*Object, bool) {
		obj, err := e.stores["fs-2"].Open(ctx, late, nil, false)
		if err != nil && apierr.Classify(err) != apierr.NotFound {
			t.Fatalf("late key: %v", err)
		}
		return obj, err == nil
	})
	b, err := io.ReadAll(obj.Body)
	obj.Close()
	if err != nil || string(b) != "content of "+late {
		t.Fatalf("late key: %q, %v", b, err)
	}
	if waited := time.Since(missed); waited > objects.DefaultMissTTL+time.Second {
		t.Fatalf("a key recorded after its miss was served %v later, TTL %v", waited, objects.DefaultMissTTL)
	}

	// Recorded by this process: its owner forgets the miss at once.
	soon := unknown[1]
	owner, _ := e.stores["fs-1"].Owner(soon)
	addMeta(soon)
	e.stores[owner].Created(soon)
	obj, err = e.stores["fs-1"].Open(ctx, soon, nil, true)
	if err != nil {
		t.Fatalf("a key Created forgot the miss of: %v", err)
	}
	obj.Close()
}
