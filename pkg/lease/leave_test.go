package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/pg"
)

// holdKey is the advisory lock a test holds to keep a node's statements waiting inside
// Postgres.
const holdKey = 0x686f6c64

// hold makes every firing of trigger (CREATE's words up to EXECUTE FUNCTION) wait, inside
// Postgres, for the advisory lock holdKey, and takes that lock on a connection of its
// own: such a statement sent now executes only once release is called, as a statement
// delayed in the network, or one whose client gave up on it, would. done waits until the
// held statements have ended.
func hold(t *testing.T, db *pgxpool.Pool, trigger string) (release, done func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, `CREATE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			LOOP
				BEGIN
					PERFORM pg_advisory_xact_lock(`+strconv.Itoa(holdKey)+`);
					EXIT;
				EXCEPTION WHEN query_canceled THEN
					-- pgx sends a cancel request when its client gives up; that is best
					-- effort and may come too late: here it always does.
				END;
			END LOOP;
			RETURN NEW;
		END $$;
		CREATE `+trigger+` EXECUTE FUNCTION test_hold()`); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, holdKey); err != nil {
		t.Fatal(err)
	}
	release = func() {
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, holdKey); err != nil {
			t.Fatal(err)
		}
	}
	// The held statements were queued for the lock before this request, so they get it
	// first: once this one is granted, every one of them has ended.
	done = func() {
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, holdKey); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, holdKey); err != nil {
			t.Fatal(err)
		}
	}
	return release, done
}

// waitersOn counts the statements waiting for the advisory lock key.
func waitersOn(t *testing.T, db *pgxpool.Pool, key int) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND NOT granted AND objid = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The race TestCleanLeaveFreesAtOnce once hit: a node stops while its round's renewal is
// on its way to Postgres; Run cancels the round, pgx returns at once, Leave frees the
// leases and deletes the member row, and only then does Postgres execute the renewal.
// Postgres refuses it: the row stays gone and the leases free, as a clean leave must
// leave them, not re-inserted to expire a lease_ttl later as after a crash.
func TestCleanLeaveRefusesLateRenewal(t *testing.T) {
	db := newDB(t)
	tbl := leasetest.Table(t, db, "events", 4)
	rec := &recorder{}
	a := startNode(t, db, rec, "idx-a", 0, lease.RoleIndexer, lease.RoleWriter)
	b := startNode(t, db, rec, "idx-b", 0, lease.RoleIndexer, lease.RoleWriter)
	leasetest.Eventually(t, 10*time.Second, "shared 2/2", func() bool {
		c := countHeld(t, db, tbl)
		return c["idx-a"] == 2 && c["idx-b"] == 2
	}, rounds(t)...)
	release, done := hold(t, db, `TRIGGER test_hold BEFORE INSERT ON mink_members FOR EACH ROW WHEN (NEW.node_id = 'idx-a')`)
	leasetest.Eventually(t, 10*time.Second, "a renewal of idx-a held inside Postgres", func() bool {
		return waitersOn(t, db, holdKey) > 0
	}, rounds(t)...)
	a.stop(t)
	if _, err := lease.LookupMember(context.Background(), db, "idx-a"); !errors.Is(err, lease.ErrNoSuchMember) {
		t.Fatalf("member row of idx-a after a clean stop: %v", err)
	}
	release()
	done()
	var rows int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM mink_members WHERE node_id = 'idx-a'`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("idx-a's member row is back after its late renewal reached Postgres (%d rows, %v)", rows, err)
	}
	leasetest.Eventually(t, 10*time.Second, "idx-b takes all 4 partitions and the writer lease", func() bool {
		h := holders(t, db, tbl)
		return countHeld(t, db, tbl)["idx-b"] == 4 && h[lease.WriterScope(tbl)].Holder == "idx-b"
	}, b.m.Changed)
	if _, err := lease.LookupMember(context.Background(), db, "idx-a"); !errors.Is(err, lease.ErrNoSuchMember) {
		t.Fatalf("member row of idx-a after idx-b's rounds: %v", err)
	}
}

// A Manager that left cannot come back (Postgres refuses its incarnation), a new process
// with the same node id registers as always, and the rounds forget a leave's record a
// day after it.
func TestLeftIncarnationStaysOut(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	newManager := func() *lease.Manager { return idxA(t, db) }
	old := newManager()
	if err := old.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.Leave(); err != nil {
		t.Fatal(err)
	}
	if err := old.Register(ctx); !errors.Is(err, lease.ErrLeft) {
		t.Fatalf("Register after Leave: %v, want ErrLeft", err)
	}
	if err := old.Round(ctx); !errors.Is(err, lease.ErrLeft) {
		t.Fatalf("Round after Leave: %v, want ErrLeft", err)
	}
	if _, err := lease.LookupMember(ctx, db, "idx-a"); !errors.Is(err, lease.ErrNoSuchMember) {
		t.Fatalf("member row of the incarnation that left: %v", err)
	}
	fresh := newManager()
	if err := fresh.Register(ctx); err != nil {
		t.Fatalf("a new process with the node id of one that left: %v", err)
	}
	defer fresh.Leave()
	if err := fresh.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.LookupMember(ctx, db, "idx-a"); err != nil {
		t.Fatalf("the new process's member row: %v", err)
	}
	records := func() (n int) {
		if err := db.QueryRow(ctx, `SELECT count(*) FROM mink_left`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := records(); n != 1 {
		t.Fatalf("%d records of leaves, want 1 (the old process's)", n)
	}
	if _, err := db.Exec(ctx, `UPDATE mink_left SET left_at = now() - interval '25 hours'`); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if n := records(); n != 0 {
		t.Fatalf("%d records of leaves a day old after a round, want 0", n)
	}
}

// A node stops while its round's acquisition is in flight inside Postgres: Leave waits
// for it, then frees what it took. Freeing from a snapshot taken before the acquisition
// committed would leave those leases held by a member row that is gone, which no round
// ever frees.
func TestCleanLeaveFreesWhatAnAcquisitionInFlightTakes(t *testing.T) {
	db := newDB(t)
	leasetest.Table(t, db, "events", 4)
	ctx := context.Background()
	release, done := hold(t, db, `TRIGGER test_hold BEFORE UPDATE ON mink_leases FOR EACH ROW WHEN (OLD.holder IS NULL AND NEW.holder = 'idx-a')`)
	m, stop, stopped := runSlowNode(t, db)
	leasetest.Eventually(t, 20*time.Second, "an acquisition of idx-a held inside Postgres", func() bool {
		return waitersOn(t, db, holdKey) > 0
	}, m.Changed)
	stop()
	runErr := stopped("DELETE FROM mink_members", release, done)
	if runErr != nil {
		t.Fatalf("Run: %v", runErr)
	}
	var held int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM mink_leases WHERE holder = 'idx-a'`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("%d leases still held by idx-a, whose member row is gone: stranded", held)
	}
	if _, err := lease.LookupMember(ctx, db, "idx-a"); !errors.Is(err, lease.ErrNoSuchMember) {
		t.Fatalf("member row of idx-a after a clean stop: %v", err)
	}
}

// runSlowNode runs a manager for idx-a with a long lease_ttl: Leave waits for Postgres at
// most lease_ttl/6, and a test must see it waiting and let a held statement go within
// that time. stopped, called once stop was, waits until Leave waits for a lock in a
// statement starting with leaving (or Run returned without), releases the held
// statements, waits for them and returns what Run returned.
func runSlowNode(t *testing.T, db *pgxpool.Pool) (m *lease.Manager, stop func(), stopped func(leaving string, release, done func()) error) {
	t.Helper()
	ctx := context.Background()
	m, err := lease.NewManager(db, lease.Config{NodeID: "idx-a", Roles: []lease.Role{lease.RoleIndexer}, GRPCAddr: "idx-a:7070",
		TTL: 12 * time.Second, Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	ran := make(chan error, 1)
	go func() { ran <- m.Run(runCtx) }()
	stopped = func(leaving string, release, done func()) error {
		t.Helper()
		waits := func() bool {
			var n int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND starts_with(query, $1)`, leaving).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		}
		var runErr error
		returned := false
		leasetest.Eventually(t, 10*time.Second, "Leave waiting for the held statement, or Run returned", func() bool {
			select {
			case runErr = <-ran:
				returned = true
			default:
			}
			return returned || waits()
		})
		release()
		done()
		if !returned {
			runErr = <-ran
		}
		return runErr
	}
	return m, stop, stopped
}

// A node stops while its registration's commit is still on its way: Run leaves anyway,
// and the leave waits for that commit and deletes the member row it made, instead of
// returning as if nothing had registered and leaving the row to expire a lease_ttl later.
func TestStopDuringRegistrationLeaves(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	// Fires at the commit of a transaction that inserted idx-a's member row.
	release, done := hold(t, db, `CONSTRAINT TRIGGER test_hold AFTER INSERT ON mink_members
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.node_id = 'idx-a')`)
	_, stop, stopped := runSlowNode(t, db)
	leasetest.Eventually(t, 20*time.Second, "the registration's commit held inside Postgres", func() bool {
		return waitersOn(t, db, holdKey) > 0
	})
	stop()
	if err := stopped("INSERT INTO mink_left", release, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var rows int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM mink_members WHERE node_id = 'idx-a'`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("idx-a's member row after it stopped during its registration: %d rows (%v)", rows, err)
	}
}

// A process paused while another took its node id over, whose replacement then left
// cleanly, does not come back as a member when it wakes: its renewal finds no member row
// to refuse it, but Postgres refuses the incarnation that was replaced, and the process
// learns it was replaced.
func TestReplacedIncarnationStaysOutAfterItsReplacementLeaves(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	newManager := func() *lease.Manager { return idxA(t, db) }
	paused := newManager()
	if err := paused.Register(ctx); err != nil {
		t.Fatal(err)
	}
	replacement := newManager()
	if err := replacement.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replacement.Leave(); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.LookupMember(ctx, db, "idx-a"); !errors.Is(err, lease.ErrNoSuchMember) {
		t.Fatalf("member row after the replacement left: %v", err)
	}
	// The paused process wakes and runs its next round.
	if err := paused.Round(ctx); !errors.Is(err, lease.ErrReplaced) {
		t.Fatalf("round of the replaced process after its replacement left: %v, want ErrReplaced", err)
	}
	if _, err := lease.LookupMember(ctx, db, "idx-a"); !errors.Is(err, lease.ErrNoSuchMember) {
		t.Fatalf("the replaced process's member row came back: %v", err)
	}
	// A new process with the node id registers as always.
	fresh := newManager()
	if err := fresh.Register(ctx); err != nil {
		t.Fatalf("a new process with the node id: %v", err)
	}
	defer fresh.Leave()
	if err := fresh.Round(ctx); err != nil {
		t.Fatal(err)
	}
}

// idxA is a Manager of node idx-a that the test drives itself (Register, Round, Leave).
func idxA(t *testing.T, db pg.DB) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(db, lease.Config{NodeID: "idx-a", Roles: []lease.Role{lease.RoleIndexer}, GRPCAddr: "idx-a:7070",
		TTL: time.Minute, Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
