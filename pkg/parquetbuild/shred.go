package parquetbuild

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/parquet-go/parquet-go"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Rows are shredded into Parquet values column by column (Dremel's record shredding):
// every leaf column has the path of nodes from its top-level field down to itself, and
// the values of a row's column are found by walking the row's value tree along that
// path. A parquet.Row must hold its values in column order; walking once per column
// gives that order directly, without per-column buffers, at the price of walking the
// lists above a column once for each column below them.

// conv is how a rowcodec value becomes a parquet value.
type conv uint8

const (
	convBool conv = iota
	convInt32
	convInt64
	convFloat
	convDouble
	convBytes
	convFixed
)

// nodeKind is what a node of a column's path is.
type nodeKind uint8

const (
	nodePrimitive nodeKind = iota // the column itself
	nodeStruct
	nodeList
	nodeMap
)

// pathNode is one Iceberg field on the way to a column: a top-level field, a struct
// field, a list element, a map key or value, and last the column's primitive.
type pathNode struct {
	kind     nodeKind
	optional bool // null is allowed; a null is written at def-1
	// def is the definition level of a present value of this node; an empty list or
	// map is written at it.
	def int
	// rep is the repetition level of the second and later entries of a list or map.
	rep   int
	child int // struct: index of the field towards the column; map: 0 key, 1 value
	width int // struct: number of fields
}

// column is one Parquet leaf column: where its values are in a row and how they convert.
type column struct {
	index int // Parquet column index
	field int // top-level field, index into Row.Values
	conv  conv
	size  int // byte length of a fixed-length value (convFixed)
	nodes []pathNode
	path  []string // Parquet path (list.element, key_value.key ...)
	leaf  *leaf
}

func (c *column) shapeError(format string, args ...any) error {
	return fmt.Errorf("column %s: %s", strings.Join(c.path, "."), fmt.Sprintf(format, args...))
}

// plan compiles the columns of fields, in the order of the Parquet schema's columns.
func (b *Builder) plan(fields []iceberg.NestedField) error {
	for i, f := range fields {
		if err := b.planNode(i, f.Type, !f.Required, f.ID, nil, []string{f.Name}, 0, 0, true); err != nil {
			return fmt.Errorf("parquetbuild: field %q: %w", f.Name, err)
		}
	}
	if len(b.cols) > parquet.MaxColumnIndex {
		return fmt.Errorf("parquetbuild: %d columns, at most %d are supported", len(b.cols), parquet.MaxColumnIndex)
	}
	return nil
}

// planNode plans the columns below a node of type t. def and rep are the levels of its
// parent; keepBounds says whether Iceberg keeps bounds below it (not in lists or maps).
func (b *Builder) planNode(field int, t iceberg.Type, optional bool, id int, nodes []pathNode, path []string, def, rep int, keepBounds bool) error {
	if optional {
		def++
	}
	if def > parquet.MaxDefinitionLevel || rep > parquet.MaxRepetitionLevel {
		return fmt.Errorf("nested too deeply")
	}
	n := pathNode{optional: optional, def: def}
	switch t := t.(type) {
	case *iceberg.StructType:
		n.kind, n.width = nodeStruct, len(t.FieldList)
		for i, f := range t.FieldList {
			n.child = i
			if err := b.planNode(field, f.Type, !f.Required, f.ID, append(nodes, n), append(path, f.Name), def, rep, keepBounds); err != nil {
				return err
			}
		}
		return nil
	case *iceberg.ListType:
		// The repeated group adds a definition level (an entry exists) and a
		// repetition level.
		n.kind, n.rep = nodeList, rep+1
		return b.planNode(field, t.Element, !t.ElementRequired, t.ElementID, append(nodes, n), append(path, "list", "element"), def+1, rep+1, false)
	case *iceberg.MapType:
		n.kind, n.rep = nodeMap, rep+1
		n.child = 0
		if err := b.planNode(field, t.KeyType, false, t.KeyID, append(nodes, n), append(path, "key_value", "key"), def+1, rep+1, false); err != nil {
			return err
		}
		n.child = 1
		return b.planNode(field, t.ValueType, !t.ValueRequired, t.ValueID, append(nodes, n), append(path, "key_value", "value"), def+1, rep+1, false)
	}
	c, size, err := convOf(t)
	if err != nil {
		return err
	}
	l := &leaf{fieldID: id}
	if keepBounds {
		l.bounds = boundsFor(t)
	}
	n.kind = nodePrimitive
	b.cols = append(b.cols, column{
		index: len(b.cols),
		field: field,
		conv:  c,
		size:  size,
		// Siblings share the backing arrays of nodes and path: each column keeps a copy.
		nodes: slices.Clone(append(nodes, n)),
		path:  slices.Clone(path),
		leaf:  l,
	})
	b.leaves = append(b.leaves, l)
	return nil
}

// checkPlan checks the plan against the columns parquet-go derived from the schema:
// same order, same levels. A mismatch is a bug here, and would write a corrupt file.
func (b *Builder) checkPlan(schema *parquet.Schema) error {
	if got := len(schema.Columns()); got != len(b.cols) {
		return fmt.Errorf("parquetbuild: schema has %d columns, plan %d", got, len(b.cols))
	}
	for i := range b.cols {
		c := &b.cols[i]
		lc, ok := schema.Lookup(c.path...)
		n := c.nodes[len(c.nodes)-1]
		maxRep := 0
		for _, p := range c.nodes {
			maxRep = max(maxRep, p.rep)
		}
		if !ok || lc.ColumnIndex != c.index || lc.MaxDefinitionLevel != n.def || lc.MaxRepetitionLevel != maxRep {
			return fmt.Errorf("parquetbuild: column %s: plan (index %d, def %d, rep %d) does not match the schema (%v: index %d, def %d, rep %d)",
				strings.Join(c.path, "."), c.index, n.def, maxRep, ok, lc.ColumnIndex, lc.MaxDefinitionLevel, lc.MaxRepetitionLevel)
		}
	}
	return nil
}

// checkFieldIDs checks that every field has an id, unique in the schema: statistics
// are keyed by them, and parquet-go writes no id for 0.
func checkFieldIDs(fields []iceberg.NestedField) error {
	seen := map[int]string{}
	check := func(id int, name string) error {
		if id <= 0 {
			return fmt.Errorf("parquetbuild: field %s: id %d is not positive", name, id)
		}
		if other, dup := seen[id]; dup {
			return fmt.Errorf("parquetbuild: fields %s and %s have the same id %d", other, name, id)
		}
		seen[id] = name
		return nil
	}
	var walk func(t iceberg.Type, name string) error
	walk = func(t iceberg.Type, name string) error {
		switch t := t.(type) {
		case *iceberg.StructType:
			for _, f := range t.FieldList {
				if err := check(f.ID, name+"."+f.Name); err != nil {
					return err
				}
				if err := walk(f.Type, name+"."+f.Name); err != nil {
					return err
				}
			}
		case *iceberg.ListType:
			if err := check(t.ElementID, name+".element"); err != nil {
				return err
			}
			return walk(t.Element, name+".element")
		case *iceberg.MapType:
			if err := check(t.KeyID, name+".key"); err != nil {
				return err
			}
			if err := check(t.ValueID, name+".value"); err != nil {
				return err
			}
			if err := walk(t.KeyType, name+".key"); err != nil {
				return err
			}
			return walk(t.ValueType, name+".value")
		}
		return nil
	}
	for _, f := range fields {
		if err := check(f.ID, f.Name); err != nil {
			return err
		}
		if err := walk(f.Type, f.Name); err != nil {
			return err
		}
	}
	return nil
}

// convOf returns how values of t convert, and the byte length of fixed-length values.
func convOf(t iceberg.Type) (conv, int, error) {
	switch t := t.(type) {
	case iceberg.BooleanType:
		return convBool, 0, nil
	case iceberg.Int32Type, iceberg.DateType:
		return convInt32, 0, nil
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType:
		return convInt64, 0, nil
	case iceberg.Float32Type:
		return convFloat, 0, nil
	case iceberg.Float64Type:
		return convDouble, 0, nil
	case iceberg.StringType, iceberg.BinaryType:
		return convBytes, 0, nil
	case iceberg.UUIDType:
		return convFixed, 16, nil
	case iceberg.FixedType:
		return convFixed, t.Len(), nil
	case iceberg.DecimalType:
		switch p := t.Precision(); {
		case p <= 9:
			return convInt32, 0, nil
		case p <= 18:
			return convInt64, 0, nil
		}
		return convFixed, tableschema.DecimalBytes(t.Precision()), nil
	}
	return 0, 0, fmt.Errorf("type %s is not supported", t)
}

// appendRow appends the values of b.row, column by column as parquet.Row wants them,
// and counts them into the columns' statistics. An error means the row does not have
// the shape of the schema; b.vals then holds part of it.
func (b *Builder) appendRow() error {
	values := b.row.Values
	if len(values) != b.nfields {
		return fmt.Errorf("row has %d values for %d fields", len(values), b.nfields)
	}
	vals := b.vals
	for i := range b.cols {
		c := &b.cols[i]
		v := &values[c.field]
		if len(c.nodes) > 1 {
			var err error
			if vals, err = b.walk(c, 0, v, 0, vals); err != nil {
				b.vals = vals
				return err
			}
			continue
		}
		// A top-level primitive, most columns: walk's first step, inlined.
		n, l := &c.nodes[0], c.leaf
		if !v.Valid {
			if !n.optional {
				b.vals = vals
				return c.shapeError("null in a required field")
			}
			l.values++
			l.nulls++
			vals = append(vals, parquet.Value{}.Level(0, 0, c.index))
			continue
		}
		pv, err := b.convert(c, v)
		if err != nil {
			b.vals = vals
			return err
		}
		l.values++
		vals = append(vals, pv.Level(0, n.def, c.index))
		if l.bounds != nil {
			l.bounds.observe(v)
		}
	}
	b.vals = vals
	b.rowEnds = append(b.rowEnds, len(vals))
	return nil
}

// walk appends the values of column c found in v, the value of c.nodes[d], whose first
// value is at repetition level rep. Every call appends at least one value: a null or
// empty node stands for all of the column's values below it.
func (b *Builder) walk(c *column, d int, v *rowcodec.Value, rep int, vals []parquet.Value) ([]parquet.Value, error) {
	n := &c.nodes[d]
	if !v.Valid {
		if !n.optional {
			return vals, c.shapeError("null in a required field (level %d)", d)
		}
		c.leaf.values++
		c.leaf.nulls++
		return append(vals, parquet.Value{}.Level(rep, n.def-1, c.index)), nil
	}
	switch n.kind {
	case nodePrimitive:
		pv, err := b.convert(c, v)
		if err != nil {
			return vals, err
		}
		c.leaf.values++
		if c.leaf.bounds != nil {
			c.leaf.bounds.observe(v)
		}
		return append(vals, pv.Level(rep, n.def, c.index)), nil
	case nodeStruct:
		if len(v.Elems) != n.width {
			return vals, c.shapeError("a struct of %d fields has %d values (level %d)", n.width, len(v.Elems), d)
		}
		return b.walk(c, d+1, &v.Elems[n.child], rep, vals)
	}
	// A list or a map.
	if len(v.Elems) == 0 {
		c.leaf.values++
		c.leaf.nulls++
		return append(vals, parquet.Value{}.Level(rep, n.def, c.index)), nil
	}
	var err error
	for j := range v.Elems {
		e := &v.Elems[j]
		if n.kind == nodeMap {
			if !e.Valid || len(e.Elems) != 2 {
				return vals, c.shapeError("map entry %d is not a [key, value] pair (level %d)", j, d)
			}
			e = &e.Elems[n.child]
		}
		if vals, err = b.walk(c, d+1, e, rep, vals); err != nil {
			return vals, err
		}
		rep = n.rep
	}
	return vals, nil
}

func (b *Builder) convert(c *column, v *rowcodec.Value) (parquet.Value, error) {
	switch c.conv {
	case convBool:
		return parquet.BooleanValue(v.Int != 0), nil
	case convInt32:
		return parquet.Int32Value(int32(v.Int)), nil
	case convInt64:
		return parquet.Int64Value(v.Int), nil
	case convFloat:
		return parquet.FloatValue(float32(v.Float)), nil
	case convDouble:
		return parquet.DoubleValue(v.Float), nil
	case convBytes:
		return parquet.ByteArrayValue(b.arena.copy(v.Bytes)), nil
	}
	// A wrong length would shift every later value of the page.
	if len(v.Bytes) != c.size {
		return parquet.Value{}, c.shapeError("a fixed-length value of %d bytes, want %d", len(v.Bytes), c.size)
	}
	return parquet.FixedLenByteArrayValue(b.arena.copy(v.Bytes)), nil
}
