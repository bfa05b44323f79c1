package icebergmeta_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/tables"
)

// A live load's metadata: the committed snapshot plus one append of the tail, current on
// main, with the parent's manifests carried as they are; every new file under
// metadata/live/, none a writer key; the coverage extended by the tail; iceberg-go plans
// the committed files and the tail's.
func TestLive(t *testing.T) {
	ctx := context.Background()
	s := store{}
	r := icebergmeta.NewReader(s)
	tbl := testTable(t, nil)
	res, err := icebergmeta.Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	created := current(t, s, res)

	// A table with only its first (empty) metadata: the load is all tail.
	live, err := icebergmeta.Live(ctx, r, tbl, created, icebergmeta.LiveChange{
		Add:      []icebergmeta.DataFile{file(0, 0, 5, 5)},
		Coverage: map[int32]icebergmeta.Coverage{0: {Start: 0, End: 5}},
		Summary:  map[string]string{"mink.live": "true"},
		Now:      time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if live.Version != created.Version || live.Snapshot.ParentSnapshotID != nil ||
		live.Metadata.CurrentSnapshot().SnapshotID != live.Snapshot.SnapshotID {
		t.Fatalf("live over empty metadata: version %d, snapshot %+v", live.Version, live.Snapshot)
	}

	base := created
	for i := int64(0); i < 2; i++ {
		res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{
			Operation: table.OpAppend, Now: time.Now(),
			Add:      []icebergmeta.DataFile{file(0, i*10, i*10+10, 10), file(1, i*10, i*10+10, 10)},
			Coverage: map[int32]icebergmeta.Coverage{0: {Start: 0, End: i*10 + 10}, 1: {Start: 0, End: i*10 + 10}},
		})
		if err != nil {
			t.Fatal(err)
		}
		s.put(res)
		base = current(t, s, res)
	}
	parent := base.Metadata.CurrentSnapshot()
	tail := []icebergmeta.DataFile{file(0, 20, 25, 5), file(0, 25, 27, 2)}
	live, err = icebergmeta.Live(ctx, r, tbl, base, icebergmeta.LiveChange{
		Add:      tail,
		Coverage: map[int32]icebergmeta.Coverage{0: {Start: 0, End: 27}},
		Summary:  map[string]string{"mink.live": "true"},
		Now:      time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.put(live)
	if live.Version != base.Version {
		t.Errorf("live version %d, want the base's %d", live.Version, base.Version)
	}
	for _, f := range live.Files {
		if !icebergmeta.IsLiveKey("ns", "events", f.Key) || icebergmeta.IsWriterKey("ns", "events", f.Key) {
			t.Errorf("live file %s: live %v, writer %v", f.Key, icebergmeta.IsLiveKey("ns", "events", f.Key), icebergmeta.IsWriterKey("ns", "events", f.Key))
		}
	}
	if len(live.Files) != 3 { // tail manifest, manifest list, metadata JSON
		t.Errorf("%d live files, want 3", len(live.Files))
	}
	md := current(t, s, live).Metadata
	snap := md.CurrentSnapshot()
	if snap.ParentSnapshotID == nil || *snap.ParentSnapshotID != parent.SnapshotID || md.TableUUID() != base.Metadata.TableUUID() {
		t.Fatalf("live snapshot %+v: want parent %d and the same table", snap, parent.SnapshotID)
	}
	if len(md.Snapshots()) != len(base.Metadata.Snapshots())+1 {
		t.Errorf("%d snapshots, want the base's %d and one", len(md.Snapshots()), len(base.Metadata.Snapshots()))
	}
	cov, err := icebergmeta.ParseCoverage(snap.Summary)
	if err != nil || cov[0] != (icebergmeta.Coverage{Start: 0, End: 27}) || cov[1] != (icebergmeta.Coverage{Start: 0, End: 20}) {
		t.Errorf("live coverage %v %v", cov, err)
	}
	p := snap.Summary.Properties
	if p["mink.live"] != "true" || p["added-data-files"] != "2" || p["total-records"] != strconv.Itoa(40+7) {
		t.Errorf("live summary %v", p)
	}
	// The parent's manifests are carried unchanged: the live list names them.
	parentMs, _ := r.ManifestList(ctx, parent)
	liveMs, err := r.ManifestList(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range parentMs {
		if !slices.ContainsFunc(liveMs, func(l iceberg.ManifestFile) bool { return l.FilePath() == m.FilePath() }) {
			t.Errorf("parent manifest %s not carried", m.FilePath())
		}
	}
	got, err := r.SnapshotFiles(ctx, snap)
	if err != nil || len(got) != 6 {
		t.Fatalf("live snapshot files %v %v", got, err)
	}
	if d := files(t, s, md); len(d) != 6 {
		t.Fatalf("iceberg-go reads %d data files, want 6", len(d))
	}
}

// With live loads on, a snapshot replaced as current is kept for the live TTL (capped
// by the retention age) even when it is older than the age and beyond the newest kept:
// a load snapshot built on it keeps its files.
func TestRetentionKeepsReplacedSnapshotsForLiveLoads(t *testing.T) {
	ctx := context.Background()
	props := map[string]string{table.MinSnapshotsToKeepKey: "1", table.MaxSnapshotAgeMsKey: strconv.Itoa(int(time.Hour / time.Millisecond)),
		tables.PropLiveTTL: "10m"}
	if ret := icebergmeta.RetentionOf(props); ret.KeepSuperseded != 10*time.Minute {
		t.Fatalf("retention %+v, want replaced snapshots kept 10m", ret)
	}
	if ttl := icebergmeta.LiveTTLOf(map[string]string{table.MaxSnapshotAgeMsKey: "60000"}); ttl != time.Minute {
		t.Errorf("live TTL %v, want the 1m retention age", ttl)
	}
	if ret := icebergmeta.RetentionOf(map[string]string{tables.PropLiveLoad: "false"}); ret.KeepSuperseded != 0 {
		t.Errorf("retention with live loads off %+v", ret)
	}
	s := store{}
	r := icebergmeta.NewReader(s)
	tbl := testTable(t, props)
	res, err := icebergmeta.Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base := current(t, s, res)
	// A snapshot two hours older than t0: past the age. (Snapshot times never go back
	// before the metadata's last update, which is now: t0 is ahead.)
	t0 := time.Now().Add(3 * time.Hour)
	commit := func(at time.Time, i int64) {
		t.Helper()
		res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{
			Operation: table.OpAppend, Add: []icebergmeta.DataFile{file(0, i, i+1, 1)}, Now: at,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.put(res)
		base = current(t, s, res)
	}
	commit(t0.Add(-2*time.Hour), 0)
	old := base.Metadata.CurrentSnapshot().SnapshotID
	commit(t0, 1) // replaces the old one now: kept
	if base.Metadata.SnapshotByID(old) == nil {
		t.Fatal("the snapshot replaced just now was expired")
	}
	commit(t0.Add(5*time.Minute), 2) // replaced 5m ago: kept
	if base.Metadata.SnapshotByID(old) == nil {
		t.Fatal("a snapshot replaced 5m ago was expired (live TTL 10m)")
	}
	commit(t0.Add(11*time.Minute), 3) // replaced 11m ago: expired
	if base.Metadata.SnapshotByID(old) != nil {
		t.Fatal("a snapshot replaced 11m ago, two hours old, is still kept")
	}
}

// mink.history.max-snapshots caps the history however young it is (so a table committing
// every few hundred milliseconds loads in bounded metadata), and never drops what a live
// load names: a snapshot whose child rewrote its manifests (here a replace, as assembly
// makes) is kept for the live TTL, and every manifest and data file of a load built on
// the capped snapshots stays referenced by the kept ones.
func TestHistoryCapKeepsWhatLiveLoadsName(t *testing.T) {
	ctx := context.Background()
	props := map[string]string{tables.PropHistoryMaxSnapshots: "10", table.MinSnapshotsToKeepKey: "1", tables.PropLiveTTL: "10m"}
	if ret := icebergmeta.RetentionOf(props); ret.MaxSnapshots != 10 {
		t.Fatalf("retention %+v, want a cap of 10", ret)
	}
	if ret := icebergmeta.RetentionOf(nil); ret.MaxSnapshots != tables.DefaultProps.HistoryMaxSnapshots {
		t.Fatalf("default retention %+v, want a cap of %d", ret, tables.DefaultProps.HistoryMaxSnapshots)
	}
	s := store{}
	r := icebergmeta.NewReader(s)
	tbl := testTable(t, props)
	res, err := icebergmeta.Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base := current(t, s, res)
	now := time.Now()
	var added []icebergmeta.DataFile
	commit := func(ch icebergmeta.Change) {
		t.Helper()
		ch.Now = now
		now = now.Add(100 * time.Millisecond)
		res, err := icebergmeta.Commit(ctx, r, tbl, base, ch)
		if err != nil {
			t.Fatal(err)
		}
		s.put(res)
		base = current(t, s, res)
	}
	appendOne := func() {
		f := file(0, int64(len(added)), int64(len(added)+1), 1)
		added = append(added, f)
		commit(icebergmeta.Change{Operation: table.OpAppend, Add: []icebergmeta.DataFile{f}})
	}
	for range 30 {
		appendOne()
	}
	if n := len(base.Metadata.Snapshots()); n != 10 {
		t.Fatalf("30 appends in 3s kept %d snapshots, want the cap of 10", n)
	}
	// Live loads on two snapshots: the current one (about to be capped by appends), and
	// the one a replace will rewrite.
	var loads []*icebergmeta.Result
	liveOn := func() {
		t.Helper()
		l, err := icebergmeta.Live(ctx, r, tbl, base, icebergmeta.LiveChange{Add: []icebergmeta.DataFile{file(1, 0, 1, 1)}, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		s.put(l)
		loads = append(loads, l)
	}
	liveOn()
	for range 5 {
		appendOne()
	}
	liveOn()
	rewritten := base.Metadata.CurrentSnapshot().SnapshotID
	commit(icebergmeta.Change{Operation: table.OpReplace, Add: []icebergmeta.DataFile{file(0, 0, 3, 3)}, Remove: added[:3]})
	for range 20 {
		appendOne()
	}
	if base.Metadata.SnapshotByID(rewritten) == nil {
		t.Fatal("the snapshot a replace rewrote was capped within the live TTL")
	}
	if n := len(base.Metadata.Snapshots()); n > 11 {
		t.Errorf("%d snapshots kept, want the cap of 10 and the one a replace rewrote", n)
	}
	refs, err := r.Referenced(ctx, base.Metadata, base.Key)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range loads {
		ms, err := r.ManifestList(ctx, l.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			key, err := layout.KeyOf(m.FilePath())
			if err != nil {
				t.Fatal(err)
			}
			if icebergmeta.IsLiveKey("ns", "events", key) {
				continue // the load's own: it expires with it
			}
			if !refs.Meta[key] {
				t.Errorf("load %d names manifest %s, which no kept snapshot names: collection would delete it", i, key)
			}
			paths, err := r.LivePaths(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range paths {
				if k, _ := layout.KeyOf(p); !refs.Data[k] {
					t.Errorf("load %d names data file %s, which no kept snapshot names", i, k)
				}
			}
		}
	}
}
