package tablecodec

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/jsoninfer"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/pkg/upsert"
)

// Decoder decodes the records of one table as one file recipe says. It implements
// rowcodec.RowDecoder. Not safe for concurrent use.
type Decoder struct {
	c     *Codecs
	t     tables.Table
	v     tableschema.Version
	rc    *rowcodec.Decoder // JSON and raw values, and the Kafka columns
	value *part             // registry values; nil for JSON and raw
	key   *part             // decoded keys; nil when keys stay bytes
	// KeyHash's, when keys decode: the key's canonical encoding, and scratch for the
	// decoded key and its encoding.
	keyEnc *upsert.KeyEncoder
	keyVal rowcodec.Value
	keyBuf []byte
	// An inferred JSON table's values (nil otherwise), where _mink_error goes, and
	// whether Check may ask for new columns (not once inference stopped or was refused).
	inf      *jsoninfer.Decoder
	errPos   int
	inferOff bool
}

var _ rowcodec.RowDecoder = (*Decoder)(nil)

// part decodes registry-format values (or keys) into some of a row's fields.
type part struct {
	c       *Codecs
	t       tables.Table
	v       tableschema.Version
	dec     tableschema.Decoding
	isKey   bool
	fixed   *bound // latest mode: the one schema of the recipe
	byID    map[int]*bound
	root    rowcodec.Value
	indexes []int // scratch for a record's Protobuf message indexes
}

// bound is one registry schema bound to the part's target at the decoder's version.
type bound struct {
	w       *writerSchema
	dec     schemafmt.Decoder // nil: reason
	reason  string
	cols    []int // where the value's fields go in the row
	record  bool  // the root is a struct whose fields are columns
	covered bool  // the version needs no newer one for this schema
}

// Decoder returns a decoder of table t's records for a file built with settings s: the
// schema version s.TableVersion and, in latest mode, the registry ids s names. Registry
// schemas come from Postgres only; prefix-mode records naming one the table has not
// stored are learned with Learn (Check says when).
func (c *Codecs) Decoder(ctx context.Context, t tables.Table, s parquetbuild.Settings) (*Decoder, error) {
	v, err := c.Version(ctx, t, s.TableVersion)
	if err != nil {
		return nil, err
	}
	rc, err := rowcodec.NewDecoderAt(v.Spec, v.Schema.Fields())
	if err != nil {
		return nil, fmt.Errorf("table %s version %d: %w", t.FullName(), v.ID, err)
	}
	d := &Decoder{c: c, t: t, v: v, rc: rc}
	if v.Spec.Infer != nil {
		if d.inf, err = jsoninfer.NewDecoder(v.Schema.Fields(), v.Spec.Infer); err != nil {
			return nil, fmt.Errorf("table %s version %d: %w", t.FullName(), v.ID, err)
		}
		d.errPos = slices.IndexFunc(v.Schema.Fields(), func(f iceberg.NestedField) bool { return f.Name == tableschema.ColumnMinkError })
		d.inferOff = t.Props().StopInference
	}
	for _, p := range []struct {
		dec   *tableschema.Decoding
		id    int
		isKey bool
		out   **part
	}{{v.Spec.Value, s.ValueSchemaID, false, &d.value}, {v.Spec.Key, s.KeySchemaID, true, &d.key}} {
		if p.dec == nil {
			continue
		}
		pt := &part{c: c, t: t, v: v, dec: *p.dec, isKey: p.isKey, byID: map[int]*bound{}}
		if p.dec.Mode == tableschema.ModeLatest {
			w, ok, err := c.stored(ctx, t, p.id, p.isKey)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("%w: table %s has no registry schema %d (recorded with the file)", ErrUnknownSchema, t.FullName(), p.id)
			}
			pt.fixed = pt.bind(w)
		} else if err := pt.preload(ctx); err != nil {
			return nil, err
		}
		*p.out = pt
	}
	if kt, _, ok := v.KeyTarget(); ok && d.key != nil {
		if d.keyEnc, err = upsert.NewKeyEncoder(kt); err != nil {
			return nil, fmt.Errorf("table %s version %d: %w", t.FullName(), v.ID, err)
		}
	}
	return d, nil
}

// KeyHash is the identity of a record's key in an upsert table. Without a key format it
// is the key's bytes (upsert.KeyHash). With one, it is the decoded key's canonical encoding (upsert.KeyEncoder): two encodings
// of one decoded key (field order, whitespace, another schema id) are one key, at any
// version of the table's schema. A key that does not decode is its bytes in a space of
// their own (upsert.UndecodedKeyHash): still one key, never merged with a decoded one.
// It depends on the key alone (a record whose value does not decode keeps its key). Like
// Decode, it may reuse the memory of the row the last Decode wrote.
func (d *Decoder) KeyHash(key []byte) upsert.Hash {
	if d.key == nil || key == nil {
		return upsert.KeyHash(key)
	}
	if d.keyEnc == nil {
		return upsert.UndecodedKeyHash(key) // the version has no decoded key column
	}
	if _, reason := d.key.decodeInto(key, &d.keyVal); reason != "" {
		return upsert.UndecodedKeyHash(key)
	}
	d.keyBuf = d.keyEnc.Append(d.keyBuf[:0], d.keyVal)
	return upsert.DecodedKeyHash(d.keyBuf)
}

// preload binds every registry schema the table has stored, so that a rebuild decodes
// with no further I/O.
func (p *part) preload(ctx context.Context) error {
	rss, err := tables.RegistrySchemas(ctx, p.c.db, p.t.ID)
	if err != nil {
		return err
	}
	for _, rs := range rss {
		w := p.c.cached(p.t, rs.ID, p.isKey)
		if w == nil {
			w = p.c.compiled(p.t, rs, p.isKey)
		}
		p.byID[rs.ID] = p.bind(w)
	}
	return nil
}

// bind binds a writer schema to the part's target at the decoder's version.
func (p *part) bind(w *writerSchema) *bound {
	b := &bound{w: w, reason: w.reason}
	if w.schema == nil {
		b.covered = true // error rows need no version
		return b
	}
	var target iceberg.Type
	ok := true
	if p.isKey {
		var col int
		target, col, ok = p.v.KeyTarget()
		b.cols = []int{col} // the key is one column, whatever its type
		b.covered = p.v.Covers(nil, w.root)
	} else {
		target, b.cols, ok = p.v.ValueTarget(w.root)
		_, b.record = w.root.(*iceberg.StructType)
		b.covered = p.v.Covers(w.root, nil)
	}
	if !ok {
		b.reason = fmt.Sprintf("schema id %d: its values are not records, and the table has no value column", w.id)
		b.covered = true
		return b
	}
	dec, err := w.schema.Bind(target)
	if err != nil {
		b.reason = fmt.Sprintf("schema id %d: %v", w.id, err)
		return b
	}
	b.dec = dec
	return b
}

// Fields are the version's top-level fields, the order of Row.Values.
func (d *Decoder) Fields() []iceberg.NestedField { return d.rc.Fields() }

// Version is the schema version the decoder decodes to.
func (d *Decoder) Version() tableschema.Version { return d.v }

// Decode decodes r into row (see rowcodec.RowDecoder).
func (d *Decoder) Decode(r record.Record, row *rowcodec.Row) bool {
	d.rc.Begin(row)
	if d.inf != nil {
		reason, problem := d.inf.Decode(r.Value, row.Values)
		ok := d.rc.Finish(r, row, reason)
		if ok && problem != "" {
			// The record is a row with what fit; _mink_error names what did not.
			row.Values[d.errPos] = rowcodec.Value{Valid: true, Bytes: []byte(problem)}
			ok = false
		}
		return ok
	}
	var reason string
	if d.value == nil {
		reason = d.rc.DecodeValue(r.Value, row.Values[:len(d.v.Spec.Columns)+rawColumns(d.v.Spec)])
	} else {
		reason = d.value.decode(r.Value, row)
	}
	if reason == "" && d.key != nil {
		reason = d.key.decode(r.Key, row)
	}
	return d.rc.Finish(r, row, reason)
}

func rawColumns(s tableschema.Spec) int {
	if s.Format == tableschema.FormatRaw {
		return 1
	}
	return 0
}

// decode decodes one value (or key) into its fields of row; "" or why not.
func (p *part) decode(data []byte, row *rowcodec.Row) string {
	if data == nil {
		if p.isKey {
			return "" // no key: nothing to decode, its column stays null
		}
		return "null value (tombstone)"
	}
	b, reason := p.decodeInto(data, &p.root)
	if reason != "" {
		return reason
	}
	if b.record {
		for i, c := range b.cols {
			row.Values[c] = p.root.Elems[i]
		}
	} else {
		row.Values[b.cols[0]] = p.root
	}
	return ""
}

// decodeInto decodes non-nil data into v in the shape of the part's target, returning
// the schema it decoded with, or why not.
func (p *part) decodeInto(data []byte, v *rowcodec.Value) (*bound, string) {
	what := "value"
	if p.isKey {
		what = "key"
	}
	b := p.fixed
	payload := data
	var id int
	var indexes []int
	if b == nil {
		var reason string
		id, indexes, payload, reason = splitPrefix(p.dec.Format, data, p.indexes)
		p.keep(indexes)
		if reason != "" {
			return nil, what + ": " + reason
		}
		b = p.byID[id]
		if b == nil {
			// Indexing learns every id before adding its record (Check); a rebuild has
			// every id its file used.
			return nil, fmt.Sprintf("%s: schema id %d is not known", what, id)
		}
	}
	if b.reason != "" {
		return nil, what + ": " + b.reason
	}
	if p.dec.Format == tableschema.FormatProtobuf && p.fixed == nil && !slices.Equal(indexes, b.w.indexes) {
		return nil, fmt.Sprintf("%s: message index %v of schema id %d is not message %s", what, indexes, id, p.dec.Message)
	}
	if r := b.dec.Decode(payload, v); r != "" {
		return nil, fmt.Sprintf("%s: schema id %d: %s", what, b.w.id, r)
	}
	return b, ""
}

// keep keeps the memory of a record's message indexes for the next record, unless a
// hostile record made it large.
func (p *part) keep(indexes []int) {
	if cap(indexes) <= 64 && cap(indexes) > cap(p.indexes) {
		p.indexes = indexes
	}
}

// splitPrefix reads the Confluent wire format prefix: magic byte 0, the schema id as a
// 4-byte big-endian integer, and for Protobuf the message indexes (a zig-zag varint
// count, then each index; a lone 0 means [0]), appended to buf[:0] so that a record
// costs no allocation.
func splitPrefix(f tableschema.Format, data []byte, buf []int) (id int, indexes []int, payload []byte, reason string) {
	if len(data) < 5 || data[0] != 0 {
		return 0, nil, nil, "no schema id prefix (want magic byte 0 and a 4-byte schema id)"
	}
	id = int(binary.BigEndian.Uint32(data[1:5]))
	payload = data[5:]
	if f != tableschema.FormatProtobuf {
		return id, nil, payload, ""
	}
	n, k := binary.Varint(payload)
	if k <= 0 || n < 0 || n > int64(len(payload)) {
		return id, nil, nil, "bad Protobuf message index list after the schema id"
	}
	payload = payload[k:]
	indexes = buf[:0]
	if n == 0 {
		return id, append(indexes, 0), payload, ""
	}
	for range n {
		x, k := binary.Varint(payload)
		if k <= 0 || x < 0 || x > 1<<20 {
			return id, nil, nil, "bad Protobuf message index list after the schema id"
		}
		indexes = append(indexes, int(x))
		payload = payload[k:]
	}
	return id, indexes, payload, ""
}

// NeedKind says what a record needs before the decoder can add it as indexing would.
type NeedKind int

const (
	NeedNothing NeedKind = iota
	// NeedSchema: the record names registry schema ID, which the table has not stored:
	// Learn it, then Check again.
	NeedSchema
	// NeedVersion: the record's schema has fields (or wider types) the decoder's version
	// lacks: Evolve, cut the range, and decode from this record on with the new version.
	NeedVersion
	// NeedColumns: the record of an inferred table has fields the decoder's version
	// lacks: Infer, cut the range, and decode from this record on with the new version.
	NeedColumns
)

// Need is what Check found.
type Need struct {
	Kind NeedKind
	ID   int  // the registry schema id
	Key  bool // for the key, not the value
}

// Check reports whether r decodes with this decoder as it stands, with no I/O. Records
// that will be error rows whatever happens (no prefix, a bad schema) need nothing.
func (d *Decoder) Check(r record.Record) Need {
	if d.inf != nil {
		if !d.inferOff && d.inf.Needs(r.Value) {
			return Need{Kind: NeedColumns}
		}
		return Need{}
	}
	for _, p := range []*part{d.value, d.key} {
		if p == nil || p.fixed != nil {
			continue
		}
		data := r.Value
		if p.isKey {
			data = r.Key
		}
		if data == nil {
			continue
		}
		id, indexes, _, reason := splitPrefix(p.dec.Format, data, p.indexes)
		p.keep(indexes)
		if reason != "" {
			continue
		}
		b := p.byID[id]
		if b == nil {
			w := p.c.cached(p.t, id, p.isKey)
			if w == nil {
				return Need{Kind: NeedSchema, ID: id, Key: p.isKey}
			}
			b = p.bind(w)
			p.byID[id] = b
		}
		if !b.covered {
			return Need{Kind: NeedVersion, ID: id, Key: p.isKey}
		}
	}
	return Need{}
}

// StopInferring makes Check ask for no more columns: a version with them could not be
// made (a bound), and the rest of the range keeps the new fields in _mink_unfit.
func (d *Decoder) StopInferring() { d.inferOff = true }

// Covers reports whether records of registry schema id (stored already) decode at the
// decoder's version without a newer one, for the value or the key.
func (d *Decoder) Covers(id int, key bool) bool {
	p := d.value
	if key {
		p = d.key
	}
	if p == nil {
		return true
	}
	if p.fixed != nil && p.fixed.w.id == id {
		return p.fixed.covered
	}
	b := p.byID[id]
	if b == nil {
		w := p.c.cached(p.t, id, key)
		if w == nil {
			return true // unknown: Check asks for it first
		}
		b = p.bind(w)
		if p.fixed == nil {
			p.byID[id] = b
		}
	}
	return b.covered
}
