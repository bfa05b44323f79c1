package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/tables"
)

// LiveConfig sizes item 14, concurrent live loads.
type LiveConfig struct {
	Clients  int           // concurrent clients of the burst
	Duration time.Duration // how long the burst lasts
	Rate     int           // records per second produced meanwhile (the moving tail)
	// The paced run (liveloads_steady.go): the same clients, each loading every Every,
	// for Steady (0: not run).
	Steady time.Duration
	Every  time.Duration
}

// DefaultLiveConfig is what make bench runs: a one-minute paced run keeps the whole
// bench short; the goal is five (-live-steady 5m).
func DefaultLiveConfig() LiveConfig {
	return LiveConfig{Clients: 64, Duration: 30 * time.Second, Rate: 200, Steady: time.Minute, Every: 100 * time.Millisecond}
}

// liveRows counts what live loads have written for a table: load snapshots (their
// metadata JSON rows), all their metadata files, and tail data file rows.
func liveRows(ctx context.Context, db *pgxpool.Pool, table int64) (snaps, meta, data int64, err error) {
	err = db.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM mink_meta_files WHERE table_id = $1 AND load_stream IS NOT NULL),
		(SELECT count(*) FROM mink_meta_files WHERE table_id = $1 AND expires_at IS NOT NULL),
		(SELECT count(*) FROM mink_data_files WHERE table_id = $1 AND live)`, table).Scan(&snaps, &meta, &data)
	return snaps, meta, data, err
}

// hammer loads url from clients goroutines for d and returns every load's latency and
// the size of the last body.
func hammer(ctx context.Context, url string, clients int, d time.Duration) ([]time.Duration, int, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	var (
		mu       sync.Mutex
		all      []time.Duration
		last     atomic.Int64
		firstErr error
		wg       sync.WaitGroup
	)
	end := time.Now().Add(d)
	for range clients {
		wg.Go(func() {
			var ds []time.Duration
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				n, err := loadOnce(ctx, client, url)
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				ds = append(ds, time.Since(t0))
				last.Store(int64(n))
			}
			mu.Lock()
			all = append(all, ds...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, int(last.Load()), firstErr
}

func loadOnce(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("load: %s", resp.Status)
	}
	return int(n), err
}

// runLiveLoads is item 14: many clients loading one table whose tail producers keep
// moving, against a real indexer, writer and file server: latency beside one client's,
// throughput beside item 4's bare handler under the same clients, and what the loads
// wrote to Postgres beside how often the tail changed.
func runLiveLoads(ctx context.Context, e *Env, c Config, it *Item) error {
	lc := c.Live
	db, url, err := e.NewDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	f, err := startFS(ctx, e, c, &indexingResult{run: &IndexRun{DB: db, URL: url}})
	if f != nil {
		defer f.stop()
	}
	if errors.Is(err, errSkipped) {
		it.Status = "skipped: the file server does not answer on its --catalog-addr"
		return nil
	}
	if err != nil {
		return err
	}
	topic := "bench-live-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := e.CreateTopic(ctx, topic, 1); err != nil {
		return err
	}
	const name = "live_loads"
	t, err := tables.Create(ctx, db, tables.Table{Name: name, Topic: topic, Spec: EventSpec, Properties: map[string]string{
		tables.PropRangeMaxAge: "1s", tables.PropCommitInterval: "500ms", propAssemblyTarget: "1024", propMaintenance: "24h"}}, 1)
	if err != nil {
		return err
	}
	ix, err := e.Start("indexer", "bench-live-indexer", url, c.IndexTTL)
	if err != nil {
		return err
	}
	defer ix.Stop(10 * time.Second)

	// The producer: lc.Rate records a second, from now until told to stop.
	prod, err := e.KgoClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return err
	}
	defer prod.Close()
	var produced atomic.Int64
	pctx, stopProducing := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Go(func() {
		rng := rand.New(rand.NewPCG(13, 13))
		tick := time.NewTicker(time.Second / time.Duration(max(lc.Rate, 1)))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			k, v := event(rng, i)
			prod.Produce(pctx, &kgo.Record{Topic: topic, Partition: 0, Key: k, Value: v}, func(*kgo.Record, error) {})
			produced.Add(1)
		}
	})
	defer func() { stopProducing(); pwg.Wait() }()
	if err := waitFor(ctx, time.Minute, "the first commit of "+name, func() (bool, error) {
		m, err := f.committed(ctx, t.ID)
		return err == nil && m.total("total-records") > 0, nil
	}); err != nil {
		return err
	}

	load := f.nodes[0].catalog + "/v1/namespaces/" + tables.DefaultNamespace + "/tables/" + name
	phase := min(5*time.Second, max(lc.Duration/4, time.Second))
	single, firstBody, err := hammer(ctx, load, 1, phase)
	if err != nil {
		return fmt.Errorf("one client: %w", err)
	}
	kc, err := f.e.Kafka()
	if err != nil {
		return err
	}
	defer kc.Close()
	bare := f.bareCatalog(kc)
	defer bare.Close()
	bareDs, _, err := hammer(ctx, bare.URL+"/v1/namespaces/"+tables.DefaultNamespace+"/tables/"+name, lc.Clients, phase)
	if err != nil {
		return fmt.Errorf("bare handler: %w", err)
	}

	before, err := f.committed(ctx, t.ID)
	if err != nil {
		return err
	}
	s0, m0, d0, err := liveRows(ctx, db, t.ID)
	if err != nil {
		return err
	}
	p0 := produced.Load()
	began := time.Now()
	burst, lastBody, err := hammer(ctx, load, lc.Clients, lc.Duration)
	took := time.Since(began)
	if err != nil {
		return fmt.Errorf("%d clients: %w", lc.Clients, err)
	}
	tailMoves := produced.Load() - p0
	s1, m1, d1, err := liveRows(ctx, db, t.ID)
	if err != nil {
		return err
	}
	after, err := f.committed(ctx, t.ID)
	if err != nil {
		return err
	}
	commits := len(after.Snapshots) - len(before.Snapshots) // none expire within the hour
	if lc.Steady > 0 {
		if err := steadyLoads(ctx, db, f, t.ID, load, lc, &produced, it); err != nil {
			return err
		}
	}

	// The tail standing still: the same clients, nothing produced nor indexed, after the
	// writer has committed what was indexed (the base no longer moves).
	stopProducing()
	pwg.Wait()
	ix.Stop(10 * time.Second) // what it has not indexed stays the tail
	if err := f.waitCommitted(ctx, name, t.ID, time.Minute); err != nil {
		return err
	}
	if _, _, err := hammer(ctx, load, 1, 500*time.Millisecond); err != nil { // its one snapshot
		return err
	}
	s2, m2, d2, err := liveRows(ctx, db, t.ID)
	if err != nil {
		return err
	}
	idle := min(5*time.Second, lc.Duration/4)
	idleDs, _, err := hammer(ctx, load, lc.Clients, idle)
	if err != nil {
		return fmt.Errorf("idle tail: %w", err)
	}
	s3, m3, d3, err := liveRows(ctx, db, t.ID)
	if err != nil {
		return err
	}

	bound := tables.DefaultProps.LiveSnapshotSpacing()
	most := int64(math.Ceil(float64(took)/float64(bound))) + 1
	perSec := func(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
	it.Rows = append(it.Rows,
		Latency(fmt.Sprintf("%d clients, moving tail: load p50 (beside one client's)", lc.Clients), Percentile(burst, 50), Percentile(single, 50)),
		Latency(fmt.Sprintf("%d clients, moving tail: load p99 (beside one client's)", lc.Clients), Percentile(burst, 99), Percentile(single, 99)),
		Latency(fmt.Sprintf("%d clients, moving tail: load p99 (beside the bare handler's, same clients)", lc.Clients), Percentile(burst, 99), Percentile(bareDs, 99)),
		Speed(fmt.Sprintf("%d clients, moving tail: loads/s (beside item 4's bare handler, same clients)", lc.Clients), perSec(len(burst), took), perSec(len(bareDs), phase), "req/s"),
		Info("load snapshots written during the burst", fmt.Sprintf("%d: at most ceil(%s / %s) + 1 + one per commit = %d (%d commits; %d tail changes, one per record produced)",
			s1-s0, fmtDur(took), fmtDur(bound), most+int64(commits), commits, tailMoves)),
		Info("Postgres rows written by loads during the burst: load metadata files / tail data files", fmt.Sprintf("%d / %d (for %d loads)", m1-m0, d1-d0, len(burst))),
		Info(fmt.Sprintf("%d clients, tail standing still for %s: rows written", lc.Clients, fmtDur(idle)), fmt.Sprintf("%d metadata / %d data (%d loads, %d snapshots)", m3-m2, d3-d2, len(idleDs), s3-s2)),
		Info("load body: before / after the burst", fmt.Sprintf("%.1f KB / %.1f KB (%d / %d committed snapshots)", float64(firstBody)/1e3, float64(lastBody)/1e3, len(before.Snapshots), len(after.Snapshots))),
	)
	it.Notes = append(it.Notes, fmt.Sprintf("One mink-fileserver (of two), a real indexer (mink.range.max-age 1s) and writer (mink.commit.interval 500ms) over a one-partition topic produced at %d records/s throughout, "+
		"so the tail moves with every record and the committed snapshot every commit. %d clients load the table back to back for %s (one keep-alive connection each); "+
		"the one-client figures are %s of loads just before, and the bare handler (item 4's: one Postgres query for the metadata, one Kafka offsets lookup) is loaded by the same %d clients for %s. "+
		"mink.live.reuse-ms is its default %s: a load answers with the newest load snapshot of the same commit whose offsets were read less than that before it arrived, "+
		"and one that finds it in the last quarter of that begins the next one without waiting for it (refresh ahead), so snapshots are at least %s apart.",
		lc.Rate, lc.Clients, fmtDur(took), fmtDur(phase), lc.Clients, fmtDur(phase), fmtDur(tables.DefaultProps.LiveReuse), fmtDur(bound)),
		fmt.Sprintf("Beside one client, %d clients on %d cores queue: at %s req/s each load waits on average %d / throughput = %s (Little's law); the bare handler under the same clients has p50 %s. "+
			"Compare the p99 with the bare handler's under the same clients.",
			lc.Clients, runtime.NumCPU(), fmtNum(perSec(len(burst), took)), lc.Clients, fmtDur(time.Duration(float64(lc.Clients)/perSec(len(burst), took)*float64(time.Second))), fmtDur(Percentile(bareDs, 50))))
	return nil
}
