package parquetbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// writeChunkRows is how many rows are handed to parquet-go per call. parquet-go cuts a
// page only between its internal 64-row steps, counted from the start of each call, so
// any multiple of 64 gives the same bytes as handing over a whole row group at once
// (TestSameRowsSameBytes), while holding only this many decoded rows. 256 rows keep
// the buffered values in cache.
const writeChunkRows = 256

// ErrClosed is returned by a Builder used after Close.
var ErrClosed = errors.New("parquetbuild: builder is closed")

// Builder writes the Parquet file of consecutive records of one partition.
// It is not safe for concurrent use.
type Builder struct {
	out      *hashingWriter
	settings Settings
	dec      rowcodec.RowDecoder
	//lint:ignore SA1019 rows go in as parquet.Row, which the untyped Writer takes as is
	pw      *parquet.Writer
	nfields int      // top-level fields: the length of every row
	cols    []column // by Parquet column index
	leaves  []*leaf  // by Parquet column index
	row     rowcodec.Row

	chunkRows int // rows per parquet-go call; writeChunkRows but for tests
	vals      []parquet.Value
	rowEnds   []int
	rows      []parquet.Row
	arena     arena

	groupRows    int // rows added to the current row group, written or not
	rowCount     int64
	decodeErrors int64
	partition    int32
	first, last  int64

	err    error // sticky: after a write error the file is unusable
	closed bool
}

// NewBuilder starts a file of a table spec's rows (decoded by rowcodec.NewDecoder)
// written to w. spec and s must be valid.
func NewBuilder(w io.Writer, spec tableschema.Spec, s Settings) (*Builder, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	dec, err := rowcodec.NewDecoder(spec)
	if err != nil {
		return nil, err
	}
	return NewBuilderFor(w, dec, s)
}

// NewBuilderFor starts a file written to w whose rows dec decodes: the columns are
// dec.Fields(), any nesting of struct, list and map over Iceberg primitives, each field
// with its Iceberg id (positive, unique). s must be valid. A row whose values do not
// have the shape of the fields fails the file (Add returns an error; the Builder is
// then unusable).
//
// With WithPages the Builder's finished pages wait in that pool (bounded memory).
func NewBuilderFor(w io.Writer, dec rowcodec.RowDecoder, s Settings, opts ...Option) (_ *Builder, err error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	defer func() {
		// Fields now come from Avro, Protobuf and JSON schemas: one that parquet-go
		// cannot take must fail its table, not the process.
		if r := recover(); r != nil {
			err = fmt.Errorf("parquetbuild: internal error: %v", r)
		}
	}()
	fields := dec.Fields()
	if err := checkFieldIDs(fields); err != nil {
		return nil, err
	}
	b := &Builder{
		out:       &hashingWriter{w: w, h: sha256.New()},
		settings:  s,
		dec:       dec,
		nfields:   len(fields),
		chunkRows: writeChunkRows,
		first:     -1,
		last:      -1,
	}
	// The plan first: it refuses what parquet-go cannot represent (levels past 255).
	if err := b.plan(fields); err != nil {
		return nil, err
	}
	schema, err := parquetSchema(fields)
	if err != nil {
		return nil, fmt.Errorf("parquetbuild: %w", err)
	}
	if err := b.checkPlan(schema); err != nil {
		return nil, err
	}
	wopts := []parquet.WriterOption{s.writerOptions(schema)}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.pages != nil {
		wopts = append(wopts, parquet.ColumnPageBuffers(o.pages))
	}
	b.pw = parquet.NewWriter(b.out, wopts...)
	return b, nil
}

// Option is an option of NewBuilderFor that changes how a file is built, never its bytes.
type Option func(*options)

type options struct {
	pages *Pages
}

// WithPages keeps the Builder's finished pages in p, which bounds the memory they take
// across every Builder sharing it.
func WithPages(p *Pages) Option { return func(o *options) { o.pages = p } }

// Abort gives up the file: it releases what the Builder holds (its pages, in memory or
// in temporary files) without writing the rest. A Builder dropped without Close or
// Abort keeps its share of its Pages' budget. Abort after Close does nothing.
func (b *Builder) Abort() {
	if b.closed {
		return
	}
	b.closed = true
	b.release()
}

// Add decodes r and appends its row. Records must come from one partition in increasing
// offset order (gaps allowed); a record that breaks that is refused, and the file is
// unchanged. A record that does not fit the schema is still added, as an error row.
func (b *Builder) Add(r record.Record) (err error) {
	if b.closed {
		return ErrClosed
	}
	if b.err != nil {
		return b.err
	}
	if r.Offset < 0 {
		return fmt.Errorf("parquetbuild: negative offset %d", r.Offset)
	}
	if b.rowCount > 0 {
		if r.Partition != b.partition {
			return fmt.Errorf("parquetbuild: record of partition %d in a file of partition %d", r.Partition, b.partition)
		}
		if r.Offset <= b.last {
			return fmt.Errorf("parquetbuild: offset %d after offset %d: records must be added in increasing offset order", r.Offset, b.last)
		}
	}
	defer b.recoverInto(&err)

	if !b.dec.Decode(r, &b.row) {
		b.decodeErrors++
	}
	if err := b.appendRow(); err != nil {
		// The decoder broke its contract; the values already taken are only part of
		// the row, so the file cannot be finished.
		b.err = fmt.Errorf("parquetbuild: record at offset %d: %w", r.Offset, err)
		return b.err
	}
	if b.rowCount == 0 {
		b.partition, b.first = r.Partition, r.Offset
	}
	b.rowCount++
	b.last = r.Offset
	b.groupRows++

	endOfGroup := b.groupRows == b.settings.RowGroupRows
	if len(b.rowEnds) == b.chunkRows || endOfGroup {
		if err := b.writeChunk(); err != nil {
			return b.fail(err)
		}
	}
	if endOfGroup {
		b.groupRows = 0
		if err := b.pw.Flush(); err != nil {
			return b.fail(err)
		}
	}
	return nil
}

// Close writes the rest of the file and returns its statistics. The Builder is done
// afterwards, whatever the result.
func (b *Builder) Close() (stats FileStats, err error) {
	if b.closed {
		return FileStats{}, ErrClosed
	}
	b.closed = true
	if b.err != nil {
		b.release()
		return FileStats{}, b.err
	}
	defer b.recoverInto(&err)
	if err := b.writeChunk(); err != nil {
		b.release()
		return FileStats{}, b.fail(err)
	}
	if err := b.pw.Close(); err != nil {
		b.release()
		return FileStats{}, b.fail(err)
	}
	return b.stats(), nil
}

// release gives the writer's page buffers back to their pool.
func (b *Builder) release() {
	defer func() { _ = recover() }() // a writer already broken has nothing more to give back
	b.pw.Reset(io.Discard)
}

func (b *Builder) fail(err error) error {
	b.err = fmt.Errorf("parquetbuild: writing the file: %w", err)
	return b.err
}

// recoverInto turns a panic in the Parquet writer into an error; a bug here must fail
// one file, not the process serving many.
func (b *Builder) recoverInto(err *error) {
	if r := recover(); r != nil {
		b.err = fmt.Errorf("parquetbuild: internal error: %v", r)
		*err = b.err
	}
}

// writeChunk hands the buffered rows to parquet-go.
func (b *Builder) writeChunk() error {
	if len(b.rowEnds) == 0 {
		return nil
	}
	b.rows = b.rows[:0]
	start := 0
	for _, end := range b.rowEnds {
		b.rows = append(b.rows, b.vals[start:end:end])
		start = end
	}
	_, err := b.pw.WriteRows(b.rows)
	clear(b.vals) // drop references into the arena
	b.vals, b.rowEnds = b.vals[:0], b.rowEnds[:0]
	b.arena.reset()
	return err
}

func (b *Builder) stats() FileStats {
	md := b.pw.File().Metadata()
	for _, rg := range md.RowGroups {
		for i, cc := range rg.Columns {
			b.leaves[i].size += cc.MetaData.TotalCompressedSize
		}
	}
	s := FileStats{
		Size:         b.out.n,
		SHA256:       hex.EncodeToString(b.out.h.Sum(nil)),
		RowCount:     b.rowCount,
		DecodeErrors: b.decodeErrors,
		FirstOffset:  b.first,
		LastOffset:   b.last,
	}
	for _, rg := range md.RowGroups {
		// A row group starts at its first column chunk: its dictionary page if any.
		cc := rg.Columns[0].MetaData
		off := cc.DataPageOffset
		if cc.DictionaryPageOffset > 0 && cc.DictionaryPageOffset < off {
			off = cc.DictionaryPageOffset
		}
		s.SplitOffsets = append(s.SplitOffsets, off)
	}
	slices.Sort(s.SplitOffsets)
	for _, l := range b.leaves {
		cs := ColumnStats{FieldID: l.fieldID, ValueCount: l.values, NullCount: l.nulls, ColumnSize: l.size}
		if l.bounds != nil {
			cs.LowerBound, cs.UpperBound = l.bounds.result()
		}
		s.Columns = append(s.Columns, cs)
	}
	slices.SortFunc(s.Columns, func(a, b ColumnStats) int { return a.FieldID - b.FieldID })
	return s
}

// hashingWriter counts and hashes what reaches w, so measuring a file is building it
// into io.Discard.
type hashingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *hashingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// arena holds copies of the byte values of the rows not yet handed to parquet-go: the
// decoder's bytes last only until the next record, and the caller's until Add returns.
// Blocks are kept and reused from chunk to chunk.
type arena struct {
	blocks [][]byte
	cur    int
}

// Blocks start at arenaFirstBlock and double up to arenaBlock: an indexer holds an open
// range of a few rows in each of thousands of quiet partitions (issue 32).
const (
	arenaFirstBlock = 4 << 10
	arenaBlock      = 256 << 10
)

func (a *arena) copy(p []byte) []byte {
	if len(p) > arenaBlock/4 {
		return append([]byte{}, p...) // large values get their own memory
	}
	for {
		if a.cur == len(a.blocks) {
			size := arenaFirstBlock
			if n := len(a.blocks); n > 0 {
				size = min(arenaBlock, 2*cap(a.blocks[n-1]))
			}
			a.blocks = append(a.blocks, make([]byte, 0, size))
		}
		blk := a.blocks[a.cur]
		if len(blk)+len(p) <= cap(blk) {
			start := len(blk)
			blk = append(blk, p...)
			a.blocks[a.cur] = blk
			return blk[start:len(blk):len(blk)]
		}
		a.cur++
	}
}

func (a *arena) reset() {
	for i := range a.blocks[:min(a.cur+1, len(a.blocks))] {
		a.blocks[i] = a.blocks[i][:0]
	}
	a.cur = 0
}
