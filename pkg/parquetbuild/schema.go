package parquetbuild

import (
	"fmt"
	"reflect"

	"github.com/apache/iceberg-go"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/minkhq/mink/pkg/tableschema"
)

// The Parquet schema follows Iceberg's Parquet mapping (Iceberg spec, "Parquet"): every
// node carries its Iceberg field id, columns keep the Iceberg field order, lists use the
// standard three-level form (list.element), maps the standard MAP form (key_value with
// a required key and the value), and types are the ones Iceberg's own writer uses.

// parquetSchema returns the Parquet schema of a table's fields.
func parquetSchema(fields []iceberg.NestedField) (*parquet.Schema, error) {
	root, err := groupOf(fields)
	if err != nil {
		return nil, err
	}
	return parquet.NewSchema("table", root), nil
}

func groupOf(fields []iceberg.NestedField) (*orderedGroup, error) {
	g := &orderedGroup{}
	for _, f := range fields {
		n, err := nodeOf(f.Type, f.Required, f.ID)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		g.fields = append(g.fields, namedNode{Node: n, name: f.Name})
	}
	return g, nil
}

func nodeOf(t iceberg.Type, required bool, id int) (parquet.Node, error) {
	var n parquet.Node
	switch t := t.(type) {
	case *iceberg.ListType:
		elem, err := nodeOf(t.Element, t.ElementRequired, t.ElementID)
		if err != nil {
			return nil, err
		}
		n = parquet.List(elem)
	case *iceberg.MapType:
		// Map keys are always required (Iceberg spec); parquet.Map marks them so.
		key, err := nodeOf(t.KeyType, true, t.KeyID)
		if err != nil {
			return nil, err
		}
		value, err := nodeOf(t.ValueType, t.ValueRequired, t.ValueID)
		if err != nil {
			return nil, err
		}
		n = parquet.Map(key, value)
	case *iceberg.StructType:
		if len(t.FieldList) == 0 {
			// A group without leaves has no column to carry its nulls.
			return nil, fmt.Errorf("empty structs are not supported")
		}
		g, err := groupOf(t.FieldList)
		if err != nil {
			return nil, err
		}
		n = g
	case iceberg.PrimitiveType:
		leaf, err := leafOf(t)
		if err != nil {
			return nil, err
		}
		n = leaf
	default:
		return nil, fmt.Errorf("type %s is not supported", t)
	}
	if !required {
		n = parquet.Optional(n)
	} else if n.Leaf() {
		n = parquet.Required(n)
	}
	return parquet.FieldID(n, id), nil
}

func leafOf(t iceberg.PrimitiveType) (parquet.Node, error) {
	switch t := t.(type) {
	case iceberg.BooleanType:
		return parquet.Leaf(parquet.BooleanType), nil
	case iceberg.Int32Type:
		return parquet.Leaf(parquet.Int32Type), nil
	case iceberg.Int64Type:
		return parquet.Leaf(parquet.Int64Type), nil
	case iceberg.Float32Type:
		return parquet.Leaf(parquet.FloatType), nil
	case iceberg.Float64Type:
		return parquet.Leaf(parquet.DoubleType), nil
	case iceberg.DateType:
		return parquet.Date(), nil
	case iceberg.TimeType:
		return parquet.TimeAdjusted(parquet.Microsecond, false), nil
	case iceberg.TimestampType:
		return parquet.TimestampAdjusted(parquet.Microsecond, false), nil
	case iceberg.TimestampTzType:
		return parquet.TimestampAdjusted(parquet.Microsecond, true), nil
	case iceberg.StringType:
		return parquet.String(), nil
	case iceberg.UUIDType:
		return parquet.Leaf(fixedType{Type: parquet.UUID().Type()}), nil
	case iceberg.BinaryType:
		return parquet.Leaf(parquet.ByteArrayType), nil
	case iceberg.FixedType:
		if t.Len() < 1 {
			return nil, fmt.Errorf("type %s: length must be positive", t)
		}
		return parquet.Leaf(fixedType{Type: parquet.FixedLenByteArrayType(t.Len())}), nil
	case iceberg.DecimalType:
		p, s := t.Precision(), t.Scale()
		switch {
		case p <= 9:
			return parquet.Decimal(s, p, parquet.Int32Type), nil
		case p <= 18:
			return parquet.Decimal(s, p, parquet.Int64Type), nil
		}
		dec := parquet.Decimal(s, p, parquet.FixedLenByteArrayType(tableschema.DecimalBytes(p)))
		return parquet.Leaf(fixedType{Type: dec.Type(), signed: true}), nil
	}
	return nil, fmt.Errorf("type %s is not supported", t)
}

// orderedGroup is a Parquet group that keeps its fields in the order given:
// parquet.Group sorts fields by name, which would break Iceberg's column order.
type orderedGroup struct {
	fields []parquet.Field
}

var _ parquet.Node = (*orderedGroup)(nil)

func (g *orderedGroup) ID() int                     { return 0 }
func (g *orderedGroup) String() string              { return g.asGroup().String() }
func (g *orderedGroup) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g *orderedGroup) Optional() bool              { return false }
func (g *orderedGroup) Repeated() bool              { return false }
func (g *orderedGroup) Required() bool              { return true }
func (g *orderedGroup) Leaf() bool                  { return false }
func (g *orderedGroup) Fields() []parquet.Field     { return g.fields }
func (g *orderedGroup) Encoding() encoding.Encoding { return nil }
func (g *orderedGroup) Compression() compress.Codec { return nil }
func (g *orderedGroup) GoType() reflect.Type        { return g.asGroup().GoType() }

// asGroup is the same group as a parquet.Group, for printing and Go types only.
func (g *orderedGroup) asGroup() parquet.Group {
	m := make(parquet.Group, len(g.fields))
	for _, f := range g.fields {
		m[f.Name()] = f
	}
	return m
}

// namedNode is a field of an orderedGroup. Rows are written as parquet.Row values, so the
// reflection accessor Value is never used.
type namedNode struct {
	parquet.Node
	name string
}

func (f namedNode) Name() string                          { return f.name }
func (f namedNode) Value(reflect.Value) (v reflect.Value) { return v }
