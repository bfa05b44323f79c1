package objects

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// A report tells whoever listens which table it is about, when it commits, so that the
// table's writer repairs at once: each report (a repeat too) notifies with the table's
// id, and starting to listen notifies with 0 (every table).
func TestReportProblemNotifies(t *testing.T) {
	t.Parallel()
	db := newDB(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []int64
	for _, name := range []string{"a", "b"} {
		tb, err := tables.Create(ctx, db, tables.Table{Name: name, Topic: name,
			Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tb.ID)
	}
	got := make(chan int64, 10)
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() { watched <- WatchProblems(wctx, db, func(id int64) { got <- id }) }()
	next := func() int64 {
		t.Helper()
		select {
		case id := <-got:
			return id
		case <-time.After(10 * time.Second):
			t.Fatal("no notification")
			return -1
		}
	}
	if id := next(); id != 0 {
		t.Fatalf("listening: notified %d, want 0", id)
	}
	for _, id := range []int64{ids[1], ids[0], ids[0]} {
		key := fmt.Sprintf("default/t%d/data/f.parquet", id)
		if err := ReportProblem(ctx, db, key, id, "mismatch", "test", "fs-1"); err != nil {
			t.Fatal(err)
		}
		if n := next(); n != id {
			t.Fatalf("a report of table %d notified %d", id, n)
		}
	}
	var reports int64
	if err := db.QueryRow(ctx, `SELECT reports FROM mink_file_problems WHERE table_id = $1`, ids[0]).Scan(&reports); err != nil || reports != 2 {
		t.Fatalf("reports %d, %v; want 2", reports, err)
	}
	stop()
	if err := <-watched; wctx.Err() == nil || err == nil {
		t.Fatalf("WatchProblems returned %v before its context ended", err)
	}
}
