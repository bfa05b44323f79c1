package parquetbuild

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestPositionDeletes: a position delete file has Iceberg's columns and field ids, the
// positions given in order, the same bytes on every build, and refuses positions out
// of order.
func TestPositionDeletes(t *testing.T) {
	s := smallSettings()
	pos := []int64{0, 3, 4, 9, 200, 201}
	const path = "s3://mink/default/t/data/_kafka_partition=0/x.parquet"
	var a, b bytes.Buffer
	fa, err := WritePositionDeletes(&a, s, path, pos)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := WritePositionDeletes(&b, s, path, pos)
	if err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) || fa.SHA256 != fb.SHA256 || fa.Size != int64(a.Len()) {
		t.Fatalf("two builds differ (%v)", err)
	}
	if fa.RowCount != int64(len(pos)) || len(fa.Columns) != 2 || string(fa.Columns[1].LowerBound) != path {
		t.Fatalf("stats %+v", fa)
	}
	f, err := parquet.OpenFile(bytes.NewReader(a.Bytes()), int64(a.Len()))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, fl := range f.Schema().Fields() {
		ids[fl.Name()] = fl.ID()
	}
	if ids["file_path"] != DeleteFilePathFieldID || ids["pos"] != DeletePosFieldID {
		t.Fatalf("field ids %v", ids)
	}
	rows, err := parquet.Read[positionDelete](bytes.NewReader(a.Bytes()), int64(a.Len()))
	if err != nil || len(rows) != len(pos) {
		t.Fatalf("read %d rows: %v", len(rows), err)
	}
	for i, r := range rows {
		if r.FilePath != path || r.Pos != pos[i] {
			t.Fatalf("row %d: %+v", i, r)
		}
	}
	if _, err := WritePositionDeletes(&bytes.Buffer{}, s, path, []int64{2, 1}); err == nil {
		t.Fatal("positions out of order were written")
	}
}
