package jsoninfer

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/tableschema"
)

// Grow merges the fields of one JSON record into columns, an inferred version's
// columns: a field they lack becomes a column (nested: a struct field; ids from nextID),
// within the bounds of tableschema (InferMax*). in gets the JSON key of every new field
// whose name had to be sanitised and, for a new top-level column, since (where the data
// showed it). changed says whether anything was added; columns is not modified. A record
// that is not a JSON object adds nothing (it is an error row). Types never change once
// inferred: a value of another type does not fit its column (Decoder keeps it in
// _mink_unfit), as Iceberg cannot widen long to double or a scalar to a struct.
func Grow(columns []iceberg.NestedField, in *tableschema.Inference, data []byte, nextID func() int, since string) ([]iceberg.NestedField, bool) {
	var scratch []byte
	doc, _ := parse(data, &scratch)
	if doc == nil || doc.kind != kObject {
		return columns, false
	}
	return grow(columns, countFields(columns), in, in, doc, nextID, since)
}

// grow is Grow of a parsed record, with the table's field count, reading the keys of
// fields from base and writing new ones to out.
func grow(columns []iceberg.NestedField, count int, base, out *tableschema.Inference, doc *node, nextID func() int, since string) ([]iceberg.NestedField, bool) {
	g := &grower{base: base, in: out, nextID: nextID, since: since, count: count}
	return g.object(columns, doc, 1, true)
}

// countFields counts fields, nested struct fields included (list elements are not fields).
func countFields(fs []iceberg.NestedField) int {
	n := 0
	for _, f := range fs {
		n += 1 + countIn(f.Type)
	}
	return n
}

func countIn(t iceberg.Type) int {
	switch t := t.(type) {
	case *iceberg.StructType:
		return countFields(t.FieldList)
	case *iceberg.ListType:
		return countIn(t.Element)
	}
	return 0
}

type grower struct {
	base     *tableschema.Inference // the keys of the fields given
	in       *tableschema.Inference // where new fields' keys go
	nextID   func() int
	since    string
	count    int // fields the table has
	building int // > 0 while a new field's type is being built
	pending  []keyed
}

// keyed is the JSON key of a field being built whose name is not its key.
type keyed struct {
	id  int
	key string
}

// object merges object n into fields, the members of a struct at depth (1: the columns).
func (g *grower) object(fields []iceberg.NestedField, n *node, depth int, top bool) ([]iceberg.NestedField, bool) {
	out := fields
	changed := false
	for i, k := range n.keys {
		v := n.kids[i]
		j := slices.IndexFunc(out, func(f iceberg.NestedField) bool { return g.key(f) == string(k) })
		if j >= 0 {
			t, ch := g.merge(out[j].Type, v, depth)
			if ch {
				if !changed {
					out = slices.Clone(out)
				}
				out[j].Type = t
				changed = true
			}
			continue
		}
		if len(k) > tableschema.InferMaxNameLen || depth > tableschema.InferMaxDepth {
			continue // past the bounds: kept in _mink_unfit
		}
		saved := len(g.pending)
		id := g.nextID()
		g.building++
		t := g.typeOf(v, depth)
		g.building--
		if t == nil || g.building == 0 && g.count+1+countIn(t) > tableschema.InferMaxColumns {
			g.pending = g.pending[:saved] // waits for a value, or past the bounds
			continue
		}
		name := sanitise(string(k), out, top)
		if name != string(k) {
			g.pending = append(g.pending, keyed{id, string(k)})
		}
		if !changed {
			out = slices.Clone(out)
		}
		out = append(out, iceberg.NestedField{ID: id, Name: name, Type: t})
		changed = true
		if g.building > 0 {
			continue
		}
		g.count += 1 + countIn(t)
		for _, p := range g.pending {
			if g.in.Keys == nil {
				g.in.Keys = map[int]string{}
			}
			g.in.Keys[p.id] = p.key
		}
		g.pending = g.pending[:0]
		if top && g.since != "" {
			if g.in.Since == nil {
				g.in.Since = map[int]string{}
			}
			g.in.Since[id] = g.since
		}
	}
	return out, changed
}

// key is the JSON key a field reads, a field being built's included.
func (g *grower) key(f iceberg.NestedField) string {
	for _, p := range g.pending {
		if p.id == f.ID {
			return p.key
		}
	}
	if k, ok := g.in.Keys[f.ID]; ok {
		return k
	}
	return g.base.Key(f)
}

// merge merges value v into type t of a field at depth.
func (g *grower) merge(t iceberg.Type, v *node, depth int) (iceberg.Type, bool) {
	switch tt := t.(type) {
	case *iceberg.StructType:
		if v.kind != kObject {
			return t, false
		}
		fs, ch := g.object(tt.FieldList, v, depth+1, false)
		if !ch {
			return t, false
		}
		return &iceberg.StructType{FieldList: fs}, true
	case *iceberg.ListType:
		if v.kind != kArray {
			return t, false
		}
		elem, changed := tt.Element, false
		for _, e := range v.kids {
			if ne, ch := g.merge(elem, e, depth+1); ch {
				elem, changed = ne, true
			}
		}
		if !changed {
			return t, false
		}
		nl := *tt
		nl.Element = elem
		return &nl, true
	}
	return t, false // a primitive stays what it is
}

// typeOf is the type a new field at depth takes from its value (ids from nextID); nil
// while it cannot tell (null, an empty object or list, a list of nulls).
func (g *grower) typeOf(v *node, depth int) iceberg.Type {
	switch v.kind {
	case kBool:
		return iceberg.PrimitiveTypes.Bool
	case kInt:
		return iceberg.PrimitiveTypes.Int64
	case kNum:
		return iceberg.PrimitiveTypes.Float64
	case kString:
		return iceberg.PrimitiveTypes.String
	case kObject:
		fs, _ := g.object(nil, v, depth+1, false)
		if len(fs) == 0 {
			return nil
		}
		return &iceberg.StructType{FieldList: fs}
	case kArray:
		if depth+1 > tableschema.InferMaxDepth {
			return nil
		}
		var elem iceberg.Type
		id := 0
		for _, e := range v.kids {
			if elem == nil {
				if id == 0 {
					id = g.nextID()
				}
				elem = g.typeOf(e, depth+1)
				continue
			}
			if ne, ch := g.merge(elem, e, depth+1); ch {
				elem = ne
			}
		}
		if elem == nil {
			return nil
		}
		return &iceberg.ListType{ElementID: id, Element: elem}
	}
	return nil
}

// sanitise makes a JSON key a field name engines use as is: letters, digits and _, not
// starting with a digit, at most InferMaxNameLen bytes; a column's not starting with
// Mink's prefixes (_kafka_, _mink_); unique ignoring case among fields (suffixes _2,
// _3, ...). Every other character becomes _.
func sanitise(key string, fields []iceberg.NestedField, top bool) string {
	var b strings.Builder
	for _, r := range key {
		if r == '_' || r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	lower := strings.ToLower(name)
	if name == "" || name[0] >= '0' && name[0] <= '9' || top && (strings.HasPrefix(lower, "_kafka_") || strings.HasPrefix(lower, "_mink_")) {
		name = "_" + name
	}
	if len(name) > tableschema.InferMaxNameLen {
		name = name[:tableschema.InferMaxNameLen]
	}
	taken := func(n string) bool {
		return slices.ContainsFunc(fields, func(f iceberg.NestedField) bool { return strings.EqualFold(f.Name, n) })
	}
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		suffix := fmt.Sprintf("_%d", i)
		n := name
		if len(n)+len(suffix) > tableschema.InferMaxNameLen {
			n = n[:tableschema.InferMaxNameLen-len(suffix)]
		}
		if !taken(n + suffix) {
			return n + suffix
		}
	}
}

// Sample is one record of the sample an inferred table's first columns come from.
type Sample struct {
	Value []byte
	Since string // where it is: "partition P offset O"
}

// First returns the top-level fields of an inferred table's first version, grown from
// samples in order (none: the Kafka columns and _mink_unfit alone), and its inference.
func First(samples []Sample) ([]iceberg.NestedField, *tableschema.Inference) {
	in := &tableschema.Inference{}
	var columns []iceberg.NestedField
	next := 0
	nextID := func() int { next++; return next }
	for _, s := range samples {
		columns, _ = Grow(columns, in, s.Value, nextID, s.Since)
	}
	return tableschema.InferredFields(columns, next), in
}
