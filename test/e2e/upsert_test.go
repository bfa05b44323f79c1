package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/tableschema"
)

// upsertKey is a key of an upsert table: keys are per partition.
type upsertKey struct {
	p   int32
	key string
}

// upsertModel is the table a map built from Kafka gives: per key, the last value, with
// tombstoned keys removed, for the records below each partition's end.
func upsertModel(recs []*kgo.Record, ends map[int32]int64) map[upsertKey]string {
	sort.Slice(recs, func(i, j int) bool {
		return recs[i].Partition < recs[j].Partition || recs[i].Partition == recs[j].Partition && recs[i].Offset < recs[j].Offset
	})
	m := map[upsertKey]string{}
	for _, r := range recs {
		if r.Offset >= ends[r.Partition] {
			continue
		}
		k := upsertKey{r.Partition, string(r.Key)}
		if r.Value == nil {
			delete(m, k)
		} else {
			m[k] = string(r.Value)
		}
	}
	return m
}

// upsertRound is n records of round to topic's partitions at random, keyed prefix and
// one of keys numbers, one in tombstones of them a tombstone.
func upsertRound(rng *rand.Rand, topic, prefix string, parts, keys, tombstones, round, n int) []*kgo.Record {
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(rng.IntN(parts)),
			Key: fmt.Appendf(nil, "%s%d", prefix, rng.IntN(keys)), Value: fmt.Appendf(nil, "v%d.%d", round, i)}
		if rng.IntN(tombstones) == 0 {
			r.Value = nil // a tombstone
		}
		recs = append(recs, r)
	}
	return recs
}

// upsertScan reads a snapshot of an upsert table with iceberg-go (which applies its
// position deletes), failing on a key read twice.
func upsertScan(t *testing.T, tbl *table.Table, snapshot int64) map[upsertKey]string {
	t.Helper()
	return upsertScanBy(t, tbl, snapshot, upsertRawKey)
}

// upsertRawKey is a row's key as bytes, _kafka_key.
func upsertRawKey(cols map[string]arrow.Array, i int) string {
	key, _ := regCell(cols[tableschema.ColumnKafkaKey], i).([]byte)
	return string(key)
}

// upsertScanBy is upsertScan with a row's key given by keyOf (its columns by name, its
// index).
func upsertScanBy(t *testing.T, tbl *table.Table, snapshot int64, keyOf func(cols map[string]arrow.Array, i int) string) map[upsertKey]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	at, err := tbl.Scan(table.WithSnapshotID(snapshot)).ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("scan snapshot %d: %v", snapshot, err)
	}
	defer at.Release()
	out := map[upsertKey]string{}
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		cols := map[string]arrow.Array{}
		for c := range int(rec.NumCols()) {
			cols[rec.ColumnName(c)] = rec.Column(c)
		}
		for i := range int(rec.NumRows()) {
			p := regCell(cols[tableschema.ColumnKafkaPartition], i).(int64)
			key := keyOf(cols, i)
			val, _ := regCell(cols["value"], i).([]byte)
			k := upsertKey{int32(p), key}
			if _, dup := out[k]; dup {
				t.Fatalf("snapshot %d: key %q of partition %d read twice", snapshot, key, p)
			}
			out[k] = string(val)
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkUpsertSnapshots checks every snapshot of the table's metadata against the model
// of the records it covers, and the current one's row count (total records minus
// position deletes) against its live keys. It returns how many snapshots it checked.
func checkUpsertSnapshots(t *testing.T, tbl *table.Table, recs []*kgo.Record) int {
	t.Helper()
	return checkUpsertSnapshotList(t, tbl, tbl.Metadata().Snapshots(), recs)
}

// checkUpsertSnapshotList is checkUpsertSnapshots on some of the table's snapshots.
func checkUpsertSnapshotList(t *testing.T, tbl *table.Table, snaps []table.Snapshot, recs []*kgo.Record) int {
	t.Helper()
	return checkUpsertSnapshotListBy(t, tbl, snaps, recs, upsertRawKey)
}

// checkUpsertSnapshotListBy is checkUpsertSnapshotList with a row's key given by keyOf
// (upsertScanBy), and recs keyed as keyOf reads them.
func checkUpsertSnapshotListBy(t *testing.T, tbl *table.Table, snaps []table.Snapshot, recs []*kgo.Record, keyOf func(cols map[string]arrow.Array, i int) string) int {
	t.Helper()
	n := 0
	for _, s := range snaps {
		cov, err := icebergmeta.ParseCoverage(s.Summary)
		if err != nil {
			t.Fatal(err)
		}
		ends := map[int32]int64{}
		for p, c := range cov {
			ends[p] = c.End
		}
		want := upsertModel(recs, ends)
		got := upsertScanBy(t, tbl, s.SnapshotID, keyOf)
		bad := 0
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				if bad++; bad < 10 {
					t.Errorf("snapshot %d (covering %v): key %q of partition %d reads %q (present %v), want %q", s.SnapshotID, ends, k.key, k.p, g, ok, v)
				}
			}
		}
		for k, g := range got {
			if _, ok := want[k]; !ok {
				if bad++; bad < 10 {
					t.Errorf("snapshot %d (covering %v): key %q of partition %d reads %q, but it is deleted or never was", s.SnapshotID, ends, k.key, k.p, g)
				}
			}
		}
		if bad > 0 {
			t.Fatalf("snapshot %d: %d keys differ (%d read, %d live)", s.SnapshotID, bad, len(got), len(want))
		}
		if s.SnapshotID == tbl.CurrentSnapshot().SnapshotID {
			props := s.Summary.Properties
			total, _ := strconv.ParseInt(props["total-records"], 10, 64)
			dels, _ := strconv.ParseInt(props["total-position-deletes"], 10, 64)
			if total-dels != int64(len(want)) {
				t.Errorf("current snapshot: total-records %d - total-position-deletes %d != %d live keys", total, dels, len(want))
			}
		}
		n++
	}
	return n
}

// TestUpsertTableThroughIceberg: an upsert table over a keyed topic with updates and
// tombstones in several partitions, produced in rounds so that snapshots commit ranges
// whose keys earlier files hold. Read by iceberg-go through the catalog and the S3
// endpoint (position delete files built on demand from the index), every snapshot
// equals the map built from Kafka: key -> last value, minus tombstoned keys.
func TestUpsertTableThroughIceberg(t *testing.T) {
	rc := newRegCluster(t, true)
	const parts = 3
	rc.Kafka.CreateTopic("users", parts, nil)
	raw := adminv1.RecordFormat_RECORD_FORMAT_RAW
	// Live loads on (the default): a load has the tail too (TestUpsertLiveLoadTail).
	rc.createTable(&adminv1.CreateTableRequest{Name: "users", Format: raw,
		Mode: adminv1.TableMode_TABLE_MODE_UPSERT, Properties: regProps()})
	// The same topic assembled as soon as two small files are there: merged files keep
	// the latest record per key of their span, with their deletes recomputed.
	rc.createTable(&adminv1.CreateTableRequest{Name: "users_merged", Topic: "users", Format: raw,
		Mode: adminv1.TableMode_TABLE_MODE_UPSERT, Properties: regProps("mink.live-load", "false",
			"mink.assembly.target-bytes", "65536", "mink.assembly.tier-files", "2", "mink.maintenance.interval", "100ms")})
	// And as an append table: every record a row, beside the upsert ones.
	rc.createTable(&adminv1.CreateTableRequest{Name: "users_log", Topic: "users", Format: raw,
		Properties: regProps("mink.live-load", "false")})
	rng := rand.New(rand.NewPCG(19, 1))
	var all []*kgo.Record
	ends := map[int32]int64{}
	for round := range 5 {
		recs := rc.produce(upsertRound(rng, "users", "user-", parts, 40, 8, round, 120)...)
		all = append(all, recs...)
		for _, r := range recs {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
		for _, name := range []string{"users", "users_merged", "users_log"} {
			rc.waitCommitted(name, ends)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A record Kafka holds beyond the committed snapshot: a load covering it (live, or
	// committed by then) reads it as the newest value of its key.
	tail := rc.produce(&kgo.Record{Topic: "users", Partition: 0, Key: []byte("user-0"), Value: []byte("in the tail")})
	all = append(all, tail...)
	ends[0] = tail[0].Offset + 1
	tbl, err := regLoad(ctx, rc.catalog, "users")
	if err != nil {
		t.Fatal(err)
	}
	if n := checkUpsertSnapshots(t, tbl, all); n < 3 {
		t.Fatalf("%d snapshots checked, want one per round at least", n)
	}
	props := tbl.CurrentSnapshot().Summary.Properties
	if props["total-position-deletes"] == "0" || props["total-delete-files"] == "0" {
		t.Fatalf("no position deletes in the current snapshot (%v): updates across rounds must delete earlier rows", props)
	}

	merged := waitAssembled(ctx, t, rc.catalog, "users_merged", 30*time.Second)
	checkUpsertSnapshots(t, merged, all)

	rc.waitCommitted("users_log", ends)
	log := regScanTable(t, rc.catalog, "users_log")
	if len(log.rows) != len(all) || len(log.dups) > 0 {
		t.Fatalf("the append table over the topic reads %d rows (%d twice), %d records were produced", len(log.rows), len(log.dups), len(all))
	}
}

// TestUpsertTableAfterCompaction: Kafka compacts the topic under an upsert table. Files
// whose rebuild no longer matches their recorded bytes are reported by the file server
// that cannot serve them, and the writer re-derives their ranges from what Kafka still
// has (new rows, checksums and keys in the index, new files, new deletes). A compacted
// record was superseded, so the table read afterwards is still the map from Kafka, which
// compaction did not change either.
func TestUpsertTableAfterCompaction(t *testing.T) {
	rc := newRegCluster(t, true)
	const parts = 2
	rc.Kafka.CreateTopic("accounts", parts, map[string]string{"cleanup.policy": "compact"})
	rc.createTable(&adminv1.CreateTableRequest{Name: "accounts", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
		Mode: adminv1.TableMode_TABLE_MODE_UPSERT, Properties: regProps("mink.live-load", "false", "mink.maintenance.interval", "200ms")})
	rng := rand.New(rand.NewPCG(19, 5))
	var all []*kgo.Record
	ends := map[int32]int64{}
	for round := range 4 {
		var recs []*kgo.Record
		for i := range 60 {
			r := &kgo.Record{Topic: "accounts", Partition: int32(rng.IntN(parts)),
				Key: fmt.Appendf(nil, "acct-%d", rng.IntN(25)), Value: fmt.Appendf(nil, "v%d.%d", round, i)}
			if rng.IntN(10) == 0 {
				r.Value = nil
			}
			recs = append(recs, r)
		}
		recs = rc.produce(recs...)
		all = append(all, recs...)
		for _, r := range recs {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
		rc.waitCommitted("accounts", ends)
	}
	want := upsertModel(all, ends)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	tbl, err := regLoad(ctx, rc.catalog, "accounts")
	if err != nil {
		t.Fatal(err)
	}
	checkUpsertSnapshots(t, tbl, all)

	rc.Kafka.Compact()
	// What Kafka holds now: fewer records, the same latest value per key.
	var left []*kgo.Record
	cons := rc.Kafka.Client(kgo.ConsumeTopics("accounts"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	total := 0
	for _, e := range ends {
		total += int(e)
	}
	for len(left) < total {
		fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(fctx)
		fcancel()
		if fctx.Err() != nil && fs.NumRecords() == 0 {
			break // no more: compaction removed the rest
		}
		left = append(left, fs.Records()...)
	}
	if len(left) >= len(all) {
		t.Fatalf("compaction left %d of %d records", len(left), len(all))
	}
	if after := upsertModel(left, ends); !mapsEqual(after, want) {
		t.Fatalf("compaction changed the latest values: %d keys, was %d", len(after), len(want))
	}
	// A fresh file server has none of the files cached: it builds them from Kafka, and
	// reports those that no longer match.
	rc.restart("fileserver", "fs-1")
	repaired := waitFor(t, 90*time.Second, "the compacted files repaired and the table read", func() (*table.Table, bool) {
		tb, err := regLoad(ctx, rc.catalog, "accounts")
		if err != nil {
			return nil, false
		}
		if _, err := tb.Scan().ToArrowTable(ctx); err != nil {
			return nil, false // a file reported: the writer replaces it
		}
		return tb, true
	})
	snap := repaired.CurrentSnapshot()
	got := upsertScan(t, repaired, snap.SnapshotID)
	if !mapsEqual(got, want) {
		t.Fatalf("after compaction the table reads %d keys, want %d", len(got), len(want))
	}
	found := false
	for _, s := range repaired.Metadata().Snapshots() {
		found = found || s.Summary.Properties["mink.repair.replaced-files"] != ""
	}
	if !found {
		t.Fatal("no repair snapshot: compaction changed no file?")
	}
	props := snap.Summary.Properties
	total64, _ := strconv.ParseInt(props["total-records"], 10, 64)
	dels, _ := strconv.ParseInt(props["total-position-deletes"], 10, 64)
	if total64-dels != int64(len(want)) {
		t.Errorf("after repair: total-records %d - total-position-deletes %d != %d live keys", total64, dels, len(want))
	}
}

func mapsEqual(a, b map[upsertKey]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// waitAssembled loads the table until its metadata has an assembly snapshot.
func waitAssembled(ctx context.Context, t *testing.T, catalog, name string, timeout time.Duration) *table.Table {
	t.Helper()
	return waitFor(t, timeout, name+" to be assembled", func() (*table.Table, bool) {
		tb, err := regLoad(ctx, catalog, name)
		if err != nil {
			return nil, false
		}
		for _, s := range tb.Metadata().Snapshots() {
			if s.Summary.Properties["mink.assembly.replaced-files"] != "" {
				return tb, true
			}
		}
		return tb, false
	})
}

// TestUpsertLiveLoadTail: a live load of an upsert table includes the tail Kafka holds
// beyond the committed snapshot with the table's semantics: a key updated in the tail
// reads its newest value, a key tombstoned in the tail is gone (position deletes of the
// committed files, and of earlier tail files, for the keys the tail touches). The tail
// stays a tail (mink.range.max-age of an hour: nothing indexed, every tail file measured
// by the file server), over two loads, so that a later tail file supersedes an earlier
// one. A file server started afresh rebuilds every file of the load from Kafka and
// Postgres alone. Once the tail is committed, the committed snapshot reads the same.
func TestUpsertLiveLoadTail(t *testing.T) {
	rc := newRegCluster(t, true)
	const parts = 2
	rc.Kafka.CreateTopic("prices", parts, nil)
	rc.createTable(&adminv1.CreateTableRequest{Name: "prices", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
		Mode: adminv1.TableMode_TABLE_MODE_UPSERT, Properties: regProps("mink.live.reuse-ms", "0")})
	rng := rand.New(rand.NewPCG(19, 9))
	var all []*kgo.Record
	ends := map[int32]int64{}
	produce := func(round, n int) {
		recs := rc.produce(upsertRound(rng, "prices", "sku-", parts, 30, 6, round, n)...)
		all = append(all, recs...)
		for _, r := range recs {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
	}
	produce(0, 160)
	rc.waitCommitted("prices", ends)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Ranges read the table's properties as they open: the ones open now close as
	// before, with a round of their own; the next ones stay open for an hour.
	if _, err := rc.Member("idx-1").Admin().AlterTable(ctx, &adminv1.AlterTableRequest{Name: "prices",
		SetProperties: map[string]string{"mink.range.max-age": "1h"}}); err != nil {
		t.Fatalf("AlterTable: %v", err)
	}
	produce(1, 40)
	rc.waitCommitted("prices", ends)
	committed := maps.Clone(ends)

	// loadLive loads the table and checks that its load snapshot covers every record
	// produced, with a tail beyond what is committed and deletes the tail made, and
	// reads as the model of all of them.
	loadLive := func(what string) *table.Table {
		t.Helper()
		tbl, err := regLoad(ctx, rc.catalog, "prices")
		if err != nil {
			t.Fatal(err)
		}
		cur := tbl.CurrentSnapshot()
		props := cur.Summary.Properties
		if props["mink.live"] != "true" {
			t.Fatalf("%s: the load is not live: %v", what, props)
		}
		cov, err := icebergmeta.ParseCoverage(cur.Summary)
		if err != nil {
			t.Fatal(err)
		}
		for p, end := range ends {
			if cov[p].End != end {
				t.Fatalf("%s: the load covers partition %d up to %d, %d produced (summary %v)", what, p, cov[p].End, end, props)
			}
		}
		got, _ := regCommitted(tbl)
		if !maps.Equal(got, committed) {
			t.Fatalf("%s: the load's base covers %v, want %v: the tail was committed", what, got, committed)
		}
		if props["added-position-deletes"] == "" || props["added-position-deletes"] == "0" {
			t.Fatalf("%s: the load snapshot adds no position deletes, yet its tail updates committed keys: %v", what, props)
		}
		checkUpsertSnapshotList(t, tbl, []table.Snapshot{*cur}, all)
		return tbl
	}
	// The tail: updates and tombstones of keys the committed files hold, and a key
	// updated then tombstoned within the tail, and one tombstoned then revived.
	produce(2, 60)
	all = append(all, rc.produce(
		&kgo.Record{Topic: "prices", Partition: 0, Key: []byte("sku-0"), Value: []byte("tail-new")},
		&kgo.Record{Topic: "prices", Partition: 0, Key: []byte("sku-2"), Value: []byte("tail-short-lived")},
		&kgo.Record{Topic: "prices", Partition: 0, Key: []byte("sku-2")},
		&kgo.Record{Topic: "prices", Partition: 1, Key: []byte("sku-1")},
		&kgo.Record{Topic: "prices", Partition: 1, Key: []byte("sku-3")},
		&kgo.Record{Topic: "prices", Partition: 1, Key: []byte("sku-3"), Value: []byte("revived")},
	)...)
	for _, r := range all {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	first := loadLive("first tail")
	want := upsertModel(all, ends)
	if want[upsertKey{0, "sku-0"}] != "tail-new" || want[upsertKey{1, "sku-3"}] != "revived" {
		t.Fatalf("model: %q %q", want[upsertKey{0, "sku-0"}], want[upsertKey{1, "sku-3"}])
	}
	if _, ok := want[upsertKey{1, "sku-1"}]; ok {
		t.Fatal("model: sku-1 is tombstoned in the tail")
	}
	// More of the tail: the first load's tail file stays, a second one supersedes keys
	// of it.
	produce(3, 60)
	loadLive("second tail")
	_ = first
	// The tail is not indexed: the load's delete files name the tail files whose
	// recorded keys they are computed with, two of them in a partition by now.
	var named int
	if err := rc.DB.QueryRow(ctx, `SELECT coalesce(max(cardinality(deletes_tail)), 0) FROM mink_data_files
		WHERE deletes_of IS NOT NULL`).Scan(&named); err != nil {
		t.Fatal(err)
	}
	if named < 2 {
		t.Fatalf("the load's delete files name at most %d tail files, want 2 (the first load's and the second's)", named)
	}

	// A file server with an empty cache rebuilds the load's tail files from Kafka and
	// its delete files from Postgres (the index's keys and the tail files' recorded ones).
	rc.restart("fileserver", "fs-1")
	loadLive("after a file server restart")

	// The tail committed: ranges close within 200ms again once the indexer reopens them.
	if _, err := rc.Member("idx-1").Admin().AlterTable(ctx, &adminv1.AlterTableRequest{Name: "prices",
		SetProperties: map[string]string{"mink.range.max-age": "200ms"}}); err != nil {
		t.Fatalf("AlterTable: %v", err)
	}
	rc.restart("indexer", "idx-1")
	rc.waitCommitted("prices", ends)
	tbl, err := regLoad(ctx, rc.catalog, "prices")
	if err != nil {
		t.Fatal(err)
	}
	got, err := regCommitted(tbl)
	if err != nil || !maps.Equal(got, ends) {
		t.Fatalf("committed %v (%v), want %v", got, err, ends)
	}
	checkUpsertSnapshots(t, tbl, all)
}

// upsertJSONKey is a key {id, region} in JSON, in one of several encodings: schema id
// ids[0] or ids[1] (the second only once registered), fields in either order, other
// whitespace, a null field of the second schema.
func upsertJSONKey(rng *rand.Rand, ids []int, id int, region string) []byte {
	texts := []string{`{"id":%d,"region":%q}`, " { \"id\" :\n%d ,\t\"region\": %q } "}
	text := texts[rng.IntN(len(texts))]
	if rng.IntN(2) == 0 {
		text = `{"region":%[2]q,"id":%[1]d}`
	}
	schema := ids[rng.IntN(len(ids))]
	if schema == ids[len(ids)-1] && len(ids) > 1 && rng.IntN(2) == 0 {
		text = `{"note":null,"region":%[2]q,"id":%[1]d}`
	}
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(schema))
	return fmt.Appendf(b, text, id, region)
}

// TestUpsertDecodedKeys: an upsert table whose keys are JSON Schema (key_format): the
// key is the decoded key, so one key produced in several encodings (two schema ids,
// fields in either order, other whitespace, a null field) is one row with its latest
// value, through an evolution of the key schema mid-stream, in committed snapshots,
// live loads with a tail, and assembled files. A key that does not decode (no schema id
// prefix) is a key of its own, its bytes.
func TestUpsertDecodedKeys(t *testing.T) {
	rc := newRegCluster(t, true)
	const parts = 2
	rc.Kafka.CreateTopic("profiles", parts, nil)
	const (
		keyV1 = `{"type":"object","properties":{"id":{"type":"integer"},"region":{"type":"string"}}}`
		keyV2 = `{"type":"object","properties":{"region":{"type":"string"},"id":{"type":"integer"},"note":{"type":"string"}}}`
	)
	ids := []int{rc.reg.register("profiles-key", sr.Schema{Schema: keyV1, Type: sr.TypeJSON})}
	jsonKeys := adminv1.RecordFormat_RECORD_FORMAT_JSON_SCHEMA
	raw := adminv1.RecordFormat_RECORD_FORMAT_RAW
	rc.createTable(&adminv1.CreateTableRequest{Name: "profiles", Format: raw, KeyFormat: jsonKeys,
		Mode: adminv1.TableMode_TABLE_MODE_UPSERT, Properties: regProps("mink.live.reuse-ms", "0")})
	rc.createTable(&adminv1.CreateTableRequest{Name: "profiles_merged", Topic: "profiles", Format: raw, KeyFormat: jsonKeys,
		Mode: adminv1.TableMode_TABLE_MODE_UPSERT, Properties: regProps("mink.live-load", "false",
			"mink.assembly.target-bytes", "65536", "mink.assembly.tier-files", "2", "mink.maintenance.interval", "100ms")})

	// logical keeps each record with its key as the test means it: the decoded fields,
	// or the bytes of a key that does not decode.
	var logical []*kgo.Record
	rng := rand.New(rand.NewPCG(19, 21))
	ends := map[int32]int64{}
	produce := func(round, n int) {
		var recs, keys []*kgo.Record
		for i := range n {
			id, region := rng.IntN(12), []string{"eu", "us"}[rng.IntN(2)]
			r := &kgo.Record{Topic: "profiles", Partition: int32(rng.IntN(parts)),
				Key: upsertJSONKey(rng, ids, id, region), Value: fmt.Appendf(nil, "v%d.%d", round, i)}
			k := fmt.Sprintf("%d/%s", id, region)
			undecoded := rng.IntN(15) == 0
			if undecoded {
				r.Key = fmt.Appendf(nil, "legacy-%d", rng.IntN(3)) // no schema id prefix
				k = "raw:" + string(r.Key)
			}
			if rng.IntN(8) == 0 {
				r.Value = nil
			}
			l := &kgo.Record{Key: []byte(k), Value: r.Value}
			if undecoded && r.Value != nil {
				l.Value = []byte{} // an error row: its value column is null
			}
			recs = append(recs, r)
			keys = append(keys, l)
		}
		recs = rc.produce(recs...)
		for i, r := range recs {
			keys[i].Partition, keys[i].Offset = r.Partition, r.Offset
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
		logical = append(logical, keys...)
	}
	keyOf := func(cols map[string]arrow.Array, i int) string {
		if k, ok := regCell(cols[tableschema.ColumnKafkaKeyDecoded], i).(map[string]any); ok {
			return fmt.Sprintf("%v/%v", k["id"], k["region"])
		}
		key, _ := regCell(cols[tableschema.ColumnKafkaKey], i).([]byte)
		return "raw:" + string(key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// check reads every snapshot of tbl as the map from Kafka of what it covers.
	check := func(tbl *table.Table) {
		t.Helper()
		checkUpsertSnapshotListBy(t, tbl, tbl.Metadata().Snapshots(), logical, keyOf)
	}

	produce(0, 80)
	rc.waitCommitted("profiles", ends)
	// The key's second schema: records from here on use either id, and the table
	// evolves (a key field "note") when the first of them is indexed.
	ids = append(ids, rc.reg.register("profiles-key", sr.Schema{Schema: keyV2, Type: sr.TypeJSON}))
	for round := 1; round < 4; round++ {
		produce(round, 80)
		for _, name := range []string{"profiles", "profiles_merged"} {
			rc.waitCommitted(name, ends)
		}
	}
	tbl, err := regLoad(ctx, rc.catalog, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	check(tbl)
	if typ := regColumnType(tbl, tableschema.ColumnKafkaKeyDecoded); !strings.Contains(typ, "note") {
		t.Errorf("%s is %s after the key's second schema", tableschema.ColumnKafkaKeyDecoded, typ)
	}

	// A tail of updates and tombstones in other encodings, beyond what is committed: a
	// live load reads it with the same keys (ranges stay open meanwhile).
	if _, err := rc.Member("idx-1").Admin().AlterTable(ctx, &adminv1.AlterTableRequest{Name: "profiles",
		SetProperties: map[string]string{"mink.range.max-age": "1h"}}); err != nil {
		t.Fatalf("AlterTable: %v", err)
	}
	produce(4, 20) // closes the open ranges as before, with a round of their own
	rc.waitCommitted("profiles", ends)
	committed := maps.Clone(ends)
	produce(5, 40)
	live, err := regLoad(ctx, rc.catalog, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	cur := live.CurrentSnapshot()
	if base, err := regCommitted(live); err != nil || cur.Summary.Properties["mink.live"] != "true" || !maps.Equal(base, committed) {
		t.Fatalf("the load is not live with a tail beyond %v: base %v (%v), %v", committed, base, err, cur.Summary.Properties)
	}
	check(live)

	merged := waitAssembled(ctx, t, rc.catalog, "profiles_merged", 30*time.Second)
	check(merged)
}
