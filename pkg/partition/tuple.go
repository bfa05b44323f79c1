package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Tuple is a row's partition values, one per field of a spec, in rowcodec's form of
// each field's result type. A Tuple made by Evaluator.Tuple may alias the row's bytes.
type Tuple []rowcodec.Value

// Evaluator computes the partition tuples of rows decoded with one version of a
// table's schema, for one spec. It is safe for concurrent use.
type Evaluator struct {
	spec   Spec
	fields []evalField
}

type evalField struct {
	path []int        // positions from the row's top-level value through struct fields; nil: always null
	src  iceberg.Type // nil when the source column is gone (a void field's may be)
	res  iceberg.Type
	fn   func(rowcodec.Value) rowcodec.Value
}

// NewEvaluator binds spec to schema, the schema version rows are decoded with: a row's
// Values follow schema's top-level fields. Every source column must be in schema, but
// a void field's, which is null anyway.
func NewEvaluator(spec Spec, schema *iceberg.Schema) (*Evaluator, error) {
	e := &Evaluator{spec: spec, fields: make([]evalField, len(spec.Fields))}
	for i, f := range spec.Fields {
		field, path, ok := byID(schema.Fields(), f.SourceID, nil)
		ef := &e.fields[i]
		switch {
		case !ok && f.Transform.Kind == Void:
			ef.res = iceberg.PrimitiveTypes.Int32 // the spec's result of void without a source type
			ef.fn = func(rowcodec.Value) rowcodec.Value { return rowcodec.Value{} }
			continue
		case !ok:
			return nil, fmt.Errorf("partition: spec %d field %q: no source column %d in schema %d (only through structs)", spec.ID, f.Name, f.SourceID, schema.ID)
		}
		fn, err := f.Transform.Compile(field.Type)
		if err != nil {
			return nil, fmt.Errorf("partition: spec %d field %q: %w", spec.ID, f.Name, err)
		}
		*ef = evalField{path: path, src: field.Type, res: f.Transform.ResultType(field.Type), fn: fn}
	}
	return e, nil
}

// byID finds the field with id, reached through structs only, and its positions.
func byID(fields []iceberg.NestedField, id int, path []int) (iceberg.NestedField, []int, bool) {
	for i, f := range fields {
		p := append(slices.Clip(path), i)
		if f.ID == id {
			return f, p, true
		}
		if st, ok := f.Type.(*iceberg.StructType); ok {
			if g, gp, ok := byID(st.FieldList, id, p); ok {
				return g, gp, true
			}
		}
	}
	return iceberg.NestedField{}, nil, false
}

// Spec is the spec e evaluates.
func (e *Evaluator) Spec() Spec { return e.spec }

// Types are the result types of the spec's fields: the partition struct's types.
func (e *Evaluator) Types() []iceberg.Type {
	ts := make([]iceberg.Type, len(e.fields))
	for i, f := range e.fields {
		ts[i] = f.res
	}
	return ts
}

// Tuple computes row's partition tuple into dst (reused; its length set to the spec's
// fields). A source value inside a null struct is null. A row that is not of the
// schema's shape gives nulls where it falls short.
func (e *Evaluator) Tuple(row *rowcodec.Row, dst Tuple) Tuple {
	dst = slices.Grow(dst[:0], len(e.fields))[:len(e.fields)]
	for i, f := range e.fields {
		dst[i] = f.fn(valueAt(row.Values, f.path))
	}
	return dst
}

func valueAt(vs []rowcodec.Value, path []int) rowcodec.Value {
	var v rowcodec.Value
	for _, p := range path {
		if p >= len(vs) {
			return rowcodec.Value{}
		}
		v = vs[p]
		if !v.Valid {
			return rowcodec.Value{}
		}
		vs = v.Elems
	}
	return v
}

// Value classes of the key encoding: what a value's bytes are, whatever its exact
// type, so that a promotion (int to long, float to double, decimal(9,2) to
// decimal(20,2)) leaves keys as they were.
const (
	classInt     = iota // boolean, int, long, date, time, timestamps: zigzag varint
	classFloat          // float, double: the double's bits, NaN as one pattern
	classDecimal        // the unscaled value's fewest two's-complement bytes, length first
	classBytes          // string, binary, fixed, uuid: length, bytes
)

func classOf(t iceberg.Type) int {
	switch t.(type) {
	case iceberg.Float32Type, iceberg.Float64Type:
		return classFloat
	case iceberg.DecimalType:
		return classDecimal
	case iceberg.StringType, iceberg.BinaryType, iceberg.FixedType, iceberg.UUIDType:
		return classBytes
	}
	return classInt
}

// AppendKey appends t's key: bytes equal exactly when the tuples are equal, the same in
// every process (a map key for grouping rows, and what the index can store). ParseKey
// reads it back.
func (e *Evaluator) AppendKey(dst []byte, t Tuple) []byte {
	for i, f := range e.fields {
		v := t[i]
		if !v.Valid {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		switch classOf(f.res) {
		case classInt:
			dst = binary.AppendVarint(dst, v.Int)
		case classFloat:
			bits := math.Float64bits(v.Float)
			if math.IsNaN(v.Float) {
				bits = 0x7ff8000000000000
			}
			dst = binary.BigEndian.AppendUint64(dst, bits)
		case classDecimal:
			var b []byte
			if isFixedDecimal(f.res) {
				b = rowcodec.MinimalTwos(v.Bytes)
			} else {
				var be [8]byte
				binary.BigEndian.PutUint64(be[:], uint64(v.Int))
				b = rowcodec.MinimalTwos(be[:])
			}
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		case classBytes:
			dst = binary.AppendUvarint(dst, uint64(len(v.Bytes)))
			dst = append(dst, v.Bytes...)
		}
	}
	return dst
}

// isFixedDecimal reports whether t is a decimal whose rowcodec form is Bytes (precision
// above 18) rather than Int.
func isFixedDecimal(t iceberg.Type) bool {
	d, ok := t.(iceberg.DecimalType)
	return ok && d.Precision() > 18
}

var errKey = errors.New("partition: malformed tuple key")

// ParseKey reads a key AppendKey wrote, for e's spec, into a Tuple of its own bytes.
func (e *Evaluator) ParseKey(key []byte) (Tuple, error) {
	t := make(Tuple, len(e.fields))
	for i, f := range e.fields {
		if len(key) == 0 {
			return nil, errKey
		}
		valid := key[0]
		key = key[1:]
		if valid == 0 {
			continue
		}
		if valid != 1 {
			return nil, errKey
		}
		v := rowcodec.Value{Valid: true}
		switch classOf(f.res) {
		case classInt:
			x, n := binary.Varint(key)
			if n <= 0 {
				return nil, errKey
			}
			v.Int, key = x, key[n:]
		case classFloat:
			if len(key) < 8 {
				return nil, errKey
			}
			v.Float, key = math.Float64frombits(binary.BigEndian.Uint64(key)), key[8:]
		case classDecimal, classBytes:
			l, n := binary.Uvarint(key)
			if n <= 0 || l > uint64(len(key)-n) {
				return nil, errKey
			}
			b := key[n : n+int(l)]
			key = key[n+int(l):]
			if classOf(f.res) == classBytes {
				v.Bytes = slices.Clone(b)
				break
			}
			x := fromTwos(b)
			if isFixedDecimal(f.res) {
				size := tableschema.DecimalBytes(f.res.(iceberg.DecimalType).Precision())
				if len(b) > size {
					return nil, errKey
				}
				v.Bytes = toTwos(x, size)
			} else {
				if !x.IsInt64() {
					return nil, errKey
				}
				v.Int = x.Int64()
			}
		}
		t[i] = v
	}
	if len(key) != 0 {
		return nil, errKey
	}
	return t, nil
}

// Literals are t's values by partition field id as iceberg-go's manifests take them
// (iceberg-go's literals; nil for null).
func (e *Evaluator) Literals(t Tuple) map[int]any {
	out := make(map[int]any, len(e.fields))
	for i, f := range e.fields {
		out[e.spec.Fields[i].FieldID] = Literal(f.res, t[i]) // a nil Literal is a nil any
	}
	return out
}

// Literal is v, a value of type typ in rowcodec's form, as an iceberg-go literal (nil
// for null, and for a type Mink does not store).
func Literal(typ iceberg.Type, v rowcodec.Value) iceberg.Literal {
	if !v.Valid {
		return nil
	}
	switch typ := typ.(type) {
	case iceberg.BooleanType:
		return iceberg.BoolLiteral(v.Int != 0)
	case iceberg.Int32Type:
		return iceberg.Int32Literal(int32(v.Int))
	case iceberg.Int64Type:
		return iceberg.Int64Literal(v.Int)
	case iceberg.Float32Type:
		return iceberg.Float32Literal(float32(v.Float))
	case iceberg.Float64Type:
		return iceberg.Float64Literal(v.Float)
	case iceberg.DateType:
		return iceberg.DateLiteral(iceberg.Date(int32(v.Int)))
	case iceberg.TimeType:
		return iceberg.TimeLiteral(iceberg.Time(v.Int))
	case iceberg.TimestampType, iceberg.TimestampTzType:
		return iceberg.TimestampLiteral(iceberg.Timestamp(v.Int))
	case iceberg.StringType:
		return iceberg.StringLiteral(string(v.Bytes))
	case iceberg.BinaryType:
		return iceberg.BinaryLiteral(slices.Clone(v.Bytes))
	case iceberg.FixedType:
		return iceberg.FixedLiteral(slices.Clone(v.Bytes))
	case iceberg.UUIDType:
		u, err := uuid.FromBytes(v.Bytes)
		if err != nil {
			return nil
		}
		return iceberg.UUIDLiteral(u)
	case iceberg.DecimalType:
		n := decimal128.FromI64(v.Int)
		if typ.Precision() > 18 {
			n = decimal128.FromBigInt(fromTwos(v.Bytes))
		}
		return iceberg.DecimalLiteral(iceberg.Decimal{Val: n, Scale: typ.Scale()})
	}
	return nil
}
