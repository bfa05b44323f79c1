// Package parquetbuild builds the Parquet data file of a range of Kafka records, with
// the Iceberg statistics a manifest needs, such that the same records, table spec and
// Settings always give the same bytes, in any process. Mink relies on that: a file is
// built once to measure it (size, checksum, statistics) and rebuilt later, elsewhere, on
// demand; the rebuild must match what the manifest recorded.
//
// What the bytes depend on: the rows (via pkg/rowcodec), the spec, the Settings, this
// package's code and the pinned parquet-go version. Changing any of the last two in a
// way that moves a byte needs a new Settings.Version, with the old one kept buildable.
package parquetbuild

import (
	"fmt"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Settings are the knobs that shape a file's bytes. They are recorded with every indexed
// range so that another process can rebuild the exact same file.
type Settings struct {
	// Version is the file layout version: what this package does with the other
	// settings. Only 1 exists.
	Version int `json:"version"`
	// RowGroupRows is the number of rows per row group; the last may have fewer.
	RowGroupRows int `json:"row_group_rows"`
	// PageBufferBytes is the uncompressed size at which a column's page is cut.
	PageBufferBytes int `json:"page_buffer_bytes"`
	// Compression is the page codec: "zstd", "snappy", "gzip" or "none".
	Compression string `json:"compression"`

	// What the rows were decoded with, besides the records: this package does not read
	// these, pkg/tablecodec does. They travel with the settings so that every copy of a
	// file's recipe (ranges, data files, assembled runs, live tails) carries them, and
	// files built differently never compare equal. Zero is what files had before
	// schemas could change (omitted from the JSON).
	//
	// TableVersion is the version of the table's schema (tableschema.Version.ID).
	TableVersion int `json:"table_version,omitempty"`
	// ValueSchemaID and KeySchemaID are the Schema Registry ids values and keys were
	// decoded with in "latest" mode, where records carry no schema id.
	ValueSchemaID int `json:"value_schema_id,omitempty"`
	KeySchemaID   int `json:"key_schema_id,omitempty"`
}

// CurrentVersion is the layout version new ranges are built with.
const CurrentVersion = 1

// DefaultSettings returns the settings new ranges are built with.
func DefaultSettings() Settings {
	return Settings{
		Version:         CurrentVersion,
		RowGroupRows:    128 * 1024,
		PageBufferBytes: 1 << 20,
		Compression:     "zstd",
	}
}

// Limits of Settings: beyond them a file is either useless or a memory hazard.
const (
	maxRowGroupRows    = 16 << 20
	minPageBufferBytes = 4 << 10
	maxPageBufferBytes = 64 << 20
)

// Validate checks s, naming the field at fault.
func (s Settings) Validate() error {
	if s.Version != 1 {
		return fmt.Errorf("version: unsupported parquet layout version %d (want 1)", s.Version)
	}
	if s.RowGroupRows < 1 || s.RowGroupRows > maxRowGroupRows {
		return fmt.Errorf("row_group_rows: %d is outside 1..%d", s.RowGroupRows, maxRowGroupRows)
	}
	if s.PageBufferBytes < minPageBufferBytes || s.PageBufferBytes > maxPageBufferBytes {
		return fmt.Errorf("page_buffer_bytes: %d is outside %d..%d", s.PageBufferBytes, minPageBufferBytes, maxPageBufferBytes)
	}
	if _, ok := codecs[s.Compression]; !ok {
		return fmt.Errorf("compression: unknown codec %q (want zstd, snappy, gzip or none)", s.Compression)
	}
	return nil
}

// codecs maps Settings.Compression to a codec with every parameter pinned, so a library
// default changing cannot change our bytes silently.
var codecs = map[string]compress.Codec{
	"zstd":   &zstd.Codec{Level: zstd.SpeedDefault, Concurrency: 1},
	"snappy": &snappy.Codec{},
	"gzip":   &gzip.Codec{Level: gzip.DefaultCompression},
	"none":   &uncompressed.Codec{},
}

// CreatedBy is the created_by of every file: a constant, never the library version or
// the host, so that it cannot differ between two builds of the same file. It follows
// the "<app> version <semver>" form that parquet-mr and Arrow parse; readers that cannot
// parse created_by distrust the file's string statistics.
const CreatedBy = "mink-parquetbuild version 1.0.0"

// writerOptions returns the parquet-go writer configuration for s, every field that can
// move a byte set explicitly.
func (s Settings) writerOptions(schema *parquet.Schema) parquet.WriterOption {
	return writerConfig(func(c *parquet.WriterConfig) {
		c.Schema = schema
		c.CreatedBy = CreatedBy
		c.PageBufferSize = s.PageBufferBytes
		c.Compression = codecs[s.Compression]
		// Data page v1: the Iceberg vectorized Spark reader and other engines still
		// read v1 more widely than v2.
		c.DataPageVersion = 1
		// Page header statistics duplicate the column index and are ignored by the
		// engines we serve; leaving them out keeps pages smaller.
		c.DataPageStatistics = false
		c.DeprecatedDataPageStatistics = false
		c.ColumnIndexSizeLimit = func([]string) int { return parquet.DefaultColumnIndexSizeLimit }
		// We cut row groups ourselves, by row count, so that only the rows decide.
		c.MaxRowsPerRowGroup = parquet.DefaultMaxRowsPerRowGroup
		c.KeyValueMetadata = nil
		c.BloomFilters = nil
		c.Encodings = nil
		c.DictionaryMaxBytes = 0
	})
}

// writerConfig is a parquet.WriterOption that edits the whole configuration; the library's
// own options merge with defaults in ways that cannot turn some of them off.
type writerConfig func(*parquet.WriterConfig)

func (f writerConfig) ConfigureWriter(c *parquet.WriterConfig) { f(c) }
