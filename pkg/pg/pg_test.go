package pg_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

// Code names what Postgres answered by its SQLSTATE, through any wrapping, and nothing
// for an error Postgres did not answer.
func TestCodeIsTheSQLSTATE(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `CREATE TABLE t (k int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	_, err := db.Exec(ctx, `INSERT INTO t VALUES (1)`)
	if got := pg.Code(errors.Join(errors.New("store"), err)); got != pg.UniqueViolation {
		t.Errorf("a duplicate key: code %q, want %q (%v)", got, pg.UniqueViolation, err)
	}
	_, err = db.Exec(ctx, `SELECT 1 FROM no_such_table`)
	if got := pg.Code(err); got != pg.UndefinedTable {
		t.Errorf("a missing table: code %q, want %q (%v)", got, pg.UndefinedTable, err)
	}
	if got := pg.Code(context.DeadlineExceeded); got != "" {
		t.Errorf("a Go error: code %q, want none", got)
	}
}

// Now is the database's clock, not this process's: a session whose clock is set back
// a day is measured by it.
func TestNowIsTheDatabaseClock(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	before, err := pg.Now(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(before); d < -time.Minute || d > time.Minute {
		t.Fatalf("Now %v is %v away from this machine's clock; the test's server runs here", before, d)
	}
	var inTx time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&inTx); err != nil {
		t.Fatal(err)
	}
	after, err := pg.Now(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	// clock_timestamp, not the transaction's start: it moves inside a transaction.
	if !after.After(inTx) || !after.After(before) {
		t.Fatalf("Now %v then %v, transaction start %v: want the clock, moving", before, after, inTx)
	}
}

// Listen tells when it listens, then each notification of its channels with its payload,
// and ends with its context.
func TestListenDeliversNotifications(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type note struct{ ch, payload string }
	got := make(chan note, 10)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- pg.Listen(lctx, db, func(ch, p string) { got <- note{ch, p} }, "a", "b")
	}()
	next := func() note {
		t.Helper()
		select {
		case n := <-got:
			return n
		case <-ctx.Done():
			t.Fatal("no notification")
			return note{}
		}
	}
	if n := next(); n != (note{}) {
		t.Fatalf("first call %+v, want the empty one that says it listens", n)
	}
	for _, want := range []note{{"b", "1"}, {"a", "2"}} {
		if _, err := db.Exec(ctx, `SELECT pg_notify($1, $2)`, want.ch, want.payload); err != nil {
			t.Fatal(err)
		}
		if n := next(); n != want {
			t.Fatalf("notified %+v, want %+v", n, want)
		}
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Listen ended with %v, want its context's end", err)
	}
}
