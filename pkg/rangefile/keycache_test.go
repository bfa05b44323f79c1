package rangefile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/pkg/upsert"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

// keyPartition is an upsert table's partition 0 in a database of its own, whose ranges
// are appended with random keys.
type keyPartition struct {
	db   *pgxpool.Pool
	tbl  tables.Table
	l    lease.Lease
	rnd  *rand.Rand
	ends []int64 // range boundaries, from 0
}

func newKeyPartition(t testing.TB) *keyPartition {
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tbl, err := tables.Create(ctx, db, tables.Table{Name: "kv", Mode: tables.ModeUpsert, Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &keyPartition{db: db, tbl: tbl, l: leasetest.Take(t, db, lease.PartitionScope(tbl.ID, 0), "a"),
		rnd: rand.New(rand.NewPCG(1, 2)), ends: []int64{0}}
}

// keys draws n records of 40 keys (some tombstones) from offset start.
func (k *keyPartition) keys(start int64, n int) upsert.Keys {
	l := upsert.NewLatest(upsert.KeyHash)
	for i := range n {
		r := record.Record{Offset: start + int64(i), Key: fmt.Appendf(nil, "k%d", k.rnd.IntN(40)), Value: []byte("v")}
		if k.rnd.IntN(5) == 0 {
			r.Value = nil
		}
		l.Add(r)
	}
	_, ks := l.Finish()
	return ks
}

// add appends n ranges of 10 records each.
func (k *keyPartition) add(t testing.TB, n int) {
	for range n {
		start := k.ends[len(k.ends)-1]
		r := ranges.Range{Table: k.tbl.ID, Partition: 0, Start: start, End: start + 10, Records: 1, Size: 1,
			SHA256: fmt.Sprint("sha", start), Settings: []byte(`{}`), Stats: []byte(`[]`), Keys: k.keys(start, 10).Encode()}
		if err := ranges.Append(context.Background(), k.db, k.l, r); err != nil {
			t.Fatal(err)
		}
		k.ends = append(k.ends, start+10)
	}
}

// files are data files over the partition's ranges: single ranges and assembled runs.
func (k *keyPartition) files() [][2]int64 {
	var out [][2]int64
	for i := 0; i+1 < len(k.ends); {
		j := min(len(k.ends)-1, i+1+k.rnd.IntN(3))
		out = append(out, [2]int64{k.ends[i], k.ends[j]})
		i = j
	}
	return out
}

// check: every file's deletes up to cover, with tail files tail, are the same through c
// as merged from Postgres without a cache.
func (k *keyPartition) check(t *testing.T, c *KeyCache, cover int64, tail []string) {
	t.Helper()
	ctx := context.Background()
	want, err := (*KeyCache)(nil).Partition(ctx, k.db, k.tbl.ID, 0, 0, cover, tail)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Partition(ctx, k.db, k.tbl.ID, 0, 0, cover, tail)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range k.files() {
		if f[1] > cover {
			break
		}
		d := Deletes{Table: k.tbl.ID, Start: f[0], End: f[1], CoverEnd: cover, DataKey: fmt.Sprint(f), Tail: tail}
		w, werr := want.Deletes(d)
		g, gerr := got.Deletes(d)
		if (werr == nil) != (gerr == nil) || !slices.Equal(w, g) {
			t.Fatalf("file %v cover %d tail %v: cached %v (%v), merged %v (%v)", f, cover, tail, g, gerr, w, werr)
		}
		n += len(w)
	}
	if n == 0 && cover > 20 {
		t.Fatalf("cover %d: no file has deletes: the check proves nothing", cover)
	}
}

// TestKeyCacheDeletes: the deletes a KeyCache computes equal those merged from Postgres
// as the partition grows, a range is replaced (re-derived) and tail files stand for
// the end; only ranges it has not seen are read again; it stays within its bound.
func TestKeyCacheDeletes(t *testing.T) {
	t.Parallel()
	k := newKeyPartition(t)
	ctx := context.Background()
	c := NewKeyCache(0)
	k.add(t, 20)
	k.check(t, c, k.ends[len(k.ends)-1], nil)
	if s := c.Stats(); s.Misses != 20 || s.Hits != 0 || s.Bytes <= 0 {
		t.Fatalf("after the first read: %+v, want 20 misses", s)
	}
	k.add(t, 5)
	k.check(t, c, k.ends[len(k.ends)-1], nil)
	k.check(t, c, k.ends[12], nil) // an older coverage of the same index
	if s := c.Stats(); s.Misses != 25 || s.Hits != 20+12 {
		t.Fatalf("after growing: %+v, want 25 misses (each range read once) and 32 hits", s)
	}

	// A range re-derived after compaction: new keys and checksum.
	if _, err := k.db.Exec(ctx, `UPDATE mink_ranges SET keys = $2, sha256 = 'rederived' WHERE table_id = $1 AND start_offset = 100`,
		k.tbl.ID, k.keys(100, 3).Encode()); err != nil {
		t.Fatal(err)
	}
	k.check(t, c, k.ends[len(k.ends)-1], nil)

	// Tail files after the indexed end, and one in place of the last two ranges.
	end := k.ends[len(k.ends)-1]
	record := func(start, end int64) string {
		key := fmt.Sprintf("tail/%d-%d", start, end)
		if _, _, _, err := objects.RecordTail(ctx, k.db, objects.Tail{Table: k.tbl.ID, Key: key, Start: start, End: end, Records: 1, Size: 1,
			SHA256: key, Settings: []byte(`{}`), Stats: []byte(`[]`), Keys: k.keys(start, int(end-start)).Encode()}, time.Minute, time.Minute); err != nil {
			t.Fatal(err)
		}
		return key
	}
	tail := []string{record(end, end+7), record(end+7, end+20)}
	k.check(t, c, end+20, tail)
	k.check(t, c, end, []string{record(end-20, end)})

	// The first 15 ranges collected (expired): the cache drops them with a read of
	// the 10 left, as they are most of what it holds.
	if _, err := k.db.Exec(ctx, `DELETE FROM mink_ranges WHERE table_id = $1 AND start_offset < 150`, k.tbl.ID); err != nil {
		t.Fatal(err)
	}
	k.ends = k.ends[15:]
	before := c.Stats()
	k.check(t, c, k.ends[len(k.ends)-1], nil)
	if s := c.Stats(); s.Misses-before.Misses != 10 || s.Bytes >= before.Bytes {
		t.Fatalf("after collection: %+v, before %+v; want the 10 ranges left read again, fewer bytes", s, before)
	}

	small := NewKeyCache(1)
	k.check(t, small, k.ends[len(k.ends)-1], nil)
	k.check(t, small, k.ends[len(k.ends)-1], nil)
	if s := small.Stats(); s.Bytes > s.Max || s.Hits != 0 {
		t.Fatalf("a cache of 1 byte: %+v, want nothing kept", s)
	}
}

// TestKeyCacheConcurrent: loads and commits of one partition at once, while its index
// grows, read the same deletes as merged from Postgres (run with -race).
func TestKeyCacheConcurrent(t *testing.T) {
	t.Parallel()
	k := newKeyPartition(t)
	ctx := context.Background()
	k.add(t, 10)
	c := NewKeyCache(0)
	ends := slices.Clone(k.ends)
	var g errgroup.Group
	for w := range 4 {
		g.Go(func() error {
			for i := range 10 {
				cover := ends[1+(w+i)%(len(ends)-1)]
				want, err := (*KeyCache)(nil).Partition(ctx, k.db, k.tbl.ID, 0, 0, cover, nil)
				if err != nil {
					return err
				}
				got, err := c.Partition(ctx, k.db, k.tbl.ID, 0, 0, cover, nil)
				if err != nil {
					return err
				}
				for j := 0; j+1 < len(ends) && ends[j+1] <= cover; j++ {
					d := Deletes{Table: k.tbl.ID, Start: ends[j], End: ends[j+1], CoverEnd: cover, DataKey: "f"}
					wp, werr := want.Deletes(d)
					gp, gerr := got.Deletes(d)
					if werr != nil || gerr != nil || !slices.Equal(wp, gp) {
						return fmt.Errorf("file %v cover %d: cached %v (%v), merged %v (%v)", d, cover, gp, gerr, wp, werr)
					}
				}
			}
			return nil
		})
	}
	k.add(t, 10) // beyond what the readers cover: their covers hold
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	k.check(t, c, k.ends[len(k.ends)-1], nil)
}
