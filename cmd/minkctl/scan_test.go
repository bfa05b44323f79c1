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
	"github.com/google/uuid"
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
	dir := t.TempDir()
	hc, err := hadoop.NewCatalog("local", "file://"+dir, iceberg.Properties{})
	if err != nil {
		t.Fatal(err)
	}
	if err := hc.CreateNamespace(ctx, []string{"default"}, nil); err != nil {
		t.Fatal(err)
	}
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
	if code != exitRPC || !strings.Contains(errOut, "table default.nope not found in catalog "+srv.URL) {
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
