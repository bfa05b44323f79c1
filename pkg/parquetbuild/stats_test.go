package parquetbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// TestStatsAgainstTheRows computes every column's metrics from the decoded rows, by
// simple means, and checks the builder's against them: counts, and bounds decoded
// with iceberg-go's own single-value deserializer.
func TestStatsAgainstTheRows(t *testing.T) {
	recs := makeRecords(3000, 11, 20)
	rows, _ := expectedRows(t, testSpec, recs)
	var buf bytes.Buffer
	st := build(t, &buf, testSpec, smallSettings(), recs, 0)

	sc, _ := testSpec.IcebergSchema()
	byID := map[int]ColumnStats{}
	var ids []int
	for _, c := range st.Columns {
		byID[c.FieldID] = c
		ids = append(ids, c.FieldID)
	}
	if !slices.IsSorted(ids) {
		t.Errorf("columns not in field-id order: %v", ids)
	}

	wantIDs := []int{}
	for i, f := range sc.Fields() {
		switch ft := f.Type.(type) {
		case *iceberg.ListType:
			// Parquet counts of the element column: one entry per element, one null
			// entry for a null or empty list.
			leafIDs := []int{ft.ElementID}
			if st, ok := ft.Element.(*iceberg.StructType); ok {
				leafIDs = []int{st.FieldList[0].ID, st.FieldList[1].ID}
			}
			for k, id := range leafIDs {
				wantIDs = append(wantIDs, id)
				var values, nulls int64
				for _, r := range rows {
					v := r.Values[i]
					if !v.Valid || len(v.Elems) == 0 {
						values++
						nulls++
						continue
					}
					for _, e := range v.Elems {
						values++
						if len(leafIDs) == 2 {
							e = e.Elems[k]
						}
						if !e.Valid {
							nulls++
						}
					}
				}
				if got := byID[id]; got.ValueCount != values || got.NullCount != nulls || got.LowerBound != nil || got.UpperBound != nil {
					t.Errorf("%s (id %d): %+v, want %d values, %d nulls, no bounds", f.Name, id, got, values, nulls)
				}
			}
			continue
		}
		wantIDs = append(wantIDs, f.ID)
		got := byID[f.ID]
		var nulls int64
		var present []rowcodec.Value
		for _, r := range rows {
			if r.Values[i].Valid {
				present = append(present, r.Values[i])
			} else {
				nulls++
			}
		}
		if got.ValueCount != int64(len(rows)) || got.NullCount != nulls {
			t.Errorf("%s: %d values %d nulls, want %d, %d", f.Name, got.ValueCount, got.NullCount, len(rows), nulls)
		}
		if got.ColumnSize <= 0 {
			t.Errorf("%s: column size %d", f.Name, got.ColumnSize)
		}
		lo, hi := wantBounds(t, f.Type, present)
		if !bytes.Equal(got.LowerBound, lo) || !bytes.Equal(got.UpperBound, hi) || (lo == nil) != (got.LowerBound == nil) {
			t.Errorf("%s: bounds %x..%x, want %x..%x", f.Name, got.LowerBound, got.UpperBound, lo, hi)
		}
		if lo == nil {
			continue
		}
		// What an engine will make of them.
		loLit, err1 := iceberg.LiteralFromBytes(f.Type, got.LowerBound)
		hiLit, err2 := iceberg.LiteralFromBytes(f.Type, got.UpperBound)
		if err1 != nil || err2 != nil {
			t.Errorf("%s: bounds do not deserialize: %v %v", f.Name, err1, err2)
			continue
		}
		checkLiteralBounds(t, f, present, loLit, hiLit)
	}
	slices.Sort(wantIDs)
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Errorf("stats for fields %v, want %v", ids, wantIDs)
	}

	// Column sizes add up to the column chunks in the footer.
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var footer, ours int64
	for _, rg := range f.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			footer += cc.MetaData.TotalCompressedSize
		}
	}
	for _, c := range st.Columns {
		ours += c.ColumnSize
	}
	if footer != ours {
		t.Errorf("column sizes sum to %d, footer says %d", ours, footer)
	}
}

// wantBounds serializes the min and max of vs the Iceberg way, using iceberg-go's
// literals, with truncate(16) for strings and binary.
func wantBounds(t *testing.T, typ iceberg.Type, vs []rowcodec.Value) ([]byte, []byte) {
	t.Helper()
	if len(vs) == 0 {
		return nil, nil
	}
	ser := func(l iceberg.Literal) []byte {
		b, err := l.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	switch tt := typ.(type) {
	case iceberg.UUIDType:
		return nil, nil
	case iceberg.StringType, iceberg.BinaryType:
		ss := make([]string, len(vs))
		for i, v := range vs {
			ss[i] = string(v.Bytes)
		}
		lo, hi := slices.Min(ss), slices.Max(ss)
		if _, text := tt.(iceberg.StringType); text {
			lo, hi = truncRunes(lo), upperRunes(hi)
			if hi == "\x00none" {
				return []byte(lo), nil
			}
			return []byte(lo), []byte(hi)
		}
		if len(lo) > 16 {
			lo = lo[:16]
		}
		if len(hi) > 16 {
			h := []byte(hi[:16])
			for len(h) > 0 && h[len(h)-1] == 0xff {
				h = h[:len(h)-1]
			}
			if len(h) == 0 {
				return []byte(lo), nil
			}
			h[len(h)-1]++
			hi = string(h)
		}
		return []byte(lo), []byte(hi)
	case iceberg.Float32Type, iceberg.Float64Type:
		lo, hi := vs[0].Float, vs[0].Float
		for _, v := range vs {
			lo, hi = math.Min(lo, v.Float), math.Max(hi, v.Float)
		}
		if _, f32 := tt.(iceberg.Float32Type); f32 {
			return ser(iceberg.Float32Literal(lo)), ser(iceberg.Float32Literal(hi))
		}
		return ser(iceberg.Float64Literal(lo)), ser(iceberg.Float64Literal(hi))
	case iceberg.DecimalType:
		nums := make([]decimal128.Num, len(vs))
		for i, v := range vs {
			if tt.Precision() <= 18 {
				nums[i] = decimal128.FromI64(v.Int)
			} else {
				nums[i] = decimal128.FromBigInt(twos(v.Bytes))
			}
		}
		lo, hi := nums[0], nums[0]
		for _, n := range nums {
			if n.Less(lo) {
				lo = n
			}
			if hi.Less(n) {
				hi = n
			}
		}
		return ser(iceberg.DecimalLiteral{Val: lo, Scale: tt.Scale()}), ser(iceberg.DecimalLiteral{Val: hi, Scale: tt.Scale()})
	}
	lo, hi := vs[0].Int, vs[0].Int
	for _, v := range vs {
		lo, hi = min(lo, v.Int), max(hi, v.Int)
	}
	switch typ.(type) {
	case iceberg.BooleanType:
		return ser(iceberg.BoolLiteral(lo != 0)), ser(iceberg.BoolLiteral(hi != 0))
	case iceberg.Int32Type:
		return ser(iceberg.Int32Literal(lo)), ser(iceberg.Int32Literal(hi))
	case iceberg.DateType:
		return ser(iceberg.DateLiteral(lo)), ser(iceberg.DateLiteral(hi))
	case iceberg.TimeType:
		return ser(iceberg.TimeLiteral(lo)), ser(iceberg.TimeLiteral(hi))
	case iceberg.TimestampType, iceberg.TimestampTzType:
		return ser(iceberg.TimestampLiteral(lo)), ser(iceberg.TimestampLiteral(hi))
	}
	return ser(iceberg.Int64Literal(lo)), ser(iceberg.Int64Literal(hi))
}

func truncRunes(s string) string {
	r := []rune(s)
	if len(r) > 16 {
		return string(r[:16])
	}
	return s
}

func upperRunes(s string) string {
	r := []rune(s)
	if len(r) <= 16 {
		return s
	}
	r = r[:16]
	for len(r) > 0 {
		last := r[len(r)-1] + 1
		if last == 0xD800 {
			last = 0xE000
		}
		if last <= utf8.MaxRune {
			r[len(r)-1] = last
			return string(r)
		}
		r = r[:len(r)-1]
	}
	return "\x00none"
}

// checkLiteralBounds checks that every value lies within the decoded bounds, and that
// for untruncated types the bounds are values of the column.
func checkLiteralBounds(t *testing.T, f iceberg.NestedField, vs []rowcodec.Value, lo, hi iceberg.Literal) {
	t.Helper()
	switch l := lo.(type) {
	case iceberg.Int64Literal:
		h := hi.(iceberg.Int64Literal)
		for _, v := range vs {
			if v.Int < int64(l) || v.Int > int64(h) {
				t.Errorf("%s: %d outside %d..%d", f.Name, v.Int, l, h)
			}
		}
	case iceberg.Int32Literal:
		h := hi.(iceberg.Int32Literal)
		for _, v := range vs {
			if v.Int < int64(l) || v.Int > int64(h) {
				t.Errorf("%s: %d outside %d..%d", f.Name, v.Int, l, h)
			}
		}
	case iceberg.TimestampLiteral:
		h := hi.(iceberg.TimestampLiteral)
		for _, v := range vs {
			if v.Int < int64(l) || v.Int > int64(h) {
				t.Errorf("%s: %d outside %d..%d", f.Name, v.Int, l, h)
			}
		}
	case iceberg.Float64Literal:
		h := hi.(iceberg.Float64Literal)
		for _, v := range vs {
			if v.Float < float64(l) || v.Float > float64(h) {
				t.Errorf("%s: %g outside %g..%g", f.Name, v.Float, l, h)
			}
		}
	case iceberg.StringLiteral:
		h := string(hi.(iceberg.StringLiteral))
		for _, v := range vs {
			if string(v.Bytes) < string(l) || string(v.Bytes) > h {
				t.Errorf("%s: %q outside %q..%q", f.Name, v.Bytes, l, h)
			}
		}
	}
}

// TestStatsMatchIcebergGo has iceberg-go compute the data_file metrics of our file from
// its footer, as it would for a file added to a table, and compares them with ours.
func TestStatsMatchIcebergGo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "range.parquet")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	st := build(t, out, testSpec, smallSettings(), makeRecords(3000, 12, 25), 0)
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	sc, _ := testSpec.IcebergSchema()
	df, err := table.FileToDataFile(context.Background(), iceio.LocalFS{}, path, sc, *iceberg.UnpartitionedSpec, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if df.Count() != st.RowCount || df.FileSizeBytes() != st.Size || !reflect.DeepEqual(df.SplitOffsets(), st.SplitOffsets) {
		t.Errorf("iceberg-go: %d rows %d bytes splits %v; ours: %d rows %d bytes splits %v",
			df.Count(), df.FileSizeBytes(), df.SplitOffsets(), st.RowCount, st.Size, st.SplitOffsets)
	}
	uuidID := 1 // event_id: iceberg-go keeps bounds for uuid, we do not (see boundsFor)
	for _, c := range st.Columns {
		id := c.FieldID
		if df.ValueCounts()[id] != c.ValueCount || df.NullValueCounts()[id] != c.NullCount || df.ColumnSizes()[id] != c.ColumnSize {
			t.Errorf("field %d: iceberg-go counts %d/%d size %d; ours %d/%d size %d", id,
				df.ValueCounts()[id], df.NullValueCounts()[id], df.ColumnSizes()[id], c.ValueCount, c.NullCount, c.ColumnSize)
		}
		if id == uuidID {
			continue
		}
		if lo, hi := df.LowerBoundValues()[id], df.UpperBoundValues()[id]; !bytes.Equal(lo, c.LowerBound) || !bytes.Equal(hi, c.UpperBound) {
			t.Errorf("field %d: iceberg-go bounds %x..%x, ours %x..%x", id, lo, hi, c.LowerBound, c.UpperBound)
		}
	}
	if len(df.ValueCounts()) != len(st.Columns) {
		t.Errorf("iceberg-go has counts for %d fields, we have %d", len(df.ValueCounts()), len(st.Columns))
	}
}

func TestTruncatedBounds(t *testing.T) {
	cases := []struct {
		text   bool
		values []string
		lo, hi string
		noHi   bool
	}{
		{true, []string{"b", "a", "c"}, "a", "c", false},
		{true, []string{"", "x"}, "", "x", false},
		{true, []string{"0123456789abcdef", "0123456789abcdeg"}, "0123456789abcdef", "0123456789abcdeg", false},
		{true, []string{"0123456789abcdefXYZ", "0"}, "0", "0123456789abcdeg", false},
		{true, []string{"0123456789abcdef", "0123456789abcdefZ"}, "0123456789abcdef", "0123456789abcdeg", false},
		{true, []string{"0123456789abcdeZZ", "0123456789abcdef"}, "0123456789abcdeZ", "0123456789abcdef", false},
		{true, []string{"ééééééééééééééééé"}, "éééééééééééééééé", "éééééééééééééééê", false},
		{true, []string{"aaaaaaaaaaaaaaa\uD7FFz"}, "aaaaaaaaaaaaaaa\uD7FF", "aaaaaaaaaaaaaaa\uE000", false},
		{true, []string{"aaaaaaaaaaaaaaa\U0010FFFFz"}, "aaaaaaaaaaaaaaa\U0010FFFF", "aaaaaaaaaaaaaab", false},
		{true, []string{strings.Repeat("\U0010FFFF", 17)}, strings.Repeat("\U0010FFFF", 16), "", true},
		{false, []string{"\x00\xff", "\x01"}, "\x00\xff", "\x01", false},
		{false, []string{"0123456789abcdef\xff"}, "0123456789abcdef", "0123456789abcdeg", false},
		{false, []string{"0123456789abcde\xff\x00"}, "0123456789abcde\xff", "0123456789abcdf", false},
		{false, []string{strings.Repeat("\xff", 17)}, strings.Repeat("\xff", 16), "", true},
	}
	for _, c := range cases {
		b := &prefixBounds{text: c.text}
		for _, v := range c.values {
			b.observe(&rowcodec.Value{Valid: true, Bytes: []byte(v)})
		}
		lo, hi := b.result()
		if string(lo) != c.lo || (hi == nil) != c.noHi || (!c.noHi && string(hi) != c.hi) {
			t.Errorf("text=%v %q: bounds %q..%q (nil upper %v), want %q..%q (nil upper %v)", c.text, c.values, lo, hi, hi == nil, c.lo, c.hi, c.noHi)
		}
	}
	var none prefixBounds
	if lo, hi := none.result(); lo != nil || hi != nil {
		t.Error("bounds without values")
	}
}

func TestFloatAndDecimalBounds(t *testing.T) {
	fb := &floatBounds{size: 8}
	for _, f := range []float64{0, math.Copysign(0, -1), 1.5, -2.5, math.NaN()} {
		fb.observe(&rowcodec.Value{Valid: true, Float: f})
	}
	lo, hi := fb.result()
	l, _ := iceberg.LiteralFromBytes(iceberg.PrimitiveTypes.Float64, lo)
	h, _ := iceberg.LiteralFromBytes(iceberg.PrimitiveTypes.Float64, hi)
	if l.(iceberg.Float64Literal) != -2.5 || h.(iceberg.Float64Literal) != 1.5 {
		t.Errorf("bounds %v..%v", l, h)
	}
	zeros := &floatBounds{size: 4}
	zeros.observe(&rowcodec.Value{Valid: true, Float: 0})
	zeros.observe(&rowcodec.Value{Valid: true, Float: math.Copysign(0, -1)})
	lo, hi = zeros.result()
	if !bytes.Equal(lo, []byte{0, 0, 0, 0x80}) || !bytes.Equal(hi, []byte{0, 0, 0, 0}) {
		t.Errorf("-0/+0 bounds %x..%x, want -0..+0", lo, hi)
	}

	// Decimal bounds are minimal big-endian two's complement: what iceberg-go writes.
	for _, v := range []int64{0, 1, -1, 127, 128, -128, -129, 255, -256, math.MaxInt64, math.MinInt64} {
		ib := &intBounds{decimal: true}
		ib.observe(&rowcodec.Value{Valid: true, Int: v})
		got, _ := ib.result()
		want, _ := iceberg.DecimalLiteral{Val: decimal128.FromI64(v), Scale: 2}.MarshalBinary()
		if !bytes.Equal(got, want) {
			t.Errorf("decimal %d: %x, iceberg-go %x", v, got, want)
		}
	}
}

// TestWideDecimalFooterStatsAreSigned: parquet-go orders fixed-length bytes unsigned;
// a wide decimal column mixing signs must still get signed min/max in the footer and the
// page index, because engines prune with them.
func TestWideDecimalFooterStatsAreSigned(t *testing.T) {
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
		{Name: "d", Type: "decimal(38,0)"}, {Name: "u", Type: "uuid"},
	}}
	var recs []record.Record
	vals := []string{"5", "-7", "3", "-1", "100000000000000000000000000000000000", "-2"}
	for i := 0; i < 10000; i++ {
		v := `{"d": ` + vals[i%len(vals)] + `, "u": "123e4567-e89b-12d3-a456-42661417400` + string(rune('0'+i%10)) + `"}`
		if i >= 300 {
			v = `{"d": null}` // all-null pages: the page index must stay well-formed
		}
		recs = append(recs, record.Record{Offset: int64(i), Value: []byte(v)})
	}
	s := smallSettings()
	s.PageBufferBytes = minPageBufferBytes
	var buf bytes.Buffer
	st := build(t, &buf, spec, s, recs, 0)

	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	stat := f.Metadata().RowGroups[0].Columns[0].MetaData.Statistics
	if got, want := twos(stat.MinValue).String(), "-7"; got != want {
		t.Errorf("footer min %s, want %s", got, want)
	}
	if got, want := twos(stat.MaxValue).String(), "100000000000000000000000000000000000"; got != want {
		t.Errorf("footer max %s, want %s", got, want)
	}
	for c, ci := range f.ColumnIndexes() {
		if len(ci.MinValues) != len(ci.NullPages) || len(ci.MaxValues) != len(ci.NullPages) || (c < 2 && len(ci.NullPages) < 2) {
			t.Errorf("column %d: page index with %d pages, %d/%d bounds", c, len(ci.NullPages), len(ci.MinValues), len(ci.MaxValues))
			continue
		}
		for p, null := range ci.NullPages {
			if null && (len(ci.MinValues[p]) != 0 || len(ci.MaxValues[p]) != 0) {
				t.Errorf("column %d page %d: null page with bounds", c, p)
			}
			if !null && c == 0 && twos(ci.MinValues[p]).Cmp(twos(ci.MaxValues[p])) > 0 {
				t.Errorf("page %d: min %s > max %s", p, twos(ci.MinValues[p]), twos(ci.MaxValues[p]))
			}
		}
	}
	d := st.Columns[0]
	l, _ := iceberg.LiteralFromBytes(iceberg.DecimalTypeOf(38, 0), d.LowerBound)
	h, _ := iceberg.LiteralFromBytes(iceberg.DecimalTypeOf(38, 0), d.UpperBound)
	if l.String() != "-7" || h.String() != "100000000000000000000000000000000000" {
		t.Errorf("bounds %s..%s", l, h)
	}
}

func TestStatsJSON(t *testing.T) {
	st := build(t, &bytes.Buffer{}, testSpec, smallSettings(), makeRecords(200, 2, 10), 0)
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back FileStats
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Errorf("stats do not survive JSON:\n%+v\n%+v", back, st)
	}
}
