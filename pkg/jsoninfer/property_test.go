package jsoninfer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"pgregory.net/rapid"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// genValue draws a JSON value whose shape at each path is fixed by the path (so every
// order of arrival agrees on it), with nulls anywhere, and sometimes a value of
// another kind (it must be kept in _mink_unfit, never lost).
func genValue(t *rapid.T, path string, depth int, odd bool) any {
	if rapid.IntRange(0, 9).Draw(t, path+"?null") == 0 {
		return nil
	}
	kind := int(hash(path) % 6)
	if depth >= 3 && kind >= 4 {
		kind = 0
	}
	if odd && rapid.IntRange(0, 19).Draw(t, path+"?odd") == 0 {
		kind = (kind + 1) % 4 // a value of another kind
	}
	switch kind {
	case 0:
		return rapid.Int64().Draw(t, path)
	case 1:
		return float64(rapid.IntRange(-1e6, 1e6).Draw(t, path)) + 0.5 // written with a fraction
	case 2:
		return rapid.Bool().Draw(t, path)
	case 3:
		return rapid.StringMatching(`[a-z é"\\]{0,6}`).Draw(t, path)
	case 4:
		m := map[string]any{}
		for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "c-d", "E"}), 0, 4, rapid.ID[string]).Draw(t, path+"{}") {
			m[k] = genValue(t, path+"."+k, depth+1, odd)
		}
		return m
	default:
		n := rapid.IntRange(0, 3).Draw(t, path+"[]")
		l := make([]any, n)
		for i := range l {
			l[i] = genValue(t, path+"[]", depth+1, odd)
		}
		return l
	}
}

func hash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// shape is a schema without ids or order: each field's path and type.
func shape(fields []iceberg.NestedField, in *tableschema.Inference) []string {
	var out []string
	var walk func(prefix string, t iceberg.Type)
	walk = func(prefix string, t iceberg.Type) {
		switch tt := t.(type) {
		case *iceberg.StructType:
			for _, f := range tt.FieldList {
				p := prefix + "." + in.Key(f) + "=" + f.Name
				out = append(out, p+":"+typeName(f.Type))
				walk(p, f.Type)
			}
		case *iceberg.ListType:
			walk(prefix+"[]", tt.Element)
		}
	}
	walk("", &iceberg.StructType{FieldList: fields})
	sort.Strings(out)
	return out
}

// Random documents arriving in random orders across partitions (each partition in its
// order): the final columns are the same (when each path keeps one kind), and every non-null value of every document is
// in its column or in _mink_unfit at the version in force when it arrived.
func TestPropertyOrderAndNothingLost(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.IntRange(1, 3).Draw(t, "partitions")
		// Values of another kind than their path's: kept, never lost, but the first
		// kind a path shows is its type (Iceberg widens no kind to another), so only
		// documents without them agree on the schema in every order.
		odd := rapid.Bool().Draw(t, "odd")
		var docs [][][]byte
		for p := range parts {
			var ds [][]byte
			for i := range rapid.IntRange(1, 6).Draw(t, fmt.Sprintf("docs%d", p)) {
				m := map[string]any{}
				for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"id", "price", "user", "tags", "x-y", "_mink_z", "9"}), 0, 7, rapid.ID[string]).Draw(t, fmt.Sprintf("keys%d.%d", p, i)) {
					m[k] = genValue(t, k, 1, odd)
				}
				b, _ := json.Marshal(m)
				ds = append(ds, b)
			}
			docs = append(docs, ds)
		}
		var first []string
		for run := range 2 {
			// An interleaving of the partitions.
			pos := make([]int, parts)
			cols := []iceberg.NestedField(nil)
			in := &tableschema.Inference{}
			next := 0
			nextID := func() int { next++; return next }
			for {
				var open []int
				for p := range parts {
					if pos[p] < len(docs[p]) {
						open = append(open, p)
					}
				}
				if len(open) == 0 {
					break
				}
				p := open[rapid.IntRange(0, len(open)-1).Draw(t, fmt.Sprintf("pick%d", run))]
				doc := docs[p][pos[p]]
				pos[p]++
				cols, _ = Grow(cols, in, doc, nextID, "")
				fields := tableschema.InferredFields(cols, next+100)
				checkNothingLost(t, fields, in, doc)
			}
			s := shape(cols, in)
			if run == 0 {
				first = s
			} else if !odd && strings.Join(s, "\n") != strings.Join(first, "\n") {
				t.Fatalf("orders disagree:\n%s\n---\n%s", strings.Join(first, "\n"), strings.Join(s, "\n"))
			}
		}
	})
}

// checkNothingLost decodes doc and checks that each of its non-null leaves is in a column
// (equal) or in _mink_unfit (as written).
func checkNothingLost(t *rapid.T, fields []iceberg.NestedField, in *tableschema.Inference, doc []byte) {
	d, err := NewDecoder(fields, in)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]rowcodec.Value, len(fields))
	if reason, _ := d.Decode(doc, row); reason != "" {
		t.Fatalf("%s: %s", doc, reason)
	}
	cols, unfit := tableschema.InferredColumns(fields)
	kept := map[string]json.RawMessage{}
	if row[unfit].Valid {
		if err := json.Unmarshal(row[unfit].Bytes, &kept); err != nil {
			t.Fatalf("_mink_unfit %s: %v", row[unfit].Bytes, err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	st := &iceberg.StructType{}
	top := rowcodec.Value{Valid: true}
	for _, i := range cols {
		st.FieldList = append(st.FieldList, fields[i])
		top.Elems = append(top.Elems, row[i])
	}
	var check func(path string, v any, typ iceberg.Type, got rowcodec.Value)
	check = func(path string, v any, typ iceberg.Type, got rowcodec.Value) {
		if v == nil {
			return
		}
		if raw, ok := kept[path]; ok {
			var back any
			if err := json.Unmarshal(raw, &back); err != nil || fmt.Sprint(back) != fmt.Sprint(v) {
				t.Fatalf("%s kept as %s, was %v", path, raw, v)
			}
			return
		}
		if typ == nil || !got.Valid {
			t.Fatalf("%s = %v lost (doc %s, unfit %v)", path, v, doc, kept)
		}
		switch tt := typ.(type) {
		case *iceberg.StructType:
			for k, sub := range v.(map[string]any) {
				var ft iceberg.Type
				var fv rowcodec.Value
				for j, f := range tt.FieldList {
					if in.Key(f) == k {
						ft, fv = f.Type, got.Elems[j]
					}
				}
				check(strings.TrimPrefix(path+"."+k, "."), sub, ft, fv)
			}
		case *iceberg.ListType:
			for i, e := range v.([]any) {
				check(fmt.Sprintf("%s[%d]", path, i), e, tt.Element, got.Elems[i])
			}
		case iceberg.Int64Type:
			if float64(got.Int) != v.(float64) {
				t.Fatalf("%s = %d, was %v", path, got.Int, v)
			}
		case iceberg.Float64Type:
			if got.Float != v.(float64) {
				t.Fatalf("%s = %v, was %v", path, got.Float, v)
			}
		case iceberg.BooleanType:
			if (got.Int == 1) != v.(bool) {
				t.Fatalf("%s = %d, was %v", path, got.Int, v)
			}
		case iceberg.StringType:
			if string(got.Bytes) != v.(string) {
				t.Fatalf("%s = %q, was %q", path, got.Bytes, v)
			}
		}
	}
	check("", m, st, top)
}
