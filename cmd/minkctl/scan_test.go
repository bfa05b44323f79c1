package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/hadoop"
	itable "github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/minkhq/mink/pkg/tablerows"
)

// sample is two rows with every kind of value a Mink table has: the demo's columns and
// the Kafka columns (headers are a list of key/value structs), with nulls.
func sample(t *testing.T) (*arrow.Schema, arrow.RecordBatch) {
	t.Helper()
	header := arrow.StructOf(arrow.Field{Name: "key", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "page", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "session", Type: extensions.NewUUIDType(), Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "_kafka_key", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "_kafka_headers", Type: arrow.ListOf(header), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 9007199254740993}, nil)
	amount := b.Field(1).(*array.Decimal128Builder)
	amount.Append(decimal128.FromI64(123456))
	amount.AppendNull()
	ts := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	b.Field(2).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{arrow.Timestamp(ts.UnixMicro()), 0}, nil)
	b.Field(3).(*array.StringBuilder).AppendValues([]string{"/search?q=boots&x=<1>", "tab\there\nnewline"}, nil)
	sess := b.Field(4).(*extensions.UUIDBuilder)
	sess.Append(uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e"))
	sess.AppendNull()
	tags := b.Field(5).(*array.ListBuilder)
	tags.Append(true)
	tags.ValueBuilder().(*array.StringBuilder).AppendValues([]string{"promo", "beta"}, nil)
	tags.Append(true) // empty, not null
	score := b.Field(6).(*array.Float64Builder)
	score.Append(0.5)
	score.Append(math.NaN())
	day := b.Field(7).(*array.Date32Builder)
	day.Append(arrow.Date32FromTime(ts))
	day.AppendNull()
	key := b.Field(8).(*array.BinaryBuilder)
	key.Append([]byte("u-0042"))
	key.Append([]byte{0, 0xff})
	hs := b.Field(9).(*array.ListBuilder)
	hs.Append(true)
	hb := hs.ValueBuilder().(*array.StructBuilder)
	hb.Append(true)
	hb.FieldBuilder(0).(*array.StringBuilder).Append("trace")
	hb.FieldBuilder(1).(*array.BinaryBuilder).Append([]byte("abc"))
	hs.AppendNull()
	return schema, b.NewRecordBatch()
}

func batches(recs ...arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

func columnsOf(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return out
}

func TestPrintRowsTable(t *testing.T) {
	schema, rec := sample(t)
	var out bytes.Buffer
	n, err := printRows(&out, "table", schema, columnsOf(schema), batches(rec), 0)
	if err != nil || n != 2 {
		t.Fatalf("printRows = %d, %v", n, err)
	}
	want := `id                amount   ts                           page                   session                               tags           score  day         _kafka_key  _kafka_headers
1                 1234.56  2026-03-04T05:06:07.123456Z  /search?q=boots&x=<1>  0f8fad5b-d9cb-469f-a165-70867728950e  [promo, beta]  0.5    2026-03-04  u-0042      [{key: trace, value: abc}]
9007199254740993  NULL     1970-01-01T00:00:00.000000Z  tab\there\nnewline     NULL                                  []             NaN    NULL        0x00ff      NULL
(2 rows)
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestPrintRowsJSON(t *testing.T) {
	schema, rec := sample(t)
	var out bytes.Buffer
	n, err := printRows(&out, "json", schema, columnsOf(schema), batches(rec), 0)
	if err != nil || n != 2 {
		t.Fatalf("printRows = %d, %v", n, err)
	}
	want := `{"id":1,"amount":1234.56,"ts":"2026-03-04T05:06:07.123456Z","page":"/search?q=boots&x=<1>","session":"0f8fad5b-d9cb-469f-a165-70867728950e","tags":["promo","beta"],"score":0.5,"day":"2026-03-04","_kafka_key":"dS0wMDQy","_kafka_headers":[{"key":"trace","value":"YWJj"}]}
{"id":9007199254740993,"amount":null,"ts":"1970-01-01T00:00:00.000000Z","page":"tab\there\nnewline","session":null,"tags":[],"score":"NaN","day":null,"_kafka_key":"AP8=","_kafka_headers":null}
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	// Every line is valid JSON, and a long keeps every digit (no float64 rounding).
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
}

func TestPrintRowsColumnsAndLimit(t *testing.T) {
	schema, rec := sample(t)
	rec.Retain() // used by two batches
	var out bytes.Buffer
	n, err := printRows(&out, "table", schema, []string{"page", "id"}, batches(rec, rec), 3)
	if err != nil || n != 3 {
		t.Fatalf("printRows = %d, %v", n, err)
	}
	want := "page                   id\n/search?q=boots&x=<1>  1\ntab\\there\\nnewline     9007199254740993\n/search?q=boots&x=<1>  1\n(3 rows)\n"
	if out.String() != want {
		t.Errorf("got:\n%q\nwant:\n%q", out.String(), want)
	}
	if _, err := printRows(&out, "table", schema, []string{"nope"}, batches(), 0); err == nil {
		t.Error("an unknown column printed")
	}
}

func TestPrintRowsEmptyAndError(t *testing.T) {
	schema, _ := sample(t)
	var out bytes.Buffer
	if n, err := printRows(&out, "table", schema, []string{"id", "page"}, batches(), 10); err != nil || n != 0 {
		t.Fatalf("printRows = %d, %v", n, err)
	}
	if want := "id  page\n(0 rows)\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	boom := errors.New("boom")
	failing := func(yield func(arrow.RecordBatch, error) bool) { yield(nil, boom) }
	if _, err := printRows(&out, "json", schema, []string{"id"}, failing, 0); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}

func TestCellTextTruncates(t *testing.T) {
	long := strings.Repeat("é", 100)
	got := cellText(long)
	if n := len([]rune(got)); n != maxCell || !strings.HasSuffix(got, "…") {
		t.Errorf("cellText of 100 runes = %d runes %q", n, got)
	}
}

// TestScanThroughRESTCatalog runs `minkctl scan` against a stub Iceberg REST catalog that
// serves a table written by iceberg-go to local files: the whole command (catalog config,
// table load, scan, printing) short of Mink's S3 endpoint.
func TestScanThroughRESTCatalog(t *testing.T) {
	ctx := context.Background()
	hc, _ := localCatalog(t)
	sc := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "user", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "amount", Type: iceberg.DecimalTypeOf(10, 2)},
	)
	tbl, err := hc.CreateTable(ctx, []string{"default", "demo"}, sc)
	if err != nil {
		t.Fatal(err)
	}
	arrowSchema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), arrowSchema)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"u-1", "u-2", ""}, []bool{true, true, false})
	am := b.Field(2).(*array.Decimal128Builder)
	am.Append(decimal128.FromI64(1999))
	am.Append(decimal128.FromI64(5))
	am.AppendNull()
	rec := b.NewRecordBatch()
	b.Release()
	at := array.NewTableFromRecords(arrowSchema, []arrow.RecordBatch{rec})
	if tbl, err = tbl.AppendTable(ctx, at, 10, nil); err != nil {
		t.Fatal(err)
	}
	metaLoc := tbl.MetadataLocation()
	meta, err := os.ReadFile(strings.TrimPrefix(metaLoc, "file://"))
	if err != nil {
		t.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"defaults":{},"overrides":{}}`))
	})
	mux.HandleFunc("GET /v1/namespaces/default/tables/demo", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"metadata-location": metaLoc, "metadata": json.RawMessage(meta), "config": map[string]string{}})
	})
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables/{table}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"message":"Table does not exist: ` + r.PathValue("ns") + "." + r.PathValue("table") + `","type":"NoSuchTableException","code":404}}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	minkctl := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr, func(string) (string, bool) { return "", false })
		return stdout.String(), stderr.String(), code
	}
	out, errOut, code := minkctl("scan", "default.demo", "--catalog", srv.URL, "-o", "json")
	if code != 0 {
		t.Fatalf("scan: exit %d: %s", code, errOut)
	}
	want := `{"id":1,"user":"u-1","amount":19.99}` + "\n" + `{"id":2,"user":"u-2","amount":0.05}` + "\n" + `{"id":3,"user":null,"amount":null}` + "\n"
	if out != want {
		t.Errorf("scan -o json:\n%s\nwant:\n%s", out, want)
	}
	out, errOut, code = minkctl("scan", "demo", "--catalog", srv.URL, "--columns", "amount,id", "--limit", "2")
	if want := "amount  id\n19.99   1\n0.05    2\n(2 rows)\n"; code != 0 || out != want {
		t.Errorf("scan --columns --limit: exit %d %s\n%s\nwant:\n%s", code, errOut, out, want)
	}
	_, errOut, code = minkctl("scan", "default.nope", "--catalog", srv.URL)
	if code != exitRPC || !strings.Contains(errOut, "table default.nope not loaded from catalog "+srv.URL) {
		t.Errorf("unknown table: exit %d: %s", code, errOut)
	}
	_, errOut, code = minkctl("scan", "default.demo", "--catalog", srv.URL, "--columns", "id,nope")
	if code != exitUsage || !strings.Contains(errOut, `no column "nope" (it has: id, user, amount)`) {
		t.Errorf("unknown column: exit %d: %s", code, errOut)
	}
	srv.Close()
	_, errOut, code = minkctl("scan", "default.demo", "--catalog", srv.URL)
	if code != exitRPC || !strings.Contains(errOut, "is unreachable") {
		t.Errorf("catalog down: exit %d: %s", code, errOut)
	}
}

// nested is three rows of the nested values registry tables have: a struct holding a
// struct, a list of structs and a map; maps keyed by text, by numbers and by structs;
// fixed, UUIDs in a list, a float; with nulls at every level.
func nested(t *testing.T) (*arrow.Schema, arrow.RecordBatch) {
	t.Helper()
	line := arrow.StructOf(
		arrow.Field{Name: "sku", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "price", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true})
	shipTo := arrow.StructOf(
		arrow.Field{Name: "zip", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "geo", Type: arrow.StructOf(
			arrow.Field{Name: "lat", Type: arrow.PrimitiveTypes.Float32},
			arrow.Field{Name: "lon", Type: arrow.PrimitiveTypes.Float64}), Nullable: true},
		arrow.Field{Name: "lines", Type: arrow.ListOf(line), Nullable: true},
		arrow.Field{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), Nullable: true})
	structKey := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ship_to", Type: shipTo, Nullable: true},
		{Name: "codes", Type: arrow.MapOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String), Nullable: true},
		{Name: "by_pair", Type: arrow.MapOf(structKey, arrow.BinaryTypes.String), Nullable: true},
		{Name: "hash", Type: &arrow.FixedSizeBinaryType{ByteWidth: 4}, Nullable: true},
		{Name: "sessions", Type: arrow.ListOf(extensions.NewUUIDType()), Nullable: true},
		{Name: "ratio", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)

	st := b.Field(1).(*array.StructBuilder)
	zip := st.FieldBuilder(0).(*array.StringBuilder)
	geo := st.FieldBuilder(1).(*array.StructBuilder)
	lines := st.FieldBuilder(2).(*array.ListBuilder)
	lb := lines.ValueBuilder().(*array.StructBuilder)
	attrs := st.FieldBuilder(3).(*array.MapBuilder)
	// Row 1: everything set.
	st.Append(true)
	zip.Append("10115")
	geo.Append(true)
	geo.FieldBuilder(0).(*array.Float32Builder).Append(52.52)
	geo.FieldBuilder(1).(*array.Float64Builder).Append(13.405)
	lines.Append(true)
	for _, l := range []struct {
		sku   string
		qty   int32
		price int64
	}{{"pen", 2, 199}, {"ink \"blue\"", 1, 1250}} {
		lb.Append(true)
		lb.FieldBuilder(0).(*array.StringBuilder).Append(l.sku)
		lb.FieldBuilder(1).(*array.Int32Builder).Append(l.qty)
		lb.FieldBuilder(2).(*array.Decimal128Builder).Append(decimal128.FromI64(l.price))
	}
	attrs.Append(true)
	attrs.KeyBuilder().(*array.StringBuilder).AppendValues([]string{"gift", "a\tb"}, nil)
	attrs.ItemBuilder().(*array.Int64Builder).AppendValues([]int64{1, 9007199254740993}, nil)
	// Row 2: a struct with null fields, a line with nulls, an empty map.
	st.Append(true)
	zip.AppendNull()
	geo.AppendNull()
	lines.Append(true)
	lb.Append(true)
	lb.FieldBuilder(0).(*array.StringBuilder).Append("nib")
	lb.FieldBuilder(1).(*array.Int32Builder).AppendNull()
	lb.FieldBuilder(2).(*array.Decimal128Builder).AppendNull()
	attrs.Append(true)
	// Row 3: no struct at all.
	st.AppendNull()

	codes := b.Field(2).(*array.MapBuilder)
	codes.Append(true)
	codes.KeyBuilder().(*array.Int32Builder).AppendValues([]int32{404, -1}, nil)
	codes.ItemBuilder().(*array.StringBuilder).AppendValues([]string{"not found", ""}, []bool{true, false})
	codes.AppendNull()
	codes.Append(true)
	codes.KeyBuilder().(*array.Int32Builder).Append(7)
	codes.ItemBuilder().(*array.StringBuilder).Append("seven")

	pairs := b.Field(3).(*array.MapBuilder)
	pairs.Append(true)
	pk := pairs.KeyBuilder().(*array.StructBuilder)
	pk.Append(true)
	pk.FieldBuilder(0).(*array.Int32Builder).Append(1)
	pairs.ItemBuilder().(*array.StringBuilder).Append("one")
	pairs.AppendNull()
	pairs.AppendNull()

	hash := b.Field(4).(*array.FixedSizeBinaryBuilder)
	hash.Append([]byte{0xde, 0xad, 0xbe, 0xef})
	hash.Append([]byte("abcd"))
	hash.AppendNull()

	sess := b.Field(5).(*array.ListBuilder)
	sb := sess.ValueBuilder().(*extensions.UUIDBuilder)
	sess.Append(true)
	sb.Append(uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e"))
	sb.AppendNull()
	sess.AppendNull()
	sess.Append(true)

	ratio := b.Field(6).(*array.Float32Builder)
	ratio.Append(0.1)
	ratio.Append(float32(math.Inf(1)))
	ratio.AppendNull()
	return schema, b.NewRecordBatch()
}

func TestPrintRowsNestedJSON(t *testing.T) {
	schema, rec := nested(t) // printRows releases what it prints
	var out bytes.Buffer
	if n, err := printRows(&out, "json", schema, columnsOf(schema), batches(rec), 0); err != nil || n != 3 {
		t.Fatalf("printRows = %d, %v", n, err)
	}
	want := `{"id":1,"ship_to":{"zip":"10115","geo":{"lat":52.52,"lon":13.405},"lines":[{"sku":"pen","qty":2,"price":1.99},{"sku":"ink \"blue\"","qty":1,"price":12.50}],"attrs":{"gift":1,"a\tb":9007199254740993}},"codes":{"404":"not found","-1":null},"by_pair":[{"key":{"a":1},"value":"one"}],"hash":"3q2+7w==","sessions":["0f8fad5b-d9cb-469f-a165-70867728950e",null],"ratio":0.1}
{"id":2,"ship_to":{"zip":null,"geo":null,"lines":[{"sku":"nib","qty":null,"price":null}],"attrs":{}},"codes":null,"by_pair":null,"hash":"YWJjZA==","sessions":null,"ratio":"+Inf"}
{"id":3,"ship_to":null,"codes":{"7":"seven"},"by_pair":null,"hash":null,"sessions":[],"ratio":null}
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	// Valid JSON, every digit kept.
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
}

func TestPrintRowsNestedTable(t *testing.T) {
	schema, rec := nested(t)
	defer rec.Release()
	rec.Retain() // one reference for each printRows, which releases what it prints
	rec.Retain()
	var out bytes.Buffer
	if _, err := printRows(&out, "table", schema, []string{"id", "codes", "by_pair", "hash", "sessions", "ratio"}, batches(rec), 0); err != nil {
		t.Fatal(err)
	}
	want := `id  codes                       by_pair        hash        sessions                                      ratio
1   {404: not found, -1: NULL}  {{a: 1}: one}  0xdeadbeef  [0f8fad5b-d9cb-469f-a165-70867728950e, NULL]  0.1
2   NULL                        NULL           abcd        NULL                                          +Inf
3   {7: seven}                  NULL           NULL        []                                            NULL
(3 rows)
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if _, err := printRows(&out, "table", schema, []string{"ship_to"}, batches(rec), 0); err != nil {
		t.Fatal(err)
	}
	// Tabs in keys are escaped so rows stay aligned; a long value is cut to maxCell.
	want = "ship_to\n" +
		`{zip: 10115, geo: {lat: 52.52, lon: 13.405}, lines: [{sku: pen,…` + "\n" +
		`{zip: NULL, geo: NULL, lines: [{sku: nib, qty: NULL, price: NUL…` + "\n" +
		"NULL\n(3 rows)\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	m := tablerows.CellOf(rec.Column(1), 0).(tablerows.Object)[3].V
	if got := tablerows.Text(m); got != `{gift: 1, a\tb: 9007199254740993}` {
		t.Errorf("map text %q", got)
	}
}

// TestPrintRowsSliced: batches that are slices of larger arrays (as a scan's limit cuts
// them) print the rows they hold, maps and structs included.
func TestPrintRowsSliced(t *testing.T) {
	schema, rec := nested(t)
	defer rec.Release()
	sl := rec.NewSlice(1, 3) // released by printRows
	var out bytes.Buffer
	if _, err := printRows(&out, "json", schema, []string{"id", "ship_to", "codes"}, batches(sl), 0); err != nil {
		t.Fatal(err)
	}
	want := `{"id":2,"ship_to":{"zip":null,"geo":null,"lines":[{"sku":"nib","qty":null,"price":null}],"attrs":{}},"codes":null}
{"id":3,"ship_to":null,"codes":{"7":"seven"}}
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	// A map column sliced on its own: its entries start past the entries' offset.
	codes := array.NewSlice(rec.Column(2), 2, 3)
	defer codes.Release()
	if got := tablerows.Text(tablerows.CellOf(codes, 0)); got != "{7: seven}" {
		t.Errorf("sliced map: %q", got)
	}
}

// TestScanNestedThroughRESTCatalog: nested values written to Parquet by iceberg-go and
// read back by `minkctl scan` as an engine reads them (the Arrow types a real scan
// yields, not ones built by hand).
func TestScanNestedThroughRESTCatalog(t *testing.T) {
	ctx := context.Background()
	hc, _ := localCatalog(t)
	sc := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "ship_to", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 10, Name: "zip", Type: iceberg.PrimitiveTypes.String},
			{ID: 11, Name: "tags", Type: &iceberg.ListType{ElementID: 12, Element: iceberg.PrimitiveTypes.String, ElementRequired: true}},
		}}},
		iceberg.NestedField{ID: 3, Name: "attrs", Type: &iceberg.MapType{KeyID: 13, KeyType: iceberg.PrimitiveTypes.String,
			ValueID: 14, ValueType: iceberg.PrimitiveTypes.Int32}},
		iceberg.NestedField{ID: 4, Name: "price", Type: iceberg.DecimalTypeOf(10, 2)},
		iceberg.NestedField{ID: 5, Name: "hash", Type: iceberg.FixedTypeOf(2)},
		iceberg.NestedField{ID: 6, Name: "session", Type: iceberg.PrimitiveTypes.UUID},
		iceberg.NestedField{ID: 7, Name: "ratio", Type: iceberg.PrimitiveTypes.Float32},
	)
	tbl, err := hc.CreateTable(ctx, []string{"default", "nested"}, sc)
	if err != nil {
		t.Fatal(err)
	}
	arrowSchema, err := itable.SchemaToArrowSchema(sc, nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.NewGoAllocator(), arrowSchema)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	st := b.Field(1).(*array.StructBuilder)
	st.Append(true)
	st.FieldBuilder(0).(*array.StringBuilder).Append("10115")
	tags := st.FieldBuilder(1).(*array.ListBuilder)
	tags.Append(true)
	tags.ValueBuilder().(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
	st.AppendNull()
	attrs := b.Field(2).(*array.MapBuilder)
	attrs.Append(true)
	attrs.KeyBuilder().(*array.StringBuilder).AppendValues([]string{"x", "y"}, nil)
	attrs.ItemBuilder().(*array.Int32Builder).AppendValues([]int32{1, 2}, []bool{true, false})
	attrs.Append(true)
	b.Field(3).(*array.Decimal128Builder).AppendValues([]decimal128.Num{decimal128.FromI64(-5), {}}, []bool{true, false})
	b.Field(4).(*array.FixedSizeBinaryBuilder).AppendValues([][]byte{{0xca, 0xfe}, nil}, []bool{true, false})
	b.Field(5).(*extensions.UUIDBuilder).Append(uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e"))
	b.Field(5).(*extensions.UUIDBuilder).AppendNull()
	b.Field(6).(*array.Float32Builder).AppendValues([]float32{0.1, 2.5}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	at := array.NewTableFromRecords(arrowSchema, []arrow.RecordBatch{rec})
	if tbl, err = tbl.AppendTable(ctx, at, 10, nil); err != nil {
		t.Fatal(err)
	}
	srv := stubCatalog(t, "nested", tbl.MetadataLocation())

	var stdout, stderr bytes.Buffer
	if code := run([]string{"scan", "default.nested", "--catalog", srv.URL, "-o", "json"}, &stdout, &stderr,
		func(string) (string, bool) { return "", false }); code != 0 {
		t.Fatalf("scan: exit %d: %s", code, stderr.String())
	}
	want := `{"id":1,"ship_to":{"zip":"10115","tags":["a","b"]},"attrs":{"x":1,"y":null},"price":-0.05,"hash":"yv4=","session":"0f8fad5b-d9cb-469f-a165-70867728950e","ratio":0.1}
{"id":2,"ship_to":null,"attrs":{},"price":null,"hash":null,"session":null,"ratio":2.5}
`
	if stdout.String() != want {
		t.Errorf("scan -o json:\n%s\nwant:\n%s", stdout.String(), want)
	}
	stdout.Reset()
	if code := run([]string{"scan", "default.nested", "--catalog", srv.URL}, &stdout, &stderr,
		func(string) (string, bool) { return "", false }); code != 0 {
		t.Fatalf("scan: exit %d: %s", code, stderr.String())
	}
	wantTable := `id  ship_to                     attrs            price  hash    session                               ratio
1   {zip: 10115, tags: [a, b]}  {x: 1, y: NULL}  -0.05  0xcafe  0f8fad5b-d9cb-469f-a165-70867728950e  0.1
2   NULL                        {}               NULL   NULL    NULL                                  2.5
(2 rows)
`
	if stdout.String() != wantTable {
		t.Errorf("scan:\n%s\nwant:\n%s", stdout.String(), wantTable)
	}
}

// localCatalog is an Iceberg catalog in a folder of its own, with the namespace
// "default": tables for stubCatalog to serve.
func localCatalog(t *testing.T) (*hadoop.Catalog, string) {
	t.Helper()
	dir := t.TempDir()
	hc, err := hadoop.NewCatalog("local", "file://"+dir, iceberg.Properties{})
	if err != nil {
		t.Fatal(err)
	}
	if err := hc.CreateNamespace(context.Background(), []string{"default"}, nil); err != nil {
		t.Fatal(err)
	}
	return hc, dir
}

// stubCatalog serves one table of the namespace "default" as an Iceberg REST catalog.
func stubCatalog(t *testing.T, name, metaLoc string) *httptest.Server {
	t.Helper()
	meta, err := os.ReadFile(strings.TrimPrefix(metaLoc, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"defaults":{},"overrides":{}}`))
	})
	mux.HandleFunc("GET /v1/namespaces/default/tables/"+name, func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"metadata-location": metaLoc, "metadata": json.RawMessage(meta), "config": map[string]string{}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}
