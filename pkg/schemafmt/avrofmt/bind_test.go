package avrofmt

import (
	"errors"
	"math/big"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/schemafmt"
)

const (
	v1Schema = `{"type": "record", "name": "Item", "fields": [
		{"name": "id", "type": "int"},
		{"name": "gone", "type": "string"},
		{"name": "score", "type": "float"},
		{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
		{"name": "tags", "type": {"type": "array", "items": "int"}},
		{"name": "attrs", "type": {"type": "map", "values": {"type": "record", "name": "A", "fields": [{"name": "n", "type": "int"}]}}},
		{"name": "u", "type": ["null", "int", "string"]}]}`
	// v2 widens id, score, price, tags and attrs.n, adds note and a union branch.
	v2Schema = `{"type": "record", "name": "Item", "fields": [
		{"name": "id", "type": "long"},
		{"name": "note", "type": ["null", "string"], "default": null},
		{"name": "gone", "type": "string"},
		{"name": "score", "type": "double"},
		{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}},
		{"name": "tags", "type": {"type": "array", "items": "long"}},
		{"name": "attrs", "type": {"type": "map", "values": {"type": "record", "name": "A", "fields": [{"name": "n", "type": "long"}, {"name": "m", "type": "string"}]}}},
		{"name": "u", "type": ["null", "string", "bytes", "int"]}]}`
)

type tA1 struct {
	N int32 `avro:"n"`
}

type tItem1 struct {
	ID    int32          `avro:"id"`
	Gone  string         `avro:"gone"`
	Score float32        `avro:"score"`
	Price *big.Rat       `avro:"price"`
	Tags  []int32        `avro:"tags"`
	Attrs map[string]tA1 `avro:"attrs"`
	U     map[string]any `avro:"u"`
}

type tA2 struct {
	N int64  `avro:"n"`
	M string `avro:"m"`
}

type tItem2 struct {
	ID    int64          `avro:"id"`
	Note  *string        `avro:"note"`
	Gone  string         `avro:"gone"`
	Score float64        `avro:"score"`
	Price *big.Rat       `avro:"price"`
	Tags  []int64        `avro:"tags"`
	Attrs map[string]tA2 `avro:"attrs"`
	U     map[string]any `avro:"u"`
}

// withoutField returns st without its field name.
func withoutField(st *iceberg.StructType, name string) *iceberg.StructType {
	out := &iceberg.StructType{}
	for _, f := range st.FieldList {
		if f.Name != name {
			out.FieldList = append(out.FieldList, f)
		}
	}
	return out
}

func TestBindEvolution(t *testing.T) {
	s1, s2 := mustCompile(t, v1Schema), mustCompile(t, v2Schema)
	// v2's root holds everything v1's had, widened: it is the merge.
	merged := withIDs(s2.Root()).(*iceberg.StructType)
	old := marshal(t, v1Schema, tItem1{ID: -7, Gone: "g1", Score: 0.25, Price: rat("-1234567.89"),
		Tags: []int32{1, -1}, Attrs: map[string]tA1{"k": {N: 3}}, U: map[string]any{"string": "s"}})
	cur := marshal(t, v2Schema, tItem2{ID: 1 << 40, Note: ptr("hi"), Gone: "g2", Score: 0.1,
		Price: rat("123456789012345678.90"), Tags: []int64{1 << 40}, Attrs: map[string]tA2{"k": {N: 1 << 33, M: "m"}},
		U: map[string]any{"bytes": []byte{9}}})

	// The fields in another order than either writer's: fields match by name.
	reordered := &iceberg.StructType{FieldList: append([]iceberg.NestedField{merged.FieldList[7]}, merged.FieldList[:7]...)}

	for _, c := range []struct {
		name   string
		s      schemafmt.Schema
		target *iceberg.StructType
		data   []byte
		want   string
	}{
		{"v2 into merge", s2, merged, cur,
			`{id: 1099511627776, note: "hi", gone: "g2", score: 0.1, price: 12345678901234567890, tags: [1099511627776], ` +
				`attrs: {"k": {n: 8589934592, m: "m"}}, u: {string: null, bytes: 0x09, int: null}}`},
		{"v1 into merge", s1, merged, old,
			`{id: -7, note: null, gone: "g1", score: 0.25, price: -123456789, tags: [1 -1], ` +
				`attrs: {"k": {n: 3, m: null}}, u: {string: "s", bytes: null, int: null}}`},
		{"v1 into merge without gone", s1, withoutField(merged, "gone"), old,
			`{id: -7, note: null, score: 0.25, price: -123456789, tags: [1 -1], ` +
				`attrs: {"k": {n: 3, m: null}}, u: {string: "s", bytes: null, int: null}}`},
		{"v2 into merge without gone", s2, withoutField(merged, "gone"), cur,
			`{id: 1099511627776, note: "hi", score: 0.1, price: 12345678901234567890, tags: [1099511627776], ` +
				`attrs: {"k": {n: 8589934592, m: "m"}}, u: {string: null, bytes: 0x09, int: null}}`},
		{"v1 into reordered merge", s1, reordered, old,
			`{u: {string: "s", bytes: null, int: null}, id: -7, note: null, gone: "g1", score: 0.25, price: -123456789, tags: [1 -1], ` +
				`attrs: {"k": {n: 3, m: null}}}`},
		{"v1 into v1", s1, withIDs(s1.Root()).(*iceberg.StructType), old,
			`{id: -7, gone: "g1", score: 0.25, price: -123456789, tags: [1 -1], attrs: {"k": {n: 3}}, u: {int: null, string: "s"}}`},
	} {
		d, err := c.s.Bind(c.target)
		if err != nil {
			t.Errorf("%s: Bind: %v", c.name, err)
			continue
		}
		if got := show(c.target, decode(t, d, c.data)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestBindNullableToPlain(t *testing.T) {
	// [null, T] in the writer, T in the table (and the other way): the same optional T.
	opt := mustCompile(t, `{"type": "record", "name": "R", "fields": [{"name": "x", "type": ["null", "int"]}]}`)
	plain := mustCompile(t, `{"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]}`)
	target := withIDs(plain.Root())
	d, err := opt.Bind(target)
	if err != nil {
		t.Fatal(err)
	}
	schema := `{"type": "record", "name": "R", "fields": [{"name": "x", "type": ["null", "int"]}]}`
	type tR struct {
		X *int32 `avro:"x"`
	}
	if got := show(target, decode(t, d, marshal(t, schema, tR{X: ptr(int32(5))}))); got != `{x: 5}` {
		t.Errorf("got %s", got)
	}
	if got := show(target, decode(t, d, marshal(t, schema, tR{}))); got != `{x: null}` {
		t.Errorf("got %s", got)
	}
}

func TestBindConflicts(t *testing.T) {
	table := mustCompile(t, `{"type": "record", "name": "R", "fields": [
		{"name": "id", "type": "int"},
		{"name": "addr", "type": {"type": "record", "name": "A", "fields": [{"name": "zip", "type": "int"}]}},
		{"name": "tags", "type": {"type": "array", "items": "int"}},
		{"name": "m", "type": {"type": "map", "values": "int"}},
		{"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
		{"name": "u", "type": ["null", "int", "string", {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]}]}]}`)
	target := withIDs(table.Root())
	for _, c := range []struct {
		field, typ string
		want       schemafmt.Conflict
	}{
		{"id", `"string"`, schemafmt.Conflict{Path: "id", Schema: "string", Table: "int"}},
		{"id", `"long"`, schemafmt.Conflict{Path: "id", Schema: "long", Table: "int"}},
		{"id", `{"type": "array", "items": "int"}`, schemafmt.Conflict{Path: "id", Schema: "list", Table: "int"}},
		{"addr", `{"type": "record", "name": "A", "fields": [{"name": "zip", "type": "string"}]}`,
			schemafmt.Conflict{Path: "addr.zip", Schema: "string", Table: "int"}},
		{"addr", `"string"`, schemafmt.Conflict{Path: "addr", Schema: "string", Table: "struct"}},
		{"tags", `{"type": "array", "items": "double"}`, schemafmt.Conflict{Path: "tags.element", Schema: "double", Table: "int"}},
		{"m", `{"type": "map", "values": "boolean"}`, schemafmt.Conflict{Path: "m.value", Schema: "boolean", Table: "int"}},
		{"amount", `{"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}`,
			schemafmt.Conflict{Path: "amount", Schema: "decimal(10, 3)", Table: "decimal(10, 2)"}},
		{"amount", `{"type": "bytes", "logicalType": "decimal", "precision": 11, "scale": 2}`,
			schemafmt.Conflict{Path: "amount", Schema: "decimal(11, 2)", Table: "decimal(10, 2)"}},
		{"u", `["null", {"type": "record", "name": "P", "fields": [{"name": "x", "type": "string"}]}, "int"]`,
			schemafmt.Conflict{Path: "u.P.x", Schema: "string", Table: "int"}},
		{"u", `["null", "double"]`, schemafmt.Conflict{Path: "u", Schema: "double", Table: "struct"}},
	} {
		schema := `{"type": "record", "name": "R", "fields": [{"name": "` + c.field + `", "type": ` + c.typ + `}]}`
		_, err := mustCompile(t, schema).Bind(target)
		var conflict *schemafmt.Conflict
		if !errors.As(err, &conflict) || *conflict != c.want {
			t.Errorf("Bind of %s = %v, want %+v", schema, err, c.want)
		}
	}
	// The map key of a table that is not a string.
	m := withIDs(mustCompile(t, `{"type": "map", "values": "int"}`).Root()).(*iceberg.MapType)
	m.KeyType = iceberg.PrimitiveTypes.Int32
	_, err := mustCompile(t, `{"type": "map", "values": "int"}`).Bind(m)
	var conflict *schemafmt.Conflict
	if !errors.As(err, &conflict) || *conflict != (schemafmt.Conflict{Path: "key", Schema: "string", Table: "int"}) {
		t.Errorf("Bind to map<int, int> = %v", err)
	}
	// The root.
	_, err = mustCompile(t, `"string"`).Bind(iceberg.PrimitiveTypes.Int32)
	if !errors.As(err, &conflict) || *conflict != (schemafmt.Conflict{Path: "", Schema: "string", Table: "int"}) {
		t.Errorf("Bind of string to int = %v", err)
	}
}

func TestBindWidenedDecimalFit(t *testing.T) {
	// The value must fit the writer's precision even when the table's is wider.
	s := mustCompile(t, `{"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 0}`)
	d, err := s.Bind(iceberg.DecimalTypeOf(25, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		data, want string
	}{
		{"\x04\x03\xe7", "999"},
		{"\x04\xfc\x19", "-999"},
		{"\x04\x03\xe8", "decimal does not fit decimal(3,0)"},
	} {
		v, r := decodeReason(d, []byte(c.data))
		got := r
		if r == "" {
			got = show(iceberg.DecimalTypeOf(25, 0), v)
		}
		if got != c.want {
			t.Errorf("Decode(%q) = %s, want %s", c.data, got, c.want)
		}
	}
}
