package jsonfmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/minkhq/mink/pkg/jsonscan"
	"github.com/minkhq/mink/pkg/schemafmt"
)

// rootURL is where the schema being compiled lives when it has no $id of its own, as in
// Confluent's clients: a reference named "address.json" is then mem://input/address.json.
const rootURL = "mem://input/"

// Limits on what a schema may map to, so that a hostile or generated schema cannot make
// Compile run away. A type nested deeper than the decoder's JSON limit could never be read.
const (
	maxTypeDepth = jsonscan.MaxDepth
	maxNodes     = 100_000
)

// kind is how a value is read from JSON and which Iceberg type holds it.
type kind uint8

const (
	kJSON        kind = iota // string holding the value's compact JSON text
	kString                  // string
	kLong                    // long
	kDouble                  // double
	kBool                    // boolean
	kTimestampTz             // timestamptz, from an RFC 3339 date-time string
	kDate                    // date, from YYYY-MM-DD
	kTime                    // time, from hh:mm:ss[.f][offset]
	kUUID                    // uuid, from the 8-4-4-4-12 form
	kStruct                  // struct of the properties
	kMap                     // map<string, V>
	kList                    // list<T>
)

// node is a schema compiled to its Iceberg shape.
type node struct {
	kind   kind
	fields []field // kStruct, in schema order
	elem   *node   // kList element, kMap value
	// bare is 'o' for an object that only says "type": "object" and 'a' for an array
	// without items: in an allOf they give way to a member of the same kind that says more.
	bare byte
	typ  iceberg.Type // with field ids 0
}

type field struct {
	name string
	node *node
}

func (n *node) field(name string) *node { return fieldNode(n.fields, name) }

var primitiveTypes = [...]iceberg.Type{
	kJSON:        iceberg.PrimitiveTypes.String,
	kString:      iceberg.PrimitiveTypes.String,
	kLong:        iceberg.PrimitiveTypes.Int64,
	kDouble:      iceberg.PrimitiveTypes.Float64,
	kBool:        iceberg.PrimitiveTypes.Bool,
	kTimestampTz: iceberg.PrimitiveTypes.TimestampTz,
	kDate:        iceberg.PrimitiveTypes.Date,
	kTime:        iceberg.PrimitiveTypes.Time,
	kUUID:        iceberg.PrimitiveTypes.UUID,
}

func primitive(k kind) *node { return &node{kind: k, typ: primitiveTypes[k]} }

func jsonNode() *node { return primitive(kJSON) }

func structNode(fields []field) *node {
	fl := make([]iceberg.NestedField, len(fields))
	for i, f := range fields {
		fl[i] = iceberg.NestedField{Name: f.name, Type: f.node.typ}
	}
	return &node{kind: kStruct, fields: fields, typ: &iceberg.StructType{FieldList: fl}}
}

func listNode(elem *node) *node {
	return &node{kind: kList, elem: elem, typ: &iceberg.ListType{Element: elem.typ}}
}

func mapNode(val *node) *node {
	return &node{kind: kMap, elem: val, typ: &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: val.typ}}
}

// same reports whether a and b read the same JSON into the same type. Iceberg types are
// not enough: a string and a string holding JSON are both strings.
func same(a, b *node) bool {
	if a.kind != b.kind || len(a.fields) != len(b.fields) {
		return false
	}
	for i := range a.fields {
		if a.fields[i].name != b.fields[i].name || !same(a.fields[i].node, b.fields[i].node) {
			return false
		}
	}
	if a.elem != nil {
		return same(a.elem, b.elem)
	}
	return true
}

// Compile compiles a JSON Schema (drafts 4 to 2020-12; draft 7 when $schema is absent
// or unknown, as in Confluent's Schema Registry) with the registry schemas it references.
// See the package doc for the mapping.
func Compile(src schemafmt.Source) (_ schemafmt.Schema, err error) {
	defer func() {
		// A registry schema is input: a bug in the validator library must not take the
		// process down with it.
		if p := recover(); p != nil {
			err = fmt.Errorf("jsonfmt: compiling the schema failed: %v", p)
		}
	}()
	m := &mapper{docs: map[string]*jnode{}, texts: map[string]string{}, names: map[string]string{}, active: map[*jsonschema.Schema]bool{}}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(&m.loader) // never the file system or the network: only what src holds
	// Patterns are constraints, not shape; they are often ECMA or Java regexes Go's RE2
	// refuses (look-ahead), which Confluent accepts. Take them all unparsed.
	c.UseRegexpEngine(func(s string) (jsonschema.Regexp, error) { return anyRegexp(s), nil })

	root, err := m.add(c, rootURL, "", src.Text, true)
	if err != nil {
		return nil, err
	}
	base := baseURL(rootURL, root)
	if err := m.addRefs(c, src.References, base, base); err != nil {
		return nil, err
	}
	sch, err := c.Compile(rootURL)
	if err != nil {
		if len(m.loader.missing) > 0 {
			return nil, fmt.Errorf("jsonfmt: $ref %q: no such schema among the references", strings.TrimPrefix(m.loader.missing[0], rootURL))
		}
		return nil, fmt.Errorf("jsonfmt: invalid JSON Schema: %v", err)
	}
	n, err := m.mapSchema(sch, "", 0)
	if err != nil {
		return nil, err
	}
	if n == nil {
		n = jsonNode()
	}
	return &compiled{root: n}, nil
}

type anyRegexp string

func (r anyRegexp) String() string          { return string(r) }
func (r anyRegexp) MatchString(string) bool { return true }

// loader refuses every URL the sources do not hold, and remembers which.
type loader struct{ missing []string }

func (l *loader) Load(u string) (any, error) {
	l.missing = append(l.missing, u)
	return nil, errors.New("not among the references")
}

type mapper struct {
	loader loader
	docs   map[string]*jnode // by the URL each document was added at
	texts  map[string]string
	names  map[string]string // URL → how messages name the document: "" for the root, else the reference name
	active map[*jsonschema.Schema]bool
	nodes  int
}

// add parses text and adds it to c at u. A URL already taken by the same text is fine
// (two references to one schema); by another text it is an error when primary, else the
// first one stays (aliases are guesses).
func (m *mapper) add(c *jsonschema.Compiler, u, name, text string, primary bool) (*jnode, error) {
	if old, ok := m.texts[u]; ok {
		if primary && !sameText(old, text) {
			return nil, fmt.Errorf("jsonfmt: two different schemas are referenced as %q", strings.TrimPrefix(u, rootURL))
		}
		return m.docs[u], nil
	}
	doc, err := parseDoc(text)
	if err != nil {
		if name == "" {
			return nil, fmt.Errorf("jsonfmt: the schema is not valid JSON: %v", err)
		}
		return nil, fmt.Errorf("jsonfmt: referenced schema %q is not valid JSON: %v", name, err)
	}
	v := doc.value()
	if obj, ok := v.(map[string]any); ok {
		if s, ok := obj["$schema"].(string); ok && !knownDraft(s) {
			delete(obj, "$schema")
		}
	}
	if err := c.AddResource(u, v); err != nil {
		return nil, fmt.Errorf("jsonfmt: adding %q: %v", name, err)
	}
	m.docs[u], m.texts[u], m.names[u] = doc, text, name
	return doc, nil
}

// addRefs adds a document's references. A reference's name is resolved against the
// referring document's base (the JSON Schema rule) and also against the root's (what
// Confluent's Java client does, which resolves every name against the root's $id); a
// referenced schema with an absolute $id is also reachable by it.
func (m *mapper) addRefs(c *jsonschema.Compiler, refs []schemafmt.Reference, base, rootBase string) error {
	for _, r := range refs {
		u, err := resolveURL(base, r.Name)
		if err != nil {
			return fmt.Errorf("jsonfmt: reference name %q is not a URL", r.Name)
		}
		_, seen := m.texts[u]
		doc, err := m.add(c, u, r.Name, r.Source.Text, true)
		if err != nil {
			return err
		}
		if alias, err := resolveURL(rootBase, r.Name); err == nil && alias != u {
			if _, err := m.add(c, alias, r.Name, r.Source.Text, false); err != nil {
				return err
			}
		}
		b := baseURL(u, doc)
		if b != u {
			if _, err := m.add(c, b, r.Name, r.Source.Text, false); err != nil {
				return err
			}
		}
		if seen {
			continue // its references are in already
		}
		if err := m.addRefs(c, r.Source.References, b, rootBase); err != nil {
			return err
		}
	}
	return nil
}

// baseURL is the URL relative references in doc, found at u, resolve against: its $id
// (id in draft 4) if it has one.
func baseURL(u string, doc *jnode) string {
	id, ok := doc.str("$id")
	if !ok {
		if s, _ := doc.str("$schema"); strings.Contains(s, "draft-04") {
			id, ok = doc.str("id")
		}
	}
	if !ok || id == "" {
		return u
	}
	b, err := resolveURL(u, id)
	if err != nil {
		return u
	}
	return b
}

func resolveURL(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	u := b.ResolveReference(r)
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// name is how messages name the schema at loc: "#/$defs/Node" in the root document,
// "address.json#/$defs/Node" in a referenced one.
func (m *mapper) name(loc string) string {
	doc, frag, _ := strings.Cut(loc, "#")
	if p, err := url.PathUnescape(frag); err == nil {
		frag = p
	}
	name, ok := m.names[doc]
	if !ok {
		name = doc
	}
	return name + "#" + frag
}

// raw returns the document-ordered form of s.
func (m *mapper) raw(s *jsonschema.Schema) *jnode {
	doc, frag, _ := strings.Cut(s.Location, "#")
	return m.docs[doc].lookup(frag)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func pathName(path string) string {
	if path == "" {
		return "(the value)"
	}
	return path
}

// mapSchema maps s to its node, or nil when s says nothing about the shape of a value
// ({}, true, or constraints only), which reads as JSON text once nothing else does.
func (m *mapper) mapSchema(s *jsonschema.Schema, path string, depth int) (*node, error) {
	if m.active[s] {
		return nil, fmt.Errorf("jsonfmt: field %q: the schema is recursive: %q refers to itself, and a table's type cannot nest without end",
			pathName(path), m.name(s.Location))
	}
	if depth > maxTypeDepth {
		return nil, fmt.Errorf("jsonfmt: field %q: the schema nests deeper than %d levels", pathName(path), maxTypeDepth)
	}
	if m.nodes++; m.nodes > maxNodes {
		return nil, fmt.Errorf("jsonfmt: the schema maps to more than %d types", maxNodes)
	}
	m.active[s] = true
	defer delete(m.active, s)

	if s.Bool != nil {
		return nil, nil
	}
	if s.RecursiveRef != nil || s.DynamicRef != nil {
		// Their targets depend on the dynamic scope; the value is kept as written.
		return jsonNode(), nil
	}

	// A union's branches are mapped first: when they differ the value is kept as JSON
	// text, whatever they hold (recursion included).
	var picks []*node
	for _, alts := range [][]*jsonschema.Schema{s.OneOf, s.AnyOf} {
		branches := choice(alts)
		switch len(branches) {
		case 0:
			continue
		case 1: // an optional X is X, refused like X if it recurses
			n, err := m.mapSchema(branches[0], path, depth)
			if err != nil {
				return nil, err
			}
			if n != nil {
				picks = append(picks, n)
			}
			continue
		}
		n := m.union(branches, path, depth)
		if n == nil {
			return jsonNode(), nil
		}
		picks = append(picks, n)
	}

	// The parts that together give the shape: the $ref target (draft 2019 and later keep
	// its siblings; earlier drafts ignore them, and so does the library), the allOf
	// members, the schema's own keywords, and the shape of a oneOf/anyOf's branches.
	var parts []*node
	addPart := func(sub *jsonschema.Schema) error {
		n, err := m.mapSchema(sub, path, depth)
		if n != nil {
			parts = append(parts, n)
		}
		return err
	}
	if s.Ref != nil {
		if err := addPart(s.Ref); err != nil {
			return nil, err
		}
	}
	for _, a := range s.AllOf {
		if err := addPart(a); err != nil {
			return nil, err
		}
	}
	own, err := m.own(s, path, depth)
	if err != nil {
		return nil, err
	}
	if own != nil {
		parts = append(parts, own)
	}
	return merge(append(parts, picks...)), nil
}

// union maps the shaped branches of a oneOf or anyOf: their shape when they all have the
// same one (say, integers with different bounds), else nil. A branch that cannot be
// mapped (it recurses) makes a union like any other: JSON text is always possible.
func (m *mapper) union(branches []*jsonschema.Schema, path string, depth int) *node {
	var first *node
	for _, b := range branches {
		n, err := m.mapSchema(b, path, depth)
		if err != nil || n == nil || (first != nil && !same(first, n)) {
			return nil
		}
		if first == nil {
			first = n
		}
	}
	return first
}

// choice returns the branches of a oneOf or anyOf that shape the value. Branches that
// only admit null (or nothing) are dropped: [null, X] is an optional X, as producers such
// as Jackson's schema generator and pydantic write them. A branch that admits anything
// makes the combinator constrain nothing: no branches.
func choice(alts []*jsonschema.Schema) []*jsonschema.Schema {
	var shaped []*jsonschema.Schema
	for _, b := range alts {
		switch {
		case nullOnly(b):
		case !shapeful(b):
			return nil
		default:
			shaped = append(shaped, b)
		}
	}
	return shaped
}

// nullOnly reports whether b's own keywords admit only null (or nothing: false).
func nullOnly(b *jsonschema.Schema) bool {
	if b.Bool != nil {
		return !*b.Bool
	}
	if b.Ref != nil || b.RecursiveRef != nil || b.DynamicRef != nil || len(b.AllOf)+len(b.AnyOf)+len(b.OneOf) > 0 {
		return false
	}
	if b.Types != nil {
		ts := b.Types.ToStrings()
		return len(ts) == 1 && ts[0] == "null"
	}
	for _, v := range values(b) {
		if v != nil {
			return false
		}
	}
	return b.Const != nil || b.Enum != nil
}

// shapeful reports whether b's own keywords say anything about the shape of a value.
func shapeful(b *jsonschema.Schema) bool {
	if b.Bool != nil {
		return false
	}
	_, addl := b.AdditionalProperties.(*jsonschema.Schema)
	return b.Ref != nil || b.RecursiveRef != nil || b.DynamicRef != nil || b.Types != nil ||
		b.Enum != nil || b.Const != nil || len(b.Properties) > 0 || len(b.PatternProperties) > 0 || addl ||
		b.Items != nil || b.Items2020 != nil || len(b.PrefixItems) > 0 ||
		len(b.AllOf)+len(b.AnyOf)+len(b.OneOf) > 0
}

// values returns the values an enum or const admits, or nil.
func values(s *jsonschema.Schema) []any {
	switch {
	case s.Const != nil:
		return []any{*s.Const}
	case s.Enum != nil:
		return s.Enum.Values
	}
	return nil
}

// ownType is the JSON type s's own keywords give its values: "type" when it has one
// non-null type, else what its enum or const values are, else what its keywords apply
// to. "json" is several types, "null" only null, "" nothing said.
func ownType(s *jsonschema.Schema) string {
	if s.Types != nil {
		var ts []string
		for _, t := range s.Types.ToStrings() {
			if t != "null" {
				ts = append(ts, t)
			}
		}
		switch len(ts) {
		case 0:
			return "null"
		case 1:
			return ts[0]
		}
		return "json"
	}
	if vals := values(s); vals != nil {
		t := "null"
		for _, v := range vals {
			var vt string
			switch v := v.(type) {
			case nil:
				continue
			case string:
				vt = "string"
			case bool:
				vt = "boolean"
			case json.Number:
				vt = "number"
				if _, msg := integer([]byte(v)); msg == "" && jsonscan.ValidNumber([]byte(v)) {
					vt = "integer"
				}
			default:
				return "json"
			}
			switch {
			case t == "null" || t == vt:
				t = vt
			case t == "integer" && vt == "number", t == "number" && vt == "integer":
				t = "number"
			default:
				return "json"
			}
		}
		return t
	}
	_, addl := s.AdditionalProperties.(*jsonschema.Schema)
	obj := len(s.Properties) > 0 || len(s.PatternProperties) > 0 || addl
	arr := s.Items != nil || s.Items2020 != nil || len(s.PrefixItems) > 0
	switch {
	case obj && arr:
		return "json"
	case obj:
		return "object"
	case arr:
		return "array"
	}
	return ""
}

// own maps s's own keywords, ignoring $ref and the combinators.
func (m *mapper) own(s *jsonschema.Schema, path string, depth int) (*node, error) {
	switch ownType(s) {
	case "":
		return nil, nil
	case "object":
		return m.object(s, path, depth)
	case "array":
		return m.array(s, path, depth)
	case "string":
		format, _ := m.raw(s).str("format")
		switch format {
		case "date-time":
			return primitive(kTimestampTz), nil
		case "date":
			return primitive(kDate), nil
		case "time":
			return primitive(kTime), nil
		case "uuid":
			return primitive(kUUID), nil
		}
		return primitive(kString), nil
	case "integer":
		return primitive(kLong), nil
	case "number":
		return primitive(kDouble), nil
	case "boolean":
		return primitive(kBool), nil
	}
	return jsonNode(), nil // several types, or only null
}

// object maps an object: a struct of its properties when it has any (patternProperties
// and additionalProperties are then ignored: the declared properties are the table's
// shape, and extra keys are dropped like any unknown key); else a map when every value
// schema maps to one type; else JSON text.
func (m *mapper) object(s *jsonschema.Schema, path string, depth int) (*node, error) {
	if len(s.Properties) > 0 {
		raw := m.raw(s).member("properties")
		if raw == nil || len(raw.keys) != len(s.Properties) {
			return nil, fmt.Errorf("jsonfmt: field %q: cannot find the properties of %q in the schema text", pathName(path), m.name(s.Location))
		}
		fields := make([]field, 0, len(raw.keys))
		for _, name := range raw.keys {
			sub := s.Properties[name]
			if sub == nil {
				return nil, fmt.Errorf("jsonfmt: field %q: cannot find property %q of %q", pathName(path), name, m.name(s.Location))
			}
			n, err := m.mapSchema(sub, join(path, name), depth+1)
			if err != nil {
				return nil, err
			}
			if n == nil {
				n = jsonNode()
			}
			fields = append(fields, field{name, n})
		}
		return structNode(fields), nil
	}

	var vals []*jsonschema.Schema
	pats := make([]jsonschema.Regexp, 0, len(s.PatternProperties))
	for re := range s.PatternProperties {
		pats = append(pats, re)
	}
	slices.SortFunc(pats, func(a, b jsonschema.Regexp) int { return strings.Compare(a.String(), b.String()) })
	for _, re := range pats {
		vals = append(vals, s.PatternProperties[re])
	}
	if a, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		vals = append(vals, a)
	}
	var val *node
	for _, v := range vals {
		n, err := m.mapSchema(v, join(path, "value"), depth+1)
		if err != nil {
			return nil, err
		}
		switch {
		case n == nil: // admits anything: says nothing about the values
		case val == nil:
			val = n
		case !same(val, n):
			return jsonNode(), nil
		}
	}
	if val == nil {
		n := jsonNode()
		n.bare = 'o'
		return n, nil
	}
	return mapNode(val), nil
}

// array maps an array: a list of its items' type; a tuple (prefixItems, or items as an
// array before draft 2020) or an array without items is a list of JSON text, which keeps
// the elements and their order.
func (m *mapper) array(s *jsonschema.Schema, path string, depth int) (*node, error) {
	var items *jsonschema.Schema
	switch it := s.Items.(type) {
	case *jsonschema.Schema:
		items = it
	case []*jsonschema.Schema:
		return listNode(jsonNode()), nil
	}
	if len(s.PrefixItems) > 0 {
		return listNode(jsonNode()), nil
	}
	if s.Items2020 != nil {
		items = s.Items2020
	}
	var elem *node
	if items != nil {
		n, err := m.mapSchema(items, join(path, "element"), depth+1)
		if err != nil {
			return nil, err
		}
		elem = n
	}
	if elem == nil {
		n := listNode(jsonNode())
		n.bare = 'a'
		return n, nil
	}
	return listNode(elem), nil
}

// merge combines the parts of one schema (see mapSchema). Parts that are the same shape
// are one; objects merge into one struct when no property has two different types; a
// bare object or array gives way to a part of its kind that says more. Anything else
// (say, allOf of a string and an object, which no value satisfies) is JSON text.
func merge(parts []*node) *node {
	if len(parts) <= 1 {
		if len(parts) == 0 {
			return nil
		}
		return parts[0]
	}
	category := func(n *node) byte {
		switch n.kind {
		case kStruct, kMap:
			return 'o'
		case kList:
			return 'a'
		}
		return 0
	}
	var kept []*node
	for _, p := range parts {
		if p.bare != 0 && slices.ContainsFunc(parts, func(q *node) bool { return q.bare == 0 && category(q) == p.bare }) {
			continue
		}
		kept = append(kept, p)
	}
	if !slices.ContainsFunc(kept[1:], func(q *node) bool { return !same(kept[0], q) }) {
		return kept[0]
	}
	var fields []field
	for _, p := range kept {
		if p.kind != kStruct {
			return jsonNode()
		}
		for _, f := range p.fields {
			if old := fieldNode(fields, f.name); old != nil {
				if !same(old, f.node) {
					return jsonNode()
				}
				continue
			}
			fields = append(fields, f)
		}
	}
	return structNode(fields)
}

func fieldNode(fields []field, name string) *node {
	for _, f := range fields {
		if f.name == name {
			return f.node
		}
	}
	return nil
}
