package writer

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/tablecodec"
)

// Live loads leave rows a file server wrote: tail data files (mink_data_files with
// expires_at) and metadata files under metadata/live/ (mink_meta_files with expires_at).
// Collection never removes them before they expire, removes them after, and a commit
// that names a tail file's identical range makes it the writer's for good (and listed).
func TestCollectionOfLiveLoadRows(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.produce(0, 10)
	f.index(0, 10)
	f.produce(0, 10) // [10, 20): not indexed, a live load's tail
	f.run(f.newWriter(), f.take("writer", -1, "w1"))
	f.waitCovered()

	// What a live load stores, as the file server's live package does.
	tailRow := func(start, end int64, ttl time.Duration) string {
		t.Helper()
		fs, err := rangefile.BuildOffsets(f.ctx, f.src, tablecodec.New(f.db, nil), f.tbl, parquetbuild.DefaultSettings(), 0, start, end, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		settings, _ := json.Marshal(parquetbuild.DefaultSettings())
		stats, _ := json.Marshal(fs.Columns)
		key := layout.DataKey(f.tbl.Namespace, f.tbl.Name, 0, start, end, fs.SHA256)
		if _, err := f.db.Exec(f.ctx, `INSERT INTO mink_data_files (table_id, key, partition, start_offset, end_offset, record_count,
				file_size, sha256, settings, stats, expires_at, live)
			VALUES ($1, $2, 0, $3, $4, $5, $6, $7, $8, $9, now() + $10::float8 * interval '1 millisecond', true)
			ON CONFLICT (key) DO UPDATE SET expires_at = GREATEST(mink_data_files.expires_at, EXCLUDED.expires_at)`,
			f.tbl.ID, key, start, end, fs.RowCount, fs.Size, fs.SHA256, settings, stats, float64(ttl.Milliseconds())); err != nil {
			t.Fatal(err)
		}
		return key
	}
	metaRow := func(name string, ttl time.Duration) string {
		t.Helper()
		key := layout.MetadataKey(f.tbl.Namespace, f.tbl.Name, icebergmeta.LiveDir+name)
		if _, err := f.db.Exec(f.ctx, `INSERT INTO mink_meta_files (table_id, key, content, expires_at)
			VALUES ($1, $2, '{}', now() + $3::float8 * interval '1 millisecond')`, f.tbl.ID, key, float64(ttl.Milliseconds())); err != nil {
			t.Fatal(err)
		}
		return key
	}
	const ttl = 4 * time.Second
	liveData, liveMeta := tailRow(10, 20, ttl), metaRow("a.metadata.json", ttl)
	var until time.Time
	if err := f.db.QueryRow(f.ctx, `SELECT expires_at FROM mink_data_files WHERE key = $1`, liveData).Scan(&until); err != nil {
		t.Fatal(err)
	}
	deadData, deadMeta := tailRow(10, 15, -time.Second), metaRow("b.metadata.json", -time.Second)

	exists := func(table, key string) bool {
		var n int
		if err := f.db.QueryRow(f.ctx, `SELECT count(*) FROM `+table+` WHERE key = $1`, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	leasetest.Eventually(t, 10*time.Second, "expired live rows collected", func() bool {
		return !exists("mink_data_files", deadData) && !exists("mink_meta_files", deadMeta)
	})
	// Collection ran (it removed the expired ones) while these had not expired: kept.
	var now time.Time
	if err := f.db.QueryRow(f.ctx, `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	if !now.Before(until) {
		t.Fatalf("the test was too slow: the live rows expired (%v) before they could be checked (%v)", until, now)
	}
	if !exists("mink_data_files", liveData) || !exists("mink_meta_files", liveMeta) {
		t.Fatal("collection removed live-load rows before they expired")
	}
	leasetest.Eventually(t, 20*time.Second, "live rows collected once expired", func() bool {
		return !exists("mink_data_files", liveData) && !exists("mink_meta_files", liveMeta)
	})

	// A row set to outlive everything (a client of an older version asked for a TTL of a
	// century) is brought back to the table's live TTL, then collected.
	century := tailRow(10, 12, 100*365*24*time.Hour)
	century2 := metaRow("c.metadata.json", 100*365*24*time.Hour)
	ttlOf := icebergmeta.LiveTTLOf(f.tbl.Properties)
	leasetest.Eventually(t, 10*time.Second, "a century-long expiry capped", func() bool {
		var capped bool
		err := f.db.QueryRow(f.ctx, `SELECT (SELECT expires_at FROM mink_data_files WHERE key = $1) <= now() + $3::float8 * interval '1 millisecond'
			AND (SELECT expires_at FROM mink_meta_files WHERE key = $2) <= now() + $3::float8 * interval '1 millisecond'`,
			century, century2, float64(ttlOf.Milliseconds())).Scan(&capped)
		return err == nil && capped
	})

	// A load's tail file, then a commit of the identical range: the writer's file now,
	// with no expiry, kept past the load's TTL since the snapshot names it.
	tail := tailRow(10, 20, 2*time.Second)
	var tailUntil time.Time
	if err := f.db.QueryRow(f.ctx, `SELECT expires_at FROM mink_data_files WHERE key = $1`, tail).Scan(&tailUntil); err != nil {
		t.Fatal(err)
	}
	f.index(0, 10)
	v := f.waitCovered()
	if fs := v.files[0]; len(fs) != 2 || fs[1].key != tail {
		t.Fatalf("the commit names %+v, want the range [10, 20) as file %s", fs, tail)
	}
	var expires *time.Time
	var live bool
	if err := f.db.QueryRow(f.ctx, `SELECT expires_at, live FROM mink_data_files WHERE key = $1`, tail).Scan(&expires, &live); err != nil {
		t.Fatal(err)
	}
	if expires != nil || live {
		t.Fatalf("the committed tail file still expires at %v, or is still a live load's (%v): S3 listings leave it out", expires, live)
	}
	leasetest.Eventually(t, 10*time.Second, "the load's TTL to pass", func() bool {
		var passed bool
		// Past the load's expiry, and a few collection rounds (every 30ms) past it.
		f.db.QueryRow(f.ctx, `SELECT now() > $1::timestamptz + interval '500 milliseconds'`, tailUntil).Scan(&passed)
		return passed
	})
	if !exists("mink_data_files", tail) {
		t.Fatal("a committed file that began as a tail file was collected")
	}
	f.checkExact(f.view())
}
