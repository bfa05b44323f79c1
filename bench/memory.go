package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/tables"
)

// MemConfig sizes item 13: the resident memory of an indexer holding many partition
// leases, and of file servers under concurrent clients.
type MemConfig struct {
	Tables          int           // tables of the indexer run
	TablePartitions int           // partitions of each
	Busy            int           // partitions that receive records
	BusyRate        int           // bytes of records per second to each busy partition
	BusyFor         time.Duration // how long they receive them
	TargetBytes     []int64       // mink.range.target-bytes values, one indexer run each
	// UpsertTarget is the mink.range.target-bytes of one more run whose tables are upsert
	// tables (0: none), its busy partitions receiving UpsertRate bytes per second of
	// records of distinct keys.
	UpsertTarget int64
	UpsertRate   int

	FSPartitions int           // partitions of the file servers' table
	FSRecords    int           // records per partition of it
	FSRangeBytes int64         // its range size: how many data files there are
	Clients      int           // concurrent clients (half load the table, half GET files)
	Burst        time.Duration // how long they run
}

// DefaultMemConfig is what make bench runs.
func DefaultMemConfig() MemConfig {
	return MemConfig{Tables: 10, TablePartitions: 100, Busy: 20, BusyRate: 256 << 10, BusyFor: 20 * time.Second,
		TargetBytes:  []int64{1 << 20, 128 << 20}, UpsertTarget: 128 << 20, UpsertRate: 768 << 10,
		FSPartitions: 4, FSRecords: 30_000, FSRangeBytes: 1 << 20, Clients: 64, Burst: 20 * time.Second}
}

// memBudget is README's budget for an indexer ("Memory"): per idle partition, and per
// busy one whatever mink.range.target-bytes is.
const (
	memIdleBudget = 2 << 20
	memBusyBudget = 32 << 20
	// A busy upsert partition holds at most 12 MiB more (latest records, then offsets).
	memBusyUpsertBudget = 56 << 20
)

// rssOf is a process's resident set (VmRSS) in bytes; 0 when it cannot be read.
func rssOf(pid int) int64 {
	kb, err := parseKB(lineValue(fmt.Sprintf("/proc/%d/status", pid), "VmRSS"))
	if err != nil {
		return 0
	}
	return kb << 10
}

// rssSampler samples the RSS of processes every interval until stopped.
type rssSampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak map[int]int64
}

func sampleRSS(interval time.Duration, pids ...int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{}), peak: map[int]int64{}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.mu.Lock()
			for _, pid := range pids {
				s.peak[pid] = max(s.peak[pid], rssOf(pid))
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns each process's peak.
func (s *rssSampler) Stop() map[int]int64 {
	close(s.stop)
	<-s.done
	return s.peak
}

// steadyRSS is a process's RSS once it has stopped moving: the median of the last 12
// samples (3 s) once they are within 2% of each other, or after 30 s (a loaded machine
// keeps RSS moving) the median of the last 12 anyway.
func steadyRSS(ctx context.Context, pid int) (int64, error) {
	var samples []int64
	err := waitEvery(ctx, 250*time.Millisecond, 30*time.Second, "the RSS of process "+strconv.Itoa(pid)+" to settle", func() (bool, error) {
		v := rssOf(pid)
		if v == 0 {
			return false, fmt.Errorf("cannot read the RSS of process %d", pid)
		}
		samples = append(samples, v)
		if n := len(samples); n >= 12 {
			w := samples[n-12:]
			lo, hi := slices.Min(w), slices.Max(w)
			return float64(hi-lo) < 0.02*float64(hi), nil
		}
		return false, nil
	})
	if err != nil && (ctx.Err() != nil || len(samples) < 12) {
		return 0, err
	}
	w := slices.Clone(samples[len(samples)-12:])
	slices.Sort(w)
	return w[len(w)/2], nil
}

func fmtMiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// runMemory is item 13.
func runMemory(ctx context.Context, e *Env, c Config, it *Item) error {
	m := c.Mem
	var errs []error
	for _, target := range m.TargetBytes {
		if err := memIndexer(ctx, e, c, target, tables.ModeAppend, m.BusyRate, it); err != nil {
			errs = append(errs, fmt.Errorf("indexer, target %s: %w", fmtMiB(target), err))
		}
	}
	if m.UpsertTarget > 0 {
		if err := memIndexer(ctx, e, c, m.UpsertTarget, tables.ModeUpsert, m.UpsertRate, it); err != nil {
			errs = append(errs, fmt.Errorf("indexer, upsert tables, target %s: %w", fmtMiB(m.UpsertTarget), err))
		}
	}
	if err := memFileServer(ctx, e, c, it); err != nil {
		errs = append(errs, fmt.Errorf("file servers: %w", err))
	}
	it.Notes = append(it.Notes, fmt.Sprintf("Indexer: one mink-indexer process takes all %d partition leases (%d tables x %d partitions, empty topics), "+
		"then %d of them (spread over the tables) receive %s/s of JSON events each for %v with mink.range.max-age 10m, so ranges are cut by size only. "+
		"Per idle partition = (RSS holding every lease - RSS holding none) / %d, both when RSS has settled; per busy partition = (peak RSS while busy - idle RSS) / %d. "+
		"Budget (README, Memory): %s per idle partition, %s per busy one at any target size.",
		m.Tables*m.TablePartitions, m.Tables, m.TablePartitions, m.Busy, fmtMiB(int64(m.BusyRate)), m.BusyFor,
		m.Tables*m.TablePartitions, m.Busy, fmtMiB(memIdleBudget), fmtMiB(memBusyBudget)))
	if m.UpsertTarget > 0 {
		it.Notes = append(it.Notes, fmt.Sprintf("Upsert: the same run over upsert tables at target %s, the busy partitions receiving %s/s each of the same events, "+
			"whose keys are nearly all distinct (one of a million per record), so an open range's latest records grow with the range until the hold bound (4 MiB) "+
			"and then its keys' offsets do. Budget (README, Memory): %s per busy upsert partition for this 12-column table.",
			fmtMiB(m.UpsertTarget), fmtMiB(int64(m.UpsertRate)), fmtMiB(memBusyUpsertBudget)))
	}
	return errors.Join(errs...)
}

func memIndexer(ctx context.Context, e *Env, c Config, target int64, mode tables.Mode, rate int, it *Item) error {
	m := c.Mem
	db, url, err := e.NewDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := e.Start("indexer", "mem-idx", url, 3*time.Second)
	if err != nil {
		return err
	}
	defer p.Stop(10 * time.Second)
	if err := WaitMembers(ctx, db, 30*time.Second, p); err != nil {
		return err
	}
	base, err := steadyRSS(ctx, p.Pid())
	if err != nil {
		return err
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	var topics []string
	for i := range m.Tables {
		topic := fmt.Sprintf("mem-%s-%d", suffix, i)
		if err := e.CreateTopic(ctx, topic, int32(m.TablePartitions)); err != nil {
			return err
		}
		props := map[string]string{tables.PropRangeTargetBytes: strconv.FormatInt(target, 10), tables.PropRangeMaxAge: "10m"}
		if _, err := createTable(ctx, db, tables.Table{Name: topic, Topic: topic, Spec: EventSpec, Properties: props, Mode: mode}, int32(m.TablePartitions), ""); err != nil {
			return err
		}
		topics = append(topics, topic)
	}
	all := m.Tables * m.TablePartitions
	err = waitFor(ctx, 2*time.Minute, fmt.Sprintf("%s to hold %d partition leases", p.ID, all), func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("%s exited: %s", p.ID, p.LogTail())
		}
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FROM mink_leases WHERE kind = 'partition' AND holder = $1`, p.ID).Scan(&n)
		return n == all, err
	})
	if err != nil {
		return err
	}
	idle, err := steadyRSS(ctx, p.Pid())
	if err != nil {
		return err
	}
	perIdle := (idle - base) / int64(all)

	// Busy partitions: partition i of table i mod Tables, fed in ticks of 100ms.
	cl, err := e.KgoClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	sampler := sampleRSS(100*time.Millisecond, p.Pid())
	var produced atomic.Int64
	var produceErr error
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(13, uint64(target)))
	tick := time.NewTicker(100 * time.Millisecond)
	end := time.Now().Add(m.BusyFor)
	perTick := rate / 10
	seq := 0
	for time.Now().Before(end) && ctx.Err() == nil {
		<-tick.C
		for b := range m.Busy {
			topic, part := topics[b%m.Tables], int32(b/m.Tables)
			for sent := 0; sent < perTick; {
				k, v := event(rng, seq)
				seq++
				sent += len(k) + len(v)
				produced.Add(int64(len(k) + len(v)))
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: part, Key: k, Value: v}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						produceErr = cmpErr(produceErr, err)
						mu.Unlock()
					}
				})
			}
		}
	}
	tick.Stop()
	ferr := cl.Flush(ctx)
	peak := sampler.Stop()[p.Pid()]
	if err := errors.Join(ferr, produceErr); err != nil {
		return err
	}
	if p.Exited() {
		return fmt.Errorf("%s exited: %s", p.ID, p.LogTail())
	}
	perBusy := max(0, peak-idle) / int64(m.Busy)
	label := "target " + fmtMiB(target)
	if mode == tables.ModeUpsert {
		it.Rows = append(it.Rows,
			Row{What: fmt.Sprintf("indexer RSS per busy partition of an upsert table, distinct keys (%s; %d busy, %s produced; peak %s)", label, m.Busy, fmtMiB(produced.Load()), fmtMiB(peak)),
				Mink: fmtMiB(perBusy), Baseline: fmtMiB(memBusyUpsertBudget) + " (budget)", Ratio: fmtBudget(perBusy, memBusyUpsertBudget)})
		return nil
	}
	it.Rows = append(it.Rows,
		Row{What: fmt.Sprintf("indexer RSS per idle partition (%s; %d leases: %s → %s)", label, all, fmtMiB(base), fmtMiB(idle)),
			Mink: fmtKiB(perIdle), Baseline: fmtMiB(memIdleBudget) + " (budget)", Ratio: fmtBudget(perIdle, memIdleBudget)},
		Row{What: fmt.Sprintf("indexer RSS per busy partition (%s; %d busy, %s produced; peak %s)", label, m.Busy, fmtMiB(produced.Load()), fmtMiB(peak)),
			Mink: fmtMiB(perBusy), Baseline: fmtMiB(memBusyBudget) + " (budget)", Ratio: fmtBudget(perBusy, memBusyBudget)})
	return nil
}

func fmtKiB(b int64) string { return fmt.Sprintf("%d KiB", b>>10) }

func fmtBudget(v, budget int64) string {
	return fmt.Sprintf("%.2f of budget", float64(v)/float64(budget))
}

// memFileServer runs Clients concurrent clients against two file servers for Burst:
// half load the table through the catalog, half GET its data files (the first GET of a
// file builds it from Kafka; half of them are forwarded to the other node).
func memFileServer(ctx context.Context, e *Env, c Config, it *Item) error {
	m := c.Mem
	topic := "mem-fs-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := e.CreateTopic(ctx, topic, int32(m.FSPartitions)); err != nil {
		return err
	}
	sizes, err := e.Produce(ctx, topic, int32(m.FSPartitions), m.FSRecords, "none", 13)
	if err != nil {
		return err
	}
	pr := props(c)
	pr[tables.PropRangeTargetBytes] = strconv.FormatInt(m.FSRangeBytes, 10)
	run, err := e.RunIndexers(ctx, IndexOptions{Procs: 1, Topic: topic, Partitions: int32(m.FSPartitions), TTL: c.IndexTTL, Props: pr, Timeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	defer run.Close()
	idx := &indexingResult{topic: topic, sizes: sizes, run: run}
	f, err := startFS(ctx, e, c, idx)
	if f != nil {
		defer f.stop()
	}
	if err != nil {
		return err
	}
	if err := f.waitCommitted(ctx, run.Table.Name, run.Table.ID, 60*time.Second); err != nil {
		return err
	}
	keys, fileSizes, err := f.dataFiles(ctx, run.Table.ID)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return errors.New("no data files committed")
	}
	pids := []int{}
	before := map[int]int64{}
	for _, n := range f.nodes {
		if before[n.p.Pid()], err = steadyRSS(ctx, n.p.Pid()); err != nil {
			return err
		}
		pids = append(pids, n.p.Pid())
	}
	sampler := sampleRSS(100*time.Millisecond, pids...)
	bctx, cancel := context.WithTimeout(ctx, m.Burst)
	var (
		wg          sync.WaitGroup
		loads, gets atomic.Int64
		getBytes    atomic.Int64
		firstErr    error
		mu          sync.Mutex
	)
	for i := range m.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(13, uint64(i)))
			for bctx.Err() == nil {
				n := f.nodes[rng.IntN(len(f.nodes))]
				var err error
				if i%2 == 0 {
					_, _, err = f.load(bctx, n, run.Table.Name)
					if err == nil {
						loads.Add(1)
					}
				} else {
					j := rng.IntN(len(keys))
					var got int64
					got, err = f.get(bctx, n.s3, keys[j], io.Discard)
					if err == nil && got != fileSizes[j] {
						err = fmt.Errorf("GET %s: %d bytes, want %d", keys[j], got, fileSizes[j])
					}
					if err == nil {
						gets.Add(1)
						getBytes.Add(got)
					}
				}
				if err != nil && bctx.Err() == nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	cancel()
	peak := sampler.Stop()
	if firstErr != nil {
		return firstErr
	}
	var total int64
	for _, s := range fileSizes {
		total += s
	}
	for _, n := range f.nodes {
		pid := n.p.Pid()
		after15 := rssAfter(ctx, pid, 15*time.Second)
		after, err := steadyRSS(ctx, pid)
		if err != nil {
			return err
		}
		it.Rows = append(it.Rows,
			Info(fmt.Sprintf("file server %s RSS before / peak / 15 s after / settled after the burst", n.p.ID),
				fmt.Sprintf("%s / %s / %s / %s", fmtMiB(before[pid]), fmtMiB(peak[pid]), fmtMiB(after15), fmtMiB(after))))
	}
	it.Notes = append(it.Notes, fmt.Sprintf("File servers: %d clients for %v against two mink-fileserver processes: half load the table (%d data files, %s), "+
		"half GET random data files from either node (built from Kafka on first read, forwarded when the other node owns them): %d loads, %d GETs (%s). "+
		"RSS sampled every 100 ms; \"settled\" is when it has stopped moving.",
		m.Clients, m.Burst, len(keys), fmtMiB(total), loads.Load(), gets.Load(), fmtMiB(getBytes.Load())))
	return nil
}

// rssAfter is a process's RSS d from now.
func rssAfter(ctx context.Context, pid int, d time.Duration) int64 {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return rssOf(pid)
}
