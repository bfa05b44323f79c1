package protofmt

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// errDup is returned inside the fast path when a singular message field occurs twice:
// Protobuf merges the occurrences, which the fast path does not do, so the message is
// rewritten with them merged (see merge.go) and read again. It never leaves Decode.
const errDup = "\x00merge"

// decoder reads one message's wire bytes. It is not safe for concurrent use.
type decoder struct {
	root *msgPlan
	md   protoreflect.MessageDescriptor

	buf []byte // enum numbers, decimals and JSON of the current value
	kvs []kv   // Struct entries being sorted, a stack across nesting levels

	merge     *mergeMsg // made on the first message that needs it
	mergedBuf []byte
}

func (d *decoder) Decode(data []byte, v *rowcodec.Value) string {
	d.buf = d.buf[:0]
	d.kvs = d.kvs[:0]
	r := d.message(d.root, data, v)
	if r == errDup {
		return d.decodeMerged(data, v)
	}
	return r
}

// decodeMerged reads a message in which a singular message field occurs more than once.
// Such input is rare; this path allocates.
func (d *decoder) decodeMerged(data []byte, v *rowcodec.Value) string {
	if d.merge == nil {
		d.merge = newMergeMsg(d.md, map[protoreflect.FullName]*mergeMsg{})
	}
	out, r := merge(d.merge, [][]byte{data}, d.mergedBuf[:0], 0, d.root.bad)
	if r != "" {
		return r
	}
	d.mergedBuf = out
	d.buf = d.buf[:0]
	d.kvs = d.kvs[:0]
	if r := d.message(d.root, out, v); r != errDup {
		return r
	}
	return d.root.bad // cannot happen: merged input has no second occurrences
}

// tag reads a field tag. ok is false for a malformed tag or an invalid field number.
func tag(b []byte) (num protowire.Number, wt protowire.Type, n int, ok bool) {
	if len(b) > 0 && b[0] < 0x80 {
		num, wt = protowire.Number(b[0]>>3), protowire.Type(b[0]&7)
		return num, wt, 1, num != 0
	}
	num, wt, n = protowire.ConsumeTag(b)
	return num, wt, n, n > 0 && num <= protowire.MaxValidNumber
}

// resize sets v's length to n, reusing its memory.
func resize(v []rowcodec.Value, n int) []rowcodec.Value {
	if cap(v) >= n {
		return v[:n]
	}
	return append(v[:cap(v)], make([]rowcodec.Value, n-cap(v))...)
}

// grow appends an element to list v, reusing memory past its length, and returns it.
func grow(v *rowcodec.Value) *rowcodec.Value {
	n := len(v.Elems)
	if n < cap(v.Elems) {
		v.Elems = v.Elems[:n+1]
	} else {
		v.Elems = append(v.Elems, rowcodec.Value{})
	}
	return &v.Elems[n]
}

func null(v *rowcodec.Value) {
	*v = rowcodec.Value{Elems: v.Elems[:0]}
}

// message reads message payload b as plan p into struct v.
func (d *decoder) message(p *msgPlan, b []byte, v *rowcodec.Value) string {
	elems := resize(v.Elems, len(p.init))
	for i := range elems {
		keep := elems[i].Elems[:0]
		elems[i] = p.init[i]
		elems[i].Elems = keep
	}
	*v = rowcodec.Value{Valid: true, Elems: elems}
	for len(b) > 0 {
		num, wt, n, ok := tag(b)
		if !ok {
			return p.bad
		}
		b = b[n:]
		i := p.lookup(num)
		if i < 0 {
			if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
				return p.bad
			}
			b = b[n:]
			continue
		}
		n, r := d.field(&p.fields[i], elems, num, wt, b)
		if r != "" {
			return r
		}
		if n < 0 { // of another wire type: unknown, as for parsers
			if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
				return p.bad
			}
		}
		b = b[n:]
	}
	for _, i := range p.maps {
		f := &p.fields[i]
		sortMap(&elems[f.slot], f.keyBytes)
	}
	return ""
}

// skip consumes a field value that is not read (unknown, or of an unexpected wire type,
// which Protobuf also treats as unknown).
func skip(num protowire.Number, wt protowire.Type, b []byte, bad string) (int, string) {
	n := protowire.ConsumeFieldValue(num, wt, b)
	if n < 0 {
		return 0, bad
	}
	return n, ""
}

// field reads one occurrence of field f at b into its slot of elems. It returns a
// negative length, and reads nothing, when the wire type is not one f has.
func (d *decoder) field(f *fieldPlan, elems []rowcodec.Value, num protowire.Number, wt protowire.Type, b []byte) (int, string) {
	if f.slot < 0 { // a oneof member not read
		if wt == f.val.wt {
			for _, o := range f.others {
				null(&elems[o])
			}
		}
		return -1, ""
	}
	dst := &elems[f.slot]
	switch f.card {
	case cardSingle:
		if wt != f.val.wt {
			return -1, ""
		}
		if f.val.isMsg && dst.Valid {
			return 0, errDup
		}
		for _, o := range f.others {
			null(&elems[o])
		}
		return d.value(&f.val, num, b, dst)
	case cardList:
		if wt == f.val.wt {
			return d.value(&f.val, num, b, grow(dst))
		}
		if wt != protowire.BytesType || !f.val.packable() {
			return -1, ""
		}
		packed, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, f.bad
		}
		for len(packed) > 0 {
			m, r := d.value(&f.val, num, packed, grow(dst))
			if r != "" {
				return 0, r
			}
			packed = packed[m:]
		}
		return n, ""
	}
	if wt != protowire.BytesType {
		return -1, ""
	}
	entry, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return 0, f.bad
	}
	return n, d.mapEntry(f, entry, grow(dst))
}

// mapEntry reads a map entry's payload into e, a Value{Valid: true, Elems: [key, value]}.
func (d *decoder) mapEntry(f *fieldPlan, b []byte, e *rowcodec.Value) string {
	kv := resize(e.Elems, 2)
	*e = rowcodec.Value{Valid: true, Elems: kv}
	kv[0] = f.key.zero
	sawVal := false
	for len(b) > 0 {
		num, wt, n, ok := tag(b)
		if !ok {
			return f.bad
		}
		b = b[n:]
		var r string
		switch {
		case num == 1 && wt == f.key.wt:
			n, r = d.value(&f.key, num, b, &kv[0])
		case num == 2 && wt == f.val.wt:
			if sawVal && f.val.isMsg {
				return errDup
			}
			sawVal = true
			n, r = d.value(&f.val, num, b, &kv[1])
		default:
			n, r = skip(num, wt, b, f.bad)
		}
		if r != "" {
			return r
		}
		b = b[n:]
	}
	if sawVal {
		return ""
	}
	if f.val.isMsg {
		// A map value is never absent: a missing one is the empty message.
		return d.content(&f.val, nil, &kv[1])
	}
	kv[1] = f.val.zero
	return ""
}

// sortMap orders map v's entries by key, keeping the last of equal keys, as Protobuf
// does. Entries are only swapped, never copied, so each keeps its own memory.
func sortMap(v *rowcodec.Value, byBytes bool) {
	es := v.Elems
	cmp := func(a, b rowcodec.Value) int {
		x, y := &a.Elems[0], &b.Elems[0]
		if byBytes {
			return bytes.Compare(x.Bytes, y.Bytes)
		}
		switch {
		case x.Int < y.Int:
			return -1
		case x.Int > y.Int:
			return 1
		}
		return 0
	}
	sorted := true
	for i := 1; i < len(es); i++ {
		if cmp(es[i-1], es[i]) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	slices.SortStableFunc(es, cmp)
	w := 0
	for i := range es {
		if i+1 < len(es) && cmp(es[i], es[i+1]) == 0 {
			continue // a later entry has the same key
		}
		es[w], es[i] = es[i], es[w]
		w++
	}
	v.Elems = es[:w]
}

// value reads one value of p, of wire type p.wt, at the start of b into dst.
func (d *decoder) value(p *valPlan, num protowire.Number, b []byte, dst *rowcodec.Value) (int, string) {
	var x uint64
	var n int
	switch p.wt {
	case protowire.VarintType:
		x, n = protowire.ConsumeVarint(b)
	case protowire.Fixed32Type:
		var y uint32
		y, n = protowire.ConsumeFixed32(b)
		x = uint64(y)
	case protowire.Fixed64Type:
		x, n = protowire.ConsumeFixed64(b)
	case protowire.BytesType:
		var s []byte
		s, n = protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, p.bad
		}
		switch p.op {
		case opString:
			if !rowcodec.ValidUTF8(s) {
				return 0, p.badUTF8
			}
			*dst = rowcodec.Value{Valid: true, Bytes: s}
			return n, ""
		case opBytes:
			*dst = rowcodec.Value{Valid: true, Bytes: s}
			return n, ""
		}
		return n, d.content(p, s, dst)
	case protowire.StartGroupType:
		var s []byte
		s, n = protowire.ConsumeGroup(num, b)
		if n < 0 {
			return 0, p.bad
		}
		return n, d.content(p, s, dst)
	}
	if n < 0 {
		return 0, p.bad
	}
	switch p.op {
	case opBool:
		*dst = rowcodec.Value{Valid: true}
		if x != 0 {
			dst.Int = 1
		}
	case opInt32, opSfixed32:
		*dst = rowcodec.Value{Valid: true, Int: int64(int32(x))}
	case opSint32:
		*dst = rowcodec.Value{Valid: true, Int: int64(int32(protowire.DecodeZigZag(x & math.MaxUint32)))}
	case opInt64, opSfixed64:
		*dst = rowcodec.Value{Valid: true, Int: int64(x)}
	case opSint64:
		*dst = rowcodec.Value{Valid: true, Int: protowire.DecodeZigZag(x)}
	case opUint32, opFixed32:
		*dst = rowcodec.Value{Valid: true, Int: int64(uint32(x))}
	case opUint64, opFixed64:
		start := len(d.buf)
		d.buf = appendDecimal(d.buf, x, p.decLen)
		*dst = rowcodec.Value{Valid: true, Bytes: d.buf[start:len(d.buf):len(d.buf)]}
	case opFloat:
		*dst = rowcodec.Value{Valid: true, Float: float64(math.Float32frombits(uint32(x)))}
	case opDouble:
		*dst = rowcodec.Value{Valid: true, Float: math.Float64frombits(x)}
	case opEnum:
		name := p.enum.name(int32(x))
		if name == nil {
			start := len(d.buf)
			d.buf = strconv.AppendInt(d.buf, int64(int32(x)), 10)
			name = d.buf[start:len(d.buf):len(d.buf)]
		}
		*dst = rowcodec.Value{Valid: true, Bytes: name}
	}
	return n, ""
}

// appendDecimal appends x as the n-byte big-endian two's complement form of a decimal
// of precision ≥ 20 (n ≥ 9, so the sign byte is always 0).
func appendDecimal(b []byte, x uint64, n int) []byte {
	for i := 8; i < n; i++ {
		b = append(b, 0)
	}
	return binary.BigEndian.AppendUint64(b, x)
}

func appendInt(b []byte, x int64) []byte { return strconv.AppendInt(b, x, 10) }

// content reads the payload of a message-kind value into dst.
func (d *decoder) content(p *valPlan, b []byte, dst *rowcodec.Value) string {
	switch p.op {
	case opMessage:
		return d.message(p.msg, b, dst)
	case opTimestamp, opDuration:
		us, r := secondsNanos(b, p)
		if r != "" {
			return r
		}
		*dst = rowcodec.Value{Valid: true, Int: us}
		return ""
	case opWrapper:
		*dst = p.inner.zero
		for len(b) > 0 {
			num, wt, n, ok := tag(b)
			if !ok {
				return p.bad
			}
			b = b[n:]
			var r string
			if num == 1 && wt == p.inner.wt {
				n, r = d.value(p.inner, num, b, dst)
			} else {
				n, r = skip(num, wt, b, p.bad)
			}
			if r != "" {
				return r
			}
			b = b[n:]
		}
		return ""
	}
	start := len(d.buf)
	var r string
	switch p.op {
	case opStruct:
		r = d.structJSON(p, b, 0)
	case opValue:
		r = d.valueJSON(p, b, 0)
	case opListValue:
		r = d.listJSON(p, b, 0)
	case opAny:
		r = d.anyJSON(p, b)
	}
	if r != "" {
		return r
	}
	*dst = rowcodec.Value{Valid: true, Bytes: d.buf[start:len(d.buf):len(d.buf)]}
	return ""
}

// maxSeconds bounds the seconds of a Timestamp or Duration whose microseconds fit an
// int64 whatever its nanos.
const maxSeconds = (math.MaxInt64 - 1<<22) / 1_000_000

// secondsNanos reads a Timestamp or Duration payload as microseconds, flooring the
// nanos so that the result does not depend on the sign conventions of the writer.
func secondsNanos(b []byte, p *valPlan) (int64, string) {
	var sec int64
	var nanos int32
	for len(b) > 0 {
		num, wt, n, ok := tag(b)
		if !ok {
			return 0, p.bad
		}
		b = b[n:]
		if (num == 1 || num == 2) && wt == protowire.VarintType {
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, p.bad
			}
			if num == 1 {
				sec = int64(x)
			} else {
				nanos = int32(x)
			}
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
			return 0, p.bad
		}
		b = b[n:]
	}
	if sec > maxSeconds || sec < -maxSeconds {
		return 0, p.badRange
	}
	us := int64(nanos) / 1000
	if int64(nanos)%1000 < 0 {
		us--
	}
	return sec*1e6 + us, ""
}
