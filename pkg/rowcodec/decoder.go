// Package rowcodec decodes Kafka records into table rows: one row per record, always.
// A record that does not fit the table's schema is still one row, with every user column
// null and the _mink_error column saying why; nothing is skipped and no input panics.
//
// Decoding must be deterministic: rows feed Parquet files that are rebuilt byte for byte
// by other processes, so every error text here is made only from the input and constant
// strings, never from library error messages that could change between versions.
package rowcodec

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/jsonscan"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Value is one column value of a row. Which field holds it depends on the column's
// Iceberg type:
//
//   - Int: boolean (0 or 1), int, long, date (days since 1970-01-01), time (µs since
//     midnight), timestamp and timestamptz (µs since 1970-01-01 UTC), and decimals of
//     precision ≤ 18 (the unscaled value).
//   - Float: float and double.
//   - Bytes: string (valid UTF-8), binary, uuid (16 bytes), fixed(L) (L bytes), and
//     decimals of precision > 18 (the unscaled value, big-endian two's complement,
//     tableschema.DecimalBytes(P) long).
//   - Elems: a list's elements; a struct's fields in order (a _kafka_headers element is a
//     struct {key, value}); a map's entries, each a Value{Valid: true, Elems: [key,
//     value]}, keys never null.
type Value struct {
	Valid bool // false: the value is null
	Int   int64
	Float float64
	Bytes []byte
	Elems []Value
}

// Row is one decoded record: Values[i] is the value of the table's i-th top-level field
// (tableschema.Spec.Fields order: user columns, then Kafka columns).
type Row struct {
	Values []Value
}

// RowDecoder turns the records of one table, at one version of its schema, into rows of
// that schema's fields: exactly one row per record, always. Decode reports whether the
// record fit; when it did not, every user column is null and _mink_error says why.
// What Decode writes may alias the record and the decoder's memory until the next call.
// Implementations are not safe for concurrent use.
type RowDecoder interface {
	Fields() []iceberg.NestedField
	Decode(r record.Record, row *Row) (ok bool)
}

var _ RowDecoder = (*Decoder)(nil)

// kind is how a primitive is decoded and held; one per Iceberg primitive we support.
type kind uint8

const (
	kBool kind = iota
	kInt
	kLong
	kFloat
	kDouble
	kDecimal
	kDate
	kTime
	kTimestamp
	kTimestampTz
	kString
	kUUID
	kBinary
)

// column is a user column compiled for decoding.
type column struct {
	name     string
	kind     kind // the element kind for a list
	list     bool
	required bool
	prec     int    // decimal precision
	scale    int    // decimal scale
	fixedLen int    // decimal precision > 18: bytes of the fixed-length form; 0 otherwise
	typeName string // of a value (a list's element), for messages: long, decimal(10,2)
}

// pathNode is one object level of the JSON key tree built from the columns' paths.
type pathNode struct {
	col      int // index of the column read here, or -1 for an object holding columns
	children map[string]*pathNode
	keys     []string    // the children's keys, for lookup by scanning when there are few
	nodes    []*pathNode // keys[i]'s node
	next     int         // where in keys to look first: after the key found last
	path     string      // dotted path, for messages
	firstCol int         // a column below, named when the value here is not an object
}

// Decoder decodes the records of one table. It is not safe for concurrent use.
type Decoder struct {
	spec     tableschema.Spec
	fields   []iceberg.NestedField
	nUser    int // declared columns (JSON) or 1 (raw): the first fields; 0 for registry formats
	kpos     [kafkaColumns]int
	others   []int // positions of every field that is not a Kafka column: null in error rows
	cols     []column
	required []int // the required columns
	root     *pathNode

	scratch []byte // unescaped strings, decoded bytes, error text of the current row
	seen    []bool // per column: the key was present in the current record
	errMsg  string // first value error of the current record
}

// The Kafka columns a decoder fills, as indexes of Decoder.kpos.
const (
	offPartition = iota
	offOffset
	offTimestamp
	offKey
	offHeaders
	offError
	kafkaColumns
)

var kafkaColumnNames = [kafkaColumns]string{tableschema.ColumnKafkaPartition, tableschema.ColumnKafkaOffset,
	tableschema.ColumnKafkaTimestamp, tableschema.ColumnKafkaKey, tableschema.ColumnKafkaHeaders, tableschema.ColumnMinkError}

// NewDecoder compiles a decoder for version 0 of spec, which must be valid and have its
// fields from the spec (JSON or raw without a key format).
func NewDecoder(spec tableschema.Spec) (*Decoder, error) {
	fields, err := spec.Fields()
	if err != nil {
		return nil, err
	}
	return NewDecoderAt(spec, fields)
}

// NewDecoderAt compiles a decoder for a version of a table's schema: spec and the
// version's top-level fields. For JSON and raw tables the first fields are the declared
// columns (or "value"), in order; Kafka columns are found by name. Fields of neither kind
// (registry value columns, a decoded key) are for the caller to fill between Begin and
// Finish; Decode leaves them null.
func NewDecoderAt(spec tableschema.Spec, fields []iceberg.NestedField) (*Decoder, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	d := &Decoder{spec: spec, fields: fields}
	switch spec.Format {
	case tableschema.FormatJSON:
		d.nUser = len(spec.Columns)
	case tableschema.FormatRaw:
		d.nUser = 1
	}
	if len(fields) < d.nUser+kafkaColumns {
		return nil, fmt.Errorf("rowcodec: %d fields for %d user columns", len(fields), d.nUser)
	}
	for i := range d.kpos {
		d.kpos[i] = -1
	}
	for i, f := range fields {
		k := slices.Index(kafkaColumnNames[:], f.Name)
		if k < 0 {
			d.others = append(d.others, i)
			continue
		}
		if i < d.nUser {
			return nil, fmt.Errorf("rowcodec: field %d is %q, want a user column", i, f.Name)
		}
		d.kpos[k] = i
	}
	for k, p := range d.kpos {
		if p < 0 {
			return nil, fmt.Errorf("rowcodec: no %s column", kafkaColumnNames[k])
		}
	}
	if spec.Format == tableschema.FormatRaw && fields[0].Name != tableschema.ColumnRawValue {
		return nil, fmt.Errorf("rowcodec: raw table's first field is %q", fields[0].Name)
	}
	if spec.Format != tableschema.FormatJSON {
		return d, nil
	}
	for i, c := range spec.Columns {
		if fields[i].Name != c.Name {
			return nil, fmt.Errorf("rowcodec: field %d is %q, column %d is %q", i, fields[i].Name, i, c.Name)
		}
	}
	d.root = &pathNode{col: -1, children: map[string]*pathNode{}}
	for i, c := range spec.Columns {
		col, err := compileColumn(c, fields[i])
		if err != nil {
			return nil, err
		}
		d.cols = append(d.cols, col)
		if col.required {
			d.required = append(d.required, i)
		}
		n := d.root
		path := c.Path()
		for k, key := range path {
			child := n.children[key]
			if child == nil {
				child = &pathNode{col: -1, firstCol: i, path: strings.Join(path[:k+1], ".")}
				n.children[key] = child
			}
			if k == len(path)-1 {
				child.col = i
			} else if child.children == nil {
				child.children = map[string]*pathNode{}
			}
			n = child
		}
	}
	d.root.index()
	d.seen = make([]bool, len(d.cols))
	return d, nil
}

// maxScan is the number of keys up to which comparing beats hashing.
const maxScan = 16

func (n *pathNode) index() {
	if len(n.children) <= maxScan {
		// In column order, which is often the order records write their keys in.
		for _, k := range slices.SortedFunc(maps.Keys(n.children), func(a, b string) int {
			return cmp.Or(n.children[a].firstCol-n.children[b].firstCol, strings.Compare(a, b))
		}) {
			n.keys = append(n.keys, k)
			n.nodes = append(n.nodes, n.children[k])
		}
	}
	for _, c := range n.children {
		c.index()
	}
}

// child returns the node for key, or nil.
func (n *pathNode) child(key []byte) *pathNode {
	if n.keys == nil {
		return n.children[string(key)]
	}
	// The records of a topic mostly write their keys in one order, so the key after the
	// one found last is likely next.
	if i := n.next; i < len(n.keys) && n.keys[i] == string(key) {
		n.next = i + 1
		return n.nodes[i]
	}
	for i, k := range n.keys {
		if k == string(key) {
			n.next = i + 1
			return n.nodes[i]
		}
	}
	return nil
}

func compileColumn(c tableschema.Column, f iceberg.NestedField) (column, error) {
	col := column{name: c.Name, required: c.Required}
	t := f.Type
	if l, ok := t.(*iceberg.ListType); ok {
		col.list = true
		t = l.Element
	}
	switch t := t.(type) {
	case iceberg.BooleanType:
		col.kind = kBool
	case iceberg.Int32Type:
		col.kind = kInt
	case iceberg.Int64Type:
		col.kind = kLong
	case iceberg.Float32Type:
		col.kind = kFloat
	case iceberg.Float64Type:
		col.kind = kDouble
	case iceberg.DecimalType:
		col.kind = kDecimal
		col.prec, col.scale = t.Precision(), t.Scale()
		col.typeName = fmt.Sprintf("decimal(%d,%d)", col.prec, col.scale)
		if col.prec > 18 {
			col.fixedLen = tableschema.DecimalBytes(col.prec)
		}
	case iceberg.DateType:
		col.kind = kDate
	case iceberg.TimeType:
		col.kind = kTime
	case iceberg.TimestampType:
		col.kind = kTimestamp
	case iceberg.TimestampTzType:
		col.kind = kTimestampTz
	case iceberg.StringType:
		col.kind = kString
	case iceberg.UUIDType:
		col.kind = kUUID
	case iceberg.BinaryType:
		col.kind = kBinary
	default:
		return column{}, fmt.Errorf("column %q: type %s has no decoder", c.Name, t)
	}
	if col.typeName == "" {
		col.typeName = t.String()
	}
	return col, nil
}

// Fields returns the table's top-level fields, the order of Row.Values. Callers must
// not modify them.
func (d *Decoder) Fields() []iceberg.NestedField { return d.fields }

// Decode decodes r into row, reusing row's memory, and reports whether the record fit the
// schema. Either way row holds exactly one row for r: when it did not fit, every user
// column is null and _mink_error says why.
//
// The row's bytes may alias r's bytes and the decoder's own memory: they stay valid until
// the next Decode call, as long as r's bytes are not changed.
func (d *Decoder) Decode(r record.Record, row *Row) (ok bool) {
	d.Begin(row)
	reason := d.DecodeValue(r.Value, row.Values[:d.nUser])
	return d.Finish(r, row, reason)
}

// Begin starts a row: row gets one null value per field, its memory reused, and the
// decoder's scratch memory is recycled. Decode is Begin, DecodeValue and Finish; a
// caller that fills other fields itself calls them in that order.
func (d *Decoder) Begin(row *Row) {
	n := len(d.fields)
	if cap(row.Values) < n {
		row.Values = make([]Value, n)
	}
	row.Values = row.Values[:n]
	for i := range row.Values {
		row.Values[i].Valid = false
	}
	d.scratch = d.scratch[:0]
	d.errMsg = ""
}

// DecodeValue decodes a JSON or raw record value into the user columns (the first
// fields) and returns why it could not, or "".
func (d *Decoder) DecodeValue(value []byte, user []Value) (reason string) {
	switch d.spec.Format {
	case tableschema.FormatRaw:
		// A raw table has no shape to miss: a tombstone is just a null value.
		user[0] = Value{Valid: value != nil, Bytes: value}
	case tableschema.FormatJSON:
		return d.decodeJSON(value, user)
	default:
		return "format " + string(d.spec.Format) + " has no JSON decoder" // a caller's bug
	}
	return ""
}

// Finish fills the Kafka columns of r and, when reason is not "", nulls every other field
// and sets _mink_error to reason. It reports whether the row decoded (reason == "").
func (d *Decoder) Finish(r record.Record, row *Row, reason string) (ok bool) {
	v := row.Values
	if reason != "" {
		for _, i := range d.others {
			v[i].Valid = false
		}
	}
	v[d.kpos[offPartition]] = Value{Valid: true, Int: int64(r.Partition)}
	v[d.kpos[offOffset]] = Value{Valid: true, Int: r.Offset}
	v[d.kpos[offTimestamp]] = Value{Valid: true, Int: r.Timestamp.UnixMicro()}
	v[d.kpos[offKey]] = Value{Valid: r.Key != nil, Bytes: r.Key}
	d.headers(r.Headers, &v[d.kpos[offHeaders]])
	v[d.kpos[offError]] = Value{}
	if reason != "" {
		start := len(d.scratch)
		d.scratch = append(d.scratch, reason...)
		v[d.kpos[offError]] = Value{Valid: true, Bytes: d.scratch[start:]}
	}
	return reason == ""
}

func (d *Decoder) headers(hs []record.Header, v *Value) {
	// Kafka headers are never null, only empty: an empty list says "no headers".
	elems := v.Elems[:0]
	for _, h := range hs {
		var e Value
		if len(elems) < cap(elems) {
			e = elems[:len(elems)+1][len(elems)] // reuse the field slice of an earlier row
		}
		key := []byte(nil)
		if utf8.ValidString(h.Key) {
			start := len(d.scratch)
			d.scratch = append(d.scratch, h.Key...)
			key = d.scratch[start:]
		} else {
			// The key column is a string; a non-Java client can send any bytes.
			key = []byte(strings.ToValidUTF8(h.Key, "\uFFFD"))
		}
		fields := e.Elems[:0]
		fields = append(fields,
			Value{Valid: true, Bytes: key},
			Value{Valid: h.Value != nil, Bytes: h.Value})
		elems = append(elems, Value{Valid: true, Elems: fields})
	}
	*v = Value{Valid: true, Elems: elems}
}

// decodeJSON fills the user columns from one JSON object and returns why it could not,
// or "".
func (d *Decoder) decodeJSON(data []byte, user []Value) string {
	if data == nil {
		return "null value (tombstone)"
	}
	clear(d.seen)
	s := jsonscan.New(data, &d.scratch)
	if !s.Start() {
		return s.Err()
	}
	if s.Peek() != '{' {
		kind := s.Kind()
		if s.Skip() {
			s.End()
		}
		if s.Err() != "" {
			return s.Err()
		}
		return "not a JSON object (got " + kind + ")"
	}
	if d.object(&s, d.root, user) {
		s.End()
	}
	if s.Err() != "" {
		return s.Err() // a syntax error outranks what we made of the part before it
	}
	if d.errMsg != "" {
		return d.errMsg
	}
	for _, i := range d.required {
		if !user[i].Valid {
			if d.seen[i] {
				return fmt.Sprintf("required column %q is null", d.cols[i].name)
			}
			return fmt.Sprintf("missing required column %q", d.cols[i].name)
		}
	}
	return ""
}

// valueError records the first problem with a value of the current record.
func (d *Decoder) valueError(c *column, elem int, msg string) {
	if d.errMsg != "" {
		return
	}
	if elem >= 0 {
		d.errMsg = fmt.Sprintf("column %q: element %d: %s", c.name, elem, msg)
	} else {
		d.errMsg = fmt.Sprintf("column %q: %s", c.name, msg)
	}
}
