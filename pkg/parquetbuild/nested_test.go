package parquetbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
)

// leafPath is one Parquet leaf column of an Iceberg schema, found independently of the
// builder's plan: the Iceberg field id, the Parquet path, the Iceberg types from the
// top-level field down, and which child each struct or map step takes.
type leafPath struct {
	id     int
	path   []string
	types  []iceberg.Type
	req    []bool // required, per step
	child  []int  // struct field index or map 0 key / 1 value, per step
	bounds bool   // only structs above: Iceberg keeps bounds
	field  int    // top-level field index
}

func leafPaths(fields []iceberg.NestedField) []leafPath {
	var out []leafPath
	var walk func(lp leafPath, t iceberg.Type, required bool, id int, name ...string)
	walk = func(lp leafPath, t iceberg.Type, required bool, id int, name ...string) {
		lp.path = append(append([]string{}, lp.path...), name...)
		lp.types = append(append([]iceberg.Type{}, lp.types...), t)
		lp.req = append(append([]bool{}, lp.req...), required)
		switch t := t.(type) {
		case *iceberg.StructType:
			for i, f := range t.FieldList {
				l := lp
				l.child = append(append([]int{}, lp.child...), i)
				walk(l, f.Type, f.Required, f.ID, f.Name)
			}
		case *iceberg.ListType:
			lp.child = append(append([]int{}, lp.child...), 0)
			lp.bounds = false
			walk(lp, t.Element, t.ElementRequired, t.ElementID, "list", "element")
		case *iceberg.MapType:
			lp.bounds = false
			k, v := lp, lp
			k.child = append(append([]int{}, lp.child...), 0)
			v.child = append(append([]int{}, lp.child...), 1)
			walk(k, t.KeyType, true, t.KeyID, "key_value", "key")
			walk(v, t.ValueType, t.ValueRequired, t.ValueID, "key_value", "value")
		default:
			lp.id = id
			lp.child = append(append([]int{}, lp.child...), -1)
			out = append(out, lp)
		}
	}
	for i, f := range fields {
		walk(leafPath{field: i, bounds: true}, f.Type, f.Required, f.ID, f.Name)
	}
	return out
}

// project is the part of v that one column holds: a struct becomes []any{its field on
// the way}, a list or map []any of its entries' projections, null nil, a primitive its
// normal form.
func (lp *leafPath) project(d int, v rowcodec.Value) any {
	if !v.Valid {
		return nil
	}
	switch t := lp.types[d].(type) {
	case *iceberg.StructType:
		return []any{lp.project(d+1, v.Elems[lp.child[d]])}
	case *iceberg.ListType:
		out := []any{}
		for _, e := range v.Elems {
			out = append(out, lp.project(d+1, e))
		}
		return out
	case *iceberg.MapType:
		out := []any{}
		for _, e := range v.Elems {
			out = append(out, lp.project(d+1, e.Elems[lp.child[d]]))
		}
		return out
	default:
		return normValue(t, v)
	}
}

// counts returns the Parquet value and null counts of the column in v, and its present
// values: one entry per leaf slot, a null or empty node standing for one.
func (lp *leafPath) counts(d int, v rowcodec.Value, present *[]rowcodec.Value) (values, nulls int64) {
	if !v.Valid {
		return 1, 1
	}
	switch lp.types[d].(type) {
	case *iceberg.StructType:
		return lp.counts(d+1, v.Elems[lp.child[d]], present)
	case *iceberg.ListType, *iceberg.MapType:
		if len(v.Elems) == 0 {
			return 1, 1
		}
		for _, e := range v.Elems {
			if _, isMap := lp.types[d].(*iceberg.MapType); isMap {
				e = e.Elems[lp.child[d]]
			}
			n, z := lp.counts(d+1, e, present)
			values, nulls = values+n, nulls+z
		}
		return values, nulls
	}
	*present = append(*present, v)
	return 1, 0
}

// levels are a column's definition and repetition levels per step, from the schema.
func (lp *leafPath) levels() (defs, reps []int) {
	def, rep := 0, 0
	for d, t := range lp.types {
		if !lp.req[d] {
			def++
		}
		defs = append(defs, def)
		switch t.(type) {
		case *iceberg.ListType, *iceberg.MapType:
			def++
			rep++
		}
		reps = append(reps, rep)
	}
	return defs, reps
}

// assemble rebuilds the projection of one row from the column's leveled values: the
// inverse of shredding, written from the Parquet level semantics.
func (lp *leafPath) assemble(vals []parquet.Value) any {
	defs, reps := lp.levels()
	pos := 0
	var at func(d int) any
	at = func(d int) any {
		v := vals[pos]
		if v.DefinitionLevel() < defs[d] {
			pos++ // null here: the value stands for the whole subtree
			return nil
		}
		switch lp.types[d].(type) {
		case *iceberg.StructType:
			return []any{at(d + 1)}
		case *iceberg.ListType, *iceberg.MapType:
			out := []any{}
			if v.DefinitionLevel() == defs[d] {
				pos++ // present but empty
				return out
			}
			for {
				out = append(out, at(d+1))
				if pos == len(vals) || vals[pos].RepetitionLevel() < reps[d] {
					return out
				}
			}
		}
		pos++
		return parquetNorm(lp.types[d], v)
	}
	got := at(0)
	if pos != len(vals) {
		return fmt.Sprintf("%d values left over", len(vals)-pos)
	}
	return got
}

// parquetNorm is normValue for a raw parquet-go value.
func parquetNorm(t iceberg.Type, v parquet.Value) any {
	switch t.(type) {
	case iceberg.FixedType:
		return string(v.ByteArray())
	case iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType:
		return v.Int64()
	}
	return rawValue(v, t)
}

// arrowNorm is normValue for a value read by Arrow.
func arrowNorm(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Map:
		start, end := a.ValueOffsets(i)
		out := []any{}
		for j := start; j < end; j++ {
			out = append(out, []any{arrowNorm(a.Keys(), int(j)), arrowNorm(a.Items(), int(j))})
		}
		return out
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := []any{}
		for j := start; j < end; j++ {
			out = append(out, arrowNorm(a.ListValues(), int(j)))
		}
		return out
	case *array.Struct:
		out := []any{}
		for f := 0; f < a.NumField(); f++ {
			out = append(out, arrowNorm(a.Field(f), i))
		}
		return out
	case array.ExtensionArray:
		return arrowNorm(a.Storage(), i)
	}
	return arrowValue(arr, i)
}

// checkWithArrow reads the file with arrow-go's pqarrow and checks the schema iceberg-go
// makes of it and every value of every row.
func checkWithArrow(t *testing.T, data []byte, fields []iceberg.NestedField, rows []rowcodec.Row) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if pf.NumRows() != int64(len(rows)) {
		t.Fatalf("arrow reads %d rows, want %d", pf.NumRows(), len(rows))
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()

	wantSchema := iceberg.NewSchema(0, fields...)
	gotSchema, err := table.ArrowSchemaToIceberg(tbl.Schema(), false, nil)
	if err != nil {
		t.Fatalf("iceberg-go cannot map the file's schema: %v", err)
	}
	if !gotSchema.Equals(wantSchema) {
		t.Fatalf("file schema as Iceberg:\n%s\nwant\n%s", gotSchema, wantSchema)
	}
	for c, f := range fields {
		row := 0
		for _, chunk := range tbl.Column(c).Data().Chunks() {
			for i := 0; i < chunk.Len(); i++ {
				got, exp := arrowNorm(chunk, i), normValue(f.Type, rows[row].Values[c])
				if !reflect.DeepEqual(got, exp) {
					t.Fatalf("row %d field %s: arrow reads\n%#v\nwant\n%#v", row, f.Name, got, exp)
				}
				row++
			}
		}
		if row != len(rows) {
			t.Fatalf("field %s has %d values", f.Name, row)
		}
	}
}

// checkWithParquetGo reads the file's raw leveled values with parquet-go and checks
// every column of every row, and the field ids of the schema.
func checkWithParquetGo(t *testing.T, data []byte, fields []iceberg.NestedField, rows []rowcodec.Row) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	lps := leafPaths(fields)
	if got := f.Schema().Columns(); len(got) != len(lps) {
		t.Fatalf("%d columns, want %d", len(got), len(lps))
	}
	for i, lp := range lps {
		lc, ok := f.Schema().Lookup(lp.path...)
		defs, reps := lp.levels()
		if !ok || lc.ColumnIndex != i || lc.MaxDefinitionLevel != defs[len(defs)-1] || lc.MaxRepetitionLevel != reps[len(reps)-1] {
			t.Fatalf("column %s: %v %+v, want index %d def %d rep %d", pathString(lp.path), ok, lc, i, defs[len(defs)-1], reps[len(reps)-1])
		}
		if lc.Node.ID() != lp.id {
			t.Errorf("column %s has field id %d, want %d", pathString(lp.path), lc.Node.ID(), lp.id)
		}
	}
	// Ids of the groups: every Iceberg field, nested ones too, but no id on the
	// list and key_value groups.
	wantIDs, gotIDs := map[string]int{}, map[string]int{}
	var icebergIDs func(prefix string, t iceberg.Type)
	icebergIDs = func(prefix string, t iceberg.Type) {
		switch t := t.(type) {
		case *iceberg.StructType:
			for _, f := range t.FieldList {
				wantIDs[prefix+f.Name] = f.ID
				icebergIDs(prefix+f.Name+".", f.Type)
			}
		case *iceberg.ListType:
			wantIDs[prefix+"list"] = 0
			wantIDs[prefix+"list.element"] = t.ElementID
			icebergIDs(prefix+"list.element.", t.Element)
		case *iceberg.MapType:
			wantIDs[prefix+"key_value"] = 0
			wantIDs[prefix+"key_value.key"], wantIDs[prefix+"key_value.value"] = t.KeyID, t.ValueID
			icebergIDs(prefix+"key_value.key.", t.KeyType)
			icebergIDs(prefix+"key_value.value.", t.ValueType)
		}
	}
	icebergIDs("", structOf(fields...))
	var parquetIDs func(prefix string, n parquet.Node)
	parquetIDs = func(prefix string, n parquet.Node) {
		for _, fl := range n.Fields() {
			gotIDs[prefix+fl.Name()] = fl.ID()
			parquetIDs(prefix+fl.Name()+".", fl)
		}
	}
	parquetIDs("", f.Schema())
	if !reflect.DeepEqual(gotIDs, wantIDs) {
		t.Errorf("field ids in the Parquet schema:\n got %v\nwant %v", gotIDs, wantIDs)
	}

	r := parquet.NewReader(f)
	buf := make([]parquet.Row, 1)
	byCol := make([][]parquet.Value, len(lps))
	for i := range rows {
		if n, err := r.ReadRows(buf); n != 1 {
			t.Fatalf("row %d: %v", i, err)
		}
		for c := range byCol {
			byCol[c] = byCol[c][:0]
		}
		for _, v := range buf[0] {
			byCol[v.Column()] = append(byCol[v.Column()], v)
		}
		for c, lp := range lps {
			got, exp := lp.assemble(byCol[c]), lp.project(0, rows[i].Values[lp.field])
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("row %d column %s: parquet-go reads\n%#v\nwant\n%#v", i, pathString(lp.path), got, exp)
			}
		}
	}
	if n, _ := r.ReadRows(buf); n != 0 {
		t.Fatal("more rows than written")
	}
}

// checkStats checks the builder's statistics against counts and bounds computed from
// the rows, the footer's own counts, and iceberg-go's metrics of the file.
func checkStats(t *testing.T, data []byte, st FileStats, fields []iceberg.NestedField, rows []rowcodec.Row) {
	t.Helper()
	lps := leafPaths(fields)
	if len(st.Columns) != len(lps) {
		t.Fatalf("stats for %d columns, want %d", len(st.Columns), len(lps))
	}
	byID := map[int]ColumnStats{}
	for i, c := range st.Columns {
		byID[c.FieldID] = c
		if i > 0 && st.Columns[i-1].FieldID >= c.FieldID {
			t.Errorf("columns not in field-id order")
		}
	}

	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for i, lp := range lps {
		got, ok := byID[lp.id]
		if !ok {
			t.Errorf("column %s: no stats", pathString(lp.path))
			continue
		}
		var values, nulls int64
		var present []rowcodec.Value
		for _, r := range rows {
			n, z := lp.counts(0, r.Values[lp.field], &present)
			values, nulls = values+n, nulls+z
		}
		var footerValues, footerNulls, size int64
		for _, rg := range f.Metadata().RowGroups {
			md := rg.Columns[i].MetaData
			footerValues += md.NumValues
			footerNulls += md.Statistics.NullCount
			size += md.TotalCompressedSize
		}
		if got.ValueCount != values || got.NullCount != nulls || footerValues != values || footerNulls != nulls || got.ColumnSize != size {
			t.Errorf("column %s: %d values %d nulls size %d; rows give %d/%d, footer %d/%d size %d",
				pathString(lp.path), got.ValueCount, got.NullCount, got.ColumnSize, values, nulls, footerValues, footerNulls, size)
		}
		lo, hi := nestedWantBounds(t, lp, present)
		if !bytes.Equal(got.LowerBound, lo) || !bytes.Equal(got.UpperBound, hi) || (lo == nil) != (got.LowerBound == nil) || (hi == nil) != (got.UpperBound == nil) {
			t.Errorf("column %s: bounds %x..%x, want %x..%x", pathString(lp.path), got.LowerBound, got.UpperBound, lo, hi)
		}
		if lo != nil {
			typ := lp.types[len(lp.types)-1]
			if _, err := iceberg.LiteralFromBytes(typ, got.LowerBound); err != nil {
				t.Errorf("column %s: lower bound does not deserialize: %v", pathString(lp.path), err)
			}
		}
	}

	// iceberg-go's metrics of the same file, from its footer: counts and sizes for
	// every column; bounds for those it keeps (top-level ones: v0.7 keeps none inside
	// structs, where Iceberg Java does and we do).
	path := filepath.Join(t.TempDir(), "nested.parquet")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	df, err := table.FileToDataFile(context.Background(), iceio.LocalFS{}, path, iceberg.NewSchema(0, fields...), *iceberg.UnpartitionedSpec, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if df.Count() != st.RowCount || df.FileSizeBytes() != st.Size || !reflect.DeepEqual(df.SplitOffsets(), st.SplitOffsets) {
		t.Errorf("iceberg-go: %d rows %d bytes splits %v; ours: %d rows %d bytes splits %v",
			df.Count(), df.FileSizeBytes(), df.SplitOffsets(), st.RowCount, st.Size, st.SplitOffsets)
	}
	if len(df.ValueCounts()) != len(st.Columns) {
		t.Errorf("iceberg-go has counts for %d fields, we have %d", len(df.ValueCounts()), len(st.Columns))
	}
	uuids := map[int]bool{}
	for _, lp := range lps {
		if _, ok := lp.types[len(lp.types)-1].(iceberg.UUIDType); ok {
			uuids[lp.id] = true // see boundsFor
		}
	}
	for _, c := range st.Columns {
		id := c.FieldID
		if df.ValueCounts()[id] != c.ValueCount || df.NullValueCounts()[id] != c.NullCount || df.ColumnSizes()[id] != c.ColumnSize {
			t.Errorf("field %d: iceberg-go counts %d/%d size %d; ours %d/%d size %d", id,
				df.ValueCounts()[id], df.NullValueCounts()[id], df.ColumnSizes()[id], c.ValueCount, c.NullCount, c.ColumnSize)
		}
		lo, hasLo := df.LowerBoundValues()[id]
		hi, hasHi := df.UpperBoundValues()[id]
		if (hasLo || hasHi) && !uuids[id] && (!bytes.Equal(lo, c.LowerBound) || !bytes.Equal(hi, c.UpperBound)) {
			t.Errorf("field %d: iceberg-go bounds %x..%x, ours %x..%x", id, lo, hi, c.LowerBound, c.UpperBound)
		}
	}
}

// nestedWantBounds: none inside lists and maps, fixed(L) whole values in unsigned byte
// order, the rest as wantBounds.
func nestedWantBounds(t *testing.T, lp leafPath, present []rowcodec.Value) ([]byte, []byte) {
	if !lp.bounds || len(present) == 0 {
		return nil, nil
	}
	typ := lp.types[len(lp.types)-1]
	if _, ok := typ.(iceberg.FixedType); ok {
		lo, hi := present[0].Bytes, present[0].Bytes
		for _, v := range present {
			if bytes.Compare(v.Bytes, lo) < 0 {
				lo = v.Bytes
			}
			if bytes.Compare(v.Bytes, hi) > 0 {
				hi = v.Bytes
			}
		}
		return lo, hi
	}
	return wantBounds(t, typ, present)
}

func TestNestedReadBack(t *testing.T) {
	fields := nestedFields()
	dec := &rowsDecoder{fields: fields, rows: nestedRows(fields, 2500, 1), base: 100, failEvery: 13}
	var buf bytes.Buffer
	st := buildRows(t, &buf, dec, smallSettings(), 0)
	if st.RowCount != 2500 || st.FirstOffset != 100 || st.LastOffset != 2599 || st.DecodeErrors != 2500/13 || len(st.SplitOffsets) != 3 {
		t.Errorf("stats %d rows %d..%d, %d errors, %d row groups", st.RowCount, st.FirstOffset, st.LastOffset, st.DecodeErrors, len(st.SplitOffsets))
	}
	t.Run("arrow", func(t *testing.T) { checkWithArrow(t, buf.Bytes(), fields, dec.rows) })
	t.Run("parquet-go", func(t *testing.T) { checkWithParquetGo(t, buf.Bytes(), fields, dec.rows) })
	t.Run("stats", func(t *testing.T) { checkStats(t, buf.Bytes(), st, fields, dec.rows) })
}

// TestNestedShapes pins the cases one by one, so that a failure names its shape.
func TestNestedShapes(t *testing.T) {
	i32 := func(x int64) rowcodec.Value { return rowcodec.Value{Valid: true, Int: x} }
	str := func(s string) rowcodec.Value { return rowcodec.Value{Valid: true, Bytes: []byte(s)} }
	elems := func(vs ...rowcodec.Value) rowcodec.Value {
		return rowcodec.Value{Valid: true, Elems: append([]rowcodec.Value{}, vs...)}
	}
	null := rowcodec.Value{}
	cases := []struct {
		name  string
		typ   iceberg.Type
		req   bool
		vals  []rowcodec.Value
		defs  []int // of the single leaf column, all rows
		reps  []int
		lower string
	}{
		{"optional struct", structOf(opt("a", tInt)), false,
			[]rowcodec.Value{null, elems(null), elems(i32(5))}, []int{0, 1, 2}, []int{0, 0, 0}, "05000000"},
		{"required struct", structOf(req("a", tInt)), true,
			[]rowcodec.Value{elems(i32(-1))}, []int{0}, []int{0}, "ffffffff"},
		{"list", listOf(tInt, false), false,
			[]rowcodec.Value{null, elems(), elems(null), elems(i32(1), null, i32(2))}, []int{0, 1, 2, 3, 2, 3}, []int{0, 0, 0, 0, 1, 1}, ""},
		{"required list of required", listOf(tInt, true), true,
			[]rowcodec.Value{elems(), elems(i32(1), i32(2))}, []int{0, 1, 1}, []int{0, 0, 1}, ""},
		{"list of lists", listOf(listOf(tInt, false), false), false,
			[]rowcodec.Value{elems(elems(), null, elems(i32(1), i32(2))), elems(elems(i32(3)))},
			[]int{3, 2, 5, 5, 5}, []int{0, 1, 1, 2, 0}, ""},
		{"map", mapOf(tString, tString, false), false,
			[]rowcodec.Value{null, elems(), elems(elems(str("k"), null), elems(str("l"), str("v")))},
			// the value column
			[]int{0, 1, 2, 3}, []int{0, 0, 0, 1}, ""},
		{"struct in list in struct", structOf(opt("l", listOf(structOf(opt("x", tInt)), false))), false,
			[]rowcodec.Value{elems(elems(null, elems(null), elems(i32(7))))},
			[]int{3, 4, 5}, []int{0, 1, 1}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			field := iceberg.NestedField{Name: "f", Type: c.typ, Required: c.req}
			fields := withIDs([]iceberg.NestedField{field})
			rows := make([]rowcodec.Row, len(c.vals))
			for i, v := range c.vals {
				rows[i] = rowcodec.Row{Values: []rowcodec.Value{v}}
			}
			dec := &rowsDecoder{fields: fields, rows: rows}
			var buf bytes.Buffer
			st := buildRows(t, &buf, dec, DefaultSettings(), 0)
			f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			col := len(f.Schema().Columns()) - 1 // a map's value column
			var defs, reps []int
			r := parquet.NewReader(f)
			buf1 := make([]parquet.Row, 1)
			for range rows {
				if n, err := r.ReadRows(buf1); n != 1 {
					t.Fatal(err)
				}
				for _, v := range buf1[0] {
					if v.Column() == col {
						defs, reps = append(defs, v.DefinitionLevel()), append(reps, v.RepetitionLevel())
					}
				}
			}
			if !reflect.DeepEqual(defs, c.defs) || !reflect.DeepEqual(reps, c.reps) {
				t.Errorf("levels def %v rep %v, want def %v rep %v", defs, reps, c.defs, c.reps)
			}
			cs := st.Columns[len(st.Columns)-1]
			if fmt.Sprintf("%x", cs.LowerBound) != c.lower {
				t.Errorf("lower bound %x, want %s", cs.LowerBound, c.lower)
			}
			checkWithArrow(t, buf.Bytes(), fields, rows)
			checkWithParquetGo(t, buf.Bytes(), fields, rows)
			checkStats(t, buf.Bytes(), st, fields, rows)
		})
	}
}

func TestNestedSameRowsSameBytes(t *testing.T) {
	fields := nestedFields()
	dec := &rowsDecoder{fields: fields, rows: nestedRows(fields, 3000, 2)}
	s := smallSettings()
	var first bytes.Buffer
	want := buildRows(t, &first, dec, s, 0)
	for _, chunk := range []int{64, 128, s.RowGroupRows, 1 << 20} {
		if got := buildRows(t, io.Discard, dec, s, chunk); !reflect.DeepEqual(got, want) {
			t.Errorf("chunk %d: different file (%d bytes %s, want %d bytes %s)", chunk, got.Size, got.SHA256, want.Size, want.SHA256)
		}
	}
	// The builder copies what it keeps: rows that alias the decoder's memory, or not,
	// give the same bytes.
	aliased := *dec
	aliased.alias = true
	if got := buildRows(t, io.Discard, &aliased, s, 0); got.SHA256 != want.SHA256 {
		t.Errorf("aliased rows gave %s, want %s", got.SHA256, want.SHA256)
	}
}

// TestNestedGoldenFile pins the bytes of a nested file, as TestGoldenFile does for the
// flat layout: once files of nested tables are recorded, they must rebuild.
func TestNestedGoldenFile(t *testing.T) {
	fields := nestedFields()
	dec := &rowsDecoder{fields: fields, rows: nestedRows(fields, 400, 1234)}
	st := buildRows(t, io.Discard, dec, smallSettings(), 0)
	const want = "a6e599f7a022027467bdd14d7aec53b8e1c1f81a91ef6e596b15d3665ed7900a"
	if st.SHA256 != want {
		t.Errorf("version 1 nested layout changed: sha256 %s (%d bytes), want %s", st.SHA256, st.Size, want)
	}
}

const nestedChildEnv = "MINK_PARQUETBUILD_NESTED_CHILD"

func nestedChildStats(t testing.TB) FileStats {
	fields := nestedFields()
	dec := &rowsDecoder{fields: fields, rows: nestedRows(fields, 3000, 77), failEvery: 9}
	return buildRows(t, io.Discard, dec, smallSettings(), 0)
}

// TestBuildNestedInChildProcess is the child side of TestNestedSameBytesInAnotherProcess.
func TestBuildNestedInChildProcess(t *testing.T) {
	if os.Getenv(nestedChildEnv) != "1" {
		t.Skip("run by TestNestedSameBytesInAnotherProcess")
	}
	out, _ := json.Marshal(nestedChildStats(t))
	os.Stdout.Write(append(append([]byte("STATS "), out...), '\n'))
}

func TestNestedSameBytesInAnotherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	want := nestedChildStats(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestBuildNestedInChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), nestedChildEnv+"=1", "GOMAXPROCS=1", "GOGC=5")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var got FileStats
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(line, "STATS "); ok {
			if err := json.Unmarshal([]byte(js), &got); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("child printed no stats:\n%s", out)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("another process built a different file:\n got %+v\nwant %+v", got, want)
	}
}

// TestBadShapesFailTheFile: a decoder whose rows do not fit its fields fails the file
// with an error, never the process, and never writes a wrong file.
func TestBadShapesFailTheFile(t *testing.T) {
	fields := withIDs([]iceberg.NestedField{
		req("id", tLong),
		opt("s", structOf(req("a", tInt), opt("b", tString))),
		opt("l", listOf(tInt, true)),
		opt("m", mapOf(tString, tLong, false)),
		opt("fx", tFixed3),
		opt("u", listOf(tUUID, false)),
		opt("big", tDec30),
	})
	good := func() rowcodec.Row {
		return rowcodec.Row{Values: []rowcodec.Value{
			{Valid: true, Int: 1},
			{Valid: true, Elems: []rowcodec.Value{{Valid: true, Int: 2}, {}}},
			{Valid: true, Elems: []rowcodec.Value{{Valid: true, Int: 3}}},
			{Valid: true, Elems: []rowcodec.Value{{Valid: true, Elems: []rowcodec.Value{{Valid: true, Bytes: []byte("k")}, {}}}}},
			{Valid: true, Bytes: []byte("abc")},
			{Valid: true, Elems: []rowcodec.Value{{Valid: true, Bytes: make([]byte, 16)}}},
			{Valid: true, Bytes: make([]byte, 13)},
		}}
	}
	bad := map[string]func(r *rowcodec.Row){
		"null required top-level": func(r *rowcodec.Row) { r.Values[0] = rowcodec.Value{} },
		"null required in struct": func(r *rowcodec.Row) { r.Values[1].Elems[0] = rowcodec.Value{} },
		"struct too short":        func(r *rowcodec.Row) { r.Values[1].Elems = r.Values[1].Elems[:1] },
		"struct too long":         func(r *rowcodec.Row) { r.Values[1].Elems = append(r.Values[1].Elems, rowcodec.Value{}) },
		"struct without fields":   func(r *rowcodec.Row) { r.Values[1].Elems = nil },
		"null required element":   func(r *rowcodec.Row) { r.Values[2].Elems[0] = rowcodec.Value{} },
		"null map key":            func(r *rowcodec.Row) { r.Values[3].Elems[0].Elems[0] = rowcodec.Value{} },
		"map entry not a pair":    func(r *rowcodec.Row) { r.Values[3].Elems[0].Elems = r.Values[3].Elems[0].Elems[:1] },
		"null map entry":          func(r *rowcodec.Row) { r.Values[3].Elems[0] = rowcodec.Value{} },
		"fixed too short":         func(r *rowcodec.Row) { r.Values[4].Bytes = []byte("ab") },
		"fixed too long":          func(r *rowcodec.Row) { r.Values[4].Bytes = []byte("abcd") },
		"uuid too short":          func(r *rowcodec.Row) { r.Values[5].Elems[0].Bytes = make([]byte, 15) },
		"wide decimal too long":   func(r *rowcodec.Row) { r.Values[6].Bytes = make([]byte, 16) },
		"too few values":          func(r *rowcodec.Row) { r.Values = r.Values[:6] },
		"too many values":         func(r *rowcodec.Row) { r.Values = append(r.Values, rowcodec.Value{}) },
	}
	for name, breakRow := range bad {
		t.Run(name, func(t *testing.T) {
			rows := []rowcodec.Row{good(), good(), good()}
			breakRow(&rows[1])
			dec := &rowsDecoder{fields: fields, rows: rows, alias: true}
			b, err := NewBuilderFor(io.Discard, dec, DefaultSettings())
			if err != nil {
				t.Fatal(err)
			}
			recs := dec.records()
			if err := b.Add(recs[0]); err != nil {
				t.Fatalf("good row: %v", err)
			}
			err = b.Add(recs[1])
			if err == nil {
				t.Fatal("bad row accepted")
			}
			if err2 := b.Add(recs[2]); err2 != err {
				t.Errorf("Add after the failure: %v", err2)
			}
			if _, err2 := b.Close(); err2 != err {
				t.Errorf("Close after the failure: %v", err2)
			}
		})
	}

	// A decoder that panics fails the file too.
	b, err := NewBuilderFor(io.Discard, panicDecoder{fields}, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(record.Record{}); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Errorf("panicking decoder: %v", err)
	}
}

type panicDecoder struct{ fields []iceberg.NestedField }

func (d panicDecoder) Fields() []iceberg.NestedField            { return d.fields }
func (d panicDecoder) Decode(record.Record, *rowcodec.Row) bool { panic("decoder bug") }

func TestNewBuilderForValidates(t *testing.T) {
	one := func(f iceberg.NestedField) []iceberg.NestedField { return withIDs([]iceberg.NestedField{f}) }
	deep := iceberg.Type(tInt)
	for range 130 {
		deep = listOf(deep, false) // two definition levels each: 260 > 255
	}
	noID := one(opt("l", listOf(tInt, false)))
	noID[0].Type.(*iceberg.ListType).ElementID = 0
	dup := withIDs([]iceberg.NestedField{opt("a", tInt), opt("b", tInt)})
	dup[1].ID = dup[0].ID
	dupNested := one(opt("m", mapOf(tInt, tInt, false)))
	dupNested[0].Type.(*iceberg.MapType).ValueID = dupNested[0].Type.(*iceberg.MapType).KeyID
	bad := map[string][]iceberg.NestedField{
		"empty struct":     one(opt("s", structOf())),
		"unsupported type": one(opt("t", iceberg.PrimitiveTypes.TimestampNs)),
		"too deep":         one(opt("d", deep)),
		"no id":            noID,
		"duplicate id":     dup,
		"duplicate nested": dupNested,
	}
	for name, fields := range bad {
		if _, err := NewBuilderFor(io.Discard, &rowsDecoder{fields: fields}, DefaultSettings()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s := DefaultSettings()
	s.RowGroupRows = 0
	if _, err := NewBuilderFor(io.Discard, &rowsDecoder{fields: nestedFields()}, s); err == nil {
		t.Error("invalid settings accepted")
	}
}

// TestFlatThroughNewBuilderFor: NewBuilder is NewBuilderFor with rowcodec's decoder.
func TestFlatThroughNewBuilderFor(t *testing.T) {
	recs := makeRecords(500, 8, 10)
	want := build(t, io.Discard, testSpec, smallSettings(), recs, 0)
	dec, err := rowcodec.NewDecoder(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBuilderFor(io.Discard, dec, smallSettings())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Close()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("NewBuilderFor gave %+v, %v; NewBuilder %+v", got, err, want)
	}
}

// randomType returns a random Iceberg type nested at most depth levels.
func randomType(rng *rand.Rand, depth int) iceberg.Type {
	prims := []iceberg.Type{tBoolean, tInt, tLong, iceberg.PrimitiveTypes.Float32, iceberg.PrimitiveTypes.Float64,
		iceberg.PrimitiveTypes.Date, iceberg.PrimitiveTypes.Time, iceberg.PrimitiveTypes.Timestamp,
		iceberg.PrimitiveTypes.TimestampTz, tString, tBinary, tUUID,
		iceberg.FixedTypeOf(1 + rng.IntN(20)), iceberg.DecimalTypeOf(1+rng.IntN(38), 0)}
	if depth == 0 || rng.IntN(3) == 0 {
		return prims[rng.IntN(len(prims))]
	}
	switch rng.IntN(3) {
	case 0:
		var fs []iceberg.NestedField
		for i := range 1 + rng.IntN(3) {
			fs = append(fs, iceberg.NestedField{Name: fmt.Sprintf("f%d", i), Type: randomType(rng, depth-1), Required: rng.IntN(3) == 0})
		}
		return structOf(fs...)
	case 1:
		return listOf(randomType(rng, depth-1), rng.IntN(3) == 0)
	}
	// Keys: primitives, which every reader takes.
	return mapOf(prims[rng.IntN(len(prims))], randomType(rng, depth-1), rng.IntN(3) == 0)
}

// FuzzNestedRoundTrip builds random values of a random schema and reads them back with
// arrow-go and parquet-go, and checks the statistics.
func FuzzNestedRoundTrip(f *testing.F) {
	for seed := range uint64(40) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 99))
		var fields []iceberg.NestedField
		for i := range 1 + rng.IntN(4) {
			fields = append(fields, iceberg.NestedField{Name: fmt.Sprintf("c%d", i), Type: randomType(rng, 4), Required: rng.IntN(4) == 0})
		}
		fields = withIDs(fields)
		g := &gen{rng: rng, nullRate: 1 + rng.IntN(6), maxElems: rng.IntN(5)}
		rows := make([]rowcodec.Row, 1+rng.IntN(300))
		for i := range rows {
			rows[i] = g.row(fields)
		}
		dec := &rowsDecoder{fields: fields, rows: rows}
		s := DefaultSettings()
		s.RowGroupRows = 1 + rng.IntN(200)
		s.PageBufferBytes = minPageBufferBytes
		var buf bytes.Buffer
		st := buildRows(t, &buf, dec, s, 0)
		checkWithArrow(t, buf.Bytes(), fields, rows)
		checkWithParquetGo(t, buf.Bytes(), fields, rows)
		checkStats(t, buf.Bytes(), st, fields, rows)
		if again := buildRows(t, io.Discard, dec, s, 64); again.SHA256 != st.SHA256 {
			t.Errorf("a second build differs")
		}
	})
}

// TestFixedPageIndex: fixed(L) columns get a well-formed page index with all-null pages
// (parquet-go's own drops their entries, see fixed.go), in unsigned order, L > 16 too.
func TestFixedPageIndex(t *testing.T) {
	fields := withIDs([]iceberg.NestedField{
		opt("f3", tFixed3),
		opt("s", structOf(opt("f20", iceberg.FixedTypeOf(20)))),
	})
	rows := make([]rowcodec.Row, 10000)
	for i := range rows {
		f3, f20 := rowcodec.Value{}, rowcodec.Value{}
		if i < 300 {
			f3 = rowcodec.Value{Valid: true, Bytes: []byte{byte(i), 0x80, byte(255 - i%256)}}
			f20 = rowcodec.Value{Valid: true, Bytes: bytes.Repeat([]byte{byte(i)}, 20)}
		}
		rows[i] = rowcodec.Row{Values: []rowcodec.Value{f3, {Valid: true, Elems: []rowcodec.Value{f20}}}}
	}
	s := smallSettings()
	s.PageBufferBytes = minPageBufferBytes
	var buf bytes.Buffer
	st := buildRows(t, &buf, &rowsDecoder{fields: fields, rows: rows}, s, 0)
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	nullPages := 0
	for c, ci := range f.ColumnIndexes() {
		if len(ci.MinValues) != len(ci.NullPages) || len(ci.MaxValues) != len(ci.NullPages) {
			t.Fatalf("column index %d: %d pages, %d/%d bounds", c, len(ci.NullPages), len(ci.MinValues), len(ci.MaxValues))
		}
		for p, null := range ci.NullPages {
			if null {
				nullPages++
				if len(ci.MinValues[p]) != 0 || len(ci.MaxValues[p]) != 0 {
					t.Errorf("column index %d page %d: null page with bounds", c, p)
				}
			} else if bytes.Compare(ci.MinValues[p], ci.MaxValues[p]) > 0 {
				t.Errorf("column index %d page %d: min %x > max %x", c, p, ci.MinValues[p], ci.MaxValues[p])
			}
		}
	}
	if nullPages == 0 {
		t.Fatal("no all-null page: the test does not test")
	}
	if got := st.Columns[0]; fmt.Sprintf("%x..%x", got.LowerBound, got.UpperBound) != "0080ff..ff8000" {
		t.Errorf("f3 bounds %x..%x", got.LowerBound, got.UpperBound)
	}
	if got := st.Columns[1]; !bytes.Equal(got.LowerBound, make([]byte, 20)) || !bytes.Equal(got.UpperBound, bytes.Repeat([]byte{0xff}, 20)) {
		t.Errorf("f20 bounds %x..%x", got.LowerBound, got.UpperBound)
	}
	checkWithArrow(t, buf.Bytes(), fields, rows)
	checkStats(t, buf.Bytes(), st, fields, rows)
}
