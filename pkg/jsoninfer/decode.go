package jsoninfer

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/jsonscan"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Decoder decodes JSON records into the columns of one inferred version. A value whose
// type is not its column's is null there and kept, as written, in _mink_unfit with its
// path, and the record's problem names it; a field the version has no column for is kept
// there too. It depends on the version alone, so every build decodes a record alike. Not
// safe for concurrent use.
type Decoder struct {
	fields  []iceberg.NestedField // the version's columns
	in      *tableschema.Inference
	pos     []int // where each column goes in the row
	unfit   int   // where _mink_unfit goes
	root    *col
	count   int // fields the version has (for Needs)
	highest int // the version's highest field id (for Needs)

	scratch    []byte
	last       []byte // a copy of the record doc was parsed from
	parsedOnce bool
	doc        *node
	msg        string   // why last did not parse
	out        []byte   // _mink_unfit's text being written
	bad        []string // paths of values that did not fit
	path       []string
}

// col is a field compiled for decoding.
type col struct {
	t    iceberg.Type
	keys map[string]int // a struct's fields by JSON key
	kids []*col         // a struct's fields; a list's element
}

// NewDecoder compiles a decoder of an inferred version's top-level fields.
func NewDecoder(fields []iceberg.NestedField, in *tableschema.Inference) (*Decoder, error) {
	cols, unfit := tableschema.InferredColumns(fields)
	if unfit < 0 {
		return nil, fmt.Errorf("jsoninfer: the version has no %s column", tableschema.ColumnMinkUnfit)
	}
	d := &Decoder{in: in, pos: cols, unfit: unfit}
	for _, i := range cols {
		d.fields = append(d.fields, fields[i])
	}
	d.root = compile(&iceberg.StructType{FieldList: d.fields}, in)
	d.count = countFields(d.fields)
	d.highest = iceberg.NewSchema(0, fields...).HighestFieldID()
	return d, nil
}

func compile(t iceberg.Type, in *tableschema.Inference) *col {
	c := &col{t: t}
	switch tt := t.(type) {
	case *iceberg.StructType:
		c.keys = make(map[string]int, len(tt.FieldList))
		for i, f := range tt.FieldList {
			c.keys[in.Key(f)] = i
			c.kids = append(c.kids, compile(f.Type, in))
		}
	case *iceberg.ListType:
		c.kids = []*col{compile(tt.Element, in)}
	}
	return c
}

// Needs reports whether record data has a field Grow would add to the version's columns:
// indexing then evolves the table before adding it.
func (d *Decoder) Needs(data []byte) bool {
	doc := d.parsed(data)
	if doc == nil || doc.kind != kObject || !needsObject(doc, d.root, 1) {
		return false
	}
	// A key without a column: whether Grow adds it (its value shows a type, within
	// the bounds). New keys go to a scratch inference: the version's is shared.
	next := d.highest
	_, changed := grow(d.fields, d.count, d.in, &tableschema.Inference{}, doc, func() int { next++; return next }, "")
	return changed
}

// parsed parses a copy of data, or returns what the last call parsed when data holds
// the same bytes (Check's Needs, then Decode, of one record): the parse aliases only
// the decoder's memory, whatever the caller does with data.
func (d *Decoder) parsed(data []byte) *node {
	if d.parsedOnce && bytes.Equal(data, d.last) {
		return d.doc
	}
	d.last = append(d.last[:0], data...)
	d.scratch = d.scratch[:0]
	d.doc, d.msg = parse(d.last, &d.scratch)
	d.parsedOnce = true
	return d.doc
}

// needsObject reports whether object n, whose members are at depth, has a key c lacks
// with a value that may show a type, within the depth and name bounds (Grow decides).
func needsObject(n *node, c *col, depth int) bool {
	for i, k := range n.keys {
		v := n.kids[i]
		j, ok := c.keys[string(k)]
		if !ok {
			if depth <= tableschema.InferMaxDepth && len(k) <= tableschema.InferMaxNameLen && v.kind != kNull && len(v.kids) > 0 == (v.kind >= kObject) {
				return true
			}
			continue
		}
		if needsValue(v, c.kids[j], depth) {
			return true
		}
	}
	return false
}

func needsValue(v *node, c *col, depth int) bool {
	switch c.t.(type) {
	case *iceberg.StructType:
		return v.kind == kObject && needsObject(v, c, depth+1)
	case *iceberg.ListType:
		if v.kind != kArray {
			return false
		}
		for _, e := range v.kids {
			if needsValue(e, c.kids[0], depth+1) {
				return true
			}
		}
	}
	return false
}

// Decode decodes record value data into row (the version's top-level fields; Kafka
// columns are the caller's). reason is why the record is no row of columns at all (not
// a JSON object, a syntax error, a tombstone): its columns are then for the caller to
// null. Otherwise problem names the values that did not fit their columns, or is "".
// The row's bytes may alias data and the decoder's memory until the next Decode.
func (d *Decoder) Decode(data []byte, row []rowcodec.Value) (reason, problem string) {
	if data == nil {
		return "null value (tombstone)", ""
	}
	d.out, d.bad, d.path = d.out[:0], d.bad[:0], d.path[:0]
	doc := d.parsed(data)
	if doc == nil {
		return d.msg, ""
	}
	if doc.kind != kObject {
		return "not a JSON object (got " + doc.kindName() + ")", ""
	}
	var top rowcodec.Value
	d.value(doc, d.root, &top)
	for i, p := range d.pos {
		row[p] = top.Elems[i]
	}
	row[d.unfit] = rowcodec.Value{}
	if len(d.out) > 0 {
		d.out = append(d.out, '}')
		row[d.unfit] = rowcodec.Value{Valid: true, Bytes: d.out}
	}
	if len(d.bad) > 0 {
		const most = 8
		names := d.bad[:min(len(d.bad), most)]
		problem = "fields that did not fit their columns' types, kept in " + tableschema.ColumnMinkUnfit + ": " + strings.Join(names, "; ")
		if len(d.bad) > most {
			problem += fmt.Sprintf("; and %d more", len(d.bad)-most)
		}
	}
	return "", problem
}

// keep adds the value at the current path to _mink_unfit, and with why (not "") to the
// problem.
func (d *Decoder) keep(n *node, why string) {
	p := d.pathText()
	if len(d.out) == 0 {
		d.out = append(d.out, '{')
	} else {
		d.out = append(d.out, ',')
	}
	d.out = appendQuoted(d.out, p)
	d.out = append(d.out, ':')
	if utf8.Valid(n.raw) {
		d.out = append(d.out, n.raw...)
	} else {
		d.out = append(d.out, strings.ToValidUTF8(string(n.raw), "\uFFFD")...) // a string column holds UTF-8
	}
	if why != "" {
		d.bad = append(d.bad, appendQuotedString(p)+" "+why)
	}
}

func appendQuotedString(s string) string { return string(appendQuoted(nil, s)) }

func (d *Decoder) pathText() string {
	var b strings.Builder
	for i, p := range d.path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// value decodes n as c's type into v.
func (d *Decoder) value(n *node, c *col, v *rowcodec.Value) {
	*v = rowcodec.Value{}
	if n.kind == kNull {
		return
	}
	mismatch := func() {
		d.keep(n, "is "+n.kindName()+", the column is "+typeName(c.t))
	}
	switch t := c.t.(type) {
	case *iceberg.StructType:
		if n.kind != kObject {
			mismatch()
			return
		}
		v.Valid = true
		v.Elems = make([]rowcodec.Value, len(t.FieldList))
		for i, k := range n.keys {
			j, ok := c.keys[string(k)]
			d.path = append(d.path, string(k))
			switch {
			case ok:
				d.value(n.kids[i], c.kids[j], &v.Elems[j])
			case n.kids[i].kind != kNull:
				d.keep(n.kids[i], "") // no column (yet, or past the bounds)
			}
			d.path = d.path[:len(d.path)-1]
		}
	case *iceberg.ListType:
		if n.kind != kArray {
			mismatch()
			return
		}
		v.Valid = true
		v.Elems = make([]rowcodec.Value, len(n.kids))
		for i, e := range n.kids {
			d.path = append(d.path, "["+strconv.Itoa(i)+"]")
			d.value(e, c.kids[0], &v.Elems[i])
			d.path = d.path[:len(d.path)-1]
		}
	case iceberg.BooleanType:
		if n.kind != kBool {
			mismatch()
			return
		}
		*v = rowcodec.Value{Valid: true, Int: b2i(n.yes)}
	case iceberg.Int64Type:
		if n.kind != kInt && n.kind != kNum {
			mismatch()
			return
		}
		x, msg := jsonscan.Integer(n.str, math.MinInt64, math.MaxInt64)
		if msg != "" {
			d.keep(n, "is a number that "+msg+" of long (the column is long)")
			return
		}
		*v = rowcodec.Value{Valid: true, Int: x}
	case iceberg.Float64Type:
		if n.kind != kInt && n.kind != kNum {
			mismatch()
			return
		}
		f, ok := jsonscan.Float(n.str, 64)
		if !ok {
			d.keep(n, "is a number out of double's range")
			return
		}
		*v = rowcodec.Value{Valid: true, Float: f}
	case iceberg.StringType:
		if n.kind != kString {
			mismatch()
			return
		}
		if !utf8.Valid(n.str) {
			d.keep(n, "is a string that is not valid UTF-8")
			return
		}
		*v = rowcodec.Value{Valid: true, Bytes: n.str}
	default:
		// A type AlterTable pinned that inference has no reading for.
		d.keep(n, "cannot be read as "+typeName(c.t))
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func typeName(t iceberg.Type) string {
	switch t.(type) {
	case *iceberg.StructType:
		return "a struct"
	case *iceberg.ListType:
		return "a list"
	}
	return t.String()
}

// appendQuoted appends s as a JSON string, escaping only '"', '\\' and control
// characters (and invalid UTF-8 as U+FFFD): the text is the same in every build.
func appendQuoted(b []byte, s string) []byte {
	s = strings.ToValidUTF8(s, "\uFFFD")
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, fmt.Sprintf("\\u%04x", c)...)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
