package parquetbuild

import (
	"fmt"
	"io"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// A small DSL for Iceberg schemas; ids are given by withIDs.
func opt(name string, t iceberg.Type) iceberg.NestedField {
	return iceberg.NestedField{Name: name, Type: t}
}

func req(name string, t iceberg.Type) iceberg.NestedField {
	return iceberg.NestedField{Name: name, Type: t, Required: true}
}

func structOf(fields ...iceberg.NestedField) *iceberg.StructType {
	return &iceberg.StructType{FieldList: fields}
}

func listOf(elem iceberg.Type, elemRequired bool) *iceberg.ListType {
	return &iceberg.ListType{Element: elem, ElementRequired: elemRequired}
}

func mapOf(key, value iceberg.Type, valueRequired bool) *iceberg.MapType {
	return &iceberg.MapType{KeyType: key, ValueType: value, ValueRequired: valueRequired}
}

// withIDs assigns fresh ids the way Iceberg does: the top-level fields 1..n, then each
// nested level in turn.
func withIDs(fields []iceberg.NestedField) []iceberg.NestedField {
	next := 0
	nextID := func() int { next++; return next }
	for i := range fields {
		fields[i].ID = nextID()
	}
	var nested func(t iceberg.Type)
	nested = func(t iceberg.Type) {
		switch t := t.(type) {
		case *iceberg.StructType:
			for i := range t.FieldList {
				t.FieldList[i].ID = nextID()
			}
			for i := range t.FieldList {
				nested(t.FieldList[i].Type)
			}
		case *iceberg.ListType:
			t.ElementID = nextID()
			nested(t.Element)
		case *iceberg.MapType:
			t.KeyID, t.ValueID = nextID(), nextID()
			nested(t.KeyType)
			nested(t.ValueType)
		}
	}
	for i := range fields {
		nested(fields[i].Type)
	}
	return fields
}

var (
	tString  = iceberg.PrimitiveTypes.String
	tInt     = iceberg.PrimitiveTypes.Int32
	tLong    = iceberg.PrimitiveTypes.Int64
	tFixed3  = iceberg.FixedTypeOf(3)
	tDec30   = iceberg.DecimalTypeOf(30, 2)
	tUUID    = iceberg.PrimitiveTypes.UUID
	tBinary  = iceberg.PrimitiveTypes.Binary
	tBoolean = iceberg.PrimitiveTypes.Bool
)

// nestedFields is a schema with every shape: structs in structs, list<struct>,
// list<list<int>>, map<string, struct>, map<int, list<long>>, required and optional at
// every level, fixed(3), decimal(30,2) in a struct, uuid in a list, deep nesting, and
// every primitive type inside a struct.
func nestedFields() []iceberg.NestedField {
	return withIDs([]iceberg.NestedField{
		req("id", tLong),
		opt("name", tString),
		opt("s", structOf(
			req("a", tInt),
			opt("inner", structOf(
				opt("x", iceberg.PrimitiveTypes.Float64),
				opt("amount", tDec30),
				opt("code", tFixed3),
				req("deep", structOf(
					opt("flag", tBoolean),
					opt("when", iceberg.PrimitiveTypes.TimestampTz),
					opt("tiny", iceberg.DecimalTypeOf(5, 1)),
				)),
			)),
			opt("label", tString),
		)),
		opt("items", listOf(structOf(
			req("sku", tString),
			opt("qty", tInt),
			opt("price", iceberg.DecimalTypeOf(9, 2)),
		), false)),
		opt("matrix", listOf(listOf(tInt, false), true)),
		opt("attrs", mapOf(tString, structOf(
			opt("v", tLong),
			opt("tags", listOf(tString, false)),
		), false)),
		opt("buckets", mapOf(tInt, listOf(tLong, true), true)),
		opt("ids", listOf(tUUID, false)),
		opt("fx", tFixed3),
		opt("big", tDec30),
		req("day", iceberg.PrimitiveTypes.Date),
		opt("deepest", listOf(mapOf(tString, listOf(structOf(
			opt("z", tFixed3),
			opt("y", listOf(tInt, false)),
		), false), false), false)),
		req("rs", structOf(
			req("r1", tLong),
			req("r2", listOf(tString, true)),
			req("r3", mapOf(tString, tString, false)),
		)),
		opt("misc", structOf(
			opt("f", iceberg.PrimitiveTypes.Float32),
			opt("bin", tBinary),
			opt("t", iceberg.PrimitiveTypes.Time),
			opt("ts", iceberg.PrimitiveTypes.Timestamp),
			opt("u", tUUID),
			opt("d18", iceberg.DecimalTypeOf(18, 4)),
			opt("i", tInt),
			opt("fx16", iceberg.FixedTypeOf(16)),
			opt("fx20", iceberg.FixedTypeOf(20)),
		)),
		opt("pairs", listOf(structOf(opt("only", tString)), false)),
	})
}

// gen makes random values of a schema: nulls, empty and non-empty lists and maps,
// extreme and ordinary primitives.
type gen struct {
	rng      *rand.Rand
	nullRate int // one in nullRate optional values is null; 0: none
	maxElems int
}

func (g *gen) row(fields []iceberg.NestedField) rowcodec.Row {
	vals := make([]rowcodec.Value, len(fields))
	for i, f := range fields {
		vals[i] = g.value(f.Type, f.Required)
	}
	return rowcodec.Row{Values: vals}
}

func (g *gen) value(t iceberg.Type, required bool) rowcodec.Value {
	if !required && g.nullRate > 0 && g.rng.IntN(g.nullRate) == 0 {
		return rowcodec.Value{}
	}
	switch t := t.(type) {
	case *iceberg.StructType:
		v := rowcodec.Value{Valid: true, Elems: make([]rowcodec.Value, len(t.FieldList))}
		for i, f := range t.FieldList {
			v.Elems[i] = g.value(f.Type, f.Required)
		}
		return v
	case *iceberg.ListType:
		v := rowcodec.Value{Valid: true, Elems: []rowcodec.Value{}}
		for n := g.rng.IntN(g.maxElems + 1); n > 0; n-- {
			v.Elems = append(v.Elems, g.value(t.Element, t.ElementRequired))
		}
		return v
	case *iceberg.MapType:
		v := rowcodec.Value{Valid: true, Elems: []rowcodec.Value{}}
		seen := map[string]bool{}
		for n := g.rng.IntN(g.maxElems + 1); n > 0; n-- {
			k := g.value(t.KeyType, true)
			ks := fmt.Sprint(normValue(t.KeyType, k))
			if seen[ks] {
				continue // map keys are unique
			}
			seen[ks] = true
			v.Elems = append(v.Elems, rowcodec.Value{Valid: true, Elems: []rowcodec.Value{k, g.value(t.ValueType, t.ValueRequired)}})
		}
		return v
	}
	return g.primitive(t)
}

func (g *gen) primitive(t iceberg.Type) rowcodec.Value {
	r := g.rng
	v := rowcodec.Value{Valid: true}
	pick := func(extremes ...int64) int64 { return extremes[r.IntN(len(extremes))] }
	switch t := t.(type) {
	case iceberg.BooleanType:
		v.Int = int64(r.IntN(2))
	case iceberg.Int32Type:
		if r.IntN(8) == 0 {
			v.Int = pick(math.MinInt32, math.MaxInt32, 0, -1)
		} else {
			v.Int = int64(r.Int32N(2000) - 1000)
		}
	case iceberg.DateType:
		v.Int = int64(r.IntN(40000) - 10000)
	case iceberg.Int64Type, iceberg.TimestampType, iceberg.TimestampTzType:
		if r.IntN(8) == 0 {
			v.Int = pick(math.MinInt64, math.MaxInt64, 0, -1)
		} else {
			v.Int = r.Int64N(1<<50) - 1<<49
		}
	case iceberg.TimeType:
		v.Int = r.Int64N(86_400_000_000)
	case iceberg.Float32Type:
		v.Float = float64(float32(r.NormFloat64() * 100))
	case iceberg.Float64Type:
		v.Float = r.NormFloat64() * 1e6
	case iceberg.StringType:
		words := []string{"", "a", "b", "zz", "ünïcödé", "日本語", "a-long-string-beyond-sixteen-characters", "\U0010FFFF"}
		v.Bytes = []byte(words[r.IntN(len(words))] + fmt.Sprint(r.IntN(50)))
	case iceberg.BinaryType:
		v.Bytes = g.bytes(r.IntN(24))
	case iceberg.UUIDType:
		v.Bytes = g.bytes(16)
	case iceberg.FixedType:
		v.Bytes = g.bytes(t.Len())
	case iceberg.DecimalType:
		limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Precision())), nil) // 10^p
		digits := make([]byte, 1+r.IntN(t.Precision()))
		for i := range digits {
			digits[i] = byte('0' + r.IntN(10))
		}
		n, _ := new(big.Int).SetString(string(digits), 10)
		switch r.IntN(6) {
		case 0:
			n.Sub(limit, big.NewInt(1)) // the largest
		case 1:
			n.SetInt64(0)
		}
		if r.IntN(2) == 0 {
			n.Neg(n)
		}
		if t.Precision() <= 18 {
			v.Int = n.Int64()
		} else {
			v.Bytes = twosComplement(n, tableschema.DecimalBytes(t.Precision()))
		}
	default:
		panic(fmt.Sprintf("no generator for %s", t))
	}
	return v
}

// bytes returns n random bytes, sometimes all 0x00 or all 0xff: the unsigned extremes.
func (g *gen) bytes(n int) []byte {
	b := make([]byte, n)
	switch g.rng.IntN(8) {
	case 0:
	case 1:
		for i := range b {
			b[i] = 0xff
		}
	default:
		for i := range b {
			b[i] = byte(g.rng.IntN(256))
		}
	}
	return b
}

// twosComplement is n as size bytes of big-endian two's complement.
func twosComplement(n *big.Int, size int) []byte {
	x := new(big.Int).Set(n)
	if x.Sign() < 0 {
		x.Add(x, new(big.Int).Lsh(big.NewInt(1), uint(8*size)))
	}
	return x.FillBytes(make([]byte, size))
}

func nestedRows(fields []iceberg.NestedField, n int, seed uint64) []rowcodec.Row {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 7)), nullRate: 5, maxElems: 3}
	rows := make([]rowcodec.Row, n)
	for i := range rows {
		rows[i] = g.row(fields)
	}
	return rows
}

// rowsDecoder is a RowDecoder of prepared rows: record offset base+i decodes to
// rows[i]. It hands out copies whose bytes live in its own scratch memory, which it
// overwrites on the next call, as rowcodec.Decoder may: the builder must copy them.
// Every failEvery-th row reports a decode error (0: none).
type rowsDecoder struct {
	fields    []iceberg.NestedField
	rows      []rowcodec.Row
	base      int64
	failEvery int
	alias     bool // hand out the prepared rows themselves (benchmarks)
	scratch   []byte
}

func (d *rowsDecoder) Fields() []iceberg.NestedField { return d.fields }

func (d *rowsDecoder) Decode(r record.Record, row *rowcodec.Row) bool {
	i := r.Offset - d.base
	src := d.rows[i]
	if d.alias {
		row.Values = src.Values
	} else {
		for j := range d.scratch {
			d.scratch[j] = 'X'
		}
		d.scratch = d.scratch[:0]
		row.Values = d.copyValues(src.Values)
	}
	return d.failEvery == 0 || i%int64(d.failEvery) != int64(d.failEvery-1)
}

func (d *rowsDecoder) copyValues(vs []rowcodec.Value) []rowcodec.Value {
	if vs == nil {
		return nil
	}
	out := make([]rowcodec.Value, len(vs))
	for i, v := range vs {
		out[i] = v
		if v.Bytes != nil {
			start := len(d.scratch)
			d.scratch = append(d.scratch, v.Bytes...)
			out[i].Bytes = d.scratch[start:len(d.scratch):len(d.scratch)]
		}
		out[i].Elems = d.copyValues(v.Elems)
	}
	return out
}

// records returns one record per row, at offsets base, base+1, ...
func (d *rowsDecoder) records() []record.Record {
	recs := make([]record.Record, len(d.rows))
	for i := range recs {
		recs[i] = record.Record{Partition: 3, Offset: d.base + int64(i)}
	}
	return recs
}

// buildRows builds the rows of dec into w with chunkRows rows per parquet-go call (0:
// the default).
func buildRows(t testing.TB, w io.Writer, dec *rowsDecoder, s Settings, chunkRows int) FileStats {
	t.Helper()
	b, err := NewBuilderFor(w, dec, s)
	if err != nil {
		t.Fatal(err)
	}
	if chunkRows > 0 {
		b.chunkRows = chunkRows
	}
	for _, r := range dec.records() {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.Close()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// normValue is a value normalized for comparison: nil, bool, int64, float64, string
// (text, binary, uuid, fixed), decimals as the decimal string of the unscaled value,
// []any for structs and lists, and []any of [key, value] pairs for maps.
func normValue(t iceberg.Type, v rowcodec.Value) any {
	if !v.Valid {
		return nil
	}
	switch t := t.(type) {
	case *iceberg.StructType:
		out := []any{}
		for i, f := range t.FieldList {
			out = append(out, normValue(f.Type, v.Elems[i]))
		}
		return out
	case *iceberg.ListType:
		out := []any{}
		for _, e := range v.Elems {
			out = append(out, normValue(t.Element, e))
		}
		return out
	case *iceberg.MapType:
		out := []any{}
		for _, e := range v.Elems {
			out = append(out, []any{normValue(t.KeyType, e.Elems[0]), normValue(t.ValueType, e.Elems[1])})
		}
		return out
	case iceberg.FixedType:
		return string(v.Bytes)
	}
	return want(t, v)
}

// pathString names a column for messages.
func pathString(p []string) string { return strings.Join(p, ".") }
