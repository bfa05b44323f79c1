package icebergmeta_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// store is an in-memory metadata store standing in for mink_meta_files.
type store map[string][]byte

func (s store) MetaFile(_ context.Context, key string) ([]byte, error) {
	b, ok := s[key]
	if !ok {
		return nil, fmt.Errorf("no file %s", key)
	}
	return b, nil
}

func (s store) put(res *icebergmeta.Result) {
	for _, f := range res.Files {
		if _, ok := s[f.Key]; ok {
			panic("file written twice: " + f.Key)
		}
		s[f.Key] = f.Content
	}
}

func testTable(t *testing.T, props map[string]string) icebergmeta.Table {
	t.Helper()
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "id", Type: "long"}, {Name: "msg", Type: "string"}}}
	sc, err := spec.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	return icebergmeta.Table{Namespace: "ns", Name: "events", Schema: sc, Properties: props}
}

func file(p int32, start, end, records int64) icebergmeta.DataFile {
	sha := fmt.Sprintf("%064x", start*1000+end)
	stats, _ := json.Marshal([]parquetbuild.ColumnStats{
		{FieldID: 1, ValueCount: records, NullCount: 0, LowerBound: le64(start), UpperBound: le64(end - 1), ColumnSize: 10},
		{FieldID: 2, ValueCount: records, NullCount: records, ColumnSize: 3},
	})
	settings, _ := json.Marshal(parquetbuild.DefaultSettings())
	return icebergmeta.DataFile{
		Key: layout.DataKey("ns", "events", p, start, end, sha), Partition: p, Start: start, End: end,
		Records: records, Size: 1000 + records, SHA256: sha, Settings: settings, Stats: stats,
	}
}

func le64(v int64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

// created stores a new table's first metadata in s and returns it as the base of the
// next commit.
func created(t *testing.T, s store, tbl icebergmeta.Table) icebergmeta.Base {
	t.Helper()
	res, err := icebergmeta.Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	return current(t, s, res)
}

// current parses the metadata JSON of res back, as any reader would.
func current(t *testing.T, s store, res *icebergmeta.Result) icebergmeta.Base {
	t.Helper()
	md, err := table.ParseMetadataBytes(s[res.Key])
	if err != nil {
		t.Fatalf("parse metadata %s: %v", res.Key, err)
	}
	return icebergmeta.Base{Version: res.Version, Key: res.Key, Metadata: md}
}

// files reads the data files of the current snapshot from the stored bytes.
func files(t *testing.T, s store, md table.Metadata) map[string]iceberg.DataFile {
	t.Helper()
	out := map[string]iceberg.DataFile{}
	snap := md.CurrentSnapshot()
	if snap == nil {
		return out
	}
	key, _ := layout.KeyOf(snap.ManifestList)
	ms, err := iceberg.ReadManifestList(bytes.NewReader(s[key]))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		mk, _ := layout.KeyOf(m.FilePath())
		es, err := iceberg.ReadManifest(m, bytes.NewReader(s[mk]), true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if _, dup := out[e.DataFile().FilePath()]; dup {
				t.Fatalf("file %s listed twice", e.DataFile().FilePath())
			}
			out[e.DataFile().FilePath()] = e.DataFile()
		}
	}
	return out
}

func summaryInt(t *testing.T, md table.Metadata, k string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(md.CurrentSnapshot().Summary.Properties[k], 10, 64)
	if err != nil {
		t.Fatalf("summary %s: %v", k, err)
	}
	return v
}

func TestCommitLifecycle(t *testing.T) {
	ctx := context.Background()
	s := store{}
	r := icebergmeta.NewReader(s)
	tbl := testTable(t, map[string]string{table.ManifestMinMergeCountKey: "4", "user.prop": "x"})

	res, err := icebergmeta.Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base := current(t, s, res)
	if base.Metadata.CurrentSnapshot() != nil || base.Metadata.Location() != "s3://mink/ns/events" || base.Metadata.Version() != 2 {
		t.Fatalf("initial metadata: snapshot %v location %s version %d", base.Metadata.CurrentSnapshot(), base.Metadata.Location(), base.Metadata.Version())
	}
	if !icebergmeta.IsWriterKey("ns", "events", res.Key) {
		t.Fatalf("%s is not recognised as a writer key", res.Key)
	}
	uuid := base.Metadata.TableUUID()
	spec := base.Metadata.PartitionSpec()
	if spec.NumFields() != 1 || spec.Field(0).Name != tableschema.ColumnKafkaPartition {
		t.Fatalf("spec: %v", spec)
	}

	now := time.Now()
	// Six appends of two partitions: manifests merge once four small ones are carried.
	var all []icebergmeta.DataFile
	for i := int64(0); i < 6; i++ {
		add := []icebergmeta.DataFile{file(0, i*10, i*10+10, 10), file(1, i*5, i*5+5, 4)}
		all = append(all, add...)
		res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{
			Operation: table.OpAppend, Add: add, Now: now.Add(time.Duration(i) * time.Second),
			Coverage: map[int32]icebergmeta.Coverage{0: {0, i*10 + 10}, 1: {0, i*5 + 5}},
		})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		s.put(res)
		base = current(t, s, res)
	}
	md := base.Metadata
	if md.TableUUID() != uuid {
		t.Fatal("table uuid changed")
	}
	got := files(t, s, md)
	if len(got) != len(all) {
		t.Fatalf("%d files in the current snapshot, want %d", len(got), len(all))
	}
	for _, f := range all {
		df, ok := got[f.URI()]
		if !ok {
			t.Fatalf("missing %s", f.Key)
		}
		if df.Count() != f.Records || df.FileSizeBytes() != f.Size || df.Partition()[spec.Field(0).FieldID] != f.Partition {
			t.Fatalf("file %s: count %d size %d partition %v", f.Key, df.Count(), df.FileSizeBytes(), df.Partition())
		}
		if df.ValueCounts()[1] != f.Records || df.NullValueCounts()[2] != f.Records || !bytes.Equal(df.LowerBoundValues()[1], le64(f.Start)) {
			t.Fatalf("file %s: column stats %v %v %v", f.Key, df.ValueCounts(), df.NullValueCounts(), df.LowerBoundValues())
		}
	}
	if n := summaryInt(t, md, "total-records"); n != 6*14 {
		t.Fatalf("total-records %d", n)
	}
	if n := summaryInt(t, md, "total-data-files"); n != 12 {
		t.Fatalf("total-data-files %d", n)
	}
	cov, err := icebergmeta.ParseCoverage(md.CurrentSnapshot().Summary)
	if err != nil || cov[0] != (icebergmeta.Coverage{0, 60}) || cov[1] != (icebergmeta.Coverage{0, 30}) {
		t.Fatalf("coverage %v %v", cov, err)
	}
	key, _ := layout.KeyOf(md.CurrentSnapshot().ManifestList)
	ms, _ := iceberg.ReadManifestList(bytes.NewReader(s[key]))
	if len(ms) >= 6 {
		t.Fatalf("%d manifests after 6 appends with min-count-to-merge 4: none merged", len(ms))
	}
	if n := len(md.Snapshots()); n != 6 {
		t.Fatalf("%d snapshots", n)
	}
	if slices.Collect(md.SnapshotLogs())[5].SnapshotID != md.CurrentSnapshot().SnapshotID {
		t.Fatal("snapshot log does not end at the current snapshot")
	}
	if n := len(slices.Collect(md.PreviousFiles())); n != 6 {
		t.Fatalf("metadata log has %d entries, want 6", n)
	}
	if md.Properties()["user.prop"] != "x" {
		t.Fatalf("properties %v", md.Properties())
	}

	// Replace: the first three files of partition 0 become one; rows unchanged.
	merged := file(0, 0, 30, 30)
	old := []icebergmeta.DataFile{all[0], all[2], all[4]}
	res, err = icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{
		Operation: table.OpReplace, Add: []icebergmeta.DataFile{merged}, Remove: old, Now: now.Add(10 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base = current(t, s, res)
	got = files(t, s, base.Metadata)
	if len(got) != 10 {
		t.Fatalf("%d files after replace", len(got))
	}
	for _, f := range old {
		if _, ok := got[f.URI()]; ok {
			t.Fatalf("replaced %s still live", f.Key)
		}
	}
	if n := summaryInt(t, base.Metadata, "total-records"); n != 6*14 {
		t.Fatalf("total-records %d after replace", n)
	}
	if c, _ := icebergmeta.ParseCoverage(base.Metadata.CurrentSnapshot().Summary); c[0] != (icebergmeta.Coverage{0, 60}) {
		t.Fatalf("coverage not carried: %v", c)
	}

	// Removing a file that is not live fails and changes nothing.
	_, err = icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{Operation: table.OpDelete, Remove: old[:1], Now: now.Add(11 * time.Second)})
	if !errors.Is(err, icebergmeta.ErrNotLive) {
		t.Fatalf("remove of a replaced file: %v", err)
	}

	// Delete: the files of partition 1 below offset 15.
	res, err = icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{
		Operation: table.OpDelete, Remove: []icebergmeta.DataFile{all[1], all[3], all[5]}, Now: now.Add(12 * time.Second),
		Coverage: map[int32]icebergmeta.Coverage{1: {15, 30}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base = current(t, s, res)
	if n := summaryInt(t, base.Metadata, "total-records"); n != 6*14-12 {
		t.Fatalf("total-records %d after delete", n)
	}
	if n := summaryInt(t, base.Metadata, "deleted-records"); n != 12 {
		t.Fatalf("deleted-records %d", n)
	}

	// Expiry: an hour later every snapshot but the newest MinKeep goes, in a metadata-only
	// version; the current snapshot is untouched.
	tbl.Properties[table.MinSnapshotsToKeepKey] = "2"
	cur := base.Metadata.CurrentSnapshot().SnapshotID
	res, err = icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{Now: now.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base = current(t, s, res)
	if n := len(base.Metadata.Snapshots()); n != 2 || base.Metadata.CurrentSnapshot().SnapshotID != cur || len(res.Expired) != 6 {
		t.Fatalf("after expiry: %d snapshots, %d expired", n, len(res.Expired))
	}
	if len(files(t, s, base.Metadata)) != 7 {
		t.Fatal("expiry changed the current files")
	}
	// The log, refs and current snapshot name only snapshots still there, in both forms
	// a load serves.
	consistent(t, "after expiry", s[base.Key])
	refsJSON, err := icebergmeta.RefsOnly(s[base.Key])
	if err != nil {
		t.Fatal(err)
	}
	consistent(t, "after expiry, refs", refsJSON)
	// Nothing more to do: no version.
	if _, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{Now: now.Add(2 * time.Hour)}); !errors.Is(err, icebergmeta.ErrNoChange) {
		t.Fatalf("empty commit: %v", err)
	}

	// Referenced names exactly what the two live snapshots and the metadata log need.
	refs, err := r.Referenced(ctx, base.Metadata, base.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs.Data) != 10 { // the current 7, plus partition 1's three in the previous snapshot
		t.Fatalf("%d referenced data files", len(refs.Data))
	}
	for k := range refs.Meta {
		if _, ok := s[k]; !ok {
			t.Fatalf("referenced %s does not exist", k)
		}
		if !icebergmeta.IsWriterKey("ns", "events", k) {
			t.Fatalf("%s not recognised as a writer key", k)
		}
	}
	var unref []string
	for k := range maps.Keys(s) {
		if !refs.Meta[k] {
			unref = append(unref, k)
		}
	}
	sort.Strings(unref)
	if len(unref) == 0 {
		t.Fatal("expiry left nothing to collect")
	}
}

func TestExpirable(t *testing.T) {
	ctx := context.Background()
	s := store{}
	r := icebergmeta.NewReader(s)
	// Iceberg's own rule alone: live loads off (with them on, a replaced snapshot is also
	// kept for the live TTL: TestRetentionKeepsReplacedSnapshotsForLiveLoads).
	tbl := testTable(t, map[string]string{table.MinSnapshotsToKeepKey: "1", table.MaxSnapshotAgeMsKey: "1000", tables.PropLiveLoad: "false"})
	base := created(t, s, tbl)
	now := time.Now()
	for i := range 3 {
		res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{
			Operation: table.OpAppend, Add: []icebergmeta.DataFile{file(0, int64(i), int64(i+1), 1)}, Now: now.Add(time.Duration(i) * time.Minute),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.put(res)
		base = current(t, s, res)
		// With one snapshot kept, each commit expires its parent once it is old.
		if n := len(base.Metadata.Snapshots()); i > 0 && n != 1 {
			t.Fatalf("commit %d: %d snapshots", i, n)
		}
	}
}

// TestExpireUnreadable: a change expires the snapshots it names however young (the
// writer's repairs: they name files Kafka no longer yields), with or without a new
// snapshot; the one that stays current is kept, and the replaced current one may go.
func TestExpireUnreadable(t *testing.T) {
	ctx := context.Background()
	s := store{}
	r := icebergmeta.NewReader(s)
	tbl := testTable(t, nil) // retention keeps every snapshot of the last hour
	base := created(t, s, tbl)
	now := time.Now()
	var ids []int64
	for i := range 4 {
		res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{
			Operation: table.OpAppend, Add: []icebergmeta.DataFile{file(0, int64(i), int64(i+1), 1)}, Now: now.Add(time.Duration(i) * time.Second),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.put(res)
		base = current(t, s, res)
		ids = append(ids, res.Snapshot.SnapshotID)
	}
	snapshots := func() []int64 {
		var out []int64
		for _, sn := range base.Metadata.Snapshots() {
			out = append(out, sn.SnapshotID)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(xs ...int64) []int64 { slices.Sort(xs); return xs }
	// Metadata only: the current one stays whatever the change names.
	res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{Now: now.Add(5 * time.Second), Expire: []int64{ids[0], ids[3], 12345}})
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base = current(t, s, res)
	if !slices.Equal(res.Expired, []int64{ids[0]}) || !slices.Equal(snapshots(), sorted(ids[1], ids[2], ids[3])) || base.Metadata.CurrentSnapshot().SnapshotID != ids[3] {
		t.Fatalf("metadata-only expiry: expired %v, left %v", res.Expired, snapshots())
	}
	// With a new snapshot, the replaced current one goes too.
	res, err = icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{Operation: table.OpDelete,
		Remove: []icebergmeta.DataFile{file(0, 3, 4, 1)}, Now: now.Add(6 * time.Second), Expire: []int64{ids[3], ids[2]}})
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base = current(t, s, res)
	if !slices.Equal(res.Expired, sorted(ids[2], ids[3])) || !slices.Equal(snapshots(), sorted(ids[1], res.Snapshot.SnapshotID)) {
		t.Fatalf("expiry with a new snapshot: expired %v, left %v", res.Expired, snapshots())
	}
}

// TestSnapshotIDsFitJavaScript: every snapshot id Mink picks (commits and live loads)
// is in [1, 2^53-1], so JSON.parse reads it exactly; a table whose current snapshot has
// a larger id (picked before) keeps it, as parent and in its metadata, to the digit.
func TestSnapshotIDsFitJavaScript(t *testing.T) {
	ctx := context.Background()
	s := store{}
	r := icebergmeta.NewReader(s)
	tbl := testTable(t, map[string]string{table.MinSnapshotsToKeepKey: "1000"})
	res, err := icebergmeta.Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base := current(t, s, res)
	check := func(id int64) {
		if id < 1 || id > icebergmeta.MaxSnapshotID || id > 1<<53-1 {
			t.Fatalf("snapshot id %d is outside [1, 2^53-1]", id)
		}
	}
	for i := range int64(60) {
		res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{Operation: table.OpAppend, Now: time.Now(),
			Add: []icebergmeta.DataFile{file(0, i, i+1, 1)}, Coverage: map[int32]icebergmeta.Coverage{0: {Start: 0, End: i + 1}}})
		if err != nil {
			t.Fatal(err)
		}
		check(res.Snapshot.SnapshotID)
		s.put(res)
		base = current(t, s, res)
		live, err := icebergmeta.Live(ctx, r, tbl, base, icebergmeta.LiveChange{Add: []icebergmeta.DataFile{file(1, i, i+1, 1)}, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		check(live.Snapshot.SnapshotID)
	}
	if n := len(base.Metadata.Snapshots()); n != 60 {
		t.Fatalf("%d snapshots kept, want 60", n)
	}

	// An id from before: rewrite the current snapshot's id in its metadata JSON.
	const big = int64(4205664986623586685)
	old := strconv.FormatInt(base.Metadata.CurrentSnapshot().SnapshotID, 10)
	js := bytes.ReplaceAll(s[base.Key], []byte(":"+old), []byte(":"+strconv.FormatInt(big, 10)))
	md, err := table.ParseMetadataBytes(js)
	if err != nil || md.CurrentSnapshot() == nil || md.CurrentSnapshot().SnapshotID != big {
		t.Fatalf("metadata with a large id: %v", err)
	}
	res, err = icebergmeta.Commit(ctx, r, tbl, icebergmeta.Base{Version: base.Version, Key: base.Key, Metadata: md},
		icebergmeta.Change{Operation: table.OpAppend, Now: time.Now(), Add: []icebergmeta.DataFile{file(0, 60, 61, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	check(res.Snapshot.SnapshotID)
	if p := res.Snapshot.ParentSnapshotID; p == nil || *p != big || res.Metadata.SnapshotByID(big) == nil {
		t.Errorf("the large id was not kept: parent %v", p)
	}
	if !bytes.Contains(res.Files[len(res.Files)-1].Content, []byte(`"snapshot-id":4205664986623586685`)) {
		t.Error("the metadata JSON lost the large id's digits")
	}
}
