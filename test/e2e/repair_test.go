package e2e

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/test/cluster"
)

// rawReads GETs every data and delete file the table's rows name, through file server
// s3 (plain HTTP, as any S3 client), pass after pass until stop (the pass under way
// ends first, so every file is read at least once: each that fails is reported); each
// answer must be the file or a retryable 503 SlowDown that says nothing of the file.
// first says when the first 503 came (zero: none yet); wait returns what was wrong, once
// stopped, and the keys answered 503.
func rawReads(t *testing.T, rc *regCluster, s3, name string, stop <-chan struct{}) (first func() time.Time, wait func() (bad, failed []string)) {
	t.Helper()
	var keys []string
	rows, err := rc.DB.Query(context.Background(), `SELECT f.key FROM mink_data_files f JOIN mink_tables t ON t.id = f.table_id
		WHERE t.name = $1 AND NOT f.live ORDER BY f.key`, name)
	if err == nil {
		keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(keys) == 0 {
		t.Fatalf("the files of %s: %v, %v", name, keys, err)
	}
	var firstAt atomic.Int64
	var bad []string
	failed := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for _, k := range keys {
				resp, err := http.Get(s3 + "/" + layout.Bucket + "/" + k)
				if err != nil {
					bad = append(bad, fmt.Sprintf("GET %s: %v", k, err))
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					continue
				}
				var e apierr.S3Error
				xml.Unmarshal(body, &e)
				if resp.StatusCode != http.StatusServiceUnavailable || e.Code != "SlowDown" || resp.Header.Get("Retry-After") == "" ||
					cluster.Leak.MatchString(e.Message) || regexp.MustCompile(`[0-9a-f]{64}`).Match(body) {
					bad = append(bad, fmt.Sprintf("GET %s: %d, Retry-After %q: %s", k, resp.StatusCode, resp.Header.Get("Retry-After"), body))
				} else {
					firstAt.CompareAndSwap(0, time.Now().UnixNano())
					failed[k] = true
				}
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	first = func() time.Time {
		if n := firstAt.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return time.Time{}
	}
	return first, func() ([]string, []string) { <-done; return bad, slices.Sorted(maps.Keys(failed)) }
}

// waitRepaired waits until the writer has handled every file problem of table name
// after the reads began to fail (first): no problem is left and a commit made the
// metadata other than was (its location before); it returns the table then and when
// that was first seen.
func waitRepaired(t *testing.T, rc *regCluster, name, was string, first func() time.Time) (*table.Table, time.Time) {
	t.Helper()
	tb := waitFor(t, 90*time.Second, name+"'s failed reads repaired", func() (*table.Table, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var problems int
		if first().IsZero() || rc.DB.QueryRow(ctx, `SELECT count(*) FROM mink_file_problems p JOIN mink_tables t ON t.id = p.table_id
			WHERE t.name = $1`, name).Scan(&problems) != nil || problems > 0 {
			return nil, false
		}
		tb, err := regLoad(ctx, rc.catalog, name)
		return tb, err == nil && tb.MetadataLocation() != was
	})
	return tb, time.Now()
}

// TestCompactionRepairedAtOnce is issue 26's second item. Kafka compacts the topic under
// an upsert table whose maintenance is an hour away, and a file server with an empty
// cache serves it. Every read of a file Kafka no longer yields is answered 503 SlowDown
// with Retry-After, naming no digest or path, whether read raw or by iceberg-go (whose
// S3 library retries it); the file server's report reaches the writer at once, which
// repairs within a few lease rounds of the first failed read, not at the maintenance;
// and afterwards every snapshot the metadata lists can be read and equals the map built
// from Kafka at its coverage (those naming a file compaction changed are expired). With
// ranges as files the current snapshot's files change and are replaced; with assembly
// (merges of 2) files only older snapshots name change too.
func TestCompactionRepairedAtOnce(t *testing.T) {
	for _, c := range []struct{ name, tier string }{{"ranges", "64"}, {"assembled", "2"}} {
		t.Run(c.name, func(t *testing.T) { compactionRepairedAtOnce(t, c.tier) })
	}
}

func compactionRepairedAtOnce(t *testing.T, tier string) {
	rc := newRegCluster(t, true)
	const parts = 2
	rc.Kafka.CreateTopic("ledger", parts, map[string]string{"cleanup.policy": "compact"})
	rc.createTable(&adminv1.CreateTableRequest{Name: "ledger", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
		Mode: adminv1.TableMode_TABLE_MODE_UPSERT, Properties: regProps("mink.live-load", "false", "mink.maintenance.interval", "1h",
			"mink.assembly.tier-files", tier)})
	rng := rand.New(rand.NewPCG(26, 2))
	var all []*kgo.Record
	ends := map[int32]int64{}
	for round := range 4 {
		recs := rc.produce(upsertRound(rng, "ledger", "acct-", parts, 25, 10, round, 60)...)
		all = append(all, recs...)
		for _, r := range recs {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
		rc.waitCommitted("ledger", ends)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Assembly done: no commit for a second (database clock).
	waitFor(t, 30*time.Second, "assembly to settle", func() (bool, bool) {
		var quiet bool
		err := rc.DB.QueryRow(ctx, `SELECT bool_and(m.committed_at < clock_timestamp() - interval '1 second')
			FROM mink_table_meta m JOIN mink_tables t ON t.id = m.table_id WHERE t.name = 'ledger'`).Scan(&quiet)
		return quiet, err == nil && quiet
	})
	before, err := regLoad(ctx, rc.catalog, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	checkUpsertSnapshots(t, before, all)

	rc.Kafka.Compact()
	rc.restart("fileserver", "fs-1") // an empty cache: every read builds from Kafka
	_, s3, err := rc.Node("fs-1").Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	first, raw := rawReads(t, rc, s3, "ledger", stop)
	// iceberg-go scans the current snapshot meanwhile, as an engine would.
	var scanErrs []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			tb, err := regLoad(ctx, rc.catalog, "ledger")
			if err == nil {
				var at interface{ Release() }
				at, err = tb.Scan().ToArrowTable(ctx)
				if err == nil {
					at.Release()
				}
			}
			if err != nil {
				if what, ok := cluster.Retryable(err); !ok || strings.Contains(what, "ServiceUnavailable") {
					scanErrs = append(scanErrs, what)
				}
			}
		}
	})
	_, at := waitRepaired(t, rc, "ledger", before.MetadataLocation(), first)
	close(stop)
	wg.Wait()
	bad, failed := raw()
	for _, b := range bad {
		t.Errorf("raw read during the repair: %s", b)
	}
	for _, e := range scanErrs {
		t.Errorf("iceberg-go scan during the repair failed with what clients do not retry: %s", e)
	}
	t.Logf("repaired %v after the first failed read; %d files answered 503", at.Sub(first()).Round(time.Millisecond), len(failed))
	if d := at.Sub(first()); d > 10*time.Second {
		t.Errorf("the repair came %v after the first failed read; the writer is told at once (lease_ttl %v)", d, regTTL)
	}
	// Reads went on while the writer repaired: what they reported is handled too.
	repaired, _ := waitRepaired(t, rc, "ledger", before.MetadataLocation(), first)

	// Every snapshot listed now reads, and reads what Kafka says at its coverage; those
	// naming a file compaction changed are gone.
	kept := 0
	for _, s := range before.Metadata().Snapshots() {
		if repaired.Metadata().SnapshotByID(s.SnapshotID) != nil {
			kept++
		}
	}
	if kept == len(before.Metadata().Snapshots()) {
		t.Errorf("all %d snapshots from before the compaction are still listed", kept)
	}
	replaced := slices.ContainsFunc(repaired.Metadata().Snapshots(), func(s table.Snapshot) bool {
		return s.Summary.Properties["mink.repair.replaced-files"] != ""
	})
	t.Logf("%d of %d snapshots from before kept, %d listed; current files replaced: %v", kept, len(before.Metadata().Snapshots()),
		len(repaired.Metadata().Snapshots()), replaced)
	if tier == "64" && !replaced {
		t.Error("no snapshot replaced the current snapshot's files compaction changed")
	}
	checkUpsertSnapshots(t, repaired, all)
	want := upsertModel(all, ends)
	if got := upsertScan(t, repaired, repaired.CurrentSnapshot().SnapshotID); !mapsEqual(got, want) {
		t.Fatalf("after the repair the table reads %d keys, want %d: %s", len(got), len(want), upsertDiff(got, want))
	}
}

// TestRetentionRepairedAtOnce: retention deletes offsets that the snapshots of an append
// table name, its maintenance an hour away. Reads of files below the log start answer
// 503 SlowDown until the writer, told by the file server, removes them; the commit that
// does expires every snapshot naming one, so that each snapshot listed afterwards reads
// exactly the records Kafka holds at its coverage.
func TestRetentionRepairedAtOnce(t *testing.T) {
	rc := newRegCluster(t, true)
	const parts = 2
	rc.Kafka.CreateTopic("visits", parts, nil)
	rc.createTable(&adminv1.CreateTableRequest{Name: "visits", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
		Properties: regProps("mink.live-load", "false", "mink.maintenance.interval", "1h")})
	ends := map[int32]int64{}
	cut := map[int32]int64{} // the log start retention moves to: inside the second round
	for round := range 3 {
		var recs []*kgo.Record
		for i := range 40 {
			recs = append(recs, &kgo.Record{Topic: "visits", Partition: int32(i % parts), Value: fmt.Appendf(nil, "visit %d.%d", round, i)})
		}
		for _, r := range rc.produce(recs...) {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
		if round == 1 {
			for p, e := range ends {
				cut[p] = e - 5
			}
		}
		rc.waitCommitted("visits", ends)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before, err := regLoad(ctx, rc.catalog, "visits")
	if err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	for p, o := range cut {
		offs.Add(kadm.Offset{Topic: "visits", Partition: p, At: o})
	}
	if resp, err := kadm.NewClient(rc.Kafka.Client()).DeleteRecords(ctx, offs); err != nil || resp.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, resp.Error())
	}
	rc.restart("fileserver", "fs-1")
	_, s3, err := rc.Node("fs-1").Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	first, raw := rawReads(t, rc, s3, "visits", stop)
	_, at := waitRepaired(t, rc, "visits", before.MetadataLocation(), first)
	close(stop)
	bad, failed := raw()
	for _, b := range bad {
		t.Errorf("raw read during the repair: %s", b)
	}
	t.Logf("repaired %v after the first failed read; %d files answered 503", at.Sub(first()).Round(time.Millisecond), len(failed))
	if d := at.Sub(first()); d > 10*time.Second {
		t.Errorf("the repair came %v after the first failed read; the writer is told at once", d)
	}
	repaired, _ := waitRepaired(t, rc, "visits", before.MetadataLocation(), first)
	if !slices.ContainsFunc(repaired.Metadata().Snapshots(), func(s table.Snapshot) bool {
		return s.Summary.Properties["mink.log-start.dropped-files"] != ""
	}) {
		t.Error("no snapshot dropped the files below the log start")
	}
	if repaired.Metadata().SnapshotByID(before.CurrentSnapshot().SnapshotID) != nil {
		t.Errorf("snapshot %d, current before retention, is still listed", before.CurrentSnapshot().SnapshotID)
	}
	for _, s := range repaired.Metadata().Snapshots() {
		cov, err := icebergmeta.ParseCoverage(s.Summary)
		if err != nil {
			t.Fatal(err)
		}
		at, err := repaired.Scan(table.WithSnapshotID(s.SnapshotID)).ToArrowTable(ctx)
		if err != nil {
			t.Fatalf("snapshot %d (%s, covering %v) cannot be read: %v", s.SnapshotID, s.Summary.Operation, cov, err)
		}
		got := map[int32]map[int64]int{}
		tr := array.NewTableReader(at, 1024)
		for tr.Next() {
			rec := tr.RecordBatch()
			cols := map[string]int{}
			for c := range int(rec.NumCols()) {
				cols[rec.ColumnName(c)] = c
			}
			for i := range int(rec.NumRows()) {
				p := int32(regCell(rec.Column(cols[tableschema.ColumnKafkaPartition]), i).(int64))
				o := regCell(rec.Column(cols[tableschema.ColumnKafkaOffset]), i).(int64)
				if got[p] == nil {
					got[p] = map[int64]int{}
				}
				got[p][o]++
			}
		}
		tr.Release()
		at.Release()
		for p, c := range cov {
			if c.Start < cut[p] {
				t.Errorf("snapshot %d covers partition %d from %d, below the log start %d", s.SnapshotID, p, c.Start, cut[p])
			}
			if int64(len(got[p])) != c.End-c.Start {
				t.Errorf("snapshot %d: partition %d holds %d offsets, covers [%d, %d)", s.SnapshotID, p, len(got[p]), c.Start, c.End)
			}
			for o, n := range got[p] {
				if o < c.Start || o >= c.End || n != 1 {
					t.Errorf("snapshot %d: partition %d offset %d read %d times, covered [%d, %d)", s.SnapshotID, p, o, n, c.Start, c.End)
				}
			}
		}
	}
}
