package parquetbuild

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// Iceberg's reserved field ids of a position delete file's columns.
const (
	DeleteFilePathFieldID = 2147483546
	DeletePosFieldID      = 2147483545
)

// positionDeleteSchema is an Iceberg position delete file's: file_path, then pos.
var positionDeleteSchema = parquet.NewSchema("position_delete", parquet.Group{
	"file_path": parquet.FieldID(parquet.String(), DeleteFilePathFieldID),
	"pos":       parquet.FieldID(parquet.Int(64), DeletePosFieldID),
})

// positionDelete is one row of a position delete file.
type positionDelete struct {
	FilePath string `parquet:"file_path"`
	Pos      int64  `parquet:"pos"`
}

// WritePositionDeletes writes the Iceberg position delete file that deletes rows
// positions (ascending, as the spec requires) of the data file at dataPath, with s's
// row groups, pages and codec: the same arguments always give the same bytes. Its
// statistics bound file_path by dataPath (engines match deletes to files by them).
func WritePositionDeletes(w io.Writer, s Settings, dataPath string, positions []int64) (FileStats, error) {
	if err := s.Validate(); err != nil {
		return FileStats{}, err
	}
	for i := 1; i < len(positions); i++ {
		if positions[i] <= positions[i-1] {
			return FileStats{}, fmt.Errorf("parquetbuild: delete positions not ascending at %d", i)
		}
	}
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(w, h)}
	pw := parquet.NewGenericWriter[positionDelete](cw, s.writerOptions(positionDeleteSchema))
	rows := make([]positionDelete, 0, min(len(positions), s.RowGroupRows))
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		if _, err := pw.Write(rows); err != nil {
			return err
		}
		rows = rows[:0]
		return pw.Flush()
	}
	for _, p := range positions {
		rows = append(rows, positionDelete{FilePath: dataPath, Pos: p})
		if len(rows) == s.RowGroupRows {
			if err := flush(); err != nil {
				return FileStats{}, fmt.Errorf("parquetbuild: position deletes: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return FileStats{}, fmt.Errorf("parquetbuild: position deletes: %w", err)
	}
	if err := pw.Close(); err != nil {
		return FileStats{}, fmt.Errorf("parquetbuild: position deletes: %w", err)
	}
	fs := FileStats{Size: cw.n, SHA256: hex.EncodeToString(h.Sum(nil)), RowCount: int64(len(positions)), FirstOffset: -1, LastOffset: -1}
	if len(positions) > 0 {
		n := int64(len(positions))
		lo, hi := make([]byte, 8), make([]byte, 8)
		binary.LittleEndian.PutUint64(lo, uint64(positions[0]))
		binary.LittleEndian.PutUint64(hi, uint64(positions[len(positions)-1]))
		fs.Columns = []ColumnStats{
			{FieldID: DeletePosFieldID, ValueCount: n, LowerBound: lo, UpperBound: hi},
			{FieldID: DeleteFilePathFieldID, ValueCount: n, LowerBound: []byte(dataPath), UpperBound: []byte(dataPath)},
		}
	}
	return fs, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
