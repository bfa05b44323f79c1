package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/tables"
)

// Item 6's steady arrival: how much is produced, and how fast.
const (
	steadyScanRate = 10_000           // records a second
	steadyScanFor  = 10 * time.Second // of producing
)

// steadyScan is item 6 as issue 17 states its goal: a first scan of data committed a
// commit interval ago, where the data arrived as a topic's data does, at a steady rate,
// indexed and committed as it came (range max-age 1s, commit interval 500ms), so each
// commit brings the owners what arrived in one interval to warm, not the whole table.
func (f *fsCluster) steadyScan(ctx context.Context, c Config, it *Item) error {
	topic := "bench-scan-steady-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := f.e.CreateTopic(ctx, topic, 1); err != nil {
		return err
	}
	const name = "scan_steady"
	t, err := tables.Create(ctx, f.db, tables.Table{Name: name, Topic: topic, Spec: EventSpec, Properties: map[string]string{
		tables.PropRangeMaxAge: "1s", tables.PropCommitInterval: benchCommitInterval.String(), propAssemblyTarget: "1024", propMaintenance: "24h"}}, 1)
	if err != nil {
		return err
	}
	ix, err := f.e.Start("indexer", "bench-scan-indexer", f.url, c.IndexTTL)
	if err != nil {
		return err
	}
	defer ix.Stop(10 * time.Second)
	prod, err := f.e.KgoClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return err
	}
	defer prod.Close()
	const tick = 10 * time.Millisecond
	perTick := steadyScanRate * int(tick) / int(time.Second)
	rng := rand.New(rand.NewPCG(6, 6))
	produced := 0
	began := time.Now()
	for due := time.Duration(0); due < steadyScanFor; due += tick {
		if wait := time.Until(began.Add(due)); wait > 0 {
			time.Sleep(wait) // the producer's schedule, not a wait for a condition
		}
		for range perTick {
			k, v := event(rng, produced)
			prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: k, Value: v}, func(*kgo.Record, error) {})
			produced++
		}
	}
	if err := prod.Flush(ctx); err != nil {
		return err
	}
	if err := waitFor(ctx, time.Minute, "the indexer to index "+name, func() (bool, error) {
		if ix.Exited() {
			return false, fmt.Errorf("the indexer exited: %s", ix.LogTail())
		}
		var indexed int64
		err := f.db.QueryRow(ctx, `SELECT coalesce(sum(record_count), 0) FROM mink_ranges WHERE table_id = $1`, t.ID).Scan(&indexed)
		return indexed >= int64(produced), err
	}); err != nil {
		return err
	}
	if err := f.waitCommitted(ctx, name, t.ID, time.Minute); err != nil {
		return err
	}
	r, err := f.scanVsLocal(ctx, c, name, t.ID)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("data arriving at %s records/s for %s", fmtNum(steadyScanRate), fmtDur(steadyScanFor))
	it.Rows = append(it.Rows,
		Latency("first scan of "+what+", one commit interval ("+fmtDur(benchCommitInterval)+") after the last commit", r.first.total, r.local),
		Info("data files of that table in their owners' caches when its first scan began (warmed, without a read)", fmt.Sprintf("%d of %d", r.warmed, r.nFiles)),
		Latency("second scan of "+what+" (cached)", r.second.total, r.local),
	)
	it.Rows = append(it.Rows, r.ceilingRows(" of "+what)...)
	it.Notes = append(it.Notes, fmt.Sprintf("Steady arrival (issue 17's goal): %d records produced at %s records/s for %s while an indexer (mink.range.max-age 1s) and the writer (mink.commit.interval %s) ran, "+
		"so each commit brought the owners one interval's ranges to warm; the first scan began one commit interval after the last commit. %s rows in %d files (%.1f MB of Parquet), the same baseline.",
		produced, fmtNum(steadyScanRate), fmtDur(steadyScanFor), fmtDur(benchCommitInterval), fmtNum(float64(r.rows)), r.files, float64(r.fileBytes)/1e6))
	return nil
}
