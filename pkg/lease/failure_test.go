package lease_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
)

// A fenced transaction held open for 0.8 x lease_ttl (a writer committing 10,000 files,
// a slow disk under Postgres) stops no other worker of its node, its node keeps renewing,
// and no other node takes its lease meanwhile: renewing touches only the member row,
// which no fenced write locks.
func TestSlowFencedWriteStopsNothing(t *testing.T) {
	db := newDB(t)
	tbl := leasetest.Table(t, db, "events", 4)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `CREATE TABLE ranges (p int, note text)`); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	a := startNode(t, db, rec, "idx-a", 0, lease.RoleIndexer)
	b := startNode(t, db, rec, "idx-b", 0, lease.RoleIndexer)
	leasetest.Eventually(t, 10*time.Second, "shared 2/2", func() bool {
		c := countHeld(t, db, tbl)
		return c["idx-a"] == 2 && c["idx-b"] == 2 && len(a.m.Held()) == 2
	}, rounds(t)...)
	mine := a.m.Held()
	slow := mine[0]
	var stalled atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- lease.Fenced(ctx, db, slow, func(tx pgx.Tx) error {
			// Checked again at every event of idx-a (its rounds, Acting ending, a worker
			// stopping at its deadline): what could change Acting or Held.
			deadline := time.NewTimer(ttl * 8 / 10)
			defer deadline.Stop()
			for held := true; held; {
				changed := a.m.Changed()
				if !a.m.Acting() || len(a.m.Held()) != 2 {
					stalled.Store(true)
				}
				select {
				case <-changed:
				case <-deadline.C:
					held = false
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO ranges VALUES ($1, 'slow')`, slow.Partition)
			return err
		})
	}()
	if err := <-done; err != nil {
		t.Fatalf("slow fenced write: %v", err)
	}
	if stalled.Load() {
		t.Fatal("idx-a stopped acting, or a worker, while one fenced write was slow")
	}
	if got := a.m.Held(); len(got) != 2 || got[0].Scope != mine[0].Scope || got[0].Epoch != mine[0].Epoch ||
		got[1].Scope != mine[1].Scope || got[1].Epoch != mine[1].Epoch {
		t.Fatalf("idx-a acts under %+v after the slow write, want %+v unchanged", got, mine)
	}
	for _, e := range rec.all() {
		if e.node == "idx-a" {
			t.Fatalf("a worker of idx-a stopped (%s: %v) during another's slow fenced write", e.lease.Scope, e.cause)
		}
	}
	if h := holders(t, db, tbl)[slow.Scope]; h.Holder != "idx-a" || h.Epoch != slow.Epoch {
		t.Fatalf("the slow write's lease is %+v now, want idx-a's epoch %d", h, slow.Epoch)
	}
	if err := b.m.LastError(); err != nil {
		t.Fatalf("idx-b's round: %v", err)
	}
}

// Three indexers started within one round over a 96-partition table are even (32 each,
// all held) by the fourth round of the last to start (3 rounds, one more when two rounds
// collide), and stay so: each first watches the membership for a round, so none takes
// everything and sheds it one lease per table per round.
func TestStartTogetherEvenWithinFourRounds(t *testing.T) {
	db := newDB(t)
	tbl := leasetest.Table(t, db, "events", 96)
	rec := &recorder{}
	var nodes []*node
	for _, id := range []string{"idx-a", "idx-b", "idx-c"} {
		nodes = append(nodes, startNode(t, db, rec, id, 0, lease.RoleIndexer))
	}
	even := func() bool {
		c := countHeld(t, db, tbl)
		return c["idx-a"] == 32 && c["idx-b"] == 32 && c["idx-c"] == 32
	}
	leasetest.Eventually(t, 20*time.Second, "shared 32/32/32", func() bool {
		// Within 3 rounds of the last to start (a node started up to a round after
		// another is in its third round while the first is in its fourth), and one more:
		// two nodes whose rounds run at the same moment can pick the same free rows, and
		// the one whose acquisition skips them (SKIP LOCKED) takes them a round later.
		last := nodes[0]
		for _, x := range nodes[1:] {
			if x.m.Stats().Rounds < last.m.Stats().Rounds {
				last = x
			}
		}
		if r := last.m.Stats().Rounds; r > 4 && !even() {
			t.Fatalf("every node has run %d rounds or more and the shares are still %v, want 32/32/32 within 3 (4 with a collision)", r, countHeld(t, db, tbl))
		}
		return even()
	}, rounds(t)...)
	moves := func() (n int64) {
		for _, x := range nodes {
			s := x.m.Stats()
			n += s.Acquired + s.Released
		}
		return n
	}
	if n := moves(); n != 96 {
		t.Errorf("%d acquisitions and releases to share 96 partitions, want 96: nothing taken only to be handed back", n)
	}
	r0 := nodes[0].m.Stats().Rounds
	leasetest.Eventually(t, 10*time.Second, "3 more rounds", func() bool { return nodes[0].m.Stats().Rounds >= r0+3 }, rounds(t)...)
	if !even() || moves() != 96 {
		t.Fatalf("shares moved after converging: %v", countHeld(t, db, tbl))
	}
}

// The writer lease moves from a node that holds it without preferring it most (it was
// alone when it took it) to the one that does, once that one joins; the epoch grows.
func TestWriterHandoffFromNonTopHolder(t *testing.T) {
	db := newDB(t)
	tbl := leasetest.Table(t, db, "events", 1)
	s := lease.WriterScope(tbl)
	top, low := "w-1", "w-2"
	if lease.Preference(low, s) > lease.Preference(top, s) {
		top, low = low, top
	}
	rec := &recorder{}
	first := startNode(t, db, rec, low, 0, lease.RoleWriter)
	leasetest.Eventually(t, 10*time.Second, "the only writer holds the writer lease", func() bool {
		return holders(t, db, tbl)[s].Holder == low && len(first.m.Held()) == 1
	}, rounds(t)...)
	before := holders(t, db, tbl)[s].Epoch
	startNode(t, db, rec, top, 0, lease.RoleWriter)
	leasetest.Eventually(t, 10*time.Second, "the writer lease with the node preferring it most", func() bool {
		return holders(t, db, tbl)[s].Holder == top
	}, rounds(t)...)
	if after := holders(t, db, tbl)[s].Epoch; after <= before {
		t.Fatalf("writer lease epoch %d after the handoff, was %d", after, before)
	}
	leasetest.Eventually(t, 5*time.Second, "the old holder stopped its writer", func() bool { return len(first.m.Held()) == 0 }, rounds(t)...)
	for _, e := range rec.all() {
		if e.node == low && !errors.Is(e.cause, context.Canceled) {
			t.Fatalf("%s stopped its writer for %v, want a clean release", low, e.cause)
		}
	}
}

// A node that could not renew in time stops its workers at its local deadline; when it
// renews again (its row still its own), each lease gets a new worker under a new epoch,
// so an old worker still running cannot be told apart from nothing: it is fenced out.
// A worker that ignores its stop is not restarted until it has ended: never two workers
// of one lease in one process.
func TestLocalDeadlineRestartsUnderNewEpoch(t *testing.T) {
	db := newDB(t)
	tbl := leasetest.Table(t, db, "events", 2)
	var mu sync.Mutex
	active := map[lease.Scope]int{}
	overlap := false
	started := map[lease.Scope][]int64{}
	release := make(chan struct{})
	work := func(ctx context.Context, l lease.Lease) {
		mu.Lock()
		active[l.Scope]++
		overlap = overlap || active[l.Scope] > 1
		started[l.Scope] = append(started[l.Scope], l.Epoch)
		mu.Unlock()
		<-ctx.Done()
		if l.Partition == 1 && errors.Is(context.Cause(ctx), lease.ErrLocalDeadline) {
			<-release // ignores its stop until told
		}
		mu.Lock()
		active[l.Scope]--
		mu.Unlock()
	}
	a := startNodeWith(t, db, "idx-a", 0, work, lease.RoleIndexer)
	leasetest.Eventually(t, 10*time.Second, "idx-a acts under both", func() bool { return len(a.m.Held()) == 2 }, rounds(t)...)
	stale := a.m.Held()
	a.db.Cut(true)
	leasetest.Eventually(t, 2*ttl, "workers stopped at the local deadline", func() bool { return len(a.m.Held()) == 0 }, rounds(t)...)
	a.db.Cut(false)
	p0, p1 := lease.PartitionScope(tbl, 0), lease.PartitionScope(tbl, 1)
	leasetest.Eventually(t, 10*time.Second, "partition 0 restarted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(started[p0]) == 2
	}, rounds(t)...)
	r0 := a.m.Stats().Rounds
	leasetest.Eventually(t, 10*time.Second, "3 more rounds", func() bool { return a.m.Stats().Rounds >= r0+3 }, rounds(t)...)
	mu.Lock()
	if n := len(started[p1]); n != 1 {
		mu.Unlock()
		t.Fatalf("partition 1 restarted while its old worker still ran (%d starts)", n)
	}
	mu.Unlock()
	close(release)
	leasetest.Eventually(t, 10*time.Second, "partition 1 restarted once its old worker ended", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(started[p1]) == 2
	}, rounds(t)...)
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Fatal("two workers of one lease ran at once in one process")
	}
	for _, l := range stale {
		epochs := started[l.Scope]
		if epochs[1] <= epochs[0] {
			t.Errorf("%s restarted under epoch %d, not above %d", l.Scope, epochs[1], epochs[0])
		}
		if err := lease.Fenced(context.Background(), db, l, func(pgx.Tx) error { return nil }); !errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("the old worker's fenced write under %s epoch %d: %v, want ErrLeaseLost", l.Scope, l.Epoch, err)
		}
	}
}

// Leave frees every lease within lease_ttl/6 whatever the workers do, here one that
// ignores its stop and one stuck inside a fenced write: the lease under that write is
// freed, and taken by another node, only once the write ends (takeover always waits for
// a fenced write in flight). Then Leave waits for the workers at most a lease_ttl.
func TestLeaveIsBoundedWhateverWorkersDo(t *testing.T) {
	db := newDB(t)
	tbl := leasetest.Table(t, db, "events", 2)
	ctx := context.Background()
	finish := make(chan struct{})
	inside := make(chan struct{})
	var running atomic.Int32
	work := func(wctx context.Context, l lease.Lease) {
		running.Add(1)
		defer running.Add(-1)
		if l.Partition == 0 {
			// Stuck in a fenced write that does not watch its context.
			_ = lease.Fenced(context.Background(), db, l, func(pgx.Tx) error {
				close(inside)
				<-finish
				return nil
			})
			return
		}
		<-finish // ignores wctx
	}
	a := startNodeWith(t, db, "idx-a", 0, work, lease.RoleIndexer)
	leasetest.Eventually(t, 10*time.Second, "idx-a acts under both", func() bool { return len(a.m.Held()) == 2 }, rounds(t)...)
	<-inside
	left := time.Now()
	a.cancel()
	p0, p1 := lease.PartitionScope(tbl, 0), lease.PartitionScope(tbl, 1)
	leasetest.Eventually(t, ttl/2, "idx-a's member row gone and the lease not under a write free", func() bool {
		_, err := lease.LookupMember(ctx, db, "idx-a")
		h := holders(t, db, tbl)
		return errors.Is(err, lease.ErrNoSuchMember) && h[p1].Holder == "" && h[p0].Holder == ""
	}, rounds(t)...)
	t.Logf("left in %v (lease_ttl/6 is %v)", time.Since(left), ttl/6)
	if running.Load() != 2 {
		t.Fatal("the workers ended; this test needs them still running")
	}
	b := startNode(t, db, &recorder{}, "idx-b", 0, lease.RoleIndexer)
	leasetest.Eventually(t, 10*time.Second, "idx-b takes the free lease", func() bool { return holders(t, db, tbl)[p1].Holder == "idx-b" }, rounds(t)...)
	r0 := b.m.Stats().Rounds
	select {
	case err := <-a.done:
		if err != nil {
			t.Fatal(err)
		}
		a.cancel = nil
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("Leave waited for the workers more than a lease_ttl")
	}
	leasetest.Eventually(t, 10*time.Second, "3 more rounds of idx-b", func() bool { return b.m.Stats().Rounds >= r0+3 }, rounds(t)...)
	var holder *string
	if err := db.QueryRow(ctx, `SELECT holder FROM mink_leases WHERE kind = 'partition' AND table_id = $1 AND partition = 0`, tbl).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if holder == nil || *holder != "idx-a" {
		t.Fatalf("the lease under the fenced write in flight changed hands to %v before the write ended", holder)
	}
	close(finish)
	leasetest.Eventually(t, 10*time.Second, "idx-b takes the other lease once the write ended", func() bool {
		return holders(t, db, tbl)[p0].Holder == "idx-b"
	}, rounds(t)...)
	leasetest.Eventually(t, 5*time.Second, "the workers ended", func() bool { return running.Load() == 0 }, rounds(t)...)
}

// A cluster's Postgres work per round is flat in partitions: the same nodes over 10 times the partitions read and write the same rows per steady round.
func TestSteadyRoundIndependentOfPartitions(t *testing.T) {
	per := map[int][2]int64{}
	for _, parts := range []int32{4, 40} {
		db := newDB(t)
		for i := 0; i < 5; i++ {
			leasetest.Table(t, db, fmt.Sprintf("t%d", i), parts)
		}
		var ms []*lease.Manager
		for i := 0; i < 4; i++ {
			m, err := lease.NewManager(db, lease.Config{NodeID: fmt.Sprintf("n%d", i), Roles: []lease.Role{lease.RoleIndexer, lease.RoleWriter}, TTL: time.Minute,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Register(context.Background()); err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		for pass := 0; pass < 4; pass++ {
			for _, m := range ms {
				if err := m.Round(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		var read, written int64
		for _, m := range ms {
			s0 := m.Stats()
			if err := m.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			s1 := m.Stats()
			read += s1.RowsRead - s0.RowsRead
			written += s1.RowsWritten - s0.RowsWritten
			if s1.Acquired != s0.Acquired || s1.Released != s0.Released {
				t.Fatalf("%d partitions: not converged after 4 passes", parts)
			}
		}
		per[int(parts)] = [2]int64{read, written}
		for _, m := range ms {
			m.Leave()
		}
	}
	if per[4] != per[40] || per[4][1] != 4 {
		t.Fatalf("rows read and written by 4 nodes' steady rounds: %v with 4 partitions per table, %v with 40; want the same, and 4 written", per[4], per[40])
	}
}

// mink_preference, the seed's preference in SQL for operators' queries, must rank exactly
// as Preference does.
func TestSQLPreferenceIsPreference(t *testing.T) {
	db := newDB(t)
	for _, node := range []string{"idx-a", "node-ü-7", ""} {
		for _, s := range []lease.Scope{lease.PartitionScope(1, 0), lease.PartitionScope(12345, 99), lease.WriterScope(7)} {
			var b []byte
			if err := db.QueryRow(context.Background(), `SELECT mink_preference($1, $2)`, node, s.String()).Scan(&b); err != nil {
				t.Fatal(err)
			}
			if len(b) != 8 || binary.BigEndian.Uint64(b) != lease.Preference(node, s) {
				t.Fatalf("mink_preference(%q, %s) = %x, Preference = %016x", node, s, b, lease.Preference(node, s))
			}
		}
	}
}
