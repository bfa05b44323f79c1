package jsoninfer

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

func samples(docs ...string) []Sample {
	var out []Sample
	for i, d := range docs {
		out = append(out, Sample{Value: []byte(d), Since: "s" + string(rune('0'+i))})
	}
	return out
}

// typeOf is field name's type among fields, as Iceberg names it.
func typeOf(fields []iceberg.NestedField, name string) string {
	for _, f := range fields {
		if f.Name == name {
			return f.Type.String()
		}
	}
	return ""
}

func TestInferenceRules(t *testing.T) {
	fields, in := First(samples(
		`{"id": 1, "price": 2.5, "ok": true, "name": "a", "later": null, "tags": ["x"], "user": {"id": 7, "geo": {"lat": 1.5}},
		  "empty": {}, "none": [], "nulls": [null], "user-id": 3, "9lives": 1, "_mink_error": "x", "ID": 2, "big": 99999999999999999999, "e": 1e3}`,
		`{"later": "now", "items": [{"sku": "a"}, {"qty": 2}]}`,
	))
	want := map[string]string{
		"id": "long", "price": "double", "ok": "boolean", "name": "string", "later": "string",
		"tags": "list<string>", "user": "struct<3: id: optional long, 4: geo: optional struct<5: lat: optional double>>",
		"user_id": "long", "_9lives": "long", "__mink_error": "string", "ID_2": "long", "big": "double", "e": "double",
	}
	for name, typ := range want {
		got := typeOf(fields, name)
		if name == "user" {
			if !strings.HasPrefix(got, "struct<") || !strings.Contains(got, "geo") || !strings.Contains(got, "lat: optional double") {
				t.Errorf("user: %s", got)
			}
			continue
		}
		if got != typ {
			t.Errorf("%s: got %q, want %q", name, got, typ)
		}
	}
	for _, name := range []string{"empty", "none", "nulls"} {
		if typeOf(fields, name) != "" {
			t.Errorf("%s has a column before any value showed its type", name)
		}
	}
	if got := typeOf(fields, "items"); !strings.Contains(got, "sku") || !strings.Contains(got, "qty: optional long") {
		t.Errorf("items: %s (a list's element merges every element's fields)", got)
	}
	// Sanitised names keep their keys; the Kafka columns and _mink_unfit come last.
	keys := map[string]string{}
	for _, f := range fields {
		keys[f.Name] = in.Key(f)
	}
	for name, key := range map[string]string{"user_id": "user-id", "_9lives": "9lives", "__mink_error": "_mink_error", "ID_2": "ID", "id": "id"} {
		if keys[name] != key {
			t.Errorf("column %s reads key %q, want %q", name, keys[name], key)
		}
	}
	n := len(fields)
	if fields[n-7].Name != tableschema.ColumnMinkUnfit || fields[n-1].Name != tableschema.ColumnMinkError {
		t.Errorf("last fields %v", fields[n-7:])
	}
	if s := iceberg.NewSchema(0, fields...); s.HighestFieldID() < len(fields) {
		t.Errorf("ids %v", s)
	}
	for _, f := range fields {
		if f.Name == "later" && in.Since[f.ID] != "s1" || f.Name == "id" && in.Since[f.ID] != "s0" {
			t.Errorf("%s since %q", f.Name, in.Since[f.ID])
		}
	}
	// Every field id is unique.
	seen := map[int]bool{}
	var walk func(t iceberg.Type)
	check := func(id int) {
		if seen[id] {
			t.Errorf("id %d twice", id)
		}
		seen[id] = true
	}
	walk = func(ty iceberg.Type) {
		switch tt := ty.(type) {
		case *iceberg.StructType:
			for _, f := range tt.FieldList {
				check(f.ID)
				walk(f.Type)
			}
		case *iceberg.ListType:
			check(tt.ElementID)
			walk(tt.Element)
		}
	}
	walk(&iceberg.StructType{FieldList: fields})
}

func TestEmptyTopicHasKafkaColumnsOnly(t *testing.T) {
	fields, _ := First(nil)
	if len(fields) != 7 || fields[0].Name != tableschema.ColumnMinkUnfit {
		t.Fatalf("fields %v", fields)
	}
	if _, err := NewDecoder(fields, &tableschema.Inference{}); err != nil {
		t.Fatal(err)
	}
}

// decode decodes doc with the version of fields and returns the columns by name, the
// _mink_unfit text, and the problem.
func decode(t *testing.T, fields []iceberg.NestedField, in *tableschema.Inference, doc string) (map[string]rowcodec.Value, string, string, string) {
	t.Helper()
	d, err := NewDecoder(fields, in)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]rowcodec.Value, len(fields))
	reason, problem := d.Decode([]byte(doc), row)
	out := map[string]rowcodec.Value{}
	unfit := ""
	for i, f := range fields {
		out[f.Name] = row[i]
		if f.Name == tableschema.ColumnMinkUnfit && row[i].Valid {
			unfit = string(row[i].Bytes)
		}
	}
	return out, unfit, reason, problem
}

func TestDecodeKeepsWhatDoesNotFit(t *testing.T) {
	fields, in := First(samples(`{"n": 1, "s": "x", "o": {"a": 1}, "l": [1, 2], "user-id": 5}`))
	row, unfit, reason, problem := decode(t, fields, in,
		`{"n": 1.5, "s": 7, "o": {"a": "no", "b": true}, "l": [3, "four"], "user-id": 6, "new": {"x": 1}, "gone": null}`)
	if reason != "" {
		t.Fatal(reason)
	}
	if row["n"].Valid || row["s"].Valid || !row["o"].Valid || row["o"].Elems[0].Valid {
		t.Errorf("row %+v", row)
	}
	if l := row["l"]; !l.Valid || len(l.Elems) != 2 || l.Elems[0].Int != 3 || l.Elems[1].Valid {
		t.Errorf("list %+v", l)
	}
	if row["user_id"].Int != 6 {
		t.Errorf("user_id %+v", row["user_id"])
	}
	var kept map[string]json.RawMessage
	if err := json.Unmarshal([]byte(unfit), &kept); err != nil {
		t.Fatalf("_mink_unfit %q: %v", unfit, err)
	}
	for path, raw := range map[string]string{"n": "1.5", "s": "7", "o.a": `"no"`, "o.b": "true", "l[1]": `"four"`, "new": `{"x": 1}`} {
		if string(kept[path]) != raw {
			t.Errorf("_mink_unfit[%q] = %s, want %s (all: %s)", path, kept[path], raw, unfit)
		}
	}
	if _, ok := kept["gone"]; ok {
		t.Errorf("a null is kept: %s", unfit)
	}
	for _, name := range []string{`"n"`, `"s"`, `"o.a"`, `"l[1]"`} {
		if !strings.Contains(problem, name) {
			t.Errorf("problem %q does not name %s", problem, name)
		}
	}
	if strings.Contains(problem, `"new"`) {
		t.Errorf("problem %q names a field without a column", problem)
	}
	// Records that are not objects are error rows, as in every JSON table.
	for doc, want := range map[string]string{`[1]`: "not a JSON object (got an array)", `{"a":`: "", `7`: "not a JSON object (got an integer)"} {
		if _, _, reason, _ := decode(t, fields, in, doc); reason == "" || want != "" && reason != want {
			t.Errorf("%s: reason %q", doc, reason)
		}
	}
	if _, _, reason, _ := decode(t, fields, in, `{"n": 2}`); reason != "" {
		t.Error(reason)
	}
	d, _ := NewDecoder(fields, in)
	if reason, _ := d.Decode(nil, make([]rowcodec.Value, len(fields))); reason == "" {
		t.Error("a tombstone decoded")
	}
}

func TestNeedsAndGrowAgree(t *testing.T) {
	fields, in := First(samples(`{"a": 1, "o": {"x": 1}, "l": [{"k": 1}]}`))
	d, _ := NewDecoder(fields, in)
	for doc, want := range map[string]bool{
		`{"a": 2}`: false, `{"a": "s"}`: false, `{"a": 1.5}`: false, `{"b": null}`: false, `{"b": []}`: false,
		`{"b": 1}`: true, `{"o": {"y": 1}}`: true, `{"l": [{"k": 2}, {"j": 1}]}`: true, `[1]`: false, `{"o": 5}`: false,
	} {
		if got := d.Needs([]byte(doc)); got != want {
			t.Errorf("Needs(%s) = %v", doc, got)
		}
	}
	// Grown with a record, the version needs nothing more for it.
	cols, _ := tableschema.InferredColumns(fields)
	var columns []iceberg.NestedField
	for _, i := range cols {
		columns = append(columns, fields[i])
	}
	next := iceberg.NewSchema(0, fields...).HighestFieldID()
	doc := `{"b": 1, "o": {"y": {"z": [true]}}, "l": [{"j": "x"}]}`
	grown, changed := Grow(columns, in, []byte(doc), func() int { next++; return next }, "p")
	if !changed {
		t.Fatal("nothing grown")
	}
	d2, err := NewDecoder(append(grown, fields[len(cols):]...), in)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Needs([]byte(doc)) {
		t.Error("the grown version still needs the record")
	}
}

func TestBounds(t *testing.T) {
	// Field names are data (ids as keys): columns stop at the bound, the rest is kept.
	var b strings.Builder
	b.WriteString("{")
	for i := range tableschema.InferMaxColumns + 50 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + itoa(i) + `": 1`)
	}
	b.WriteString(`,"` + strings.Repeat("x", tableschema.InferMaxNameLen+1) + `": 1`)
	b.WriteString("}")
	fields, in := First(samples(b.String()))
	cols, _ := tableschema.InferredColumns(fields)
	if len(cols) != tableschema.InferMaxColumns {
		t.Errorf("%d columns", len(cols))
	}
	d, _ := NewDecoder(fields, in)
	if d.Needs([]byte(b.String())) {
		t.Error("a table at its bound needs more columns")
	}
	_, unfit, _, problem := decode(t, fields, in, b.String())
	if !strings.Contains(unfit, `"k`+itoa(tableschema.InferMaxColumns)+`":1`) && !strings.Contains(unfit, `"k`+itoa(tableschema.InferMaxColumns)+`":`) || !strings.Contains(unfit, "xxxx") || problem != "" {
		t.Errorf("past the bounds: unfit %.200s..., problem %q", unfit, problem)
	}
	// Nesting past the depth bound is no column.
	deep := strings.Repeat(`{"x": 1, "a":`, tableschema.InferMaxDepth+2) + "1" + strings.Repeat("}", tableschema.InferMaxDepth+2)
	fields, in = First(samples(deep))
	if got := fields[1].Type.String(); fields[1].Name != "a" || strings.Count(got, "struct<") != tableschema.InferMaxDepth-1 {
		t.Errorf("deep: %s %s", fields[1].Name, got)
	}
	if _, unfit, _, _ := decode(t, fields, in, deep); !strings.Contains(unfit, strings.Repeat("a.", tableschema.InferMaxDepth-1)+"a") {
		t.Errorf("deep: unfit %s", unfit)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Needs never changes the version's inference, which every decoder of it shares.
func TestNeedsLeavesTheVersionAlone(t *testing.T) {
	fields, in := First(samples(`{"a-b": 1}`))
	d, _ := NewDecoder(fields, in)
	if !d.Needs([]byte(`{"b-c": 1, "o": {"x-y": 2}}`)) {
		t.Fatal("no need for new fields")
	}
	if len(in.Keys) != 1 || len(in.Since) != 1 {
		t.Errorf("Needs wrote the version's inference: %+v", in)
	}
}
