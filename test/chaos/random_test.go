package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minkhq/mink/test/cluster"
)

// chaosConfig reads the random run's seed and length: MINK_CHAOS_SEED (default: the
// time) and MINK_CHAOS_DURATION (default 20s, the short run of make test; make chaos runs
// minutes).
func chaosConfig(t *testing.T) (int64, time.Duration) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("MINK_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("MINK_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	dur := 20 * time.Second
	if s := os.Getenv("MINK_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("MINK_CHAOS_DURATION=%q: want a duration such as 5m", s)
		}
		dur = d
	}
	return seed, dur
}

// epochMonitor samples the lease table through the run and checks what must hold at
// every instant: a lease's epoch never goes back, and one epoch of a lease never has
// two holders.
type epochMonitor struct {
	stop, done chan struct{}
	mu         sync.Mutex
	seen       map[string]cluster.Lease
	samples    int
	problems   []string
}

func (c *chaosCluster) monitorEpochs() *epochMonitor {
	m := &epochMonitor{stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]cluster.Lease{}}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ls, err := c.Leases(ctx) // fails while Postgres is down: nothing to see then
			cancel()
			m.mu.Lock()
			if err == nil {
				m.samples++
			}
			for _, l := range ls {
				k := fmt.Sprintf("%s/%d/%d", l.Kind, l.Table, l.Partition)
				prev, ok := m.seen[k]
				switch {
				case !ok:
				case l.Epoch < prev.Epoch:
					m.problems = append(m.problems, fmt.Sprintf("%s: epoch went back from %d to %d", k, prev.Epoch, l.Epoch))
				case l.Epoch == prev.Epoch && l.Holder != "" && prev.Holder != "" && l.Holder != prev.Holder:
					m.problems = append(m.problems, fmt.Sprintf("%s: epoch %d held by %s, then by %s", k, l.Epoch, prev.Holder, l.Holder))
				}
				if l.Holder != "" || !ok {
					m.seen[k] = l
				}
			}
			m.mu.Unlock()
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	c.T.Cleanup(m.halt)
	return m
}

func (m *epochMonitor) halt() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// fault is one injected failure and how to end it.
type fault struct {
	name   string
	target string // node id, "postgres" or "kafka": one fault per target at a time
	undo   func()
}

// TestRandomChaos mixes every fault of the other scenarios at random while records
// arrive: crashes and clean restarts with the same node id, pauses, hung processes
// replaced by new ones, Postgres cut, delayed, slowed, reset or refused for one node,
// Postgres stopped or killed for all, Kafka stopped, a fourth indexer joining and
// leaving. Up to two faults are active at
// once. At the end every fault is undone and the checker must pass; along the way no
// lease's epoch goes back and no epoch has two holders. The sequence of faults is drawn
// from the seed, printed at the start and on failure (MINK_CHAOS_SEED=<seed> replays it;
// timings still vary).
func TestRandomChaos(t *testing.T) {
	seed, dur := chaosConfig(t)
	t.Logf("seed %d, duration %v (MINK_CHAOS_SEED=%d MINK_CHAOS_DURATION=%v to replay)", seed, dur, seed, dur)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED: replay with MINK_CHAOS_SEED=%d MINK_CHAOS_DURATION=%v go test -run TestRandomChaos ./test/chaos", seed, dur)
		}
	})
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6d696e6b))
	c := newCluster(t, cluster.PersistentKafka())
	first := c.Join("indexer", "idx-a")
	c.Join("indexer", "idx-b")
	c.Join("indexer", "idx-c")
	c.Join("writer", "wr-1")
	c.Join("writer", "wr-2")
	c.Join("fileserver", "fs-1")
	c.createTable(first, "chaos1", 3)
	c.createTable(first, "chaos2", 4)
	pr := c.produce(25*time.Millisecond, map[string]int32{"chaos1": 3, "chaos2": 4})
	mon := c.monitorEpochs()
	waitFor(t, 30*time.Second, "every lease to be held", func() (string, bool) {
		for _, l := range c.MustLeases() {
			if !l.Live {
				return l.String(), false
			}
		}
		return "", true
	})

	ttl := c.TTL
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var active []fault
	busy := func(target string) bool {
		for _, f := range active {
			if f.target == target {
				return true
			}
		}
		return false
	}
	var joiner *cluster.Node
	var replaced []*cluster.Process // woken after being replaced: each must exit
	stats := map[string]int{}
	start := time.Now()
	logf := func(format string, args ...any) {
		t.Logf("%6.1fs %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	inject := func() (fault, bool) {
		candidates := c.Nodes("")
		n := candidates[rng.IntN(len(candidates))]
		action := rng.IntN(13)
		switch action {
		case 8, 9:
			if busy("postgres") {
				return fault{}, false
			}
		case 10:
			if busy("kafka") {
				return fault{}, false
			}
		case 12:
		default:
			if busy(n.ID) || !n.Running() {
				return fault{}, false
			}
		}
		switch action {
		case 0:
			n.Kill()
			return fault{"kill " + n.ID, n.ID, func() { n.Restart() }}, true
		case 1:
			n.Leave()
			return fault{"term " + n.ID, n.ID, func() { n.Restart() }}, true
		case 2:
			n.Pause()
			return fault{"pause " + n.ID, n.ID, n.Resume}, true
		case 3:
			n.CutPostgres()
			return fault{"cut " + n.ID + " from postgres", n.ID, n.HealPostgres}, true
		case 4:
			d := between(50*time.Millisecond, ttl/4)
			n.DelayPostgres(d)
			return fault{fmt.Sprintf("delay %s's postgres by %v", n.ID, d), n.ID, n.HealPostgres}, true
		case 5:
			kb := 4 + rng.IntN(60)
			n.SlowPostgres(kb)
			return fault{fmt.Sprintf("slow %s's postgres to %d KB/s", n.ID, kb), n.ID, n.HealPostgres}, true
		case 6:
			n.ResetPostgres() // at once: nothing to undo, but hold the node a while
			return fault{"reset " + n.ID + "'s postgres connections", n.ID, func() {}}, true
		case 7:
			n.RefusePostgres()
			return fault{"refuse " + n.ID + "'s postgres connections", n.ID, n.HealPostgres}, true
		case 8:
			c.StopPostgres()
			return fault{"stop postgres", "postgres", c.StartPostgres}, true
		case 9:
			c.KillPostgres()
			return fault{"kill postgres", "postgres", c.StartPostgres}, true
		case 10:
			c.StopKafka()
			return fault{"stop kafka", "kafka", c.StartKafka}, true
		case 11:
			// A hung process is replaced by a new one with the same node id; when the old
			// one wakes it must find itself fenced out, and exit.
			n.Pause()
			old := n.Replace()
			return fault{"replace hung " + n.ID + " with a new process", n.ID, func() {
				if err := old.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				replaced = append(replaced, old)
			}}, true
		default:
			// A fourth indexer joins, or leaves cleanly; not a fault to undo.
			switch {
			case joiner == nil:
				logf("join idx-d")
				joiner = c.Start("indexer", "idx-d")
				stats["join"]++
			case busy(joiner.ID):
			case joiner.Running():
				logf("idx-d leaves")
				joiner.Leave()
				stats["leave"]++
			default:
				logf("idx-d joins again")
				joiner.Restart()
				stats["join"]++
			}
			return fault{}, false
		}
	}

	deadline := start.Add(dur)
	steps := 0
	for time.Now().Before(deadline) {
		cluster.Until(time.Now().Add(between(200*time.Millisecond, ttl)))
		if len(active) > 0 && (len(active) >= 2 || rng.IntN(2) == 0) {
			i := rng.IntN(len(active))
			f := active[i]
			active = append(active[:i], active[i+1:]...)
			logf("undo %s", f.name)
			f.undo()
			continue
		}
		if f, ok := inject(); ok {
			steps++
			kind := strings.Fields(f.name)[0] // "kill" of a node, "kill postgres", ...
			if f.target == "postgres" || f.target == "kafka" {
				kind = f.name
			}
			stats[kind]++
			logf("%s", f.name)
			active = append(active, f)
		}
	}
	for _, f := range active {
		logf("undo %s", f.name)
		f.undo()
	}
	for _, p := range replaced {
		select {
		case <-p.Done():
			if p.State().ExitCode() == 0 {
				t.Errorf("replaced process %d of %s exited with %v", p.Pid(), p.Node.ID, p.ExitState())
			}
		case <-time.After(5 * ttl):
			t.Errorf("replaced process %d of %s still runs %v after every fault was undone", p.Pid(), p.Node.ID, 5*ttl)
		}
	}
	for _, n := range c.Nodes("") {
		if !n.Running() && n != joiner {
			t.Errorf("%s is not running after every fault was undone", n.ID)
		}
	}
	var kinds []string
	for k, v := range stats {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(kinds)
	t.Logf("%d faults in %v: %s; %d records acknowledged, %d produce calls failed",
		steps, time.Since(start).Round(time.Millisecond), strings.Join(kinds, ", "), pr.sent.Load(), pr.failed.Load())

	pr.halt()
	c.check()
	mon.halt()
	mon.mu.Lock()
	defer mon.mu.Unlock()
	for _, p := range mon.problems {
		t.Errorf("lease monitor: %s", p)
	}
	t.Logf("lease monitor: %d samples", mon.samples)
}
