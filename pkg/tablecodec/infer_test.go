package tablecodec_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/minkhq/mink/pkg/jsoninfer"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Inference makes a version once however many indexers meet a new field at once, never
// with conflicting ids, and at most tableschema.InferMaxVersionsPerHour an hour: past it
// the table stays as it is (the new fields wait in _mink_unfit).
func TestInferOnceAndBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fields, in := jsoninfer.First(nil)
	tbl, err := tables.CreateVersioned(f.ctx, f.db, tables.Table{Name: "inf", Spec: tableschema.Spec{Format: tableschema.FormatJSON, Infer: in}}, 1, fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Go(func() {
			v, err := f.codecs.Infer(f.ctx, nil, tbl, []byte(`{"a": 1, "b": {"c": "x"}}`), "partition 0 offset 0")
			if err != nil {
				t.Error(err)
			}
			got[i] = v.ID
		})
	}
	wg.Wait()
	vs, err := tables.Versions(f.ctx, f.db, tbl.ID)
	if err != nil || len(vs) != 2 {
		t.Fatalf("%d versions after eight indexers met the same fields: %v", len(vs), err)
	}
	for _, id := range got {
		if id != 1 {
			t.Errorf("an indexer got version %d", id)
		}
	}
	// One version per new field until the hour's bound.
	for i := len(vs); i < tableschema.InferMaxVersionsPerHour+5; i++ {
		v, err := f.codecs.Infer(f.ctx, nil, tbl, fmt.Appendf(nil, `{"f%d": %d}`, i, i), "x")
		if err != nil {
			t.Fatal(err)
		}
		want := min(i, tableschema.InferMaxVersionsPerHour)
		if v.ID != want {
			t.Fatalf("field %d: version %d, want %d", i, v.ID, want)
		}
	}
	vs, _ = tables.Versions(f.ctx, f.db, tbl.ID)
	seen := map[int]string{}
	for _, v := range vs {
		for _, fl := range v.Schema.Fields() {
			if name, ok := seen[fl.ID]; ok && name != fl.Name {
				t.Fatalf("field id %d is %s and %s", fl.ID, name, fl.Name)
			}
			seen[fl.ID] = fl.Name
		}
	}
}
