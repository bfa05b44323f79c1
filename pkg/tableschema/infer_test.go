package tableschema

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

func TestAlterInferred(t *testing.T) {
	cols := []iceberg.NestedField{{ID: 1, Name: "user_id", Type: iceberg.PrimitiveTypes.Int64}, {ID: 2, Name: "n", Type: iceberg.PrimitiveTypes.Int64}}
	fields := InferredFields(cols, 2)
	v := Version{Spec: Spec{Format: FormatJSON, Infer: &Inference{Keys: map[int]string{1: "user-id"}}}, Schema: iceberg.NewSchema(0, fields...)}
	lastID := v.Schema.HighestFieldID()
	spec, out, err := v.Alter([]ColumnChange{
		{Rename: &Rename{Name: "user_id", NewName: "uid"}},
		{Rename: &Rename{Name: "n", NewName: "count"}},
		{Add: &Column{Name: "price", Type: "double"}},
		{Add: &Column{Name: "labels", Type: "list<string>", JSONPath: "the labels"}},
		{Optional: "uid"},
	}, lastID)
	if err != nil {
		t.Fatal(err)
	}
	in := spec.Infer
	if out[0].Name != "uid" || in.Key(out[0]) != "user-id" || out[1].Name != "count" || in.Key(out[1]) != "n" || out[0].ID != 1 {
		t.Errorf("renamed: %v %v", out[:2], in.Keys)
	}
	if out[2].Name != "price" || out[2].ID <= lastID || out[3].Name != "labels" || in.Key(out[3]) != "the labels" || out[4].Name != ColumnMinkUnfit {
		t.Errorf("added: %v", out)
	}
	if v.Spec.Infer.Keys[2] != "" {
		t.Error("Alter changed the version it was given")
	}
	for _, c := range []struct {
		ch   ColumnChange
		want string
	}{
		{ColumnChange{Widen: &Widen{Name: "n", Type: "double"}}, "cannot become double"},
		{ColumnChange{Add: &Column{Name: "ts", Type: "timestamp"}}, "reads boolean, long, double and string"},
		{ColumnChange{Add: &Column{Name: "N", Type: "long"}}, "exists already"},
		{ColumnChange{Add: &Column{Name: "k", Type: "long", JSONPath: "user-id"}}, "reads key"},
		{ColumnChange{Rename: &Rename{Name: "x", NewName: "y"}}, "no column"},
		{ColumnChange{Rename: &Rename{Name: "n", NewName: "_mink_x"}}, "reserved"},
	} {
		if _, _, err := v.Alter([]ColumnChange{c.ch}, lastID); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.ch, err, c.want)
		}
	}
}
