package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

// TestUpsertUnderFaults is issue 19's end-to-end check: 10,000 keys and 100,000 updates
// over 8 partitions, then tombstones for 1,000 keys, produced while an indexer is
// SIGKILLed (and started again) and the writer holding the lease is SIGSTOPped (another
// takes over; the paused one, resumed, is fenced). Every committed snapshot (none is
// expired: the whole history, then what assembly added) equals the map built from Kafka
// for the offsets it covers, and its row count its live keys; after Compact on the
// topic, the current one does.
func TestUpsertUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 records through real processes")
	}
	rc := newRegCluster(t, false)
	const parts, keys, updates, tombstones = 8, 10_000, 100_000, 1_000
	rc.Kafka.CreateTopic("entities", parts, map[string]string{"cleanup.policy": "compact"})
	rc.startRole("indexer", "idx-1")
	rc.startRole("indexer", "idx-2")
	rc.startRole("writer", "wr-1")
	rc.startFileServer("fs-1")
	rc.createTable(&adminv1.CreateTableRequest{Name: "entities", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
		Mode: adminv1.TableMode_TABLE_MODE_UPSERT, Properties: map[string]string{
			"mink.live-load": "false", "mink.range.max-age": "300ms", "mink.commit.interval": "1s",
			"mink.maintenance.interval": "500ms", "mink.assembly.target-bytes": "1048576", "mink.assembly.tier-files": "2",
			// Every committed snapshot is checked: none may be expired before (the default
			// keeps 100, and those of the last hour, and the run makes about 40).
			"mink.history.max-snapshots": "100000"}})

	rng := rand.New(rand.NewPCG(19, 100))
	var all []*kgo.Record
	ends := map[int32]int64{}
	produce := func(recs []*kgo.Record) {
		recs = rc.produce(recs...)
		all = append(all, recs...)
		for _, r := range recs {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
	}
	record := func(k int, value []byte) *kgo.Record {
		// A key stays in one partition, as Kafka's default partitioner keeps it.
		return &kgo.Record{Topic: "entities", Partition: int32(k % parts), Key: fmt.Appendf(nil, "entity-%05d", k), Value: value}
	}
	const batch = 5_000
	for b := range updates / batch {
		recs := make([]*kgo.Record, 0, batch)
		for i := range batch {
			k := (b*batch + i) % keys // every key at least once
			if b > 1 {
				k = rng.IntN(keys)
			}
			recs = append(recs, record(k, fmt.Appendf(nil, "v%d.%d", b, i)))
		}
		produce(recs)
		// Each batch its own snapshot (or a few): many ranges and files per partition,
		// many snapshots to check.
		rc.waitCommitted("entities", ends)
		switch b {
		case 3:
			rc.startRole("writer", "wr-2") // wr-1 holds the writer lease
			rc.Node("idx-1").Kill()
		case 6:
			rc.Node("wr-1").Pause()
		case 10:
			rc.Node("idx-1").Restart()
		case 14:
			rc.Node("wr-1").Resume()
		}
	}
	var ts []*kgo.Record
	for _, k := range rng.Perm(keys)[:tombstones] {
		ts = append(ts, record(k, nil))
	}
	produce(ts)
	rc.waitCommitted("entities", ends)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	want := upsertModel(all, ends)
	if len(want) != keys-tombstones {
		t.Fatalf("the model has %d live keys, want %d", len(want), keys-tombstones)
	}
	tbl, err := regLoad(ctx, rc.catalog, "entities")
	if err != nil {
		t.Fatal(err)
	}
	// Every committed snapshot: those of the history now, then those assembly (and the
	// last commits) added since.
	began, checked := time.Now(), map[int64]bool{}
	ops := map[table.Operation]int{}
	checkNew := func(tb *table.Table) {
		t.Helper()
		checkHistoryWhole(t, tb)
		var snaps []table.Snapshot
		for _, s := range tb.Metadata().Snapshots() {
			if !checked[s.SnapshotID] {
				checked[s.SnapshotID] = true
				snaps = append(snaps, s)
				ops[s.Summary.Operation]++
			}
		}
		checkUpsertSnapshotList(t, tb, snaps, all)
	}
	checkNew(tbl)
	merged := waitAssembled(ctx, t, rc.catalog, "entities", 2*time.Minute)
	checkNew(merged)
	if ops[table.OpReplace] == 0 {
		t.Fatalf("no assembly snapshot among the %d checked: %v", len(checked), ops)
	}
	t.Logf("%d snapshots checked (%v) in %s", len(checked), ops, time.Since(began).Round(time.Millisecond))

	// After Compact: files that changed are re-derived; the table reads the same. The
	// repairs expire the snapshots naming files Kafka can no longer rebuild
	// (TestCompactionRepairedAtOnce reads every one left); the current one is read here.
	rc.Kafka.Compact()
	rc.restart("fileserver", "fs-1")
	after := waitFor(t, 3*time.Minute, "the compacted table read", func() (*table.Table, bool) {
		tb, err := regLoad(ctx, rc.catalog, "entities")
		if err != nil {
			return nil, false
		}
		_, err = tb.Scan().ToArrowTable(ctx)
		return tb, err == nil
	})
	if got := upsertScan(t, after, after.CurrentSnapshot().SnapshotID); !mapsEqual(got, want) {
		snaps := after.Metadata().Snapshots()
		for _, s := range snaps[max(0, len(snaps)-6):] {
			t.Logf("snapshot %d: %s %v", s.SnapshotID, s.Summary.Operation, s.Summary.Properties)
		}
		t.Fatalf("after compaction the table reads %d keys, want %d: %s", len(got), len(want), upsertDiff(got, want))
	}
	checkUpsertRowCount(t, *after.CurrentSnapshot(), len(want))
}

// checkHistoryWhole fails if expiry removed a snapshot of the table's history: every
// snapshot's parent is still in the metadata, and one snapshot only has none.
func checkHistoryWhole(t *testing.T, tbl *table.Table) {
	t.Helper()
	md, roots := tbl.Metadata(), 0
	for _, s := range md.Snapshots() {
		if s.ParentSnapshotID == nil {
			roots++
		} else if md.SnapshotByID(*s.ParentSnapshotID) == nil {
			t.Fatalf("snapshot %d's parent %d was expired: not every committed snapshot can be checked", s.SnapshotID, *s.ParentSnapshotID)
		}
	}
	if roots != 1 {
		t.Fatalf("%d snapshots without a parent, want the first one only", roots)
	}
}

// upsertDiff says, per partition, how many keys a read lacks, has too many and has with
// another value.
func upsertDiff(got, want map[upsertKey]string) string {
	type d struct{ missing, extra, other int }
	per := map[int32]*d{}
	at := func(p int32) *d {
		if per[p] == nil {
			per[p] = &d{}
		}
		return per[p]
	}
	for k, v := range want {
		if g, ok := got[k]; !ok {
			at(k.p).missing++
		} else if g != v {
			at(k.p).other++
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			at(k.p).extra++
		}
	}
	out := ""
	for p := range int32(8) {
		if x := per[p]; x != nil {
			out += fmt.Sprintf("partition %d: %d missing, %d extra, %d other; ", p, x.missing, x.extra, x.other)
		}
	}
	return out
}
