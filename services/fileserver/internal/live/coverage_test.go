package live

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// committed returns the metadata JSON of a table whose current snapshot covers
// partition 0 up to offset end.
func committed(t *testing.T, end int64) Base {
	t.Helper()
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "id", Type: "long"}}}
	sc, err := spec.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	tbl := icebergmeta.Table{Namespace: "ns", Name: "events", Schema: sc}
	created, err := icebergmeta.Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	content := func(res *icebergmeta.Result) []byte { return res.Files[len(res.Files)-1].Content }
	md, err := table.ParseMetadataBytes(content(created))
	if err != nil {
		t.Fatal(err)
	}
	settings, _ := json.Marshal(parquetbuild.DefaultSettings())
	sha := fmt.Sprintf("%064x", end)
	f := icebergmeta.DataFile{Key: layout.DataKey("ns", "events", 0, 0, end, sha), Partition: 0, Start: 0, End: end,
		Records: end, Size: 1000, SHA256: sha, Settings: settings, Stats: []byte("[]")}
	reader := icebergmeta.NewReader(icebergmeta.StoreFunc(func(context.Context, string) ([]byte, error) {
		return nil, fmt.Errorf("nothing stored")
	}))
	res, err := icebergmeta.Commit(context.Background(), reader, tbl, icebergmeta.Base{Version: 1, Key: created.Key, Metadata: md},
		icebergmeta.Change{Operation: table.OpAppend, Add: []icebergmeta.DataFile{f}, Now: time.Now(),
			Coverage: map[int32]icebergmeta.Coverage{0: {Start: 0, End: end}}})
	if err != nil {
		t.Fatal(err)
	}
	return Base{Key: res.Key, Content: content(res)}
}

// TestCoverageParsedOncePerKey: a metadata file's coverage is read from its JSON once;
// later loads of the same key take it from the cache (a key's bytes never change).
func TestCoverageParsedOncePerKey(t *testing.T) {
	covs, err := newCoverageCache()
	if err != nil {
		t.Fatal(err)
	}
	l := &Loader{covs: covs}
	tbl := tables.Table{Namespace: "ns", Name: "events"}
	base := committed(t, 42)
	cov, err := l.coverage(tbl, base)
	if err != nil {
		t.Fatal(err)
	}
	if want := (icebergmeta.Coverage{Start: 0, End: 42}); len(cov) != 1 || cov[0] != want {
		t.Fatalf("coverage %v, want partition 0: %v", cov, want)
	}
	// The same key again: not parsed (these bytes would not parse).
	again, err := l.coverage(tbl, Base{Key: base.Key, Content: []byte("not json")})
	if err != nil || again[0] != cov[0] {
		t.Fatalf("cached coverage: %v, %v", again, err)
	}
	// Another key is parsed, and a bad file is an error, not cached.
	if _, err := l.coverage(tbl, Base{Key: "ns/events/metadata/bad.metadata.json", Content: []byte("{")}); err == nil {
		t.Fatal("bad metadata parsed")
	}
	if l.covs.Contains("ns/events/metadata/bad.metadata.json") {
		t.Fatal("bad metadata cached")
	}
}
