package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/tables"
)

// pacedLoad is one load of a paced run: when it was due (since the run began) and how
// long it took from then.
type pacedLoad struct {
	due, took time.Duration
}

// pace loads url from clients goroutines, each one load every every, for d: open loop,
// as engines polling a table do, so that the offered rate (clients / every) does not
// follow the server's speed. Each client starts at a random point of its first interval.
// A load's latency counts from when it was due, not from when it was sent: a client
// still waiting for its last answer sends late, and that wait is part of what it saw
// (no coordinated omission).
func pace(ctx context.Context, url string, clients int, every, d time.Duration) ([]pacedLoad, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	var (
		mu       sync.Mutex
		all      []pacedLoad
		firstErr error
		wg       sync.WaitGroup
	)
	began := time.Now()
	rng := rand.New(rand.NewPCG(14, 14))
	for range clients {
		offset := time.Duration(rng.Int64N(int64(every)))
		wg.Go(func() {
			var ls []pacedLoad
			for due := offset; due < d && ctx.Err() == nil; due += every {
				if wait := time.Until(began.Add(due)); wait > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
				}
				if _, err := loadOnce(ctx, client, url); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				ls = append(ls, pacedLoad{due: due, took: time.Since(began.Add(due))})
			}
			mu.Lock()
			all = append(all, ls...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, firstErr
}

// tookIn is the latencies of the loads due in [from, to).
func tookIn(ls []pacedLoad, from, to time.Duration) []time.Duration {
	var ds []time.Duration
	for _, l := range ls {
		if l.due >= from && l.due < to {
			ds = append(ds, l.took)
		}
	}
	return ds
}

// steadyLoads is item 14's run at engines' pace: lc.Clients clients each loading the
// table every lc.Every for lc.Steady while the producer moves the tail, beside one
// client at the same pace; the first window beside the last (latency must not grow as
// snapshots accumulate), and the rows the loads wrote beside the tail's changes.
func steadyLoads(ctx context.Context, db *pgxpool.Pool, f *fsCluster, table int64, load string, lc LiveConfig, produced *atomic.Int64, it *Item) error {
	oneFor := min(30*time.Second, max(lc.Steady/4, 5*time.Second))
	one, err := pace(ctx, load, 1, lc.Every, oneFor)
	if err != nil {
		return fmt.Errorf("one paced client: %w", err)
	}
	before, err := f.committed(ctx, table)
	if err != nil {
		return err
	}
	s0, m0, d0, err := liveRows(ctx, db, table)
	if err != nil {
		return err
	}
	p0 := produced.Load()
	began := time.Now()
	all, err := pace(ctx, load, lc.Clients, lc.Every, lc.Steady)
	took := time.Since(began)
	if err != nil {
		return fmt.Errorf("%d paced clients: %w", lc.Clients, err)
	}
	tailMoves := produced.Load() - p0
	s1, m1, d1, err := liveRows(ctx, db, table)
	if err != nil {
		return err
	}
	after, err := f.committed(ctx, table)
	if err != nil {
		return err
	}
	commits := len(after.Snapshots) - len(before.Snapshots)

	window := min(time.Minute, lc.Steady/4)
	ds := make([]time.Duration, len(all))
	for i, l := range all {
		ds[i] = l.took
	}
	first, last := tookIn(all, 0, window), tookIn(all, lc.Steady-window, lc.Steady)
	bound := tables.DefaultProps.LiveSnapshotSpacing()
	most := int64(math.Ceil(float64(took)/float64(bound))) + 1 + int64(commits)
	offered := float64(lc.Clients) / lc.Every.Seconds()
	name := fmt.Sprintf("%d clients, each every %s for %s", lc.Clients, fmtDur(lc.Every), fmtDur(lc.Steady))
	it.Rows = append(it.Rows,
		Latency(name+": load p50 (beside one client's at the same pace)", Percentile(ds, 50), Percentile(tookIn(one, 0, oneFor), 50)),
		Latency(name+": load p99 (beside one client's at the same pace)", Percentile(ds, 99), Percentile(tookIn(one, 0, oneFor), 99)),
		Latency(fmt.Sprintf("%s: load p99 of the last %s (beside the first %s's)", name, fmtDur(window), fmtDur(window)), Percentile(last, 99), Percentile(first, 99)),
		Info(name+": loads/s served (offered)", fmt.Sprintf("%s (%s)", fmtNum(float64(len(all))/took.Seconds()), fmtNum(offered))),
		Info(name+": load snapshots written per tail change", fmt.Sprintf("%.3f: %d for %d tail changes (one per record produced); at most ceil(%s / %s) + 1 + one per commit = %d (%d commits)",
			float64(s1-s0)/float64(max(tailMoves, 1)), s1-s0, tailMoves, fmtDur(took), fmtDur(bound), most, commits)),
		Info(name+": Postgres rows written by loads: load metadata files / tail data files", fmt.Sprintf("%d / %d (for %d loads: %.4f rows per load)",
			m1-m0, d1-d0, len(all), float64(m1-m0+d1-d0)/float64(max(len(all), 1)))),
		Info(name+": committed snapshots before / after", fmt.Sprintf("%d / %d", len(before.Snapshots), len(after.Snapshots))),
	)
	it.Notes = append(it.Notes, fmt.Sprintf("Paced run (the issue's goal): %d clients each load the table every %s for %s, open loop (each client on its own schedule, started at a random point of its first interval; "+
		"a load's latency counts from when it was due, so a client still waiting sends late and that wait counts), %s loads/s offered, below what the closed-loop burst served. "+
		"One client at the same pace for %s just before is its baseline. The last %s beside the first shows whether latency grows as snapshots accumulate. The producer keeps moving the tail throughout.",
		lc.Clients, fmtDur(lc.Every), fmtDur(lc.Steady), fmtNum(offered), fmtDur(oneFor), fmtDur(window)))
	return nil
}
