package icebergmeta_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

// A stored metadata file reads by key for its own table only; a live load's reads as
// missing once expired by the database's clock, before collection deletes it.
func TestMetaFileOfTableUntilExpired(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	raw := tableschema.Spec{Format: tableschema.FormatRaw}
	a, err := tables.Create(ctx, db, tables.Table{Name: "a", Spec: raw}, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tables.Create(ctx, db, tables.Table{Name: "b", Spec: raw}, 1)
	if err != nil {
		t.Fatal(err)
	}
	committed, live, expired := "default/a/metadata/snap-1.avro", "default/a/metadata/live/snap-2.avro", "default/a/metadata/live/snap-3.avro"
	for key, expiry := range map[string]string{committed: "NULL", live: "now() + interval '1 hour'", expired: "now() - interval '1 second'"} {
		if _, err := db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content, expires_at) VALUES ($1, $2, $3, `+expiry+`)`,
			a.ID, key, []byte(key)); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{committed, live} {
		got, err := objects.MetaFile(ctx, db, a.ID, key)
		if err != nil || string(got) != key {
			t.Errorf("%s: %q, %v", key, got, err)
		}
	}
	for _, c := range []struct {
		table int64
		key   string
	}{{a.ID, expired}, {b.ID, committed}, {a.ID, "default/a/metadata/none.avro"}} {
		if got, err := objects.MetaFile(ctx, db, c.table, c.key); !errors.Is(err, icebergmeta.ErrNoMetaFile) {
			t.Errorf("table %d %s: %q, %v; want ErrNoMetaFile", c.table, c.key, got, err)
		}
	}

	// As iceberg-go opens files: by URI, a missing one as fs.ErrNotExist.
	fio := icebergmeta.FileIO(ctx, objects.MetaStore(db, a.ID, time.Second))
	f, err := fio.Open(layout.URI(live))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	if err != nil || string(got) != live {
		t.Errorf("open %s: %q, %v", live, got, err)
	}
	if _, err := fio.Open(layout.URI(expired)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open of an expired file: %v, want fs.ErrNotExist", err)
	}
	if _, err := fio.Open("/etc/passwd"); err == nil {
		t.Error("a path outside the bucket opened")
	}
}
