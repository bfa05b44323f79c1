package fileserver_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/tables"
)

// loadedSnapshots reads a raw load: its snapshot ids, and that every snapshot the
// metadata names (current, refs, log) is among them.
func loadedSnapshots(t *testing.T, resp *http.Response, body []byte) []int64 {
	t.Helper()
	if resp.StatusCode != 200 {
		t.Fatalf("load: %d %s", resp.StatusCode, body)
	}
	var res struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	md, err := table.ParseMetadataBytes(res.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, s := range md.Snapshots() {
		ids = append(ids, s.SnapshotID)
		if s.SnapshotID > icebergmeta.MaxSnapshotID {
			t.Errorf("snapshot id %d is above 2^53-1", s.SnapshotID)
		}
	}
	named := []int64{md.CurrentSnapshot().SnapshotID}
	for _, r := range md.Refs() {
		named = append(named, r.SnapshotID)
	}
	for e := range md.SnapshotLogs() {
		named = append(named, e.SnapshotID)
	}
	for _, id := range named {
		if !slices.Contains(ids, id) {
			t.Errorf("the metadata names snapshot %d, not among its snapshots %v", id, ids)
		}
	}
	return ids
}

// TestLiveLoadRefsAndETag: a live load over three commits, through iceberg-go with
// snapshot-loading-mode=refs: the load snapshot alone, every record read. Raw: refs and
// all are consistent (log, refs, current all name included snapshots) and have their
// own ETags; the ETag is stable while the tail is (304 on If-None-Match) and changes
// when the tail moves or a commit lands.
func TestLiveLoadRefsAndETag(t *testing.T) {
	t.Parallel()
	// No reuse bound: a load sees the tail move at once (TestLiveLoadReuseBound has it).
	le := newLiveEnv(t, map[string]string{tables.PropLiveReuseMs: "0"}, false)
	n := le.startNodes(1)[0]
	for range 3 {
		le.produce(10)
		le.index(1 << 62)
		le.commit()
	}
	le.produce(5) // the tail

	cat, err := rest.NewCatalog(le.ctx, "mink", n.catalog, rest.WithAdditionalProps(iceberg.Properties{"snapshot-loading-mode": "refs"}))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		t.Fatal(err)
	}
	cur := tbl.Metadata().CurrentSnapshot()
	if got := len(tbl.Metadata().Snapshots()); got != 1 || cur == nil || cur.Summary.Properties["mink.live"] != "true" {
		t.Fatalf("iceberg-go in refs mode: %d snapshots, current %+v; want the load snapshot alone", got, cur)
	}
	at, err := tbl.Scan().ToArrowTable(le.ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "refs-mode scan", rowsOf(t, at), le.rows)
	at.Release()

	resp, body := get(t, "GET", le.loadURL(n), nil)
	all := loadedSnapshots(t, resp, body)
	allTag := resp.Header.Get("ETag")
	resp, body = get(t, "GET", le.loadURL(n)+"?snapshots=refs", nil)
	refs := loadedSnapshots(t, resp, body)
	refsTag := resp.Header.Get("ETag")
	if len(all) != 4 || !slices.Equal(refs, []int64{cur.SnapshotID}) || refsTag == allTag || refsTag == "" {
		t.Fatalf("all: %v (%s); refs: %v (%s); want 3 commits and the load, then the load alone, ETags apart", all, allTag, refs, refsTag)
	}

	// The same tail: the same answer, 304.
	for _, c := range []struct{ q, tag string }{{"", allTag}, {"?snapshots=refs", refsTag}} {
		resp, body := get(t, "GET", le.loadURL(n)+c.q, map[string]string{"If-None-Match": c.tag})
		if resp.StatusCode != 304 || len(body) != 0 {
			t.Errorf("%q, the same tail: %d with %d body bytes, want 304", c.q, resp.StatusCode, len(body))
		}
	}
	// The tail moves: a new answer.
	le.produce(2)
	resp, _ = get(t, "GET", le.loadURL(n), map[string]string{"If-None-Match": allTag})
	moved := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || moved == allTag {
		t.Errorf("after the tail moved: %d, ETag %s (was %s)", resp.StatusCode, moved, allTag)
	}
	// A commit of it all: the committed metadata, another ETag.
	le.index(1 << 62)
	le.commit()
	resp, body = get(t, "GET", le.loadURL(n), map[string]string{"If-None-Match": moved})
	if ids := loadedSnapshots(t, resp, body); len(ids) != 4 || resp.Header.Get("ETag") == moved {
		t.Errorf("after a commit: %d snapshots, ETag %s (was %s)", len(ids), resp.Header.Get("ETag"), moved)
	}
}
