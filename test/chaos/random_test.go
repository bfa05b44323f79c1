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
	seen       map[string]leaseRow
	samples    int
	problems   []string
}

func (c *cluster) monitorEpochs() *epochMonitor {
	m := &epochMonitor{stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]leaseRow{}}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ls, err := c.leases(ctx) // fails while Postgres is down: nothing to see then
			cancel()
			m.mu.Lock()
			if err == nil {
				m.samples++
			}
			for _, l := range ls {
				k := fmt.Sprintf("%s/%d/%d", l.kind, l.table, l.partition)
				prev, ok := m.seen[k]
				switch {
				case !ok:
				case l.epoch < prev.epoch:
					m.problems = append(m.problems, fmt.Sprintf("%s: epoch went back from %d to %d", k, prev.epoch, l.epoch))
				case l.epoch == prev.epoch && l.holder != "" && prev.holder != "" && l.holder != prev.holder:
					m.problems = append(m.problems, fmt.Sprintf("%s: epoch %d held by %s, then by %s", k, l.epoch, prev.holder, l.holder))
				}
				if l.holder != "" || !ok {
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
	c.t.Cleanup(m.halt)
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
	c := newCluster(t, clusterOptions{persistent: true})
	first := c.addNode("indexer", "idx-a")
	c.addNode("indexer", "idx-b")
	c.addNode("indexer", "idx-c")
	c.addNode("writer", "wr-1")
	c.addNode("writer", "wr-2")
	c.addNode("fileserver", "fs-1")
	c.createTable(first, "chaos1", 3)
	c.createTable(first, "chaos2", 4)
	pr := c.produce(25*time.Millisecond, map[string]int32{"chaos1": 3, "chaos2": 4})
	mon := c.monitorEpochs()
	waitFor(t, 30*time.Second, "every lease to be held", func() (string, bool) {
		for _, l := range c.mustLeases() {
			if !l.live {
				return l.String(), false
			}
		}
		return "", true
	})

	ttl := c.ttl
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
	var joiner *node
	var replaced []*proc // woken after being replaced: each must exit
	stats := map[string]int{}
	start := time.Now()
	logf := func(format string, args ...any) {
		t.Logf("%6.1fs %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	inject := func() (fault, bool) {
		candidates := c.nodesOf("")
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
			if busy(n.id) || !n.running() {
				return fault{}, false
			}
		}
		switch action {
		case 0:
			n.kill()
			return fault{"kill " + n.id, n.id, func() { n.start() }}, true
		case 1:
			n.term()
			return fault{"term " + n.id, n.id, func() { n.start() }}, true
		case 2:
			n.pause()
			return fault{"pause " + n.id, n.id, n.resume}, true
		case 3:
			n.cut()
			return fault{"cut " + n.id + " from postgres", n.id, n.heal}, true
		case 4:
			d := between(50*time.Millisecond, ttl/4)
			n.delay(d)
			return fault{fmt.Sprintf("delay %s's postgres by %v", n.id, d), n.id, n.heal}, true
		case 5:
			kb := 4 + rng.IntN(60)
			n.slow(kb)
			return fault{fmt.Sprintf("slow %s's postgres to %d KB/s", n.id, kb), n.id, n.heal}, true
		case 6:
			n.reset() // at once: nothing to undo, but hold the node a while
			return fault{"reset " + n.id + "'s postgres connections", n.id, func() {}}, true
		case 7:
			n.refuse()
			return fault{"refuse " + n.id + "'s postgres connections", n.id, n.heal}, true
		case 8:
			if err := c.pg.Stop(); err != nil {
				t.Fatal(err)
			}
			return fault{"stop postgres", "postgres", func() {
				if err := c.pg.Start(); err != nil {
					t.Fatal(err)
				}
			}}, true
		case 9:
			if err := c.pg.Kill(); err != nil {
				t.Fatal(err)
			}
			return fault{"kill postgres", "postgres", func() {
				if err := c.pg.Start(); err != nil {
					t.Fatal(err)
				}
			}}, true
		case 10:
			c.kafka.Stop()
			return fault{"stop kafka", "kafka", func() { c.kafka.Restart() }}, true
		case 11:
			// A hung process is replaced by a new one with the same node id; when the old
			// one wakes it must find itself fenced out, and exit.
			n.pause()
			old := n.replace()
			return fault{"replace hung " + n.id + " with a new process", n.id, func() {
				old.signal(t, syscall.SIGCONT)
				old.paused.Store(false)
				replaced = append(replaced, old)
			}}, true
		default:
			// A fourth indexer joins, or leaves cleanly; not a fault to undo.
			switch {
			case joiner == nil:
				logf("join idx-d")
				joiner = c.newNode("indexer", "idx-d")
				stats["join"]++
			case busy(joiner.id):
			case joiner.running():
				logf("idx-d leaves")
				joiner.term()
				stats["leave"]++
			default:
				logf("idx-d joins again")
				joiner.start()
				stats["join"]++
			}
			return fault{}, false
		}
	}

	deadline := start.Add(dur)
	steps := 0
	for time.Now().Before(deadline) {
		until(time.Now().Add(between(200*time.Millisecond, ttl)))
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
		case <-p.done:
			if p.state.ExitCode() == 0 {
				t.Errorf("replaced process %d of %s exited with %v", p.pid(), p.n.id, p.state)
			}
		case <-time.After(5 * ttl):
			t.Errorf("replaced process %d of %s still runs %v after every fault was undone", p.pid(), p.n.id, 5*ttl)
		}
	}
	for _, n := range c.nodesOf("") {
		if !n.running() && n != joiner {
			t.Errorf("%s is not running after every fault was undone", n.id)
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
