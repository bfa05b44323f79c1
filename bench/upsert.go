package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/tables"
)

// UpsertConfig sizes item 15: one keyed topic under an append and an upsert table.
type UpsertConfig struct {
	Keys       int     // distinct keys, split evenly over the partitions (keys are per partition)
	Records    int     // records over all partitions
	Partitions int     // partitions of the topic
	Tombstones float64 // fraction of records that are tombstones (null values)
	RangeBytes int64   // mink.range.target-bytes of both tables: several ranges per partition
}

// DefaultUpsertConfig is what make bench runs.
func DefaultUpsertConfig() UpsertConfig {
	return UpsertConfig{Keys: 10_000, Records: 100_000, Partitions: 4, Tombstones: 0.05, RangeBytes: 256 << 10}
}

func (u UpsertConfig) validate() error {
	if u.Partitions < 1 || u.Keys < u.Partitions || u.Records/u.Partitions < 1000 || u.Tombstones < 0 || u.Tombstones >= 1 || u.RangeBytes < 1024 {
		return fmt.Errorf("upsert: want at least 1 partition, a key and 1000 records per partition, a tombstone fraction in [0, 1) and range bytes of at least 1024")
	}
	return nil
}

// upsertTable is what item 15 measures of one table after indexing.
type upsertTable struct {
	run           *IndexRun
	idx           Measured
	rangesN       int
	rowBytes      int64 // mink_ranges rows, pg_column_size
	keyBytes      int64 // mink_ranges.keys
	dataFiles     int64
	dataBytes     int64
	deleteFiles   int64 // the current snapshot's
	deletedPos    int64
	deleteBytes   int64
	snapshots     int
	commit        time.Duration // writer lease acquired to the last commit
	first, cached time.Duration
	warmed, files int // files (data and delete) in the owners' caches when the first scan began
	rows          int64
}

// runUpsert is item 15: an append and an upsert table over one keyed topic, each
// indexed by a real mink-indexer process (interleaved, best of c.Reps), then committed
// by a real writer and scanned with iceberg-go through two real file servers.
func runUpsert(ctx context.Context, e *Env, c Config, it *Item) error {
	u := c.Upsert
	loadStart := loadAvg()
	topic := "bench-upsert-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := e.CreateTopic(ctx, topic, int32(u.Partitions)); err != nil {
		return err
	}
	per, keysPer := u.Records/u.Partitions, u.Keys/u.Partitions
	// live is the model the upsert scan must match: per partition and key, whether its
	// last record is a value.
	live := map[string]bool{}
	part := -1
	var tombstones int64
	sizes, err := e.ProduceWith(ctx, topic, int32(u.Partitions), per, c.Compression, 15, func(rng *rand.Rand, i int) ([]byte, []byte, error) {
		if i == 0 {
			part++
		}
		k := []byte(fmt.Sprintf("key-%06d", part*keysPer+rng.IntN(keysPer)))
		_, v := event(rng, i)
		if rng.Float64() < u.Tombstones {
			v = nil
			tombstones++
		}
		live[strconv.Itoa(part)+"/"+string(k)] = v != nil
		return k, v, nil
	})
	if err != nil {
		return err
	}
	var liveKeys int64
	for _, l := range live {
		if l {
			liveKeys++
		}
	}
	total, recBytes := sizes.Total()
	p := props(c)
	p[tables.PropRangeTargetBytes] = strconv.FormatInt(u.RangeBytes, 10)
	opt := func(m tables.Mode) IndexOptions {
		return IndexOptions{Procs: 1, Topic: topic, Partitions: int32(u.Partitions), TTL: c.IndexTTL, Props: p, Timeout: 5 * time.Minute, Mode: m}
	}
	app, ups := &upsertTable{}, &upsertTable{}
	defer func() {
		for _, t := range []*upsertTable{app, ups} {
			if t.run != nil {
				t.run.Close()
			}
		}
	}()
	// Interleaved, so load from elsewhere hits both alike; the first run of each is kept.
	for rep := range c.Reps {
		for _, t := range []struct {
			t    *upsertTable
			mode tables.Mode
		}{{app, tables.ModeAppend}, {ups, tables.ModeUpsert}} {
			run, err := e.RunIndexers(ctx, opt(t.mode))
			if err != nil {
				return fmt.Errorf("%s table: %w", t.mode, err)
			}
			m, err := run.Measure(sizes)
			if err != nil {
				run.Close()
				return fmt.Errorf("%s table: %w", t.mode, err)
			}
			e.Log.Info("indexed", "mode", t.mode, "rec/s", PerSec(m.Records, m.Took), "ranges", len(m.Ranges))
			if rep == 0 {
				t.t.run = run
			} else {
				run.Close()
			}
			if rep == 0 || m.Took < t.t.idx.Took {
				t.t.idx = m
			}
		}
	}
	for _, t := range []*upsertTable{app, ups} {
		if err := t.indexSizes(ctx); err != nil {
			return err
		}
		if err := t.commitAndScan(ctx, e, c); err != nil {
			return fmt.Errorf("%s table: %w", t.run.Table.Mode, err)
		}
	}
	if app.rows != total {
		return fmt.Errorf("the append table's scan read %d rows, the topic has %d records", app.rows, total)
	}
	if ups.rows != liveKeys {
		return fmt.Errorf("the upsert table's scan read %d rows, the topic has %d live keys", ups.rows, liveKeys)
	}

	kib := func(b int64) string { return fmtNum(float64(b)/1024) + " KiB" }
	perRange := func(t *upsertTable, b int64) float64 { return float64(b) / float64(max(1, t.rangesN)) }
	cost := func(what string, mink, base float64, unit string) Row {
		r := Speed(what, mink, base, unit)
		r.Ratio, r.Low = fmtRatio(base/mink), base/mink < 0.5 // a cost: the ratio is append/upsert
		return r
	}
	it.Rows = append(it.Rows,
		Speed(fmt.Sprintf("indexing, 1 indexer process, %d partitions: records/s (upsert vs append)", u.Partitions),
			PerSec(ups.idx.Records, ups.idx.Took), PerSec(app.idx.Records, app.idx.Took), "rec/s"),
		cost("Parquet data files: KiB in all (upsert vs append)", float64(ups.dataBytes)/1024, float64(app.dataBytes)/1024, "KiB"),
		cost("index in Postgres per range (mink_ranges row, pg_column_size)", perRange(ups, ups.rowBytes)/1024, perRange(app, app.rowBytes)/1024, "KiB"),
		Info("key hashes (mink_ranges.keys, 16 B per distinct key of a range + 4 B): per range / keys per range / bytes per key of the topic",
			fmt.Sprintf("%s / %s / %.0f B (%d ranges, %s bytes in all)", kib(int64(perRange(ups, ups.keyBytes))),
				fmtNum(perRange(ups, ups.keyBytes-4*int64(ups.rangesN))/16), float64(ups.keyBytes)/float64(u.Keys), ups.rangesN, fmtNum(float64(ups.keyBytes)))),
		Info("delete files of the upsert snapshot: files / positions deleted / bytes",
			fmt.Sprintf("%d of %d data files / %s / %s (%.1f%% of the data files' %s)", ups.deleteFiles, ups.dataFiles,
				fmtNum(float64(ups.deletedPos)), kib(ups.deleteBytes), 100*float64(ups.deleteBytes)/float64(max(1, ups.dataBytes)), kib(ups.dataBytes))),
		Latency("iceberg-go first scan, one commit interval after the commit (upsert vs append)", ups.first, app.first),
		Info("files (data and delete) in their owners' caches when the first scan began (warmed, without a read): upsert / append",
			fmt.Sprintf("%d of %d / %d of %d", ups.warmed, ups.files, app.warmed, app.files)),
		Latency("iceberg-go second scan, cached (upsert vs append)", ups.cached, app.cached),
		Info("rows read: upsert (live keys) / append (all records)", fmt.Sprintf("%s / %s", fmtNum(float64(ups.rows)), fmtNum(float64(app.rows)))),
		Latency(fmt.Sprintf("writer: lease to its last commit, per snapshot (upsert vs append; %d and %d snapshots)", ups.snapshots, app.snapshots),
			ups.commit/time.Duration(max(1, ups.snapshots)), app.commit/time.Duration(max(1, app.snapshots))),
		Info("load average (1, 5, 15 min)", "at start "+loadStart+"; at end "+loadAvg()),
	)
	it.Notes = append(it.Notes,
		fmt.Sprintf("Data: one topic of %d partitions, %s records (%.1f MB of keys and values: item 1's JSON events under %s keys, %d per partition, %s of them tombstones), "+
			"%s live keys at the end; both tables have mink.range.target-bytes %d: %d ranges each (the last per partition cut by age; the indexer checks the target after each fetch, so a range is at least one fetch). "+
			"Indexing rates leave out each partition's last range, as item 1 does.",
			u.Partitions, fmtNum(float64(total)), float64(recBytes)/1e6, fmtNum(float64(u.Keys)), keysPer, fmtNum(float64(tombstones)),
			fmtNum(float64(liveKeys)), u.RangeBytes, ups.rangesN),
		"Mink: an upsert table; baseline: an append table over the same topic. Each indexed by a real mink-indexer process on a fresh database, "+
			"from its partition leases' acquisition to the store of its last measured range (database clock); then a real writer and two real file servers per table: "+
			"the writer's time is from its table lease's acquisition to its last commit (every range indexed before it started) over the snapshots it made; "+
			"the upsert writer computes the position deletes from the key hashes in that time. "+
			"Scans: iceberg-go v0.7.0 (REST catalog, gocloud S3 FileIO) to an Arrow table, the first one commit interval after the commit (delete files are built on demand like data files), the second best of the runs. "+
			"Each scan is checked: the upsert table's rows are the topic's live keys, the append table's every record.",
		fmt.Sprintf("Best of %d indexing runs each, upsert and append interleaved; the writers and file servers run one table after the other, "+
			"so the first scans (one sample each, builds included) vary most from run to run.", c.Reps),
	)
	return nil
}

// indexSizes reads what the index holds for the table's ranges.
func (t *upsertTable) indexSizes(ctx context.Context) error {
	return t.run.DB.QueryRow(ctx, `SELECT count(*), coalesce(sum(pg_column_size(r.*)), 0), coalesce(sum(octet_length(r.keys)), 0)
		FROM mink_ranges r WHERE table_id = $1`, t.run.Table.ID).Scan(&t.rangesN, &t.rowBytes, &t.keyBytes)
}

// commitAndScan starts a writer and two file servers over the table's database, waits
// for its commit, and scans it.
func (t *upsertTable) commitAndScan(ctx context.Context, e *Env, c Config) error {
	f, err := startFS(ctx, e, c, &indexingResult{run: t.run})
	if f != nil {
		defer f.stop()
	}
	if err != nil {
		return err
	}
	id := t.run.Table.ID
	if err := f.waitCommitted(ctx, t.run.Table.Name, id, 2*time.Minute); err != nil {
		return err
	}
	meta, err := f.committed(ctx, id)
	if err != nil {
		return err
	}
	t.snapshots = len(meta.Snapshots)
	t.deleteFiles, t.deletedPos = meta.total("total-delete-files"), meta.total("total-position-deletes")
	if err := f.db.QueryRow(ctx, `SELECT m.committed_at - l.acquired_at FROM mink_table_meta m
		JOIN mink_leases l ON l.table_id = m.table_id AND l.kind = 'writer' WHERE m.table_id = $1`, id).Scan(&t.commit); err != nil {
		return fmt.Errorf("writer lease and commit: %w", err)
	}
	if err := f.db.QueryRow(ctx, `SELECT count(*), coalesce(sum(file_size), 0) FROM mink_data_files
		WHERE table_id = $1 AND deletes_of IS NULL AND expires_at IS NULL`, id).Scan(&t.dataFiles, &t.dataBytes); err != nil {
		return err
	}
	// The current delete file of each data file is the one of the highest coverage.
	if err := f.db.QueryRow(ctx, `SELECT coalesce(sum(file_size), 0) FROM (SELECT DISTINCT ON (deletes_of) file_size FROM mink_data_files
		WHERE table_id = $1 AND deletes_of IS NOT NULL ORDER BY deletes_of, cover_end DESC) d`, id).Scan(&t.deleteBytes); err != nil {
		return err
	}
	if t.warmed, t.files, err = f.afterCommitInterval(ctx, id); err != nil {
		return err
	}
	cat, err := rest.NewCatalog(ctx, "mink", f.nodes[0].catalog)
	if err != nil {
		return err
	}
	defer cat.Close()
	ident := table.Identifier{tables.DefaultNamespace, t.run.Table.Name}
	scan := func() (time.Duration, int64, error) {
		start := time.Now()
		tbl, err := cat.LoadTable(ctx, ident)
		if err != nil {
			return 0, 0, err
		}
		at, err := tbl.Scan().ToArrowTable(ctx)
		if err != nil {
			return 0, 0, err
		}
		defer at.Release()
		return time.Since(start), at.NumRows(), nil
	}
	if t.first, t.rows, err = scan(); err != nil {
		return fmt.Errorf("first scan: %w", err)
	}
	for range c.Reps {
		d, n, err := scan()
		if err != nil {
			return fmt.Errorf("second scan: %w", err)
		}
		if n != t.rows {
			return fmt.Errorf("scans disagree: %d rows, then %d", t.rows, n)
		}
		t.cached = minPos(t.cached, d)
	}
	return nil
}
