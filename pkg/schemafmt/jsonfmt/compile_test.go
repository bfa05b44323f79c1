package jsonfmt

import (
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/schemafmt"
)

// richSchema has a property of every mapping, in an order that is not alphabetical.
const richSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "Order",
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "customer": {"type": "string", "minLength": 1},
    "amount": {"type": "number"},
    "paid": {"type": "boolean"},
    "created": {"type": "string", "format": "date-time"},
    "day": {"type": "string", "format": "date"},
    "at": {"type": "string", "format": "time"},
    "ref": {"type": "string", "format": "uuid"},
    "email": {"type": "string", "format": "email"},
    "note": {"type": ["string", "null"]},
    "status": {"enum": ["new", "paid", null]},
    "level": {"enum": [1, 2, 3]},
    "ratio": {"enum": [1, 2.5]},
    "flag": {"const": true},
    "version": {"const": 2},
    "address": {
      "type": "object",
      "properties": {"zip": {"type": "string"}, "city": {"type": "string"}},
      "additionalProperties": false
    },
    "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
    "labels": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
    "extra": {"type": "object"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
    "lines": {"type": "array", "items": {"$ref": "#/definitions/line"}},
    "anything": {"type": "array"},
    "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
    "choice": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    "maybe": {"oneOf": [{"type": "null", "title": "Not included"}, {"type": "integer"}]},
    "maybeToo": {"anyOf": [{"$ref": "#/definitions/line"}, {"type": "null"}]},
    "both": {"allOf": [{"$ref": "#/definitions/line"}, {"properties": {"discount": {"type": "number"}}}]},
    "free": {},
    "yes": true,
    "multi": {"type": ["string", "integer"]},
    "onlyNull": {"type": "null"},
    "inferred": {"properties": {"a": {"type": "integer"}}},
    "with.dot and space": {"type": "string"},
    "ünï\"code": {"type": "string"},
    "": {"type": "integer"}
  },
  "required": ["id"],
  "definitions": {
    "line": {
      "type": "object",
      "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}
    }
  }
}`

func TestRootRich(t *testing.T) {
	s := mustCompile(t, richSchema)
	want := `struct<` +
		`"id": long, "customer": string, "amount": double, "paid": boolean, ` +
		`"created": timestamptz, "day": date, "at": time, "ref": uuid, "email": string, ` +
		`"note": string, "status": string, "level": long, "ratio": double, "flag": boolean, "version": long, ` +
		`"address": struct<"zip": string, "city": string>, ` +
		`"attrs": map<string, long>, "labels": map<string, string>, "extra": string, ` +
		`"tags": list<string>, "matrix": list<list<double>>, ` +
		`"lines": list<struct<"sku": string, "qty": long>>, ` +
		`"anything": list<string>, "pair": list<string>, "choice": string, "maybe": long, ` +
		`"maybeToo": struct<"sku": string, "qty": long>, ` +
		`"both": struct<"sku": string, "qty": long, "discount": double>, ` +
		`"free": string, "yes": string, "multi": string, "onlyNull": string, ` +
		`"inferred": struct<"a": long>, ` +
		`"with.dot and space": string, "ünï\"code": string, "": long>`
	if got := typeString(t, s.Root()); got != want {
		t.Errorf("Root:\n got: %s\nwant: %s", got, want)
	}
	// The same text always gives the same type, order included.
	for range 5 {
		if got := typeString(t, mustCompile(t, richSchema).Root()); got != want {
			t.Fatalf("Root changed between compiles: %s", got)
		}
	}
}

func TestRootShapes(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		// Top-level non-objects: the type of the one value column.
		{`{"type":"string"}`, "string"},
		{`{"type":"integer"}`, "long"},
		{`{"type":["number","null"]}`, "double"},
		{`{"type":"array","items":{"type":"integer"}}`, "list<long>"},
		{`{"type":"object","additionalProperties":{"type":"boolean"}}`, "map<string, boolean>"},
		{`{"type":"object"}`, "string"},
		{`{"type":"object","properties":{}}`, "string"},
		{`{}`, "string"},
		{`true`, "string"},
		{`false`, "string"},
		{`{"enum":["a","b"]}`, "string"},
		{`{"enum":["a",1]}`, "string"},
		{`{"enum":[{"a":1}]}`, "string"},
		{`{"const":"x"}`, "string"},
		{`{"const":1.5}`, "double"},
		{`{"const":1e2}`, "long"},
		{`{"type":"string","enum":[1,2]}`, "string"}, // type decides
		// Objects: properties win over value schemas; mixed value schemas are JSON text.
		{`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}`, `struct<"a": string>`},
		{`{"type":"object","patternProperties":{"^a":{"type":"integer"},"^b":{"type":"integer"}}}`, "map<string, long>"},
		{`{"type":"object","patternProperties":{"^a":{"type":"integer"}},"additionalProperties":{"type":"string"}}`, "string"},
		{`{"type":"object","additionalProperties":{}}`, "string"},
		{`{"type":"object","additionalProperties":true}`, "string"},
		{`{"type":"object","additionalProperties":{"type":["string","integer"]}}`, "map<string, string>"},
		// Arrays.
		{`{"type":"array","items":{}}`, "list<string>"},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"}}`, "list<string>"},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","items":{"type":"integer"}}`, "list<long>"},
		{`{"type":"array","items":{"type":"object","additionalProperties":{"type":"number"}}}`, "list<map<string, double>>"},
		// Unions.
		{`{"anyOf":[{"type":"string"},{"type":"null"}]}`, "string"},
		{`{"anyOf":[{"type":"string"},{}]}`, "string"}, // anything goes: JSON text (see TestDecodeJSONText)
		{`{"oneOf":[{"type":"string","format":"date-time"},{"type":"null"}]}`, "timestamptz"},
		{`{"type":"object","properties":{"a":{"type":"string"}},"oneOf":[{"required":["a"]},{"required":["b"]}]}`, `struct<"a": string>`},
		{`{"type":"object","properties":{"a":{"type":"string"}},"oneOf":[{"properties":{"b":{"type":"string"}}},{"properties":{"c":{"type":"string"}}}]}`, "string"},
		{`{"oneOf":[{"type":"integer","minimum":0},{"type":"integer","maximum":-10},{"type":"null"}]}`, "long"},
		{`{"anyOf":[{"type":"string","format":"email"},{"type":"string","format":"date-time"}]}`, "string"}, // string and timestamptz: JSON text
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"oneOf":[{"type":"object","required":["a"]},{"type":"object","required":["b"]}]}`, `struct<"a": string, "b": string>`},
		{`{"type":["string","integer","null"]}`, "string"},
		{`{"type":"integer","not":{"const":3}}`, "long"},
		// allOf.
		{`{"allOf":[{"type":"string"},{"maxLength":3}]}`, "string"},
		{`{"allOf":[{"type":"string"},{"type":"integer"}]}`, "string"},
		{`{"type":"object","allOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"b":{"type":"string"}}}],"properties":{"c":{"type":"boolean"}}}`, `struct<"a": long, "b": string, "c": boolean>`},
		{`{"allOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"a":{"type":"integer"},"b":{"type":"string"}}}]}`, `struct<"a": long, "b": string>`},
		{`{"allOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"a":{"type":"string"}}}]}`, "string"},
		{`{"allOf":[{"properties":{"a":{"type":"integer"}}},{"additionalProperties":{"type":"string"}}]}`, "string"},
		{`{"type":"array","allOf":[{"items":{"type":"integer"}}]}`, "list<long>"},
		{`{"allOf":[{"type":"object"},{"additionalProperties":{"type":"integer"}}]}`, "map<string, long>"},
		// $ref siblings: ignored before 2019-09, merged after.
		{`{"definitions":{"a":{"type":"integer"}},"$ref":"#/definitions/a","type":"string"}`, "long"},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema","$defs":{"a":{"properties":{"x":{"type":"integer"}}}},"$ref":"#/$defs/a","properties":{"y":{"type":"string"}}}`, `struct<"x": long, "y": string>`},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"a":{"type":"integer"}},"$ref":"#/$defs/a","description":"an a"}`, "long"},
		// Dynamic references are kept as written.
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","$dynamicAnchor":"n","type":"object","properties":{"kids":{"type":"array","items":{"$dynamicRef":"#n"}}}}`, `struct<"kids": list<string>>`},
		// A recursive union is JSON text, so it is fine.
		{`{"definitions":{"j":{"oneOf":[{"type":"string"},{"type":"array","items":{"$ref":"#/definitions/j"}}]}},"properties":{"v":{"$ref":"#/definitions/j"}}}`, `struct<"v": string>`},
		// Draft 4 with id; unknown $schema is draft 7; an ECMA-only pattern is fine.
		{`{"$schema":"http://json-schema.org/draft-04/schema#","id":"http://x.com/a.json","properties":{"a":{"type":"integer","exclusiveMinimum":true,"minimum":0}}}`, `struct<"a": long>`},
		{`{"$schema":"http://example.com/my-meta","type":"integer"}`, "long"},
		{`{"type":"string","pattern":"^(?=x)\\p{L}+$"}`, "string"},
	} {
		s, err := Compile(schemafmt.Source{Text: c.schema})
		if err != nil {
			t.Errorf("%s: %v", c.schema, err)
			continue
		}
		if got := typeString(t, s.Root()); got != c.want {
			t.Errorf("%s\n got: %s\nwant: %s", c.schema, got, c.want)
		}
	}
}

func TestRefsLocal(t *testing.T) {
	s := mustCompile(t, `{
	  "$schema": "https://json-schema.org/draft/2020-12/schema",
	  "type": "object",
	  "properties": {
	    "home": {"$ref": "#/$defs/address"},
	    "work": {"$ref": "#/$defs/address"},
	    "old": {"$ref": "#/definitions/legacy"},
	    "byAnchor": {"$ref": "#zip"},
	    "embedded": {"$ref": "https://x.com/inner.json"}
	  },
	  "$defs": {
	    "address": {"type": "object", "properties": {"zip": {"$ref": "#zip"}, "lines": {"type": "array", "items": {"type": "string"}}}},
	    "zipCode": {"$anchor": "zip", "type": "string"},
	    "inner": {"$id": "https://x.com/inner.json", "type": "object", "properties": {"n": {"$ref": "#/$defs/num"}}, "$defs": {"num": {"type": "number"}}}
	  },
	  "definitions": {"legacy": {"type": "string", "format": "date"}}
	}`)
	want := `struct<"home": struct<"zip": string, "lines": list<string>>, "work": struct<"zip": string, "lines": list<string>>, ` +
		`"old": date, "byAnchor": string, "embedded": struct<"n": double>>`
	if got := typeString(t, s.Root()); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Two levels of registry references: order → address → country.
func TestRefsAcrossReferences(t *testing.T) {
	country := schemafmt.Reference{Name: "country.json", Subject: "country", Version: 1, Source: schemafmt.Source{
		Text: `{"type":"object","properties":{"code":{"type":"string"},"name":{"type":"string"}}}`,
	}}
	address := schemafmt.Reference{Name: "address.json", Subject: "address", Version: 3, Source: schemafmt.Source{
		Text: `{"type":"object","properties":{"zip":{"type":"string"},"country":{"$ref":"country.json"},
		        "geo":{"$ref":"#/definitions/geo"}},
		        "definitions":{"geo":{"type":"array","items":{"type":"number"}}}}`,
		References: []schemafmt.Reference{country},
	}}
	order := `{"type":"object","properties":{"id":{"type":"integer"},"ship":{"$ref":"address.json"},
	          "bill":{"$ref":"address.json#/properties/country"}}}`
	s := mustCompile(t, order, address)
	want := `struct<"id": long, "ship": struct<"zip": string, "country": struct<"code": string, "name": string>, "geo": list<double>>, ` +
		`"bill": struct<"code": string, "name": string>>`
	if got := typeString(t, s.Root()); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	r := newReader(t, s, nil)
	r.expect(`{"id":7,"ship":{"zip":"10115","country":{"code":"DE"},"geo":[52.5,13.4]},"bill":{"name":"France"}}`,
		`{id: 7, ship: {zip: "10115", country: {code: "DE", name: null}, geo: [52.5, 13.4]}, bill: {code: null, name: "France"}}`)

	// With $ids: names resolve against the referring schema's $id; absolute names work.
	country.Name = "https://acme.com/common/country.json"
	address = schemafmt.Reference{Name: "address.json", Subject: "address", Version: 1, Source: schemafmt.Source{
		Text:       `{"$id":"https://acme.com/schemas/address.json","type":"object","properties":{"country":{"$ref":"../common/country.json"}}}`,
		References: []schemafmt.Reference{{Name: "../common/country.json", Source: country.Source}},
	}}
	order = `{"$id":"https://acme.com/schemas/order.json","type":"object","properties":{"ship":{"$ref":"address.json"},"c":{"$ref":"https://acme.com/common/country.json"}}}`
	s = mustCompile(t, order, address, country)
	want = `struct<"ship": struct<"country": struct<"code": string, "name": string>>, "c": struct<"code": string, "name": string>>`
	if got := typeString(t, s.Root()); got != want {
		t.Errorf("with $ids: got  %s\nwant %s", got, want)
	}

	// A reference reached by its own $id rather than its name.
	s = mustCompile(t, `{"properties":{"a":{"$ref":"https://acme.com/x.json"}}}`,
		schemafmt.Reference{Name: "x.json", Source: schemafmt.Source{Text: `{"$id":"https://acme.com/x.json","type":"integer"}`}})
	if got := typeString(t, s.Root()); got != `struct<"a": long>` {
		t.Errorf("by $id: %s", got)
	}
}

func TestCompileErrors(t *testing.T) {
	line := schemafmt.Reference{Name: "line.json", Source: schemafmt.Source{
		Text: `{"type":"object","properties":{"order":{"$ref":"order.json"}}}`,
	}}
	for _, c := range []struct {
		schema string
		refs   []schemafmt.Reference
		want   string
	}{
		{`{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/definitions/Node"}}},
		   "definitions":{"Node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/definitions/Node"}}}}}}`,
			nil, `field "children.element.kids.element": the schema is recursive: "#/definitions/Node" refers to itself`},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}}}`,
			nil, `field "next": the schema is recursive: "#" refers to itself`},
		{`{"properties":{"a":{"$ref":"#/definitions/A"}},"definitions":{"A":{"allOf":[{"$ref":"#/definitions/B"}]},"B":{"allOf":[{"$ref":"#/definitions/A"}]}}}`,
			nil, `the schema is recursive: "#/definitions/A" refers to itself`},
		{`{"$id":"https://acme.com/order.json","properties":{"lines":{"type":"array","items":{"$ref":"line.json"}}}}`,
			[]schemafmt.Reference{{Name: "line.json", Source: schemafmt.Source{Text: line.Source.Text, References: []schemafmt.Reference{
				{Name: "order.json", Source: schemafmt.Source{Text: `{"properties":{"lines":{"type":"array","items":{"$ref":"line.json"}}}}`}},
			}}}},
			`the schema is recursive: "line.json#" refers to itself`},
		{`{"properties":{"a":{"$ref":"missing.json"}}}`, nil, `$ref "missing.json": no such schema among the references`},
		{`{"properties":{"a":{"$ref":"#/definitions/nope"}}}`, nil, "invalid JSON Schema"},
		{`{"type":"int"}`, nil, "invalid JSON Schema"},
		{`{"type":"object",`, nil, "the schema is not valid JSON"},
		{`{"a":1} {}`, nil, "the schema is not valid JSON"},
		{`{"$ref":"a.json"}`, []schemafmt.Reference{{Name: "a.json", Source: schemafmt.Source{Text: `{`}}}, `referenced schema "a.json" is not valid JSON`},
		{`{"$ref":"a.json"}`, []schemafmt.Reference{
			{Name: "a.json", Source: schemafmt.Source{Text: `{"type":"string"}`}},
			{Name: "a.json", Source: schemafmt.Source{Text: `{"type":"integer"}`}},
		}, `two different schemas are referenced as "a.json"`},
		{`{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"array","items":`, 1001) + `{"type":"string"}` + strings.Repeat("}", 1001) + `}}`,
			nil, "nests deeper than 1000 levels"},
	} {
		_, err := Compile(schemafmt.Source{Text: c.schema, References: c.refs})
		if err == nil {
			t.Errorf("%.80s: compiled", c.schema)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.80s:\n got: %v\nwant: …%s…", c.schema, err, c.want)
		}
	}
}

// A schema whose types double at every level is refused before it exhausts memory.
func TestCompileTooBig(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/definitions/d0","definitions":{`)
	for i := range 20 {
		if i > 0 {
			b.WriteString(",")
		}
		next := `{"type":"string"}`
		if i < 19 {
			next = `{"$ref":"#/definitions/d` + string(rune('a'+i+1)) + `"}`
		}
		name := "d" + string(rune('a'+i))
		if i == 0 {
			name = "d0"
			next = `{"$ref":"#/definitions/db"}`
		}
		b.WriteString(`"` + name + `":{"properties":{"l":` + next + `,"r":` + next + `}}`)
	}
	b.WriteString(`}}`)
	_, err := Compile(schemafmt.Source{Text: b.String()})
	if err == nil || !strings.Contains(err.Error(), "more than 100000 types") {
		t.Fatalf("got %v", err)
	}
}
