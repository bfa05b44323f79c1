package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/test/cluster"
)

// indexing waits until the indexers hold their share of table (and, when a writer runs,
// one of them the writer lease) and every partition has ranges.
func (c *chaosCluster) indexing(table int64, partitions int32, share map[string]int, writer bool) cluster.Shares {
	c.T.Helper()
	return waitFor(c.T, 30*time.Second, fmt.Sprintf("shares %v and ranges on all %d partitions", share, partitions), func() (cluster.Shares, bool) {
		s := c.Shares(table)
		for id, n := range share {
			if s.Partitions[id] != n {
				return s, false
			}
		}
		if writer && s.Writer == "" {
			return s, false
		}
		return s, len(c.rangesPerPartition(table)) == int(partitions)
	})
}

// addDataPath starts a writer and a file server once they are wired, so the checker can
// scan every table through the catalog.
func (c *chaosCluster) addDataPath() {
	c.Join("writer", "wr-1")
	c.Join("fileserver", "fs-1")
}

// onePerNode checks that every node still runs its first process: it recovered without a
// restart.
func (c *chaosCluster) onePerNode() {
	c.T.Helper()
	for _, n := range c.Nodes("") {
		if h := n.History(); len(h) != 1 || h[0].Exited() {
			c.T.Errorf("%s: %d processes, current %s: it did not recover without a restart", n.ID, len(h), n.Process().ExitState())
		}
	}
}

// TestNodeCrash is the seed's "A node crashes: its leases expire after lease_ttl. Other
// nodes take them, and indexing resumes from the indexed ranges." An indexer is
// SIGKILLed while records arrive: its leases stay its own until their expiry (database
// clock), are taken no earlier and within lease_ttl after it, and the new holder's first
// range starts exactly where the dead one's last range ended.
func TestNodeCrash(t *testing.T) {
	c := newCluster(t)
	a := c.Join("indexer", "idx-a")
	c.Join("indexer", "idx-b")
	c.addDataPath()
	table := c.createTable(a, "crash", 4)
	pr := c.produce(20*time.Millisecond, map[string]int32{"crash": 4})
	c.indexing(table, 4, map[string]int{"idx-a": 2, "idx-b": 2}, false)

	a.Kill()
	killed := c.DBNow()
	// Its leases as its last renewal left them (read after it died, so no renewal is
	// still to come; a statement in flight at the kill could only make them later).
	dead := c.PartitionLeases(table, "idx-a")
	if len(dead) != 2 {
		t.Fatalf("the killed node holds %d live partition leases, want 2", len(dead))
	}
	var firstExpiry time.Time
	for _, d := range dead {
		if firstExpiry.IsZero() || d.Expires.Before(firstExpiry) {
			firstExpiry = d.Expires
		}
	}

	// Shortly before the first expiry, they are still the dead node's.
	waitFor(t, 2*c.TTL, "the database clock to near the first expiry", func() (time.Time, bool) {
		now := c.DBNow()
		return now, !now.Before(firstExpiry.Add(-c.TTL / 4))
	})
	ls := c.MustLeases()
	if at := ls[0].At; at.Before(firstExpiry) {
		for _, l := range ls {
			if d, ok := dead[l.Partition]; ok && l.Table == table && l.Kind == "partition" && (l.Holder != "idx-a" || l.Epoch != d.Epoch) {
				t.Errorf("partition %d was taken (%v) %v before its lease expired", l.Partition, l, firstExpiry.Sub(at))
			}
		}
	} else {
		t.Logf("the check before expiry ran late (%v after it); skipped", at.Sub(firstExpiry))
	}

	// After lease_ttl, idx-b takes them: never before their expiry, within lease_ttl of it.
	waitFor(t, 4*c.TTL, "idx-b to hold all 4 partitions", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-b"] == 4
	})
	now := c.PartitionLeases(table, "idx-b")
	for p, d := range dead {
		l := now[p]
		switch {
		case l.Epoch <= d.Epoch:
			t.Errorf("partition %d: taken under epoch %d, the dead node's was %d", p, l.Epoch, d.Epoch)
		case l.Acquired.Before(d.Expires):
			t.Errorf("partition %d: taken at %v, before the dead node's lease expired at %v", p, l.Acquired, d.Expires)
		case l.Acquired.Sub(d.Expires) > c.TTL:
			t.Errorf("partition %d: taken %v after the dead node's lease expired, more than lease_ttl", p, l.Acquired.Sub(d.Expires))
		default:
			t.Logf("partition %d: expired %v after the kill, taken %v after expiry (lease_ttl %v)",
				p, d.Expires.Sub(killed).Round(time.Millisecond), l.Acquired.Sub(d.Expires).Round(time.Millisecond), c.TTL)
		}
	}

	// Indexing resumes from the ranges: the new epoch's first range starts where the old
	// epoch's last one ended.
	waitFor(t, 20*time.Second, "ranges under the new epochs", func() (string, bool) {
		for p := range dead {
			if !slices.ContainsFunc(c.ranges(table), func(r rangeRow) bool { return r.partition == p && r.epoch == now[p].Epoch }) {
				return fmt.Sprintf("partition %d has none", p), false
			}
		}
		return "", true
	})
	rs := c.ranges(table)
	for p, d := range dead {
		for i, r := range rs {
			if r.partition == p && r.epoch == now[p].Epoch {
				if i == 0 || rs[i-1].partition != p || rs[i-1].epoch != d.Epoch || rs[i-1].end != r.start {
					t.Errorf("partition %d: the new holder's first range [%d, %d) does not follow the dead holder's last range", p, r.start, r.end)
				} else {
					t.Logf("partition %d: resumed at offset %d", p, r.start)
				}
				break
			}
		}
	}
	pr.halt()
	c.check()
}

// TestNodeJoin is the seed's "A node joins: every share drops. Other nodes hand back one
// partition per table per round." One indexer holds two 6-partition tables; two more
// join. Sampling the lease table every 25ms, no node's count of one table ever drops by
// more than one within a round (lease_ttl/3), until every share is 2.
func TestNodeJoin(t *testing.T) {
	c := newCluster(t, cluster.LeaseTTL(3*time.Second))
	a := c.Join("indexer", "idx-a")
	c.addDataPath()
	t1 := c.createTable(a, "join1", 6)
	t2 := c.createTable(a, "join2", 6)
	pr := c.produce(50*time.Millisecond, map[string]int32{"join1": 6, "join2": 6})
	c.indexing(t1, 6, map[string]int{"idx-a": 6}, false)
	c.indexing(t2, 6, map[string]int{"idx-a": 6}, false)

	type sample struct {
		at     time.Time
		counts map[string]int // "<table>/<node>" -> live partition leases
	}
	var samples []sample
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ls, err := c.Leases(ctx)
			cancel()
			if err == nil && len(ls) > 0 {
				s := sample{at: ls[0].At, counts: map[string]int{}}
				for _, l := range ls {
					if l.Kind == "partition" && l.Live {
						s.counts[fmt.Sprintf("%d/%s", l.Table, l.Holder)]++
					}
				}
				samples = append(samples, s)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()

	joined := time.Now()
	c.Join("indexer", "idx-b")
	c.Join("indexer", "idx-c")
	even := map[string]int{"idx-a": 2, "idx-b": 2, "idx-c": 2}
	for _, table := range []int64{t1, t2} {
		waitFor(t, 10*c.TTL, "every share to drop to 2", func() (cluster.Shares, bool) {
			s := c.Shares(table)
			for id, n := range even {
				if s.Partitions[id] != n {
					return s, false
				}
			}
			return s, true
		})
	}
	t.Logf("shares even %v after the joins", time.Since(joined).Round(time.Millisecond))
	close(stop)
	<-done

	// Rounds are lease_ttl/3 apart, so two hand-backs of one table by one node in one
	// round land milliseconds apart and in two rounds about lease_ttl/3 apart: a window of
	// lease_ttl/6 tells them apart with room for a round that runs late. Counting the
	// steps (each a drop of one) below checks the same from the other side.
	window := c.TTL / 6
	keys := map[string]bool{}
	for _, s := range samples {
		for k := range s.counts {
			keys[k] = true
		}
	}
	drops := map[string]int{}
	for k := range keys {
		for i := range samples {
			if i > 0 && samples[i].counts[k] < samples[i-1].counts[k] {
				drops[k]++
			}
			for j := i + 1; j < len(samples) && samples[j].at.Sub(samples[i].at) < window; j++ {
				if d := samples[i].counts[k] - samples[j].counts[k]; d > 1 {
					t.Errorf("%s: %d leases handed back within %v (from %d at %v to %d at %v): more than one per round",
						k, d, samples[j].at.Sub(samples[i].at).Round(time.Millisecond), samples[i].counts[k],
						samples[i].at.Format("15:04:05.000"), samples[j].counts[k], samples[j].at.Format("15:04:05.000"))
					break
				}
			}
		}
	}
	for _, table := range []int64{t1, t2} {
		k := fmt.Sprintf("%d/idx-a", table)
		// idx-a went from 6 to 2, one lease at a time.
		if drops[k] < 4 {
			t.Errorf("%s handed back its leases in %d steps, want 4 (one per round)", k, drops[k])
		}
	}
	t.Logf("%d samples; hand-back steps per table and node: %v", len(samples), drops)
	pr.halt()
	c.check()
}

// TestPostgresUnreachable is the seed's "Postgres is unreachable: table loads, and reads of
// data files not in the owner's cache, answer 503. Cached files are still served.
// Indexers and writers stop. Once Postgres answers, every node takes its share again
// without a restart."
func TestPostgresUnreachable(t *testing.T) {
	// lease_ttl 3s: the margin measured (lease_ttl/6) is then 500ms, well above how late
	// the 20ms status polls can see a change on a loaded machine.
	c := newCluster(t, cluster.LeaseTTL(3*time.Second))
	a := c.Join("indexer", "idx-a")
	c.Join("indexer", "idx-b")
	c.Join("writer", "wr-1")
	fs := c.Join("fileserver", "fs-1")
	table := c.createTable(a, "pgdown", 4)
	pr := c.produce(20*time.Millisecond, map[string]int32{"pgdown": 4})
	c.indexing(table, 4, map[string]int{"idx-a": 2, "idx-b": 2}, true)
	w := c.warm(fs, table)
	pre := map[int32]int64{}
	for _, l := range c.MustLeases() {
		if l.Table == table && l.Kind == "partition" {
			pre[l.Partition] = l.Epoch
		}
	}

	// Every node's own view while Postgres is gone. Postgres runs on this machine, so
	// while it is down the test reads the clock it uses directly.
	var watches []*leaseWatch
	for _, n := range c.Nodes("") {
		if n.Role != "fileserver" {
			watches = append(watches, watch(t, n, localClock))
		}
	}
	waitFor(t, 5*time.Second, "every watch to see leases", func() (int, bool) {
		for _, w := range watches {
			if !w.ready() {
				return 0, false
			}
		}
		return len(watches), true
	})
	for _, w := range watches {
		w.arm()
	}
	c.StopPostgres()
	down := time.Now()
	waitFor(t, 2*c.TTL, "every indexer and writer to stop acting", func() (string, bool) {
		for _, w := range watches {
			if !w.stopped() {
				return w.String(), false
			}
		}
		return "", true
	})
	var latest time.Time
	for _, w := range watches {
		_, _, notActing := w.snapshot()
		t.Logf("%s stopped acting %v after Postgres went down", w.n.ID, notActing.Sub(down).Round(time.Millisecond))
		if e := w.checkStoppedBeforeExpiry(t); e.After(latest) {
			latest = e
		}
		w.halt()
	}
	for _, n := range c.Nodes("") {
		if !n.Running() {
			t.Errorf("%s exited while Postgres was down: %s", n.ID, n.Process().ExitState())
		}
	}
	t.Run("catalog and S3 while Postgres is down", func(t *testing.T) {
		catURL, s3, err := fs.Endpoints()
		if err != nil {
			t.Fatal(err)
		}
		r := do(t, "GET", catURL, "/v1/namespaces/default/tables/pgdown", nil)
		if e, ok := icebergError(r.body); r.status != 503 || !ok || e.Code != 503 || e.Type != "ServiceUnavailableException" {
			t.Errorf("table load: %d %s, want 503 ServiceUnavailableException in the Iceberg envelope", r.status, r.body)
		}
		if _, err := c.scan(fs, "default", "pgdown"); !isUnavailable(err) {
			t.Errorf("iceberg-go load: %v, want rest.ErrServiceUnavailable", err)
		}
		r = do(t, "GET", s3, "/"+layout.Bucket+"/"+w.uncached, nil)
		if e, ok := s3Error(r.body); r.status != 503 || !ok || e.Code != "ServiceUnavailable" || !strings.Contains(strings.ToLower(e.Message), "postgres") {
			t.Errorf("uncached read: %d %s, want 503 ServiceUnavailable naming Postgres", r.status, r.body)
		}
		r = do(t, "GET", s3, "/"+layout.Bucket+"/"+w.cached, nil)
		if r.status != 200 || string(r.body) != string(w.body) {
			t.Errorf("cached read: %d, %d bytes of %d", r.status, len(r.body), len(w.body))
		}
	})

	// Hold the outage until every lease has expired by Postgres's clock.
	cluster.Until(latest.Add(c.TTL / 3))
	c.StartPostgres()
	back := time.Now()
	backDB := c.DBNow()
	s := waitFor(t, 4*c.TTL, "every node to take its share again", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-a"] == 2 && s.Partitions["idx-b"] == 2 && s.Writer == "wr-1"
	})
	t.Logf("Postgres back: shares %v again after %v", s, time.Since(back).Round(time.Millisecond))
	for _, n := range c.Nodes("") {
		if n.Role == "fileserver" {
			continue
		}
		waitFor(t, 2*c.TTL, n.ID+" to act again", func() (string, bool) {
			st, err := n.Status()
			if err != nil {
				return err.Error(), false
			}
			return st.GetLastError(), st.GetActing()
		})
	}
	c.onePerNode()
	// Nothing was written under the leases held before the outage: every range stored
	// since is under a newer epoch.
	waitFor(t, 20*time.Second, "ranges on every partition after the outage", func() (map[int32]int, bool) {
		after := map[int32]int{}
		for _, r := range c.ranges(table) {
			if r.created.After(backDB) {
				after[r.partition]++
			}
		}
		return after, len(after) == 4
	})
	for _, r := range c.ranges(table) {
		if r.created.After(backDB) && r.epoch <= pre[r.partition] {
			t.Errorf("partition %d: range [%d, %d) stored after the outage under epoch %d, held before it", r.partition, r.start, r.end, r.epoch)
		}
	}
	t.Run("catalog and S3 after Postgres is back", func(t *testing.T) {
		catURL, s3, err := fs.Endpoints()
		if err != nil {
			t.Fatal(err)
		}
		if r := do(t, "GET", catURL, "/v1/namespaces/default/tables/pgdown", nil); r.status != 200 {
			t.Errorf("table load: %d %s", r.status, r.body)
		}
		if r := do(t, "GET", s3, "/"+layout.Bucket+"/"+w.uncached, nil); r.status != 200 {
			t.Errorf("formerly uncached read: %d %s", r.status, r.body)
		}
	})
	pr.halt()
	c.check()
}

// TestKafkaUnreachable is the seed's "Kafka is unreachable: table loads, builds and
// indexing fail until Kafka answers. Cached data files are still served." Every node
// stays up and keeps its leases (Postgres answers); once Kafka is back, indexing resumes
// without a restart.
func TestKafkaUnreachable(t *testing.T) {
	c := newCluster(t, cluster.PersistentKafka())
	a := c.Join("indexer", "idx-a")
	b := c.Join("indexer", "idx-b")
	c.Join("writer", "wr-1")
	fs := c.Join("fileserver", "fs-1")
	table := c.createTable(a, "kafkadown", 4)
	pr := c.produce(20*time.Millisecond, map[string]int32{"kafkadown": 4})
	before := c.indexing(table, 4, map[string]int{"idx-a": 2, "idx-b": 2}, true)
	w := c.warm(fs, table)
	// An uncached file that exists now: the writer may have replaced the one warm chose.
	keys := c.dataFiles(table)
	w.uncached = keys[len(keys)-1]

	pr.paused.Store(true)
	outA, outB := len(a.Process().Output()), len(b.Process().Output())
	c.StopKafka()
	down := time.Now()
	downDB := c.DBNow()
	// A range being cut when Kafka went away may still be stored: it is cut at most
	// mink.range.max-age (300ms) after its first record. Nothing after that.
	quiet := downDB.Add(time.Second)
	t.Run("catalog and S3 while Kafka is down", func(t *testing.T) {
		catURL, s3, err := fs.Endpoints()
		if err != nil {
			t.Fatal(err)
		}
		// A build and a load each give up on Kafka after their timeout: ask both at once.
		start := time.Now()
		type answer struct {
			r   httpResult
			err error
		}
		build, load := make(chan answer, 1), make(chan answer, 1)
		go func() {
			r, err := fetch("GET", s3, "/"+layout.Bucket+"/"+w.uncached, nil)
			build <- answer{r, err}
		}()
		go func() {
			r, err := fetch("GET", catURL, "/v1/namespaces/default/tables/kafkadown", nil)
			load <- answer{r, err}
		}()
		r := do(t, "GET", s3, "/"+layout.Bucket+"/"+w.cached, nil)
		if r.status != 200 || string(r.body) != string(w.body) {
			t.Errorf("cached read: %d, %d bytes of %d", r.status, len(r.body), len(w.body))
		}
		a := <-build
		if e, ok := s3Error(a.r.body); a.err != nil || a.r.status != 503 || !ok || e.Code != "ServiceUnavailable" || !strings.Contains(strings.ToLower(e.Message), "kafka") {
			t.Errorf("uncached read (a build): %d %s %v, want 503 ServiceUnavailable naming Kafka", a.r.status, a.r.body, a.err)
		}
		// The seed: table loads fail too while Kafka is unreachable.
		a = <-load
		if e, ok := icebergError(a.r.body); a.err != nil || a.r.status != 503 || !ok || e.Code != 503 {
			t.Errorf("table load: %d %s %v, want 503 in the Iceberg envelope (seed: loads fail while Kafka is unreachable)", a.r.status, a.r.body, a.err)
		}
		t.Logf("the build and the load answered 503 within %v", time.Since(start).Round(time.Millisecond))
	})
	// Indexing fails: each indexer says so (its Kafka client gives up after its timeout).
	waitFor(t, 20*time.Second, "both indexers to report indexing failures", func() (bool, bool) {
		return true, strings.Contains(a.Process().Output()[outA:], "indexing failed") &&
			strings.Contains(b.Process().Output()[outB:], "indexing failed")
	})
	t.Logf("indexers reported failures %v into the outage", time.Since(down).Round(time.Millisecond))
	// Hold the outage for a few lease rounds: nodes stay up, keep acting and keep their
	// shares, and no range is stored.
	cluster.Until(down.Add(time.Second + c.TTL))
	for _, n := range c.Nodes("") {
		st, err := n.Status()
		switch {
		case err != nil:
			t.Errorf("%s does not answer while Kafka is down: %v", n.ID, err)
		case n.Role != "fileserver" && !st.GetActing():
			t.Errorf("%s stopped acting while only Kafka is down (last error %q)", n.ID, st.GetLastError())
		}
	}
	if s := c.Shares(table); s.String() != before.String() {
		t.Errorf("shares moved while only Kafka was down: %v, before %v", s, before)
	}
	for _, r := range c.ranges(table) {
		if r.created.After(quiet) {
			t.Errorf("partition %d: range [%d, %d) stored %v into the Kafka outage", r.partition, r.start, r.end, r.created.Sub(downDB))
		}
	}

	c.StartKafka()
	pr.paused.Store(false)
	backDB := c.DBNow()
	back := time.Now()
	waitFor(t, 30*time.Second, "ranges on every partition after Kafka is back", func() (map[int32]int, bool) {
		after := map[int32]int{}
		for _, r := range c.ranges(table) {
			if r.created.After(backDB) {
				after[r.partition]++
			}
		}
		return after, len(after) == 4
	})
	t.Logf("Kafka back: every partition indexed again after %v", time.Since(back).Round(time.Millisecond))
	c.onePerNode()
	t.Run("catalog and S3 after Kafka is back", func(t *testing.T) {
		_, s3, err := fs.Endpoints()
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the uncached file to build", func() (int, bool) {
			r := do(t, "GET", s3, "/"+layout.Bucket+"/"+w.uncached, nil)
			return r.status, r.status == 200
		})
	})
	pr.halt()
	c.check()
}

// TestPausedStaleHolder: an indexer is paused (SIGSTOP) past lease_ttl while records
// arrive; the other takes its partitions; then it wakes (SIGCONT) believing for a moment
// that it still holds them. Postgres rejects every write under the old epochs (the very
// write it would make is shown to fail), nothing is stored under them after the
// takeover, it takes its share back under new epochs, and the table view stays exact.
func TestPausedStaleHolder(t *testing.T) {
	c := newCluster(t)
	a := c.Join("indexer", "idx-a")
	c.Join("indexer", "idx-b")
	c.addDataPath()
	table := c.createTable(a, "paused", 4)
	pr := c.produce(20*time.Millisecond, map[string]int32{"paused": 4})
	c.indexing(table, 4, map[string]int{"idx-a": 2, "idx-b": 2}, false)

	a.Pause()
	old := c.PartitionLeases(table, "idx-a")
	if len(old) != 2 {
		t.Fatalf("the paused node holds %d live partition leases, want 2", len(old))
	}
	waitFor(t, 4*c.TTL, "idx-b to take every partition", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-b"] == 4
	})
	takeover := c.PartitionLeases(table, "idx-b")
	for p, o := range old {
		if n := takeover[p]; n.Epoch <= o.Epoch || n.Acquired.Before(o.Expires) {
			t.Errorf("partition %d: taken under epoch %d at %v; the paused holder's epoch %d expired at %v", p, n.Epoch, n.Acquired, o.Epoch, o.Expires)
		}
	}

	// The write the stale holder would make next (its next range, under its lease) is
	// rejected by Postgres, and changes nothing.
	ctx := context.Background()
	for p, o := range old {
		st, err := ranges.State(ctx, c.DB, table, p)
		if err != nil {
			t.Fatal(err)
		}
		stale := lease.Lease{Scope: lease.PartitionScope(table, p), Holder: "idx-a", TableName: "default.paused", Epoch: o.Epoch}
		err = ranges.Append(ctx, c.DB, stale, ranges.Range{Table: table, Partition: p, Start: st.IndexedEnd, End: st.IndexedEnd + 1,
			Records: 1, Size: 1, SHA256: strings.Repeat("0", 64), Settings: []byte("{}"), Stats: []byte("[]")})
		if !errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("partition %d: a write under the stale epoch %d answered %v, want ErrLeaseLost", p, o.Epoch, err)
		}
		if after, _ := ranges.State(ctx, c.DB, table, p); after != st {
			t.Errorf("partition %d: the rejected write changed the index: %+v, was %+v", p, after, st)
		}
	}
	// Let the new holder store past where the paused one stopped before it wakes.
	waitFor(t, 20*time.Second, "ranges under the new epochs", func() (string, bool) {
		for p := range old {
			if !slices.ContainsFunc(c.ranges(table), func(r rangeRow) bool { return r.partition == p && r.epoch == takeover[p].Epoch }) {
				return fmt.Sprintf("partition %d has none", p), false
			}
		}
		return "", true
	})

	a.Resume()
	s := waitFor(t, 8*c.TTL, "idx-a to take its share back", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-a"] == 2 && s.Partitions["idx-b"] == 2
	})
	t.Logf("after SIGCONT: %v", s)
	c.onePerNode()
	pr.halt()
	c.check()
	for _, r := range c.ranges(table) {
		if o, ok := old[r.partition]; ok && r.epoch == o.Epoch && !r.created.Before(takeover[r.partition].Acquired) {
			t.Errorf("partition %d: range [%d, %d) stored under the stale epoch %d after the takeover", r.partition, r.start, r.end, r.epoch)
		}
	}
	st, _ := a.Status()
	t.Logf("idx-a after waking: %d leases lost, last error %q", st.GetLeaseStats().GetLost(), st.GetLastError())
}

// TestPartitionFromPostgres: one indexer is cut from Postgres alone (its proxy drops every
// byte; Kafka and its admin API stay reachable). By the database clock it stops acting
// under each lease before the lease can expire, the other node takes each one only
// after that, so no two nodes ever index a partition at once; once the network heals it
// takes its share again without a restart.
func TestPartitionFromPostgres(t *testing.T) {
	// lease_ttl 3s, as in TestPostgresUnreachable: a 500ms margin to measure.
	c := newCluster(t, cluster.LeaseTTL(3*time.Second))
	a := c.Join("indexer", "idx-a")
	c.Join("indexer", "idx-b")
	c.addDataPath()
	table := c.createTable(a, "cut", 4)
	pr := c.produce(20*time.Millisecond, map[string]int32{"cut": 4})
	c.indexing(table, 4, map[string]int{"idx-a": 2, "idx-b": 2}, false)

	w := watch(t, a, c.dbClock)
	waitFor(t, 5*time.Second, "the watch to see idx-a's leases", func() (bool, bool) { return true, w.ready() })
	w.arm()
	a.CutPostgres()
	cut := time.Now()
	waitFor(t, 2*c.TTL, "idx-a to stop acting", func() (string, bool) { return w.String(), w.stopped() })
	_, goneAt, notActing := w.snapshot()
	t.Logf("idx-a stopped acting %v after the cut", time.Since(cut).Round(time.Millisecond))
	w.checkStoppedBeforeExpiry(t)
	w.halt()
	if !a.Running() {
		t.Fatalf("idx-a exited when cut from Postgres: %s", a.Process().ExitState())
	}
	if st, err := a.Status(); err != nil || st.GetActing() || st.GetLastError() == "" {
		t.Errorf("idx-a's status while cut: %v, %v", st, err)
	}

	waitFor(t, 4*c.TTL, "idx-b to take every partition", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-b"] == 4
	})
	for _, l := range c.PartitionLeases(table, "idx-b") {
		k := fmt.Sprintf("PARTITION/%d/%d", table, l.Partition)
		if g, ok := goneAt[k]; ok {
			if !l.Acquired.After(g) {
				t.Errorf("partition %d: idx-b took it at %v, while idx-a still acted under it (until %v)", l.Partition, l.Acquired, g)
			} else {
				t.Logf("partition %d: idx-a stopped %v before idx-b took it", l.Partition, l.Acquired.Sub(g).Round(time.Millisecond))
			}
		}
	}
	_ = notActing

	a.HealPostgres()
	healed := time.Now()
	s := waitFor(t, 8*c.TTL, "idx-a to take its share again", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-a"] == 2 && s.Partitions["idx-b"] == 2
	})
	t.Logf("healed: %v after %v", s, time.Since(healed).Round(time.Millisecond))
	c.onePerNode()
	pr.halt()
	c.check()
}

// TestRestartSameNodeID: an indexer hangs (SIGSTOP) and its supervisor starts a new
// process with the same node id. The new process takes the node's leases over at once,
// under new epochs, without waiting for them to expire; when the old process wakes
// (SIGCONT) it is fenced out of everything, stores nothing, and exits.
func TestRestartSameNodeID(t *testing.T) {
	c := newCluster(t)
	a := c.Join("indexer", "idx-a")
	c.Join("indexer", "idx-b")
	c.addDataPath()
	table := c.createTable(a, "restart", 4)
	pr := c.produce(20*time.Millisecond, map[string]int32{"restart": 4})
	c.indexing(table, 4, map[string]int{"idx-a": 2, "idx-b": 2}, false)

	a.Pause()
	before := c.PartitionLeases(table, "idx-a")
	old := a.Replace()
	a.WaitActing()
	// Register skips a lease whose row a fenced write of the paused process holds (it
	// was stopped inside that transaction); Postgres ends that write after
	// idle_in_transaction_session_timeout (lease_ttl), and the rounds free and take the
	// lease then. Every other lease is adopted at once.
	atOnce := c.PartitionLeases(table, "idx-a")
	after := waitFor(t, 4*c.TTL, "the new process to hold every lease of the node", func() (map[int32]cluster.Lease, bool) {
		now := c.PartitionLeases(table, "idx-a")
		for p, b := range before {
			if n, ok := now[p]; !ok || n.Epoch <= b.Epoch {
				return now, false
			}
		}
		return now, true
	})
	for p, b := range before {
		n, adopted := atOnce[p]
		switch {
		case !adopted:
			t.Logf("partition %d: a fenced write of the paused process held it; taken under epoch %d once Postgres ended that write", p, after[p].Epoch)
		case n.Epoch <= b.Epoch:
			t.Errorf("partition %d: adopted under epoch %d, the old process held %d", p, n.Epoch, b.Epoch)
		case !n.Acquired.Before(b.Expires):
			t.Errorf("partition %d: adopted at %v, not before the old lease expired (%v)", p, n.Acquired, b.Expires)
		default:
			t.Logf("partition %d: adopted under epoch %d, %v before the old lease would have expired", p, n.Epoch, b.Expires.Sub(n.Acquired).Round(time.Millisecond))
		}
	}
	waitFor(t, 20*time.Second, "ranges under the adopted epochs", func() (string, bool) {
		for p := range before {
			if !slices.ContainsFunc(c.ranges(table), func(r rangeRow) bool { return r.partition == p && r.epoch == after[p].Epoch }) {
				return fmt.Sprintf("partition %d has none", p), false
			}
		}
		return "", true
	})

	if err := old.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.Done():
	case <-time.After(3 * c.TTL):
		t.Fatalf("the replaced process still runs %v after waking", 3*c.TTL)
	}
	if old.State().ExitCode() == 0 || !strings.Contains(old.Output(), lease.ErrReplaced.Error()) {
		t.Errorf("the replaced process exited with %v; its log does not say %q", old.ExitState(), lease.ErrReplaced)
	}
	if s := c.Shares(table); s.Partitions["idx-a"] != 2 || s.Partitions["idx-b"] != 2 {
		t.Errorf("shares after the old process woke: %v", s)
	}
	pr.halt()
	c.check()
	for _, r := range c.ranges(table) {
		if b, ok := before[r.partition]; ok && r.epoch == b.Epoch && !r.created.Before(after[r.partition].Acquired) {
			t.Errorf("partition %d: range [%d, %d) stored under the replaced process's epoch %d after the takeover", r.partition, r.start, r.end, r.epoch)
		}
	}
}
