package jsonfmt

import (
	"errors"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/schemafmt"
)

const (
	v1Schema = `{"type":"object","properties":{
	  "id":{"type":"integer"},
	  "name":{"type":"string"},
	  "score":{"type":"integer"},
	  "address":{"type":"object","properties":{"zip":{"type":"string"}}}}}`
	// v2 adds top-level and nested properties and drops name.
	v2Schema = `{"type":"object","properties":{
	  "id":{"type":"integer"},
	  "email":{"type":["string","null"],"format":"email"},
	  "score":{"type":"integer"},
	  "address":{"type":"object","properties":{"zip":{"type":"string"},"city":{"type":"string"}}},
	  "tags":{"type":"array","items":{"type":"string"}}}}`
)

// merged is the table's type after v1 then v2, as the table would widen it: v1's fields,
// then the fields v2 added, at every level.
func merged() iceberg.Type {
	str, long := iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Int64
	return withIDs(&iceberg.StructType{FieldList: []iceberg.NestedField{
		{Name: "id", Type: long},
		{Name: "name", Type: str},
		{Name: "score", Type: long},
		{Name: "address", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{Name: "zip", Type: str}, {Name: "city", Type: str},
		}}},
		{Name: "email", Type: str},
		{Name: "tags", Type: &iceberg.ListType{Element: str}},
	}})
}

func TestBindEvolution(t *testing.T) {
	v1, v2 := mustCompile(t, v1Schema), mustCompile(t, v2Schema)
	target := merged()

	// Old data, old schema, new table: what v1 lacks is null.
	newReader(t, v1, target).expect(
		`{"id":1,"name":"Ann","score":10,"address":{"zip":"10115","city":"ignored: v1 has no city"},"email":"ignored@v1"}`,
		`{id: 1, name: "Ann", score: 10, address: {zip: "10115", city: null}, email: null, tags: null}`)
	// New data, new schema: what v2 dropped is null.
	newReader(t, v2, target).expect(
		`{"id":2,"name":"ignored: v2 has no name","email":"b@x.com","score":20,"address":{"zip":"75001","city":"Paris"},"tags":["a"]}`,
		`{id: 2, name: null, score: 20, address: {zip: "75001", city: "Paris"}, email: "b@x.com", tags: ["a"]}`)
	// The table may hold fields in any order and more than any one schema.
	newReader(t, v2, withIDs(&iceberg.StructType{FieldList: []iceberg.NestedField{
		{Name: "tags", Type: &iceberg.ListType{Element: iceberg.PrimitiveTypes.String}},
		{Name: "other", Type: iceberg.PrimitiveTypes.Bool},
		{Name: "id", Type: iceberg.PrimitiveTypes.Int64},
	}})).expect(`{"id":3,"tags":["x"],"other":true}`, `{tags: ["x"], other: null, id: 3}`)
	// Binding to the schema's own Root works.
	newReader(t, v2, nil).expect(`{"id":4}`, `{id: 4, email: null, score: null, address: null, tags: null}`)
}

func TestBindConflicts(t *testing.T) {
	target := merged()
	for _, c := range []struct {
		schema string
		target iceberg.Type
		want   schemafmt.Conflict
	}{
		// integer → number is not an Iceberg promotion (long → double is not allowed).
		{`{"properties":{"score":{"type":"number"}}}`, target, schemafmt.Conflict{Path: "score", Schema: "double", Table: "long"}},
		{`{"properties":{"id":{"type":"string"}}}`, target, schemafmt.Conflict{Path: "id", Schema: "string", Table: "long"}},
		{`{"properties":{"id":{"type":"string","format":"uuid"}}}`, target, schemafmt.Conflict{Path: "id", Schema: "uuid", Table: "long"}},
		{`{"properties":{"address":{"properties":{"zip":{"type":"integer"}}}}}`, target, schemafmt.Conflict{Path: "address.zip", Schema: "long", Table: "string"}},
		{`{"properties":{"address":{"type":"string"}}}`, target, schemafmt.Conflict{Path: "address", Schema: "string", Table: "struct"}},
		{`{"properties":{"address":{"type":"array","items":{"type":"string"}}}}`, target, schemafmt.Conflict{Path: "address", Schema: "list", Table: "struct"}},
		{`{"properties":{"tags":{"type":"array","items":{"type":"integer"}}}}`, target, schemafmt.Conflict{Path: "tags.element", Schema: "long", Table: "string"}},
		{`{"properties":{"tags":{"additionalProperties":{"type":"string"}}}}`, target, schemafmt.Conflict{Path: "tags", Schema: "map", Table: "list"}},
		// Top-level values and maps.
		{`{"type":"integer"}`, iceberg.PrimitiveTypes.Int32, schemafmt.Conflict{Path: "", Schema: "long", Table: "int"}},
		{`{"type":"string","format":"date-time"}`, iceberg.PrimitiveTypes.Timestamp, schemafmt.Conflict{Path: "", Schema: "timestamptz", Table: "timestamp"}},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, withIDs(&iceberg.MapType{KeyType: iceberg.PrimitiveTypes.Int64, ValueType: iceberg.PrimitiveTypes.Int64}),
			schemafmt.Conflict{Path: "key", Schema: "string", Table: "long"}},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, withIDs(&iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: iceberg.PrimitiveTypes.String}),
			schemafmt.Conflict{Path: "value", Schema: "long", Table: "string"}},
	} {
		_, err := mustCompile(t, c.schema).Bind(c.target)
		var got *schemafmt.Conflict
		if !errors.As(err, &got) {
			t.Errorf("%s: got %v, want a Conflict", c.schema, err)
			continue
		}
		if *got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.schema, *got, c.want)
		}
	}

	// Still fine: a property the table lacks is skipped whatever its type; a union and a
	// string are both strings.
	for _, schema := range []string{
		`{"properties":{"id":{"type":"integer"},"newthing":{"type":"object","properties":{"x":{"type":"number"}}}}}`,
		`{"properties":{"name":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
	} {
		if _, err := mustCompile(t, schema).Bind(target); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
	r := newReader(t, mustCompile(t, `{"properties":{"name":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`), target)
	r.expect(`{"name":5}`, `{id: null, name: "5", score: null, address: null, email: null, tags: null}`)

	err := (&schemafmt.Conflict{Path: "score", Schema: "double", Table: "long"}).Error()
	if err != `field "score" is double in the writer schema but long in the table` {
		t.Errorf("message: %s", err)
	}
}
