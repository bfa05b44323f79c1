package parquetbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tableschema"
)

func TestAddRefusesRecordsOutOfOrder(t *testing.T) {
	var buf bytes.Buffer
	b, err := NewBuilder(&buf, testSpec, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	add := func(p int32, off int64) error {
		return b.Add(record.Record{Partition: p, Offset: off, Value: []byte(`{"user": {"id": 1}}`)})
	}
	if err := add(2, 10); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		p   int32
		off int64
	}{{2, 10}, {2, 9}, {3, 11}, {2, -1}} {
		if err := add(bad.p, bad.off); err == nil {
			t.Errorf("partition %d offset %d after 2/10 accepted", bad.p, bad.off)
		}
	}
	if err := add(2, 12); err != nil { // a refused record leaves the builder usable
		t.Fatal(err)
	}
	st, err := b.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.RowCount != 2 || st.FirstOffset != 10 || st.LastOffset != 12 {
		t.Errorf("stats %+v", st)
	}
	if err := add(2, 13); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close: %v", err)
	}
	if _, err := b.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestEmptyFileIsReadable(t *testing.T) {
	var buf bytes.Buffer
	st := build(t, &buf, testSpec, DefaultSettings(), nil, 0)
	if st.RowCount != 0 || st.FirstOffset != -1 || st.LastOffset != -1 || len(st.SplitOffsets) != 0 || st.Size != int64(buf.Len()) {
		t.Errorf("stats %+v", st)
	}
	for _, c := range st.Columns {
		if c.ValueCount != 0 || c.NullCount != 0 || c.LowerBound != nil || c.UpperBound != nil {
			t.Errorf("column %+v", c)
		}
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil || f.NumRows() != 0 {
		t.Fatalf("parquet-go: %v, %d rows", err, f.NumRows())
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil || pf.NumRows() != 0 {
		t.Fatalf("arrow: %v", err)
	}
	if pf.MetaData().Schema.NumColumns() != len(st.Columns) {
		t.Errorf("%d columns, stats for %d", pf.MetaData().Schema.NumColumns(), len(st.Columns))
	}
}

func TestRawTable(t *testing.T) {
	spec := tableschema.Spec{Format: tableschema.FormatRaw}
	recs := []record.Record{
		{Partition: 1, Offset: 5, Timestamp: time.UnixMilli(1), Key: []byte("k"), Value: []byte("\x00\xffnot json")},
		{Partition: 1, Offset: 6, Timestamp: time.UnixMilli(2)}, // tombstone: a null value, no error
		{Partition: 1, Offset: 7, Timestamp: time.UnixMilli(3), Value: []byte{}},
	}
	var buf bytes.Buffer
	st := build(t, &buf, spec, DefaultSettings(), recs, 0)
	if st.DecodeErrors != 0 || st.RowCount != 3 {
		t.Fatalf("stats %+v", st)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	fr, _ := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if tbl.Schema().Field(0).Name != "value" {
		t.Fatalf("first column %s", tbl.Schema().Field(0).Name)
	}
	vals := tbl.Column(0).Data().Chunk(0).(*array.Binary)
	if string(vals.Value(0)) != "\x00\xffnot json" || !vals.IsNull(1) || vals.IsNull(2) || len(vals.Value(2)) != 0 {
		t.Errorf("raw values %v", vals)
	}
}

// failingWriter fails once n bytes have been written.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestWriteErrorsAreSticky(t *testing.T) {
	s := smallSettings()
	b, err := NewBuilder(&failingWriter{n: 50_000}, testSpec, s)
	if err != nil {
		t.Fatal(err)
	}
	var addErr error
	for _, r := range makeRecords(5000, 3, 0) {
		if addErr = b.Add(r); addErr != nil {
			break
		}
	}
	if addErr == nil || !strings.Contains(addErr.Error(), "disk full") {
		t.Fatalf("Add error %v, want the write error", addErr)
	}
	if err := b.Add(record.Record{Partition: 7, Offset: 1 << 40}); err != addErr {
		t.Errorf("Add after a failure: %v", err)
	}
	if _, err := b.Close(); err != addErr {
		t.Errorf("Close after a failure: %v", err)
	}
}

func TestNewBuilderValidates(t *testing.T) {
	if _, err := NewBuilder(io.Discard, tableschema.Spec{Format: tableschema.FormatJSON}, DefaultSettings()); err == nil {
		t.Error("invalid spec accepted")
	}
	s := DefaultSettings()
	s.Compression = "lzo"
	if _, err := NewBuilder(io.Discard, testSpec, s); err == nil {
		t.Error("invalid settings accepted")
	}
}

func TestSettings(t *testing.T) {
	if err := DefaultSettings().Validate(); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(*Settings)) Settings { s := DefaultSettings(); f(&s); return s }
	bad := map[string]Settings{
		"version:":           mod(func(s *Settings) { s.Version = 2 }),
		"row_group_rows:":    mod(func(s *Settings) { s.RowGroupRows = 0 }),
		"page_buffer_bytes:": mod(func(s *Settings) { s.PageBufferBytes = 100 }),
		"compression:":       mod(func(s *Settings) { s.Compression = "" }),
	}
	for prefix, s := range bad {
		if err := s.Validate(); err == nil || !strings.HasPrefix(err.Error(), prefix) {
			t.Errorf("%+v: %v, want an error starting %q", s, err, prefix)
		}
	}
	b, _ := json.Marshal(DefaultSettings())
	if string(b) != `{"version":1,"row_group_rows":131072,"page_buffer_bytes":1048576,"compression":"zstd"}` {
		t.Errorf("stored form %s", b)
	}
	var back Settings
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, DefaultSettings()) {
		t.Errorf("round trip: %+v %v", back, err)
	}
}

// TestGoldenFile pins the bytes of a small file. If it fails, the layout changed: files
// recorded with version 1 would no longer rebuild. Bump Settings.Version and keep the old
// layout buildable instead of updating the hash.
func TestGoldenFile(t *testing.T) {
	recs := makeRecords(300, 1234, 7)
	st := build(t, io.Discard, testSpec, smallSettings(), recs, 0)
	const want = "c77812a90f393994a900cceeb925ff5db1b26f016d29ce48e215a199c8aea3b8"
	if st.SHA256 != want {
		t.Errorf("version 1 layout changed: sha256 %s (%d bytes), want %s", st.SHA256, st.Size, want)
	}
}

// An open range of a few rows holds a small arena, and a busy one grows it to its
// usual blocks: an indexer holds such a range in each of thousands of quiet partitions
// (issue 32).
func TestArenaStartsSmall(t *testing.T) {
	var a arena
	v := a.copy([]byte("a uuid's sixteen"))
	if string(v) != "a uuid's sixteen" || cap(a.blocks[0]) > 4<<10 {
		t.Fatalf("after one value: %q in a block of %d bytes, want at most 4 KiB", v, cap(a.blocks[0]))
	}
	for range 2000 {
		a.copy(make([]byte, 1000))
	}
	if got := cap(a.blocks[len(a.blocks)-1]); got != arenaBlock {
		t.Fatalf("after 2 MB of values the last block holds %d bytes, want %d", got, arenaBlock)
	}
	a.reset()
	if a.cur != 0 || len(a.blocks[0]) != 0 {
		t.Fatalf("reset: block %d, %d bytes in the first", a.cur, len(a.blocks[0]))
	}
}
