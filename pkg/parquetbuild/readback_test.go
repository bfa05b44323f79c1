package parquetbuild

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// want is a value normalized for comparison: nil, bool, int64, float64, string (text,
// bytes and uuid), *big.Int decimals as decimal strings, []any for lists and structs.
func want(t iceberg.Type, v rowcodec.Value) any {
	if !v.Valid {
		return nil
	}
	switch t := t.(type) {
	case *iceberg.ListType:
		out := []any{}
		for _, e := range v.Elems {
			out = append(out, want(t.Element, e))
		}
		return out
	case *iceberg.StructType:
		out := []any{}
		for i, f := range t.FieldList {
			out = append(out, want(f.Type, v.Elems[i]))
		}
		return out
	case iceberg.BooleanType:
		return v.Int != 0
	case iceberg.Int32Type, iceberg.DateType, iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType:
		return v.Int
	case iceberg.Float32Type, iceberg.Float64Type:
		return v.Float
	case iceberg.StringType, iceberg.BinaryType, iceberg.UUIDType:
		return string(v.Bytes)
	case iceberg.DecimalType:
		if t.Precision() <= 18 {
			return strconv.FormatInt(v.Int, 10)
		}
		return twos(v.Bytes).String()
	}
	panic(fmt.Sprintf("no normal form for %s", t))
}

func twos(b []byte) *big.Int {
	v := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return v
}

// arrowValue is want for a value read by Arrow.
func arrowValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Date32:
		return int64(a.Value(i))
	case *array.Time64:
		return int64(a.Value(i))
	case *array.Timestamp:
		return int64(a.Value(i))
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.FixedSizeBinary:
		return string(a.Value(i))
	case *array.Decimal128:
		return a.Value(i).BigInt().String()
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := []any{}
		for j := start; j < end; j++ {
			out = append(out, arrowValue(a.ListValues(), int(j)))
		}
		return out
	case *array.Struct:
		out := []any{}
		for f := 0; f < a.NumField(); f++ {
			out = append(out, arrowValue(a.Field(f), i))
		}
		return out
	case array.ExtensionArray:
		return arrowValue(a.Storage(), i)
	}
	panic(fmt.Sprintf("no normal form for arrow %T", arr))
}

func TestReadBackWithArrowAndIceberg(t *testing.T) {
	recs := makeRecords(3000, 3, 30)
	rows, _ := expectedRows(t, testSpec, recs)
	var buf bytes.Buffer
	st := build(t, &buf, testSpec, smallSettings(), recs, 0)

	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if got := pf.NumRows(); got != int64(len(recs)) || got != st.RowCount {
		t.Fatalf("arrow reads %d rows, want %d", got, len(recs))
	}
	if got := pf.MetaData().GetCreatedBy(); got != CreatedBy {
		t.Errorf("created_by %q", got)
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

	// The field ids in the file, turned back into an Iceberg schema by iceberg-go, must
	// be the table's schema: names, types, ids (nested too) and required flags.
	wantSchema, err := testSpec.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	gotSchema, err := table.ArrowSchemaToIceberg(tbl.Schema(), false, nil)
	if err != nil {
		t.Fatalf("iceberg-go cannot map the file's schema: %v", err)
	}
	if !gotSchema.Equals(wantSchema) {
		t.Fatalf("file schema as Iceberg:\n%s\nwant\n%s", gotSchema, wantSchema)
	}

	fields := wantSchema.Fields()
	for c, f := range fields {
		col := tbl.Column(c)
		if col.Name() != f.Name {
			t.Fatalf("column %d is %q, want %q", c, col.Name(), f.Name)
		}
		row := 0
		for _, chunk := range col.Data().Chunks() {
			for i := 0; i < chunk.Len(); i++ {
				got, exp := arrowValue(chunk, i), want(f.Type, rows[row].Values[c])
				if !reflect.DeepEqual(got, exp) {
					t.Fatalf("row %d (offset %d) column %s: arrow reads %#v, want %#v", row, recs[row].Offset, f.Name, got, exp)
				}
				row++
			}
		}
		if row != len(rows) {
			t.Fatalf("column %s has %d values", f.Name, row)
		}
	}
}

func TestReadBackWithParquetGo(t *testing.T) {
	recs := makeRecords(3000, 4, 30)
	rows, _ := expectedRows(t, testSpec, recs)
	var buf bytes.Buffer
	build(t, &buf, testSpec, smallSettings(), recs, 0)

	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if f.NumRows() != int64(len(recs)) || len(f.RowGroups()) != 3 {
		t.Fatalf("%d rows in %d row groups", f.NumRows(), len(f.RowGroups()))
	}
	if f.Metadata().CreatedBy != CreatedBy {
		t.Errorf("created_by %q", f.Metadata().CreatedBy)
	}

	// Every node carries its Iceberg field id.
	sc, _ := testSpec.IcebergSchema()
	wantIDs := map[string]int{}
	for _, fl := range sc.Fields() {
		wantIDs[fl.Name] = fl.ID
		if l, ok := fl.Type.(*iceberg.ListType); ok {
			wantIDs[fl.Name+".list.element"] = l.ElementID
			if st, ok := l.Element.(*iceberg.StructType); ok {
				for _, sf := range st.FieldList {
					wantIDs[fl.Name+".list.element."+sf.Name] = sf.ID
				}
			}
		}
	}
	gotIDs := map[string]int{}
	var walk func(prefix string, n parquet.Node)
	walk = func(prefix string, n parquet.Node) {
		for _, fl := range n.Fields() {
			path := prefix + fl.Name()
			if path != fl.Name() || fl.Name() != "list" {
				if fl.Name() != "list" {
					gotIDs[path] = fl.ID()
				}
			}
			walk(path+".", fl)
		}
	}
	walk("", f.Schema())
	if !reflect.DeepEqual(gotIDs, wantIDs) {
		t.Fatalf("field ids in the Parquet schema:\n got %v\nwant %v", gotIDs, wantIDs)
	}

	// Nested values through parquet-go's own reconstruction; exact primitives (decimals
	// included, which that reconstruction turns into floats) from the raw rows.
	fields := sc.Fields()
	r := parquet.NewReader(f)
	raw := parquet.NewReader(f)
	rowBuf := make([]parquet.Row, 1)
	for i := range rows {
		m := map[string]any{}
		if err := r.Read(&m); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if n, err := raw.ReadRows(rowBuf); n != 1 {
			t.Fatalf("row %d: %v", i, err)
		}
		byCol := map[int]parquet.Value{}
		for _, v := range rowBuf[0] {
			byCol[v.Column()] = v
		}
		col := 0
		for c, fl := range fields {
			exp := want(fl.Type, rows[i].Values[c])
			switch ft := fl.Type.(type) {
			case *iceberg.ListType:
				got := normalizeGo(m[fl.Name])
				if st, ok := ft.Element.(*iceberg.StructType); ok && got != nil {
					for j, e := range got.([]any) {
						em := e.(map[string]any)
						got.([]any)[j] = []any{normalizeGo(em[st.FieldList[0].Name]), normalizeGo(em[st.FieldList[1].Name])}
					}
					col += 2
				} else {
					col++
				}
				if !reflect.DeepEqual(got, exp) {
					t.Fatalf("row %d column %s: parquet-go reads %#v, want %#v", i, fl.Name, got, exp)
				}
			default:
				if got := rawValue(byCol[col], fl.Type); !reflect.DeepEqual(got, exp) {
					t.Fatalf("row %d column %s: parquet-go reads %#v, want %#v", i, fl.Name, got, exp)
				}
				col++
			}
		}
	}
	if err := r.Read(&map[string]any{}); err != io.EOF {
		t.Fatalf("more rows than written: %v", err)
	}
}

func normalizeGo(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalizeGo(e)
		}
		return out
	case []byte:
		return string(v)
	case int32:
		return int64(v)
	case float32:
		return float64(v)
	}
	return v
}

func rawValue(v parquet.Value, t iceberg.Type) any {
	if v.IsNull() {
		return nil
	}
	switch t := t.(type) {
	case iceberg.BooleanType:
		return v.Boolean()
	case iceberg.Float32Type:
		return float64(v.Float())
	case iceberg.Float64Type:
		return v.Double()
	case iceberg.StringType, iceberg.BinaryType, iceberg.UUIDType:
		return string(v.ByteArray())
	case iceberg.DecimalType:
		switch {
		case t.Precision() <= 9:
			return strconv.FormatInt(int64(v.Int32()), 10)
		case t.Precision() <= 18:
			return strconv.FormatInt(v.Int64(), 10)
		}
		return twos(v.ByteArray()).String()
	case iceberg.Int32Type, iceberg.DateType:
		return int64(v.Int32())
	}
	return v.Int64()
}

func TestErrorRowsInTheFile(t *testing.T) {
	recs := makeRecords(500, 5, 3)
	_, wantErrs := expectedRows(t, testSpec, recs)
	var buf bytes.Buffer
	st := build(t, &buf, testSpec, smallSettings(), recs, 0)
	if st.DecodeErrors != wantErrs || wantErrs < 100 {
		t.Fatalf("DecodeErrors %d, want %d (>= 100)", st.DecodeErrors, wantErrs)
	}
	if st.RowCount != int64(len(recs)) || st.FirstOffset != recs[0].Offset || st.LastOffset != recs[len(recs)-1].Offset {
		t.Fatalf("rows %d offsets %d..%d", st.RowCount, st.FirstOffset, st.LastOffset)
	}

	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	r := parquet.NewReader(f)
	var withError int64
	for i := range recs {
		m := map[string]any{}
		if err := r.Read(&m); err != nil {
			t.Fatal(err)
		}
		if m["_kafka_offset"] != recs[i].Offset {
			t.Fatalf("row %d has offset %v, want %d: rows must keep record order", i, m["_kafka_offset"], recs[i].Offset)
		}
		if m[tableschema.ColumnMinkError] == nil {
			continue
		}
		withError++
		for _, c := range testSpec.Columns {
			if m[c.Name] != nil {
				t.Errorf("row %d has error %q but %s = %v", i, m[tableschema.ColumnMinkError], c.Name, m[c.Name])
			}
		}
	}
	if withError != wantErrs {
		t.Errorf("%d rows carry an error, want %d", withError, wantErrs)
	}
}
