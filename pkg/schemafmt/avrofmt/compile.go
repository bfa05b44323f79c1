package avrofmt

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/hamba/avro/v2"

	"github.com/minkhq/mink/pkg/tableschema"
)

// wkind is how a writer type is encoded.
type wkind uint8

const (
	wNull wkind = iota
	wBool
	wInt
	wLong
	wFloat
	wDouble
	wBytes
	wString
	wFixed
	wEnum
	wRecord
	wArray
	wMap
	wUnion
)

// conv is what a logical type changes in the decoded value.
type conv uint8

const (
	convNone    conv = iota
	convMillis       // milliseconds, stored as microseconds
	convDecimal      // two's complement unscaled value
	convUUID         // uuid: text on a string, 16 bytes on a fixed
)

// maxNodes bounds the types of a schema after expanding named types: a type used twice
// is expanded twice, so a small schema could otherwise expand exponentially.
const maxNodes = 50000

// maxMinLen caps wnode.minLen so that huge fixed sizes cannot overflow a sum; minLen
// only bounds block counts by the input's length, and no Kafka value is a GiB.
const maxMinLen = 1 << 30

// wnode is one writer type with everything its encoding and its Iceberg type need. Named
// types are expanded (they are not recursive), so every wnode has one path.
type wnode struct {
	kind     wkind
	conv     conv
	prec     int          // decimal
	scale    int          // decimal
	size     int          // fixed
	symbols  [][]byte     // enum
	fields   []wfield     // record
	items    *wnode       // array items, map values
	branches []*wnode     // union
	names    []string     // union: the struct field of each branch; "" if it reads as null
	single   int          // union: the one branch holding data, or -1
	path     string       // dotted field path, for messages
	typ      iceberg.Type // nil: carries no data, left out
	minLen   int          // fewest bytes a value takes; 0 means always 0
}

type wfield struct {
	name string
	node *wnode
}

type compiler struct {
	nodes int
	stack []string // full names of the records being expanded, outermost first
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func pathErr(path string, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path == "" {
		return fmt.Errorf("%s", msg)
	}
	return fmt.Errorf("field %q: %s", path, msg)
}

// build compiles s found at path. top is true only for the schema itself, whose record
// may be an empty struct.
func (c *compiler) build(s avro.Schema, path string, top bool) (*wnode, error) {
	c.nodes++
	if c.nodes > maxNodes {
		return nil, fmt.Errorf("the Avro schema is too large: more than %d types after expanding named types", maxNodes)
	}
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	w := &wnode{path: path, single: -1}
	switch s := s.(type) {
	case *avro.NullSchema:
		w.kind = wNull
	case *avro.PrimitiveSchema:
		if err := c.primitive(w, s); err != nil {
			return nil, err
		}
	case *avro.EnumSchema:
		w.kind, w.typ, w.minLen = wEnum, iceberg.PrimitiveTypes.String, 1
		for _, sym := range s.Symbols() {
			b := []byte(sym)
			w.symbols = append(w.symbols, b[:len(b):len(b)])
		}
	case *avro.FixedSchema:
		if err := c.fixed(w, s); err != nil {
			return nil, err
		}
	case *avro.RecordSchema:
		if err := c.record(w, s, top); err != nil {
			return nil, err
		}
	case *avro.ArraySchema:
		items, err := c.build(s.Items(), join(path, "element"), false)
		if err != nil {
			return nil, err
		}
		w.kind, w.items, w.minLen = wArray, items, 1
		if items.typ != nil {
			w.typ = &iceberg.ListType{Element: items.typ}
		}
	case *avro.MapSchema:
		values, err := c.build(s.Values(), join(path, "value"), false)
		if err != nil {
			return nil, err
		}
		w.kind, w.items, w.minLen = wMap, values, 1
		if values.typ != nil {
			w.typ = &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: values.typ}
		}
	case *avro.UnionSchema:
		if err := c.union(w, s); err != nil {
			return nil, err
		}
	default:
		return nil, pathErr(path, "Avro type %s is not supported", s.Type())
	}
	return w, nil
}

func (c *compiler) primitive(w *wnode, s *avro.PrimitiveSchema) error {
	lt := avro.LogicalType("")
	if l := s.Logical(); l != nil {
		lt = l.Type()
	}
	w.minLen = 1
	switch s.Type() {
	case avro.Boolean:
		w.kind, w.typ = wBool, iceberg.PrimitiveTypes.Bool
	case avro.Int:
		w.kind, w.typ = wInt, iceberg.PrimitiveTypes.Int32
		switch lt {
		case avro.Date:
			w.typ = iceberg.PrimitiveTypes.Date
		case avro.TimeMillis:
			w.typ, w.conv = iceberg.PrimitiveTypes.Time, convMillis
		}
	case avro.Long:
		w.kind, w.typ = wLong, iceberg.PrimitiveTypes.Int64
		switch lt {
		case avro.TimeMicros:
			w.typ = iceberg.PrimitiveTypes.Time
		case avro.TimestampMillis:
			w.typ, w.conv = iceberg.PrimitiveTypes.TimestampTz, convMillis
		case avro.TimestampMicros:
			w.typ = iceberg.PrimitiveTypes.TimestampTz
		case avro.LocalTimestampMillis:
			w.typ, w.conv = iceberg.PrimitiveTypes.Timestamp, convMillis
		case avro.LocalTimestampMicros:
			w.typ = iceberg.PrimitiveTypes.Timestamp
		}
	case avro.Float:
		w.kind, w.typ, w.minLen = wFloat, iceberg.PrimitiveTypes.Float32, 4
	case avro.Double:
		w.kind, w.typ, w.minLen = wDouble, iceberg.PrimitiveTypes.Float64, 8
	case avro.Bytes:
		w.kind, w.typ = wBytes, iceberg.PrimitiveTypes.Binary
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return decimal(w, d)
		}
	case avro.String:
		w.kind, w.typ = wString, iceberg.PrimitiveTypes.String
		if lt == avro.UUID {
			w.typ, w.conv = iceberg.PrimitiveTypes.UUID, convUUID
		}
	default:
		return pathErr(w.path, "Avro type %s is not supported", s.Type())
	}
	return nil
}

func decimal(w *wnode, d *avro.DecimalLogicalSchema) error {
	if d.Precision() > tableschema.MaxDecimalPrecision {
		return pathErr(w.path, "decimal precision %d is more than the %d Iceberg allows",
			d.Precision(), tableschema.MaxDecimalPrecision)
	}
	// hamba only makes a decimal of a valid precision and scale (else the underlying type).
	w.prec, w.scale, w.conv = d.Precision(), d.Scale(), convDecimal
	w.typ = iceberg.DecimalTypeOf(w.prec, w.scale)
	return nil
}

func (c *compiler) fixed(w *wnode, s *avro.FixedSchema) error {
	w.kind, w.size, w.minLen = wFixed, s.Size(), min(s.Size(), maxMinLen)
	if w.size == 0 {
		return nil // carries no data: left out
	}
	w.typ = iceberg.FixedTypeOf(w.size)
	if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
		return decimal(w, d)
	}
	// hamba v2.31 knows no uuid on fixed (Avro 1.12 allows it) and leaves the logicalType
	// among the properties; take it from either place.
	isUUID := s.Prop("logicalType") == string(avro.UUID)
	if l := s.Logical(); l != nil && l.Type() == avro.UUID {
		isUUID = true
	}
	if isUUID && w.size == 16 {
		w.typ, w.conv = iceberg.PrimitiveTypes.UUID, convUUID
	}
	return nil
}

func (c *compiler) record(w *wnode, s *avro.RecordSchema, top bool) error {
	full := s.FullName()
	if slices.Contains(c.stack, full) {
		where := ""
		if w.path != "" {
			where = fmt.Sprintf(" (field %q)", w.path)
		}
		return fmt.Errorf("recursive type %q is not supported%s", full, where)
	}
	c.stack = append(c.stack, full)
	defer func() { c.stack = c.stack[:len(c.stack)-1] }()

	w.kind = wRecord
	var cols []iceberg.NestedField
	for _, f := range s.Fields() {
		n, err := c.build(f.Type(), join(w.path, f.Name()), false)
		if err != nil {
			return err
		}
		w.fields = append(w.fields, wfield{name: f.Name(), node: n})
		w.minLen = min(w.minLen+n.minLen, maxMinLen)
		if n.typ != nil {
			cols = append(cols, iceberg.NestedField{Name: f.Name(), Type: n.typ})
		}
	}
	if len(cols) > 0 || top {
		w.typ = &iceberg.StructType{FieldList: cols}
	}
	return nil
}

// branchNames returns the union struct field names of a branch of type s: the one to use
// and the one to use when two branches would have the same name.
func branchNames(s avro.Schema) (name, alt string) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		return n.Name(), strings.ReplaceAll(n.FullName(), ".", "_")
	}
	name = string(s.Type())
	alt = name
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		alt = name + "_" + strings.ReplaceAll(string(l.Logical().Type()), "-", "_")
	}
	return name, alt
}

func (c *compiler) union(w *wnode, s *avro.UnionSchema) error {
	w.kind, w.minLen = wUnion, 1
	types := s.Types()
	// Names first: a branch's path is the union's path and its name.
	names := make([]string, len(types))
	count := map[string]int{}
	for i, t := range types {
		if t.Type() == avro.Null {
			continue
		}
		names[i], _ = branchNames(t)
		count[names[i]]++
	}
	for i, t := range types {
		if names[i] != "" && count[names[i]] > 1 {
			_, names[i] = branchNames(t)
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" {
			continue
		}
		if seen[n] {
			return pathErr(w.path, "union has two branches named %q", n)
		}
		seen[n] = true
	}

	var cols []iceberg.NestedField
	mapped := -1
	for i, t := range types {
		path := w.path // of null, and of T in [null, T], which is T: build it where it will be
		if len(seen) > 1 && names[i] != "" {
			path = join(w.path, names[i])
		}
		b, err := c.build(t, path, false)
		if err != nil {
			return err
		}
		w.branches = append(w.branches, b)
		if b.typ == nil {
			names[i] = "" // reads as null
			continue
		}
		mapped = i
		cols = append(cols, iceberg.NestedField{Name: names[i], Type: b.typ})
	}
	w.names = names
	switch len(cols) {
	case 0:
	case 1:
		// [null, T]: T's value is the union's, at the union's path.
		w.single = mapped
		w.typ = cols[0].Type
		if len(seen) > 1 {
			rebase(w.branches[mapped], join(w.path, names[mapped]), w.path)
		}
	default:
		w.typ = &iceberg.StructType{FieldList: cols}
	}
	return nil
}

// rebase moves the paths of w and what it contains from under old to under new.
func rebase(w *wnode, old, new string) {
	rest := strings.TrimPrefix(w.path, old)
	if new == "" {
		rest = strings.TrimPrefix(rest, ".")
	}
	w.path = new + rest
	if w.items != nil {
		rebase(w.items, old, new)
	}
	for _, f := range w.fields {
		rebase(f.node, old, new)
	}
	for _, b := range w.branches {
		rebase(b, old, new)
	}
}
