package objects

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// TestCommitOfATailFileIsNew: a live load's tail file measured long before a commit names
// it counts as committed at that commit, so the owners' warmers (Recent) see it
// with the commit's other files, and they are told of the commit (LISTEN).
func TestCommitOfATailFileIsNew(t *testing.T) {
	ctx := context.Background()
	db, _ := pgtest.DB(t)
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tb, err := tables.Create(ctx, db, tables.Table{Namespace: "default", Name: "clicks", Topic: "clicks",
		Spec: tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "id", Type: "long"}}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	tail := icebergmeta.DataFile{Key: layout.DataKey("default", "clicks", 0, 0, 5, strings.Repeat("a", 64)),
		Start: 0, End: 5, Records: 5, Size: 100, SHA256: strings.Repeat("a", 64), Settings: []byte(`{}`), Stats: []byte(`[]`)}
	if _, _, _, err := RecordTail(ctx, db, Tail{Table: tb.ID, Key: tail.Key, Start: tail.Start, End: tail.End,
		Records: tail.Records, Size: tail.Size, SHA256: tail.SHA256, Settings: tail.Settings, Stats: tail.Stats}, time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Measured an hour ago: older than any warmer's look.
	if _, err := db.Exec(ctx, `UPDATE mink_data_files SET created_at = now() - interval '1 hour',
		committed_at = now() - interval '1 hour' WHERE key = $1`, tail.Key); err != nil {
		t.Fatal(err)
	}
	fresh := icebergmeta.DataFile{Key: layout.DataKey("default", "clicks", 0, 5, 9, strings.Repeat("b", 64)),
		Start: 5, End: 9, Records: 4, Size: 90, SHA256: strings.Repeat("b", 64), Settings: []byte(`{}`), Stats: []byte(`[]`)}

	notified := make(chan struct{}, 10)
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() { watched <- WatchCommits(wctx, db, func() { notified <- struct{}{} }) }()
	t.Cleanup(func() { stop(); <-watched })
	waitNotified := func(what string) {
		t.Helper()
		select {
		case <-notified:
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification: %s", what)
		}
	}
	waitNotified("listening")

	got, since, err := Recent(ctx, db, time.Now().Add(-time.Minute), 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("before the commit: %+v, %v; want no committed file", got, err)
	}
	for i, add := range [][]icebergmeta.DataFile{{tail}, {fresh}} {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		meta := layout.MetadataKey("default", "clicks", fmt.Sprintf("%05d-test.metadata.json", i+1))
		if err := StoreCommit(ctx, tx, Commit{Table: tb.ID, Add: add, MetaFiles: []icebergmeta.File{{Key: meta, Content: []byte(`{}`)}},
			Key: meta, Version: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		waitNotified("commit " + add[0].Key)
	}
	got, _, err = Recent(ctx, db, since, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != fresh.Key || got[1].Key != tail.Key || got[1].Committed.Before(since) {
		t.Fatalf("after the commits: %+v (since %v), want the fresh file, then the tail file committed before it", got, since)
	}
}

// TestDataFilesReadsEveryChunk: more keys than one statement names (dataFilesChunk) read
// in chunks, every row found whichever chunk names it, missing keys absent.
func TestDataFilesReadsEveryChunk(t *testing.T) {
	ctx := context.Background()
	db, _ := pgtest.DB(t)
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tb, err := tables.Create(ctx, db, tables.Table{Namespace: "default", Name: "chunks", Topic: "chunks",
		Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var files []icebergmeta.DataFile
	for i := range 2 {
		sha := strings.Repeat(string(rune('a'+i)), 64)
		files = append(files, icebergmeta.DataFile{Key: layout.DataKey("default", "chunks", 0, int64(i*5), int64(i*5+5), sha),
			Start: int64(i * 5), End: int64(i*5 + 5), Records: 5, Size: 100, SHA256: sha, Settings: []byte(`{}`), Stats: []byte(`[]`)})
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	meta := layout.MetadataKey("default", "chunks", "00001-test.metadata.json")
	if err := StoreCommit(ctx, tx, Commit{Table: tb.ID, Add: files, MetaFiles: []icebergmeta.File{{Key: meta, Content: []byte(`{}`)}},
		Key: meta, Version: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 2*dataFilesChunk+1)
	for i := range keys {
		keys[i] = fmt.Sprintf("default/chunks/data/missing-%d.parquet", i)
	}
	keys[0], keys[len(keys)-1] = files[0].Key, files[1].Key // in the first chunk and the last
	got, err := DataFiles(ctx, db, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[files[0].Key].End != 5 || got[files[1].Key].SHA256 != files[1].SHA256 {
		t.Fatalf("DataFiles over %d keys: %+v; want the 2 recorded files", len(keys), got)
	}
}
