package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/tables"
)

// FailoverTrial is one SIGKILL of an indexer process.
type FailoverTrial struct {
	Victim     string
	Partitions int           // partition leases it held
	Taken      time.Duration // until the last of them was taken by another node
	Indexing   time.Duration // until the last of them had a new range stored under a new epoch
	Diag       []string      // the survivors' warnings, when the trial exceeded lease_ttl + one round
}

// FailoverOptions shape the failover measurement.
type FailoverOptions struct {
	Trials     int
	TTL        time.Duration // lease_ttl of the processes
	Partitions int32
	MaxAge     time.Duration // mink.range.max-age: how often a range is cut while records arrive
	Timeout    time.Duration // per trial
}

// Failover runs two indexer processes over a topic that records keep arriving on, then
// SIGKILLs the one holding partition leases and measures, with the database clock, the
// time until each of its partitions is indexing again elsewhere: a new range stored
// under a new epoch. A fresh process replaces the victim and the leases rebalance before
// the next trial.
func (e *Env) Failover(ctx context.Context, o FailoverOptions) ([]FailoverTrial, error) {
	db, url, err := e.NewDB(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	topic := "bench-failover-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := e.CreateTopic(ctx, topic, o.Partitions); err != nil {
		return nil, err
	}
	prodCtx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopProducing(); wg.Wait() }()
	cl, err := e.KgoClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(7, 7))
		for i := 0; prodCtx.Err() == nil; i++ {
			for p := range o.Partitions {
				k, v := event(rng, i)
				cl.Produce(prodCtx, &kgo.Record{Topic: topic, Partition: p, Key: k, Value: v}, nil)
			}
			select {
			case <-prodCtx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	})

	procs := map[string]*Proc{}
	defer func() {
		var ps []*Proc
		for _, p := range procs {
			ps = append(ps, p)
		}
		StopAll(ps)
	}()
	start := func(id string) (*Proc, error) {
		p, err := e.Start("indexer", id, url, o.TTL, "--log-level", "info") // lease moves, for the record
		if err != nil {
			return nil, err
		}
		procs[id] = p
		return p, WaitMembers(ctx, db, 30*time.Second, p)
	}
	for _, id := range []string{"fo-a0", "fo-b0"} {
		if _, err := start(id); err != nil {
			return nil, err
		}
	}
	tbl, err := tables.Create(ctx, db, tables.Table{Name: "failover", Topic: topic, Spec: EventSpec,
		Properties: map[string]string{tables.PropRangeMaxAge: o.MaxAge.String()}}, o.Partitions)
	if err != nil {
		return nil, err
	}
	var trials []FailoverTrial
	for trial := range o.Trials {
		// Balanced, and every held partition has stored a range under its current epoch.
		held := map[string]map[int32]int64{}
		err := waitFor(ctx, o.Timeout, "leases to balance and every holder to index", func() (bool, error) {
			var err error
			held, err = heldLeases(ctx, db, tbl.ID)
			if err != nil || len(held) != len(procs) {
				return false, err
			}
			n := 0
			for _, ps := range held {
				n += len(ps)
				if len(ps) > ceilDiv(int(o.Partitions), len(procs)) {
					return false, nil
				}
				for p, epoch := range ps {
					var k int
					if err := db.QueryRow(ctx, `SELECT count(*) FROM mink_ranges WHERE table_id = $1 AND partition = $2 AND epoch = $3`,
						tbl.ID, p, epoch).Scan(&k); err != nil || k == 0 {
						return false, err
					}
				}
			}
			return n == int(o.Partitions), nil
		})
		if err != nil {
			return trials, err
		}
		// Alternate between the lowest and the highest node id, so both the first
		// process and its replacements are killed.
		victim := ""
		for id := range held {
			if victim == "" || (trial%2 == 0) == (id < victim) {
				victim = id
			}
		}
		lost := held[victim]
		t0, err := pg.Now(ctx, db)
		if err != nil {
			return trials, err
		}
		procs[victim].Kill()
		delete(procs, victim)

		ft := FailoverTrial{Victim: victim, Partitions: len(lost)}
		err = waitFor(ctx, o.Timeout, "the victim's partitions to index again elsewhere", func() (bool, error) {
			for p, epoch := range lost {
				var first *time.Time
				if err := db.QueryRow(ctx, `SELECT min(created_at) FROM mink_ranges WHERE table_id = $1 AND partition = $2 AND epoch > $3`,
					tbl.ID, p, epoch).Scan(&first); err != nil || first == nil {
					return false, err
				}
			}
			return true, nil
		})
		if err != nil {
			return trials, err
		}
		for p, epoch := range lost {
			var first, acquired time.Time
			if err := db.QueryRow(ctx, `SELECT min(r.created_at), l.acquired_at FROM mink_ranges r, mink_leases l
				WHERE r.table_id = $1 AND r.partition = $2 AND r.epoch > $3
				  AND l.kind = 'partition' AND l.table_id = r.table_id AND l.partition = r.partition
				GROUP BY l.acquired_at`, tbl.ID, p, epoch).Scan(&first, &acquired); err != nil {
				return trials, err
			}
			ft.Taken = max(ft.Taken, acquired.Sub(t0))
			ft.Indexing = max(ft.Indexing, first.Sub(t0))
		}
		if ft.Indexing > o.TTL+o.TTL/3 {
			for _, p := range procs {
				for _, l := range p.Warnings(4) {
					ft.Diag = append(ft.Diag, p.ID+": "+l)
				}
			}
		}
		trials = append(trials, ft)
		if trial < o.Trials-1 {
			if _, err := start(fmt.Sprintf("fo-%c%d", victim[3], trial+1)); err != nil {
				return trials, err
			}
		}
	}
	return trials, nil
}

// heldLeases is every live holder's partition leases of a table with their epochs.
func heldLeases(ctx context.Context, db *pgxpool.Pool, table int64) (map[string]map[int32]int64, error) {
	rows, err := db.Query(ctx, `SELECT holder, partition, epoch FROM mink_lease_holders
		WHERE kind = 'partition' AND table_id = $1 AND holder IS NOT NULL`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[int32]int64{}
	for rows.Next() {
		var h string
		var p int32
		var epoch int64
		if err := rows.Scan(&h, &p, &epoch); err != nil {
			return nil, err
		}
		if out[h] == nil {
			out[h] = map[int32]int64{}
		}
		out[h][p] = epoch
	}
	return out, rows.Err()
}
