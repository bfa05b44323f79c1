package objects_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

func setup(t *testing.T) (*pgxpool.Pool, tables.Table) {
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tbl, err := tables.Create(ctx, db, tables.Table{Name: "events", Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl
}

func rows(t *testing.T, db *pgxpool.Pool) (meta, data int) {
	t.Helper()
	if err := db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM mink_meta_files), (SELECT count(*) FROM mink_data_files)`).Scan(&meta, &data); err != nil {
		t.Fatal(err)
	}
	return meta, data
}

func load(tbl tables.Table, name, key string, readAt *time.Time) objects.Load {
	return objects.Load{Table: tbl.ID, LoadKey: key, Stream: "s", ReadAt: readAt, TTL: time.Minute, ReuseFrom: 45 * time.Second,
		Tail: []icebergmeta.DataFile{{Key: "default/events/data/p0-tail.parquet", Partition: 0, Start: 0, End: 10, Records: 10, Size: 100,
			SHA256: "ab", Settings: []byte(`{}`), Stats: []byte(`[]`)}},
		Meta: []icebergmeta.File{{Key: "default/events/metadata/live/" + name + "-m0.avro", Content: []byte("m")},
			{Key: "default/events/metadata/live/" + name + ".metadata.json", Content: []byte(`{"n":"` + name + `"}`)}}}
}

// A load snapshot is recorded once per content key: a second node recording the same
// writes nothing and is told to read the first; ByContent finds it while it stays
// readable long enough, and a stale one gives up its key to a new recording.
func TestSaveOncePerContentKey(t *testing.T) {
	t.Parallel()
	db, tbl := setup(t)
	ctx := context.Background()
	if err := objects.SaveLoad(ctx, db, load(tbl, "a", "k1", nil)); err != nil {
		t.Fatal(err)
	}
	m1, d1 := rows(t, db)
	if m1 != 2 || d1 != 1 {
		t.Fatalf("after one load: %d metadata rows, %d data rows; want 2 and 1", m1, d1)
	}
	if err := objects.SaveLoad(ctx, db, load(tbl, "b", "k1", nil)); !errors.Is(err, objects.ErrLoadExists) {
		t.Fatalf("the same content key again: %v, want ErrExists", err)
	}
	if m, d := rows(t, db); m != m1 || d != d1 {
		t.Fatalf("a refused recording wrote rows: %d metadata, %d data", m-m1, d-d1)
	}
	s, found, err := objects.LoadByContent(ctx, db, tbl.ID, "k1", 30*time.Second)
	if err != nil || !found || string(s.Content) != `{"n":"a"}` {
		t.Fatalf("ByContent k1: %q %v %v, want the first load's", s.Content, found, err)
	}
	if _, found, err := objects.LoadByContent(ctx, db, tbl.ID, "k1", 2*time.Minute); err != nil || found {
		t.Fatalf("ByContent asking for more than the TTL left: found %v (%v)", found, err)
	}
	// Stale: readable for less than ReuseFrom (here, more than its TTL): a new recording
	// of the same key takes it over; the old row stays readable under its own key.
	stale := load(tbl, "c", "k1", nil)
	stale.ReuseFrom = 2 * time.Minute
	if err := objects.SaveLoad(ctx, db, stale); err != nil {
		t.Fatalf("recording over a stale key: %v", err)
	}
	if s, _, _ := objects.LoadByContent(ctx, db, tbl.ID, "k1", 0); string(s.Content) != `{"n":"c"}` {
		t.Fatalf("after the takeover ByContent answers %q, want the new load's", s.Content)
	}
}

// Newest answers the newest load of a stream whose offsets were read within the bound,
// and its age by the database's clock.
func TestNewestWithinBound(t *testing.T) {
	t.Parallel()
	db, tbl := setup(t)
	ctx := context.Background()
	now, err := pg.Now(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	old, recent := now.Add(-10*time.Second), now.Add(-time.Second)
	for _, l := range []objects.Load{load(tbl, "old", "k-old", &old), load(tbl, "recent", "k-recent", &recent), load(tbl, "never", "k-never", nil)} {
		if err := objects.SaveLoad(ctx, db, l); err != nil {
			t.Fatal(err)
		}
	}
	s, age, _, found, err := objects.NewestLoad(ctx, db, tbl.ID, "s", 5*time.Second)
	if err != nil || !found || string(s.Content) != `{"n":"recent"}` || age < time.Second || age > 5*time.Second {
		t.Fatalf("Newest within 5s: %q age %v found %v (%v), want the recent one, about 1s old", s.Content, age, found, err)
	}
	if _, _, at, found, err := objects.NewestLoad(ctx, db, tbl.ID, "s", 500*time.Millisecond); err != nil || found || at.Before(now) {
		t.Fatalf("Newest within 500ms: found %v at %v (%v), want none and the database's time", found, at, err)
	}
	if _, _, _, found, _ := objects.NewestLoad(ctx, db, tbl.ID, "other", time.Minute); found {
		t.Fatal("Newest of another stream found a load")
	}
}

// An upsert load's delete files name the tail files whose recorded keys they read:
// Save keeps those (rows or not) as long as the load, and refuses the whole load when
// one is gone or has no keys (collected, or written again without them), so that no
// recorded delete file names keys nobody can read.
func TestSaveKeepsKeyedTail(t *testing.T) {
	t.Parallel()
	db, tbl := setup(t)
	ctx := context.Background()
	const keyed = "default/events/data/p0-keyed.parquet"
	if _, _, _, err := objects.RecordTail(ctx, db, objects.Tail{Table: tbl.ID, Key: keyed, Partition: 0, Start: 10, End: 12,
		SHA256: "cd", Settings: []byte(`{}`), Stats: []byte(`[]`), Keys: []byte{0, 0, 0, 0}}, time.Second, time.Hour); err != nil {
		t.Fatal(err)
	}
	withDeletes := func(name, key string, tail ...string) objects.Load {
		l := load(tbl, name, key, nil)
		l.Deletes = []objects.LoadDelete{{Tail: tail, File: icebergmeta.DataFile{Key: "default/events/data/p0-" + name + ".deletes.parquet",
			Partition: 0, Start: 0, End: 10, Records: 1, Size: 10, SHA256: "ef", Settings: []byte(`{}`), Stats: []byte(`[]`),
			DeletesOf: "default/events/data/p0-tail.parquet", CoverEnd: 12}}}
		return l
	}
	m0, d0 := rows(t, db)
	if err := objects.SaveLoad(ctx, db, withDeletes("a", "k1", keyed, "default/events/data/p0-gone.parquet")); !errors.Is(err, objects.ErrTailGone) {
		t.Fatalf("a delete file naming a missing tail file: %v, want ErrTailGone", err)
	}
	if m, d := rows(t, db); m != m0 || d != d0 {
		t.Fatalf("a refused load wrote rows: %d metadata, %d data", m-m0, d-d0)
	}
	if err := objects.SaveLoad(ctx, db, withDeletes("b", "k2", keyed)); err != nil {
		t.Fatal(err)
	}
	var left time.Duration
	var tail []string
	if err := db.QueryRow(ctx, `SELECT (SELECT extract(epoch FROM expires_at - now()) * interval '1 second' FROM mink_data_files WHERE key = $1),
		(SELECT deletes_tail FROM mink_data_files WHERE deletes_of IS NOT NULL)`, keyed).Scan(&left, &tail); err != nil {
		t.Fatal(err)
	}
	if left < 50*time.Second || len(tail) != 1 || tail[0] != keyed {
		t.Fatalf("after the load: the keyed tail file expires in %v (want about the load's minute), the delete file names %v", left, tail)
	}
}
