package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/minkhq/mink/pkg/tables"
)

// ScaleConfig sizes item 16: the resident memory of one indexer holding many quiet
// partitions, each with a few records indexed (issue 32).
type ScaleConfig struct {
	// Leases are the partition counts of the runs, one indexer process each.
	Leases []int
	// TablePartitions is the partitions of each table (the runs' tables are
	// Leases/TablePartitions tables of that many partitions).
	TablePartitions int
	Records         int           // records produced to every partition before it is indexed
	MaxAge          time.Duration // mink.range.max-age: how soon the records are stored
	Timeout         time.Duration // bound on one run's indexing
	// TTL is the indexer's lease_ttl. 10,000 partitions starting at once on 2 shared
	// cores keep the process too busy for a round every second of a short one.
	TTL time.Duration
}

// DefaultScaleConfig is what make bench runs: 1,000 quiet partitions. The 10,000
// is -scale-leases 1000,10000.
func DefaultScaleConfig() ScaleConfig {
	return ScaleConfig{Leases: []int{1000}, TablePartitions: 100, Records: 200, MaxAge: 5 * time.Second, Timeout: 15 * time.Minute,
		TTL: 30 * time.Second}
}

func (s ScaleConfig) validate() error {
	if len(s.Leases) == 0 || s.TablePartitions < 1 || s.Records < 1 || s.MaxAge < 100*time.Millisecond {
		return errors.New("scale-leases, scale-records: want at least one run, 1 record and a max age of 100ms")
	}
	for _, n := range s.Leases {
		if n < s.TablePartitions || n%s.TablePartitions != 0 {
			return fmt.Errorf("scale-leases: %d is not a multiple of %d partitions per table", n, s.TablePartitions)
		}
	}
	return nil
}

// Issue 32's goals: an idle partition's share of an indexer's RSS, and one indexer holding
// 10,000 partition leases within 3 GiB.
const (
	quietGoal      = 256 << 10
	scaleRSSGoal   = 3 << 30
	scaleRSSLeases = 10_000
)

// runScale is item 16.
func runScale(ctx context.Context, e *Env, c Config, it *Item) error {
	s := c.Scale
	var errs []error
	for _, n := range s.Leases {
		if err := scaleIndexer(ctx, e, c, n, it); err != nil {
			errs = append(errs, fmt.Errorf("%d partitions: %w", n, err))
		}
	}
	it.Notes = append(it.Notes, fmt.Sprintf("One mink-indexer process (lease_ttl %v, the seed's default) and no other node; its RSS is sampled from /proc before any table exists (settled), "+
		"then %d records of the benchmark's JSON events are produced to every partition of N/%d new topics of %d partitions, and their tables created: "+
		"the indexer takes every lease and indexes every partition, each range stored mink.range.max-age (%v) after its first record. "+
		"\"Right after\" is the RSS when Postgres first shows every partition indexed to its end; \"settled\" is once RSS stops moving. "+
		"Per partition = (RSS - RSS before) / N. Goal (issue 32): %s per idle partition, and %d leases within %s.",
		s.TTL, s.Records, s.TablePartitions, s.TablePartitions, s.MaxAge, fmtKiB(quietGoal), scaleRSSLeases, fmtMiB(scaleRSSGoal)))
	return errors.Join(errs...)
}

func scaleIndexer(ctx context.Context, e *Env, c Config, n int, it *Item) error {
	s := c.Scale
	db, p, base, stop, err := startIdleIndexer(ctx, e, "scale-idx-"+strconv.Itoa(n), s.TTL)
	if err != nil {
		return err
	}
	defer stop()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	var topics []string
	for i := range n / s.TablePartitions {
		topic := fmt.Sprintf("scale-%s-%d", suffix, i)
		if err := e.CreateTopic(ctx, topic, int32(s.TablePartitions)); err != nil {
			return err
		}
		if _, err := e.Produce(ctx, topic, int32(s.TablePartitions), s.Records, "none", uint64(i)); err != nil {
			return err
		}
		topics = append(topics, topic)
	}
	sampler := sampleRSS(100*time.Millisecond, p.Pid())
	start := time.Now()
	for _, topic := range topics {
		props := map[string]string{tables.PropRangeMaxAge: s.MaxAge.String()}
		if _, err := createTable(ctx, db, tables.Table{Name: topic, Topic: topic, Spec: EventSpec, Properties: props}, int32(s.TablePartitions), ""); err != nil {
			sampler.Stop()
			return err
		}
	}
	var done int
	err = waitEvery(ctx, 250*time.Millisecond, s.Timeout, fmt.Sprintf("%s to index %d partitions", p.ID, n), func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("%s exited: %s", p.ID, p.LogTail())
		}
		err := db.QueryRow(ctx, `SELECT count(*) FROM mink_partitions WHERE indexed_end = $1`, s.Records).Scan(&done)
		return done == n, err
	})
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w (%d indexed; %d warnings in its log, the last: %v)", err, done, len(p.Warnings(1<<20)), p.Warnings(1))
	}
	took := time.Since(start)
	after := rssOf(p.Pid())
	peak := sampler.Stop()[p.Pid()]
	if err != nil {
		return err
	}
	settled, err := idleRSS(ctx, p.Pid())
	if err != nil {
		return err
	}
	var held int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM mink_leases WHERE kind = 'partition' AND holder = $1`, p.ID).Scan(&held); err != nil {
		return err
	}
	if held != n {
		return fmt.Errorf("%s holds %d of %d partition leases after indexing", p.ID, held, n)
	}
	per := func(rss int64) int64 { return max(0, rss-base) / int64(n) }
	what := fmt.Sprintf("%d quiet partitions (%d records each, indexed)", n, s.Records)
	it.Rows = append(it.Rows,
		Row{What: fmt.Sprintf("indexer RSS per partition right after indexing, %s: %s → %s", what, fmtMiB(base), fmtMiB(after)),
			Mink: fmtKiB(per(after)), Baseline: fmtKiB(quietGoal) + " (goal)", Ratio: fmtGoal(per(after), quietGoal)},
		Row{What: fmt.Sprintf("indexer RSS per partition settled, %s: %s → %s", what, fmtMiB(base), fmtMiB(settled)),
			Mink: fmtKiB(per(settled)), Baseline: fmtKiB(quietGoal) + " (goal)", Ratio: fmtGoal(per(settled), quietGoal)},
		Info(fmt.Sprintf("indexer peak RSS while indexing %s", what), fmtMiB(peak)),
		Info(fmt.Sprintf("from the tables' creation to every partition indexed, %s", what), fmtDur(took)))
	if n >= scaleRSSLeases {
		it.Rows = append(it.Rows, Row{What: fmt.Sprintf("indexer peak RSS holding %d partition leases, every partition indexed", n),
			Mink: fmtMiB(peak), Baseline: fmtMiB(scaleRSSGoal) + " (goal)", Ratio: fmtGoal(peak, scaleRSSGoal)})
	}
	return nil
}

func fmtGoal(v, goal int64) string { return fmt.Sprintf("%.2f of goal", float64(v)/float64(goal)) }
