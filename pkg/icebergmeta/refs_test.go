package icebergmeta_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
)

// consistent fails t unless every snapshot the metadata names (current, refs, log,
// statistics) is among its snapshots; it returns the snapshot ids.
func consistent(t *testing.T, what string, metadata []byte) []int64 {
	t.Helper()
	var md struct {
		Current   *int64 `json:"current-snapshot-id"`
		Snapshots []struct {
			ID int64 `json:"snapshot-id"`
		} `json:"snapshots"`
		Refs map[string]struct {
			ID int64 `json:"snapshot-id"`
		} `json:"refs"`
		Log []struct {
			ID int64 `json:"snapshot-id"`
		} `json:"snapshot-log"`
	}
	if err := json.Unmarshal(metadata, &md); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var ids []int64
	for _, s := range md.Snapshots {
		ids = append(ids, s.ID)
	}
	named := map[string]int64{}
	if md.Current != nil && *md.Current >= 0 {
		named["current-snapshot-id"] = *md.Current
	}
	for n, r := range md.Refs {
		named["ref "+n] = r.ID
	}
	for i, e := range md.Log {
		named["snapshot-log "+string(rune('0'+i))] = e.ID
	}
	for n, id := range named {
		if !slices.Contains(ids, id) {
			t.Errorf("%s: %s names snapshot %d, not among %v", what, n, id, ids)
		}
	}
	if _, err := table.ParseMetadataBytes(metadata); err != nil {
		t.Errorf("%s: iceberg-go refuses it: %v", what, err)
	}
	return ids
}

// TestRefsOnly: snapshots=refs keeps main's snapshot alone (a live load's included),
// with a consistent log; metadata that has nothing else comes back as it is.
func TestRefsOnly(t *testing.T) {
	ctx := context.Background()
	s := store{}
	r := icebergmeta.NewReader(s)
	tbl := testTable(t, nil)
	res, err := icebergmeta.Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base := current(t, s, res)
	if got, err := icebergmeta.RefsOnly(s[base.Key]); err != nil || !bytes.Equal(got, s[base.Key]) {
		t.Errorf("no snapshot: changed (%v)", err)
	}
	for i := range int64(4) {
		res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{Operation: table.OpAppend, Now: time.Now(),
			Add: []icebergmeta.DataFile{file(0, i, i+1, 1)}, Coverage: map[int32]icebergmeta.Coverage{0: {Start: 0, End: i + 1}}})
		if err != nil {
			t.Fatal(err)
		}
		s.put(res)
		base = current(t, s, res)
		if i == 0 {
			if got, err := icebergmeta.RefsOnly(s[base.Key]); err != nil || !bytes.Equal(got, s[base.Key]) {
				t.Errorf("one snapshot: changed (%v)", err)
			}
		}
	}
	all := consistent(t, "committed", s[base.Key])
	if len(all) != 4 {
		t.Fatalf("%d snapshots committed", len(all))
	}
	refs, err := icebergmeta.RefsOnly(s[base.Key])
	if err != nil {
		t.Fatal(err)
	}
	cur := base.Metadata.CurrentSnapshot().SnapshotID
	if ids := consistent(t, "committed, refs", refs); !slices.Equal(ids, []int64{cur}) {
		t.Errorf("refs: snapshots %v, want main's %d", ids, cur)
	}
	again, _ := icebergmeta.RefsOnly(s[base.Key])
	if !bytes.Equal(again, refs) {
		t.Error("two filterings of the same metadata differ")
	}

	lv, err := icebergmeta.Live(ctx, r, tbl, base, icebergmeta.LiveChange{Add: []icebergmeta.DataFile{file(1, 0, 3, 3)}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	liveJSON := lv.Files[len(lv.Files)-1].Content
	if ids := consistent(t, "live", liveJSON); len(ids) != 5 {
		t.Errorf("live, all: %d snapshots, want 5", len(ids))
	}
	refs, err = icebergmeta.RefsOnly(liveJSON)
	if err != nil {
		t.Fatal(err)
	}
	ids := consistent(t, "live, refs", refs)
	if !slices.Equal(ids, []int64{lv.Snapshot.SnapshotID}) {
		t.Errorf("live, refs: snapshots %v, want the load snapshot %d", ids, lv.Snapshot.SnapshotID)
	}
	md, _ := table.ParseMetadataBytes(refs)
	if md.CurrentSnapshot() == nil || md.CurrentSnapshot().ManifestList != lv.Snapshot.ManifestList || md.TableUUID() != base.Metadata.TableUUID() {
		t.Errorf("live, refs: current %+v", md.CurrentSnapshot())
	}
	for _, bad := range []string{"", "[]", `{"snapshots": 3}`, `{"snapshots": [{"snapshot-id": "x"}, {"snapshot-id": 2}], "refs": {"main": {"snapshot-id": 2}}}`} {
		if _, err := icebergmeta.RefsOnly([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
