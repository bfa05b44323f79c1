package tableschema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
)

// Version is one version of a table's schema: how its records decode (Spec) and the
// Iceberg schema of its rows, with field ids. Versions are numbered from 0, never change
// once stored, and every file records the version it was built with, so a file is always
// rebuilt the way it was first built. A new version keeps every field id of the one
// before (Iceberg schema evolution: engines project old files by id).
type Version struct {
	ID     int
	Spec   Spec
	Schema *iceberg.Schema // Schema.ID is its Iceberg schema id; versions with equal schemas share one
}

// ValueColumns returns the positions of the version's value columns: the top-level
// fields that are not Kafka columns, in order (for JSON tables, the declared columns).
func (v Version) ValueColumns() []int {
	var out []int
	for i, f := range v.Schema.Fields() {
		if !IsKafkaColumn(f.Name) {
			out = append(out, i)
		}
	}
	return out
}

// ValueTarget is the type a registry schema's values bind to at this version, given the
// kind of the schema's Root: for a struct root, the struct of the value columns; for any
// other root, the type of the column "value". ok is false when a non-struct root has no
// "value" column to go to.
func (v Version) ValueTarget(root iceberg.Type) (target iceberg.Type, cols []int, ok bool) {
	fields := v.Schema.Fields()
	cols = v.ValueColumns()
	if _, isStruct := root.(*iceberg.StructType); isStruct {
		st := &iceberg.StructType{}
		for _, i := range cols {
			st.FieldList = append(st.FieldList, fields[i])
		}
		return st, cols, true
	}
	for _, i := range cols {
		if fields[i].Name == ColumnRawValue {
			return fields[i].Type, []int{i}, true
		}
	}
	return nil, nil, false
}

// KeyTarget is the type of ColumnKafkaKeyDecoded and its position; ok is false when the
// version has no decoded key.
func (v Version) KeyTarget() (iceberg.Type, int, bool) {
	for i, f := range v.Schema.Fields() {
		if f.Name == ColumnKafkaKeyDecoded {
			return f.Type, i, true
		}
	}
	return nil, -1, false
}

// Conflict is a field whose type in a writer schema cannot be read as the table's type
// for it, and that the table cannot widen to: string in the schema, int in the table.
type Conflict struct {
	Path   string // dotted field path from the value (or key) root; "" for the root itself
	Schema string // the type in the writer schema, in Iceberg's names ("string")
	Table  string // the type in the table ("int")
}

func (c *Conflict) Error() string {
	path := c.Path
	if path == "" {
		path = "(the value)"
	}
	return fmt.Sprintf("field %q is %s in the writer schema but %s in the table", path, c.Schema, c.Table)
}

// Promotable reports whether a value of Iceberg primitive type from can be read as
// primitive type to: equal types, and Iceberg's promotions int→long, float→double and
// decimal(P,S)→decimal(P2,S) with P2 ≥ P.
func Promotable(from, to iceberg.Type) bool {
	if from.Equals(to) {
		return true
	}
	switch f := from.(type) {
	case iceberg.Int32Type:
		_, ok := to.(iceberg.Int64Type)
		return ok
	case iceberg.Float32Type:
		_, ok := to.(iceberg.Float64Type)
		return ok
	case iceberg.DecimalType:
		t, ok := to.(iceberg.DecimalType)
		return ok && t.Scale() == f.Scale() && t.Precision() >= f.Precision()
	}
	return false
}

// Merge returns table type t (with ids) with writer type w (ids unset) merged in: struct
// fields of w that t lacks are added after t's (ids from nextID, in Iceberg's fresh-id
// order), primitives of t widened where w is wider and Iceberg can promote, required
// made optional where w is optional. t is not modified. changed says whether the result
// differs from t; conflicts are the fields whose types cannot be merged (t keeps its
// type there).
func Merge(t, w iceberg.Type, nextID func() int) (out iceberg.Type, changed bool, conflicts []Conflict) {
	m := merger{nextID: nextID}
	out = m.merge(t, w, "")
	return out, m.changed, m.conflicts
}

type merger struct {
	nextID    func() int
	changed   bool
	conflicts []Conflict
	top       bool // merging the top level of a table: names are checked
}

func (m *merger) conflict(path string, w, t iceberg.Type) {
	m.conflicts = append(m.conflicts, Conflict{Path: path, Schema: w.String(), Table: t.String()})
}

func join(path, name string) string {
	if path == "" || name == "" {
		return path + name
	}
	return path + "." + name
}

func (m *merger) merge(t, w iceberg.Type, path string) iceberg.Type {
	switch tt := t.(type) {
	case *iceberg.StructType:
		ws, ok := w.(*iceberg.StructType)
		if !ok {
			m.conflict(path, w, t)
			return t
		}
		top := m.top
		m.top = false
		out := &iceberg.StructType{FieldList: slices.Clone(tt.FieldList)}
		lower := map[string]bool{}
		for _, f := range tt.FieldList {
			lower[strings.ToLower(f.Name)] = true
		}
		for _, wf := range ws.FieldList {
			i := slices.IndexFunc(out.FieldList, func(f iceberg.NestedField) bool { return f.Name == wf.Name })
			if i < 0 {
				if top {
					// A new column must not clash with Mink's columns or, ignoring case,
					// with another column (Spark would not tell them apart).
					if err := validColumnName(wf.Name); err != nil || lower[strings.ToLower(wf.Name)] {
						m.conflicts = append(m.conflicts, Conflict{Path: join(path, wf.Name), Schema: wf.Type.String(), Table: "(no column can have this name)"})
						continue
					}
				}
				lower[strings.ToLower(wf.Name)] = true
				nf := iceberg.NestedField{Name: wf.Name, Type: cloneType(wf.Type), ID: m.nextID()}
				assignNested(nf.Type, m.nextID)
				out.FieldList = append(out.FieldList, nf)
				m.changed = true
				continue
			}
			f := out.FieldList[i]
			f.Type = m.merge(f.Type, wf.Type, join(path, wf.Name))
			if f.Required && !wf.Required {
				f.Required = false
				m.changed = true
			}
			out.FieldList[i] = f
		}
		return out
	case *iceberg.ListType:
		wl, ok := w.(*iceberg.ListType)
		if !ok {
			m.conflict(path, w, t)
			return t
		}
		out := *tt
		out.Element = m.merge(tt.Element, wl.Element, join(path, "element"))
		if out.ElementRequired && !wl.ElementRequired {
			out.ElementRequired = false
			m.changed = true
		}
		return &out
	case *iceberg.MapType:
		wm, ok := w.(*iceberg.MapType)
		if !ok {
			m.conflict(path, w, t)
			return t
		}
		out := *tt
		// A key is required and identifies the entry: it must not change type.
		if !wm.KeyType.Equals(tt.KeyType) && !Promotable(wm.KeyType, tt.KeyType) {
			m.conflict(join(path, "key"), wm.KeyType, tt.KeyType)
		}
		out.ValueType = m.merge(tt.ValueType, wm.ValueType, join(path, "value"))
		if out.ValueRequired && !wm.ValueRequired {
			out.ValueRequired = false
			m.changed = true
		}
		return &out
	}
	// t is a primitive.
	switch w.(type) {
	case *iceberg.StructType, *iceberg.ListType, *iceberg.MapType:
		m.conflict(path, w, t)
		return t
	}
	switch {
	case Promotable(w, t):
		return t
	case Promotable(t, w):
		m.changed = true
		return w
	}
	m.conflict(path, w, t)
	return t
}

// HighestID is the largest field id in schemas: new fields get ids above it, so an id is
// never given twice even across versions.
func HighestID(schemas ...*iceberg.Schema) int {
	n := 0
	for _, s := range schemas {
		n = max(n, s.HighestFieldID())
	}
	return n
}

// Evolve returns the top-level fields of the version with a writer schema merged in:
// value is the value schema's Root (nil: none), key the key schema's (nil: none). New
// value columns go before the Kafka columns; new ids start above lastID. changed says
// whether the fields differ from the version's; conflicts are what could not be merged
// (records of that writer schema become error rows).
func (v Version) Evolve(value, key iceberg.Type, lastID int) (fields []iceberg.NestedField, changed bool, conflicts []Conflict) {
	next := lastID
	m := &merger{nextID: func() int { next++; return next }}
	fields = slices.Clone(v.Schema.Fields())
	if value != nil {
		cols := v.ValueColumns()
		if _, isStruct := value.(*iceberg.StructType); isStruct {
			cur := &iceberg.StructType{}
			for _, i := range cols {
				cur.FieldList = append(cur.FieldList, fields[i])
			}
			m.top = true
			merged := m.merge(cur, value, "").(*iceberg.StructType)
			m.top = false
			// Value columns come first, then Mink's: new columns go after the others.
			var rest []iceberg.NestedField
			for i, f := range fields {
				if !slices.Contains(cols, i) {
					rest = append(rest, f)
				}
			}
			fields = slices.Concat(merged.FieldList, rest)
		} else {
			i := slices.IndexFunc(fields, func(f iceberg.NestedField) bool { return f.Name == ColumnRawValue })
			if i < 0 {
				m.conflicts = append(m.conflicts, Conflict{Schema: value.String(), Table: "a table of record values"})
			} else {
				fields[i].Type = m.merge(fields[i].Type, value, "")
			}
		}
	}
	if key != nil {
		i := slices.IndexFunc(fields, func(f iceberg.NestedField) bool { return f.Name == ColumnKafkaKeyDecoded })
		if i < 0 {
			m.conflicts = append(m.conflicts, Conflict{Path: ColumnKafkaKeyDecoded, Schema: key.String(), Table: "(no decoded key)"})
		} else {
			before := len(m.conflicts)
			fields[i].Type = m.merge(fields[i].Type, key, "")
			for j := before; j < len(m.conflicts); j++ {
				m.conflicts[j].Path = join("key", m.conflicts[j].Path)
			}
		}
	}
	return fields, m.changed, m.conflicts
}

// Covers reports whether records written with a schema whose value and key Roots are
// value and key (nil: none) decode at this version without a newer one: merging them in
// would change nothing (conflicts aside, which stay error rows).
func (v Version) Covers(value, key iceberg.Type) bool {
	_, changed, _ := v.Evolve(value, key, HighestID(v.Schema))
	return !changed
}
