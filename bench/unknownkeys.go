package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minkhq/mink/pkg/layout"
)

// Item 12: GETs of unknown keys (issue 17: a flood of them cost a Postgres transaction
// each). The file servers' negative cache answers a key Postgres recorded nothing for
// from memory for its TTL, so the flood should cost about one lookup per key and TTL.
const (
	unknownGets     = 10_000
	unknownKeys     = 8
	unknownClients  = 8
	statsFlushDelay = 11 * time.Second // Postgres 15 flushes an idle backend's counters within 10s
)

// unknownKeysItem sends unknownGets GETs of unknownKeys keys that name no file, through
// both file servers, and counts the Postgres transactions they made: the database's
// commits and rollbacks (pg_stat_database) during the run, less what the cluster does
// when idle over as long a window.
func (f *fsCluster) unknownKeysItem(ctx context.Context, idx *indexingResult, it *Item) error {
	t := idx.run.Table
	var keys []string
	for i := range unknownKeys {
		keys = append(keys, layout.TablePrefix(t.Namespace, t.Name)+fmt.Sprintf("data/_kafka_partition=0/unknown-%d.parquet", i))
	}
	xacts := func() (int64, error) {
		var n int64
		err := f.db.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
		return n, err
	}
	pause := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	// The idle rate: what members, leases and the writer cost meanwhile.
	if err := pause(statsFlushDelay); err != nil {
		return err
	}
	x0, err := xacts()
	if err != nil {
		return err
	}
	if err := pause(statsFlushDelay); err != nil {
		return err
	}
	x1, err := xacts()
	if err != nil {
		return err
	}
	idleRate := float64(x1-x0-1) / statsFlushDelay.Seconds() // less our own query

	var next, bad atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for c := range unknownClients {
		n := f.nodes[c%len(f.nodes)]
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= unknownGets {
					return
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.s3+"/"+layout.Bucket+"/"+keys[i%unknownKeys], nil)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				resp, err := f.http.Do(req)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	if bad.Load() > 0 {
		return fmt.Errorf("%d GETs of unknown keys were not answered 404", bad.Load())
	}
	if err := pause(statsFlushDelay); err != nil {
		return err
	}
	x2, err := xacts()
	if err != nil {
		return err
	}
	window := time.Since(start) // the run and the flush delay after it
	extra := float64(x2-x1-1) - idleRate*window.Seconds()
	it.Rows = append(it.Rows,
		Speed(fmt.Sprintf("GETs of unknown keys per Postgres transaction (%s GETs of %d keys)", fmtNum(unknownGets), unknownKeys),
			float64(unknownGets)/max(1, extra), 1, "GETs/tx"),
		Info("Postgres transactions during the GETs, beyond the idle rate", fmt.Sprintf("%.0f (idle rate %.1f/s)", max(0, extra), idleRate)),
		Info("404s per second, through both file servers", fmtNum(float64(unknownGets)/took.Seconds())),
	)
	it.Notes = append(it.Notes, fmt.Sprintf("%s S3 GETs of %d keys under the table's data/ prefix that name no file, %d clients spread over both file servers (half forwarded to the key's owner). "+
		"Transactions: pg_stat_database's commits and rollbacks over the run and %v after it (Postgres flushes an idle backend's counters within 10 s), less the cluster's idle rate over as long a window before; ±a few from that noise. "+
		"Baseline: one lookup per GET, as before the negative cache (issue 17 counted 19,307 transactions for 19,447 such GETs).", fmtNum(unknownGets), unknownKeys, unknownClients, statsFlushDelay))
	return nil
}
