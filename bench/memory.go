package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
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
	// The file servers' --build-concurrency and --build-memory, passed explicitly so that
	// README's bound on their build memory can be computed from them.
	FSBuildConcurrency int
	FSBuildMemory      int64
	// FSReturnWithin is how far above its RSS before the burst a file server may settle
	// after it (0.2: within 20%) to count as having returned.
	FSReturnWithin float64
}

// DefaultMemConfig is what make bench runs.
func DefaultMemConfig() MemConfig {
	return MemConfig{Tables: 10, TablePartitions: 100, Busy: 20, BusyRate: 256 << 10, BusyFor: 20 * time.Second,
		TargetBytes: []int64{1 << 20, 128 << 20}, UpsertTarget: 128 << 20, UpsertRate: 768 << 10,
		FSPartitions: 4, FSRecords: 30_000, FSRangeBytes: 1 << 20, Clients: 64, Burst: 20 * time.Second,
		// A file server's default --build-concurrency is its GOMAXPROCS: the same as
		// this process's on the same machine.
		FSBuildConcurrency: runtime.GOMAXPROCS(0), FSBuildMemory: 128 << 20, FSReturnWithin: 0.2}
}

// memBudget is README's budget for an indexer ("Memory"): per idle partition, and per
// busy one whatever mink.range.target-bytes is.
const (
	memIdleBudget = 2 << 20
	memBusyBudget = 32 << 20
	// A busy upsert partition holds at most 12 MiB more (latest records, then offsets).
	memBusyUpsertBudget = 56 << 20
)

// fsFetchBytes is the Kafka fetch a file server's build holds at most (pkg/kafkasrc's
// default fetch size), as README's bound counts it.
const fsFetchBytes = 4 << 20

// fsRequestBytes is what README counts per request in flight on a file server: a
// forwarded read holds at most a 2 MiB stream window and a 1 MiB chunk (a GET from the
// cache and a table load hold less; a GET that builds is counted by fsBuildBound).
const fsRequestBytes = 3 << 20

// fsBuildBound is README's bound on a file server's build memory ("Memory", File server):
// the shared pool of finished pages plus, per build running, a page being filled per
// leaf column and a Kafka fetch. Go's collector may let the heap reach twice it.
func fsBuildBound(concurrency int, memory int64, leafColumns int) int64 {
	perBuild := int64(leafColumns)*int64(parquetbuild.DefaultSettings().PageBufferBytes) + fsFetchBytes
	return memory + int64(concurrency)*perBuild
}

// leafColumns is how many Parquet leaf columns (primitive fields, nested ones included)
// a table of spec has.
func leafColumns(spec tableschema.Spec) (int, error) {
	schema, err := spec.IcebergSchema()
	if err != nil {
		return 0, err
	}
	byID, err := iceberg.IndexByID(schema)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range byID {
		if _, ok := f.Type.(iceberg.PrimitiveType); ok {
			n++
		}
	}
	return n, nil
}

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
	return settledRSS(ctx, pid, 12, 30*time.Second)
}

// idleRSS is a node's RSS idle: settled over two of the node's checks for the end of a
// burst (pkg/node releases memory after one, every 5 s), so that what a burst before it
// (a file server warming its cache) left has been returned first.
func idleRSS(ctx context.Context, pid int) (int64, error) {
	return settledRSS(ctx, pid, 44, time.Minute)
}

// settledRSS is the median of the last n samples, taken every 250 ms, once they are
// within 2% of each other, or after timeout the median of the last n anyway.
func settledRSS(ctx context.Context, pid, n int, timeout time.Duration) (int64, error) {
	var samples []int64
	err := waitEvery(ctx, 250*time.Millisecond, timeout, "the RSS of process "+strconv.Itoa(pid)+" to settle", func() (bool, error) {
		v := rssOf(pid)
		if v == 0 {
			return false, fmt.Errorf("cannot read the RSS of process %d", pid)
		}
		samples = append(samples, v)
		if len(samples) >= n {
			w := samples[len(samples)-n:]
			lo, hi := slices.Min(w), slices.Max(w)
			return float64(hi-lo) < 0.02*float64(hi), nil
		}
		return false, nil
	})
	if err != nil && (ctx.Err() != nil || len(samples) < n) {
		return 0, err
	}
	w := slices.Clone(samples[len(samples)-n:])
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
	db, p, base, stop, err := startIdleIndexer(ctx, e, "mem-idx", 3*time.Second)
	if err != nil {
		return err
	}
	defer stop()
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

// startIdleIndexer starts one indexer process over a new database and returns them with
// its RSS once it has settled, holding nothing; stop stops both.
func startIdleIndexer(ctx context.Context, e *Env, id string, ttl time.Duration) (db *pgxpool.Pool, p *Proc, base int64, stop func(), err error) {
	db, url, err := e.NewDB(ctx)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	if p, err = e.Start("indexer", id, url, ttl); err != nil {
		db.Close()
		return nil, nil, 0, nil, err
	}
	stop = func() {
		p.Stop(30 * time.Second)
		db.Close()
	}
	if err = WaitMembers(ctx, db, 30*time.Second, p); err == nil {
		base, err = steadyRSS(ctx, p.Pid())
	}
	if err != nil {
		stop()
		return nil, nil, 0, nil, err
	}
	return db, p, base, stop, nil
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
	loadStart := loadAvg()
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
	f, err := startFS(ctx, e, c, idx, "--build-concurrency", strconv.Itoa(m.FSBuildConcurrency),
		"--build-memory", strconv.FormatInt(m.FSBuildMemory, 10))
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
		if before[n.p.Pid()], err = idleRSS(ctx, n.p.Pid()); err != nil {
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
	leaves, err := leafColumns(EventSpec)
	if err != nil {
		return err
	}
	build := fsBuildBound(m.FSBuildConcurrency, m.FSBuildMemory, leaves)
	requests := int64(m.Clients) * fsRequestBytes // every client's request in flight on one node, at worst
	for _, n := range f.nodes {
		pid := n.p.Pid()
		after15 := rssAfter(ctx, pid, 15*time.Second)
		after, err := steadyRSS(ctx, pid)
		if err != nil {
			return err
		}
		// README's bound: the node idle, plus twice (Go's collector) what its builds and
		// requests in flight may hold.
		bound := before[pid] + 2*(build+requests)
		back := "no"
		if float64(after) <= (1+m.FSReturnWithin)*float64(before[pid]) {
			back = "yes"
		}
		it.Rows = append(it.Rows,
			Row{What: fmt.Sprintf("file server %s peak RSS during the burst (bound: %s idle + 2 x (%s builds + %s requests))", n.p.ID, fmtMiB(before[pid]), fmtMiB(build), fmtMiB(requests)),
				Mink: fmtMiB(peak[pid]), Baseline: fmtMiB(bound) + " (bound)", Ratio: fmt.Sprintf("%.2f of bound", float64(peak[pid])/float64(bound))},
			Row{What: fmt.Sprintf("file server %s RSS 15 s after / settled after the burst (beside idle before it)", n.p.ID),
				Mink: fmtMiB(after15) + " / " + fmtMiB(after), Baseline: fmtMiB(before[pid]) + " (idle before)",
				Ratio: fmt.Sprintf("%.2f× settled; within %.0f%%: %s", float64(after)/float64(before[pid]), 100*m.FSReturnWithin, back)})
	}
	it.Rows = append(it.Rows, Info("load average (1, 5, 15 min)", "at start "+loadStart+"; at end "+loadAvg()))
	it.Notes = append(it.Notes, fmt.Sprintf("File servers: %d clients for %v against two mink-fileserver processes: half load the table (%d data files, %s), "+
		"half GET random data files from either node (built from Kafka on first read, forwarded when the other node owns them): %d loads, %d GETs (%s). "+
		"RSS sampled every 100 ms; idle is RSS settled over 11 s (two of the node's checks for the end of a burst) before the burst, \"settled\" when it has stopped moving after it. "+
		"Bound (README, Memory): each node runs with --build-concurrency %d and --build-memory %s and the table has %d leaf columns, so its builds hold at most "+
		"--build-memory + --build-concurrency x (leaf columns x %s page + %s fetch) = %s; each request in flight at most %s (a forwarded read's stream window and chunk), "+
		"%d of them at worst; Go's collector lets the heap reach twice what is live.",
		m.Clients, m.Burst, len(keys), fmtMiB(total), loads.Load(), gets.Load(), fmtMiB(getBytes.Load()),
		m.FSBuildConcurrency, fmtMiB(m.FSBuildMemory), leaves, fmtMiB(int64(parquetbuild.DefaultSettings().PageBufferBytes)), fmtMiB(fsFetchBytes), fmtMiB(build),
		fmtMiB(fsRequestBytes), m.Clients))
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
