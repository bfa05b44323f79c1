package parquetbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"

	"github.com/apache/iceberg-go"
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
	dec      *rowcodec.Decoder
	pw       *parquet.Writer
	plans    []fieldPlan
	leaves   []*leaf // by Parquet column index
	row      rowcodec.Row

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

// shape is how a top-level field maps onto Parquet columns.
type shape uint8

const (
	shapePrimitive shape = iota // one column
	shapeList                   // optional list of optional primitives: one column
	shapeHeaders                // list of struct{key, value}: two columns
)

// conv is how a rowcodec value becomes a parquet value.
type conv uint8

const (
	convBool conv = iota
	convInt32
	convInt64
	convFloat
	convDouble
	convBytes
	convFixed
)

type fieldPlan struct {
	shape    shape
	col      int // first Parquet column of the field
	conv     conv
	required bool
	leaf     *leaf
}

// NewBuilder starts a file written to w. spec and s must be valid.
func NewBuilder(w io.Writer, spec tableschema.Spec, s Settings) (*Builder, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	dec, err := rowcodec.NewDecoder(spec)
	if err != nil {
		return nil, err
	}
	fields := dec.Fields()
	schema, err := parquetSchema(fields)
	if err != nil {
		return nil, err
	}
	b := &Builder{
		out:       &hashingWriter{w: w, h: sha256.New()},
		settings:  s,
		dec:       dec,
		chunkRows: writeChunkRows,
		first:     -1,
		last:      -1,
	}
	if err := b.plan(fields); err != nil {
		return nil, err
	}
	if got := len(schema.Columns()); got != len(b.leaves) {
		return nil, fmt.Errorf("parquetbuild: schema has %d columns, plan %d", got, len(b.leaves)) // a bug
	}
	b.pw = parquet.NewWriter(b.out, s.writerOptions(schema))
	return b, nil
}

func (b *Builder) plan(fields []iceberg.NestedField) error {
	newLeaf := func(id int, bt iceberg.Type) *leaf {
		l := &leaf{fieldID: id}
		if bt != nil {
			l.bounds = boundsFor(bt)
		}
		b.leaves = append(b.leaves, l)
		return l
	}
	for _, f := range fields {
		p := fieldPlan{col: len(b.leaves), required: f.Required}
		switch t := f.Type.(type) {
		case *iceberg.ListType:
			if st, ok := t.Element.(*iceberg.StructType); ok {
				// Only _kafka_headers: list<struct<key string required, value binary>>.
				if f.Name != tableschema.ColumnKafkaHeaders || len(st.FieldList) != 2 {
					return fmt.Errorf("parquetbuild: field %q: lists of structs are not supported", f.Name)
				}
				p.shape = shapeHeaders
				newLeaf(st.FieldList[0].ID, nil)
				newLeaf(st.FieldList[1].ID, nil)
				break
			}
			c, err := convOf(t.Element)
			if err != nil {
				return fmt.Errorf("parquetbuild: field %q: %w", f.Name, err)
			}
			p.shape, p.conv = shapeList, c
			p.leaf = newLeaf(t.ElementID, nil) // no bounds inside lists, as Iceberg
		default:
			c, err := convOf(t)
			if err != nil {
				return fmt.Errorf("parquetbuild: field %q: %w", f.Name, err)
			}
			p.shape, p.conv = shapePrimitive, c
			p.leaf = newLeaf(f.ID, t)
		}
		b.plans = append(b.plans, p)
	}
	return nil
}

func convOf(t iceberg.Type) (conv, error) {
	switch t := t.(type) {
	case iceberg.BooleanType:
		return convBool, nil
	case iceberg.Int32Type, iceberg.DateType:
		return convInt32, nil
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType:
		return convInt64, nil
	case iceberg.Float32Type:
		return convFloat, nil
	case iceberg.Float64Type:
		return convDouble, nil
	case iceberg.StringType, iceberg.BinaryType:
		return convBytes, nil
	case iceberg.UUIDType:
		return convFixed, nil
	case iceberg.DecimalType:
		switch p := t.Precision(); {
		case p <= 9:
			return convInt32, nil
		case p <= 18:
			return convInt64, nil
		}
		return convFixed, nil
	}
	return 0, fmt.Errorf("type %s is not supported", t)
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
	b.appendRow()
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
		return FileStats{}, b.err
	}
	defer b.recoverInto(&err)
	if err := b.writeChunk(); err != nil {
		return FileStats{}, b.fail(err)
	}
	if err := b.pw.Close(); err != nil {
		return FileStats{}, b.fail(err)
	}
	return b.stats(), nil
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

// appendRow appends the values of b.row, column by column as parquet.Row wants them.
func (b *Builder) appendRow() {
	vals := b.vals
	for i := range b.plans {
		p := &b.plans[i]
		v := &b.row.Values[i]
		switch p.shape {
		case shapePrimitive:
			l := p.leaf
			l.values++
			if !v.Valid {
				l.nulls++
				vals = append(vals, parquet.Value{}.Level(0, 0, p.col))
				continue
			}
			def := 1
			if p.required {
				def = 0
			}
			vals = append(vals, b.convert(p.conv, v).Level(0, def, p.col))
			if l.bounds != nil {
				l.bounds.observe(v)
			}

		case shapeList:
			// optional list (def 1) / repeated (def 2) / optional element (def 3).
			l := p.leaf
			if !v.Valid || len(v.Elems) == 0 {
				def := 0
				if v.Valid {
					def = 1
				}
				l.values++
				l.nulls++
				vals = append(vals, parquet.Value{}.Level(0, def, p.col))
				continue
			}
			for j := range v.Elems {
				e := &v.Elems[j]
				rep := min(j, 1)
				l.values++
				if !e.Valid {
					l.nulls++
					vals = append(vals, parquet.Value{}.Level(rep, 2, p.col))
					continue
				}
				vals = append(vals, b.convert(p.conv, e).Level(rep, 3, p.col))
			}

		case shapeHeaders:
			// key: required inside the required element (max def 2);
			// value: optional (max def 3).
			keys, values := b.leaves[p.col], b.leaves[p.col+1]
			if !v.Valid || len(v.Elems) == 0 {
				def := 0
				if v.Valid {
					def = 1
				}
				keys.values++
				keys.nulls++
				values.values++
				values.nulls++
				vals = append(vals, parquet.Value{}.Level(0, def, p.col), parquet.Value{}.Level(0, def, p.col+1))
				continue
			}
			for j := range v.Elems {
				keys.values++
				vals = append(vals, parquet.ByteArrayValue(b.arena.copy(v.Elems[j].Elems[0].Bytes)).Level(min(j, 1), 2, p.col))
			}
			for j := range v.Elems {
				hv := &v.Elems[j].Elems[1]
				values.values++
				if !hv.Valid {
					values.nulls++
					vals = append(vals, parquet.Value{}.Level(min(j, 1), 2, p.col+1))
					continue
				}
				vals = append(vals, parquet.ByteArrayValue(b.arena.copy(hv.Bytes)).Level(min(j, 1), 3, p.col+1))
			}
		}
	}
	b.vals = vals
	b.rowEnds = append(b.rowEnds, len(vals))
}

func (b *Builder) convert(c conv, v *rowcodec.Value) parquet.Value {
	switch c {
	case convBool:
		return parquet.BooleanValue(v.Int != 0)
	case convInt32:
		return parquet.Int32Value(int32(v.Int))
	case convInt64:
		return parquet.Int64Value(v.Int)
	case convFloat:
		return parquet.FloatValue(float32(v.Float))
	case convDouble:
		return parquet.DoubleValue(v.Float)
	case convBytes:
		return parquet.ByteArrayValue(b.arena.copy(v.Bytes))
	default:
		return parquet.FixedLenByteArrayValue(b.arena.copy(v.Bytes))
	}
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

const arenaBlock = 256 << 10

func (a *arena) copy(p []byte) []byte {
	if len(p) > arenaBlock/4 {
		return append([]byte{}, p...) // large values get their own memory
	}
	for {
		if a.cur == len(a.blocks) {
			a.blocks = append(a.blocks, make([]byte, 0, arenaBlock))
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
