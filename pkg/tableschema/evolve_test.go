package tableschema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

var (
	tInt    = iceberg.PrimitiveTypes.Int32
	tLong   = iceberg.PrimitiveTypes.Int64
	tString = iceberg.PrimitiveTypes.String
	tFloat  = iceberg.PrimitiveTypes.Float32
	tDouble = iceberg.PrimitiveTypes.Float64
)

func st(fs ...iceberg.NestedField) *iceberg.StructType { return &iceberg.StructType{FieldList: fs} }
func fld(name string, t iceberg.Type) iceberg.NestedField {
	return iceberg.NestedField{Name: name, Type: t}
}

var avroSpec = Spec{Format: FormatAvro, Value: &Decoding{Format: FormatAvro, Subject: "orders-value", Mode: ModePrefix}}

// A registry table's first version: value columns, then the Kafka columns with the
// decoded key after _kafka_key, ids in Iceberg's fresh order (maps: key, value).
func TestComposeGolden(t *testing.T) {
	spec := avroSpec
	spec.Key = &Decoding{Format: FormatAvro, Subject: "orders-key", Mode: ModePrefix}
	value := st(
		fld("id", tLong),
		fld("address", st(fld("city", tString), fld("zip", tInt))),
		fld("lines", &iceberg.ListType{Element: st(fld("sku", tString), fld("qty", tInt))}),
		fld("attrs", &iceberg.MapType{KeyType: tString, ValueType: tString}),
	)
	key := st(fld("id", tLong))
	fields, err := Compose(spec, value, key)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(iceberg.NewSchema(0, fields...))
	want := `{"type":"struct","schema-id":0,"identifier-field-ids":[],"fields":[
{"type":"long","id":1,"name":"id","required":false},
{"type":{"type":"struct","fields":[{"type":"string","id":12,"name":"city","required":false},{"type":"int","id":13,"name":"zip","required":false}]},"id":2,"name":"address","required":false},
{"type":{"type":"list","element-id":14,"element":{"type":"struct","fields":[{"type":"string","id":15,"name":"sku","required":false},{"type":"int","id":16,"name":"qty","required":false}]},"element-required":false},"id":3,"name":"lines","required":false},
{"type":{"type":"map","key-id":17,"key":"string","value-id":18,"value":"string","value-required":false},"id":4,"name":"attrs","required":false},
{"type":"int","id":5,"name":"_kafka_partition","required":true},
{"type":"long","id":6,"name":"_kafka_offset","required":true},
{"type":"timestamptz","id":7,"name":"_kafka_timestamp","required":true},
{"type":"binary","id":8,"name":"_kafka_key","required":false},
{"type":{"type":"struct","fields":[{"type":"long","id":19,"name":"id","required":false}]},"id":9,"name":"_kafka_key_decoded","required":false},
{"type":{"type":"list","element-id":20,"element":{"type":"struct","fields":[{"type":"string","id":21,"name":"key","required":true},{"type":"binary","id":22,"name":"value","required":false}]},"element-required":true},"id":10,"name":"_kafka_headers","required":false},
{"type":"string","id":11,"name":"_mink_error","required":false}]}`
	if g, w := canonicalJSON(t, got), canonicalJSON(t, []byte(want)); string(g) != string(w) {
		t.Errorf("got  %s\nwant %s", g, w)
	}
	// The input types are not modified.
	if value.FieldList[1].Type.(*iceberg.StructType).FieldList[0].ID != 0 {
		t.Error("Compose assigned ids to its input")
	}

	// A value that is not a record is the one column "value".
	fields, err = Compose(avroSpec, tString, nil)
	if err != nil || fields[0].Name != ColumnRawValue || !fields[0].Type.Equals(tString) {
		t.Fatalf("non-record root: %v %v", fields, err)
	}
	// JSON and raw tables compose exactly as Fields (frozen ids).
	js := Spec{Format: FormatJSON, Columns: []Column{{Name: "tags", Type: "list<string>"}}}
	a, _ := js.Fields()
	b, _ := Compose(js, nil, nil)
	if !iceberg.NewSchema(0, a...).Equals(iceberg.NewSchema(0, b...)) {
		t.Error("Compose of a JSON spec differs from Fields")
	}
}

func TestComposeRejectsBadNames(t *testing.T) {
	for _, c := range []struct {
		value *iceberg.StructType
		want  string
	}{
		{st(fld("_kafka_offset", tLong)), `field "_kafka_offset": names starting with _kafka_ are reserved`},
		{st(fld("_MINK_x", tLong)), `names starting with _mink_ are reserved`},
		{st(fld("Id", tLong), fld("id", tLong)), `columns "Id" and "id" have the same name ignoring case`},
		{st(fld("", tLong)), `empty name`},
	} {
		_, err := Compose(avroSpec, c.value, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compose(%v) = %v, want %q", c.value, err, c.want)
		}
	}
	if _, err := (Spec{Format: FormatRaw, Key: &Decoding{Format: FormatAvro, Subject: "k", Mode: ModePrefix}}).Fields(); err == nil {
		t.Error("Fields of a table with a key format succeeded")
	}
}

func firstVersion(t *testing.T, spec Spec, value, key iceberg.Type) Version {
	t.Helper()
	fields, err := Compose(spec, value, key)
	if err != nil {
		t.Fatal(err)
	}
	return Version{Spec: spec, Schema: iceberg.NewSchema(0, fields...)}
}

func TestEvolveAddsWidensAndKeepsIDs(t *testing.T) {
	v1 := st(fld("id", tInt), fld("price", iceberg.DecimalTypeOf(9, 2)), fld("ratio", tFloat),
		fld("addr", st(fld("city", tString))))
	v0 := firstVersion(t, avroSpec, v1, nil)
	last := HighestID(v0.Schema)

	// Version 2 of the writer schema: a new top-level field, a new nested field, widened
	// int, decimal and float.
	v2 := st(fld("id", tLong), fld("price", iceberg.DecimalTypeOf(20, 2)), fld("ratio", tDouble),
		fld("addr", st(fld("city", tString), fld("zip", tString))), fld("note", tString))
	fields, changed, conflicts := v0.Evolve(v2, nil, last)
	if !changed || len(conflicts) != 0 {
		t.Fatalf("changed %v conflicts %v", changed, conflicts)
	}
	s := iceberg.NewSchema(1, fields...)
	for name, want := range map[string]iceberg.Type{"id": tLong, "price": iceberg.DecimalTypeOf(20, 2), "ratio": tDouble} {
		f, _ := s.FindFieldByName(name)
		old, _ := v0.Schema.FindFieldByName(name)
		if !f.Type.Equals(want) || f.ID != old.ID {
			t.Errorf("%s: %v id %d, want %v id %d", name, f.Type, f.ID, want, old.ID)
		}
	}
	zip, ok := s.FindFieldByName("addr.zip")
	note, ok2 := s.FindFieldByName("note")
	if !ok || !ok2 || zip.ID <= last || note.ID <= last || zip.ID == note.ID {
		t.Fatalf("new fields zip %+v note %+v (last id %d)", zip, note, last)
	}
	// New value columns come before Mink's columns.
	names := []string{}
	for _, f := range fields {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); !strings.HasPrefix(got, "id,price,ratio,addr,note,_kafka_partition") {
		t.Errorf("column order %s", got)
	}
	// Every old id keeps its field.
	for _, f := range v0.Schema.Fields() {
		nf, ok := s.FindFieldByID(f.ID)
		if !ok || nf.Name != f.Name {
			t.Errorf("field %d %q became %+v", f.ID, f.Name, nf)
		}
	}

	// The evolved version covers both writers; the first version covers only the old.
	ev := Version{ID: 1, Spec: avroSpec, Schema: s}
	if !ev.Covers(v1, nil) || !ev.Covers(v2, nil) {
		t.Error("evolved version does not cover its writers")
	}
	if v0.Covers(v2, nil) {
		t.Error("first version covers a writer with new fields")
	}
	if !v0.Covers(v1, nil) {
		t.Error("first version does not cover its own writer")
	}
	// An old writer (narrower types, fewer fields) is covered by the evolved version.
	if _, changed, _ := ev.Evolve(v1, nil, HighestID(s)); changed {
		t.Error("merging the old writer changed the evolved version")
	}
}

func TestEvolveConflicts(t *testing.T) {
	v0 := firstVersion(t, avroSpec, st(fld("id", tInt), fld("tags", &iceberg.ListType{Element: tString}), fld("m", st(fld("a", tLong)))), nil)
	w := st(fld("id", tString), fld("tags", tString), fld("m", st(fld("a", tDouble), fld("b", tInt))), fld("_kafka_x", tInt), fld("ID", tInt))
	fields, changed, conflicts := v0.Evolve(w, nil, HighestID(v0.Schema))
	var got []string
	for _, c := range conflicts {
		got = append(got, c.Error())
	}
	want := []string{
		`field "id" is string in the writer schema but int in the table`,
		`field "tags" is string in the writer schema but list<string> in the table`,
		`field "m.a" is double in the writer schema but long in the table`,
		`field "_kafka_x" is int in the writer schema but (no column can have this name) in the table`,
		`field "ID" is int in the writer schema but (no column can have this name) in the table`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("conflicts\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// What could be merged was: m.b is new; conflicting fields keep the table's type.
	s := iceberg.NewSchema(1, fields...)
	if _, ok := s.FindFieldByName("m.b"); !ok || !changed {
		t.Error("m.b was not added")
	}
	if f, _ := s.FindFieldByName("id"); !f.Type.Equals(tInt) {
		t.Errorf("id became %v", f.Type)
	}
	// A record root against a table whose values were not records (and back).
	prim := firstVersion(t, avroSpec, tString, nil)
	if _, _, cs := prim.Evolve(tInt, nil, 100); len(cs) != 1 || cs[0].Path != "" {
		t.Errorf("string root vs int root: %v", cs)
	}
	if _, changed, cs := prim.Evolve(st(fld("value", tString)), nil, 100); changed || len(cs) != 0 {
		t.Errorf("a record with field value over a value column: changed %v %v", changed, cs)
	}
}

func TestEvolveKey(t *testing.T) {
	spec := avroSpec
	spec.Key = &Decoding{Format: FormatAvro, Subject: "k", Mode: ModePrefix}
	v0 := firstVersion(t, spec, st(fld("a", tInt)), st(fld("id", tInt)))
	fields, changed, conflicts := v0.Evolve(nil, st(fld("id", tLong), fld("region", tString)), HighestID(v0.Schema))
	if !changed || len(conflicts) != 0 {
		t.Fatalf("changed %v conflicts %v", changed, conflicts)
	}
	s := iceberg.NewSchema(1, fields...)
	kt, _, _ := (Version{Schema: s}).KeyTarget()
	if kt.String() != "struct<1: id: optional long, 12: region: optional string>" && !strings.Contains(kt.String(), "region") {
		t.Errorf("key type %v", kt)
	}
	_, _, conflicts = v0.Evolve(nil, tString, HighestID(v0.Schema))
	if len(conflicts) != 1 || conflicts[0].Path != "key" {
		t.Errorf("key conflicts %v", conflicts)
	}
}

func TestMergeMapsAndLists(t *testing.T) {
	next := 100
	nextID := func() int { next++; return next }
	tt := &iceberg.MapType{KeyID: 1, KeyType: tString, ValueID: 2, ValueType: &iceberg.ListType{ElementID: 3, Element: tInt}}
	w := &iceberg.MapType{KeyType: tString, ValueType: &iceberg.ListType{Element: tLong}}
	out, changed, cs := Merge(tt, w, nextID)
	if !changed || len(cs) != 0 || out.(*iceberg.MapType).ValueType.(*iceberg.ListType).ElementID != 3 ||
		!out.(*iceberg.MapType).ValueType.(*iceberg.ListType).Element.Equals(tLong) {
		t.Errorf("map merge: %v changed %v %v", out, changed, cs)
	}
	if tt.ValueType.(*iceberg.ListType).Element.Equals(tLong) {
		t.Error("Merge modified its input")
	}
	_, _, cs = Merge(tt, &iceberg.MapType{KeyType: tInt, ValueType: tInt}, nextID)
	if len(cs) != 2 || cs[0].Path != "key" || cs[1].Path != "value" {
		t.Errorf("map key/value conflicts: %v", cs)
	}
}

func TestAlter(t *testing.T) {
	spec := Spec{Format: FormatJSON, Columns: []Column{
		{Name: "id", Type: "int", Required: true},
		{Name: "msg", Type: "string"},
		{Name: "scores", Type: "list<float>"},
	}}
	fields, _ := spec.Fields()
	v0 := Version{Spec: spec, Schema: iceberg.NewSchema(0, fields...)}
	last := HighestID(v0.Schema)
	nspec, nfields, err := v0.Alter([]ColumnChange{
		{Add: &Column{Name: "amount", Type: "decimal(9,2)"}},
		{Widen: &Widen{Name: "id", Type: "long"}},
		{Widen: &Widen{Name: "scores", Type: "list<double>"}},
		{Optional: "id"},
		{Rename: &Rename{Name: "msg", NewName: "message"}},
	}, last)
	if err != nil {
		t.Fatal(err)
	}
	s := iceberg.NewSchema(1, nfields...)
	id, _ := s.FindFieldByName("id")
	msg, _ := s.FindFieldByName("message")
	amount, _ := s.FindFieldByName("amount")
	oldMsg, _ := v0.Schema.FindFieldByName("msg")
	oldID, _ := v0.Schema.FindFieldByName("id")
	if !id.Type.Equals(tLong) || id.ID != oldID.ID || msg.ID != oldMsg.ID || amount.ID <= last {
		t.Errorf("ids: id %+v message %+v amount %+v", id, msg, amount)
	}
	if sc, _ := s.FindFieldByName("scores.element"); !sc.Type.Equals(tDouble) {
		t.Errorf("scores element %v", sc.Type)
	}
	want := []Column{{Name: "id", Type: "long"}, {Name: "message", Type: "string", JSONPath: "msg"},
		{Name: "scores", Type: "list<double>"}, {Name: "amount", Type: "decimal(9,2)"}}
	got, _ := json.Marshal(nspec.Columns)
	w, _ := json.Marshal(want)
	if string(got) != string(w) {
		t.Errorf("columns %s\nwant %s", got, w)
	}
	if nfields[3].Name != "amount" || nfields[4].Name != ColumnKafkaPartition {
		t.Errorf("the new column is not the last declared one: %v", nfields)
	}
	// The result is a valid version: Compose-independent, but the columns must line up.
	for i, c := range nspec.Columns {
		if nfields[i].Name != c.Name {
			t.Errorf("field %d is %q, column %q", i, nfields[i].Name, c.Name)
		}
	}

	for _, c := range []struct {
		ch   ColumnChange
		want string
	}{
		{ColumnChange{Widen: &Widen{Name: "msg", Type: "long"}}, `changes[0]: widen "msg": string cannot become long`},
		{ColumnChange{Widen: &Widen{Name: "id", Type: "float"}}, `changes[0]: widen "id": int cannot become float`},
		{ColumnChange{Widen: &Widen{Name: "nope", Type: "long"}}, `changes[0]: widen: no column "nope"`},
		{ColumnChange{Add: &Column{Name: "ID", Type: "long"}}, `duplicate name`},
		{ColumnChange{Add: &Column{Name: "_kafka_offset", Type: "long"}}, `reserved`},
		{ColumnChange{Add: &Column{Name: "x", Type: "strng"}}, `unknown type "strng"`},
		{ColumnChange{Rename: &Rename{Name: "msg", NewName: "id"}}, `duplicate name`},
		{ColumnChange{}, `want exactly one of add, widen, optional, rename`},
		{ColumnChange{Optional: "id", Rename: &Rename{Name: "id", NewName: "x"}}, `want exactly one`},
	} {
		_, _, err := v0.Alter([]ColumnChange{c.ch}, last)
		var fe *FieldError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &fe) {
			t.Errorf("Alter(%+v) = %v, want %q", c.ch, err, c.want)
		}
	}
	if _, _, err := (Version{Spec: avroSpec}).Alter([]ColumnChange{{Optional: "x"}}, 1); err == nil || !strings.Contains(err.Error(), "only JSON tables") {
		t.Errorf("Alter of an Avro table: %v", err)
	}
}
