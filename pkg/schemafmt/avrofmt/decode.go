package avrofmt

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// Reasons, constant so that they never depend on a library.
const (
	reasonTruncated  = "truncated Avro value"
	reasonExtra      = "extra bytes after the Avro value"
	reasonBadInt     = "invalid int encoding"
	reasonBadLong    = "invalid long encoding"
	reasonBadBool    = "invalid boolean byte"
	reasonNegLen     = "negative length"
	reasonBadUTF8    = "invalid UTF-8"
	reasonBadUUID    = "invalid UUID text"
	reasonBadCount   = "invalid block count"
	reasonTimeRange  = "timestamp out of range"
	reasonLongInput  = " items is longer than the rest of the input"
	reasonIndexRange = " out of range"
)

// decoder walks Avro binary with a plan. It reads the input directly: no library reader,
// no intermediate values, so that a value costs no allocation once v and the scratch
// buffer have grown, and every reason is ours.
type decoder struct {
	root *pnode

	data    []byte
	pos     int
	scratch []byte // decimals and UUIDs of the current value

	failed  bool
	errPath string
	errMsg  string
}

func (d *decoder) Decode(data []byte, v *rowcodec.Value) string {
	d.data, d.pos, d.scratch, d.failed = data, 0, d.scratch[:0], false
	d.read(d.root, v)
	d.data = nil // v may alias data, but the decoder need not keep it
	if d.failed {
		if d.errPath == "" {
			return d.errMsg
		}
		return "field " + strconv.Quote(d.errPath) + ": " + d.errMsg
	}
	if d.pos != len(data) {
		return reasonExtra
	}
	return ""
}

// fail records the first reason and ends the input, so that everything after it reads
// as empty and loops stop.
func (d *decoder) fail(path, msg string) {
	if !d.failed {
		d.failed, d.errPath, d.errMsg = true, path, msg
	}
	d.pos = len(d.data)
}

func (d *decoder) readLong(path string) int64 {
	if p := d.pos; p < len(d.data) {
		if b := d.data[p]; b < 0x80 {
			d.pos = p + 1
			return int64(b>>1) ^ -int64(b&1)
		}
	}
	return d.readLongSlow(path)
}

// readLongSlow reads a varint of up to 10 bytes; like Java's and hamba's readers, bits
// beyond 64 are dropped.
func (d *decoder) readLongSlow(path string) int64 {
	var x uint64
	if b := d.data[min(d.pos, len(d.data)):]; len(b) >= 10 {
		// All ten bytes are there: no end to check for.
		for i, c := range b[:10] {
			x |= uint64(c&0x7f) << (7 * i)
			if c < 0x80 {
				d.pos += i + 1
				return int64(x>>1) ^ -int64(x&1)
			}
		}
		d.fail(path, reasonBadLong)
		return 0
	}
	for i := 0; i < 10; i++ {
		if d.pos >= len(d.data) {
			d.fail(path, reasonTruncated)
			return 0
		}
		b := d.data[d.pos]
		d.pos++
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return int64(x>>1) ^ -int64(x&1)
		}
	}
	d.fail(path, reasonBadLong)
	return 0
}

func (d *decoder) readInt(path string) int32 {
	if p := d.pos; p < len(d.data) {
		if b := d.data[p]; b < 0x80 {
			d.pos = p + 1
			return int32(b>>1) ^ -int32(b&1)
		}
	}
	return d.readIntSlow(path)
}

// readIntSlow reads a varint of up to 5 bytes; bits beyond 32 are dropped.
func (d *decoder) readIntSlow(path string) int32 {
	var x uint32
	for i := 0; i < 5; i++ {
		if d.pos >= len(d.data) {
			d.fail(path, reasonTruncated)
			return 0
		}
		b := d.data[d.pos]
		d.pos++
		x |= uint32(b&0x7f) << (7 * i)
		if b < 0x80 {
			return int32(x>>1) ^ -int32(x&1)
		}
	}
	d.fail(path, reasonBadInt)
	return 0
}

// next returns the next n bytes, aliasing the input with its capacity cut so that no
// append can write into it.
func (d *decoder) next(path string, n int) []byte {
	p := d.pos
	if n > len(d.data)-p {
		d.fail(path, reasonTruncated)
		return nil
	}
	d.pos = p + n
	return d.data[p : p+n : p+n]
}

func (d *decoder) readBytes(path string) []byte {
	n := d.readLong(path)
	if n < 0 {
		d.fail(path, reasonNegLen)
		return nil
	}
	if n > int64(len(d.data)-d.pos) {
		d.fail(path, reasonTruncated)
		return nil
	}
	return d.next(path, int(n))
}

// blockCount reads an array or map block header and returns its item count, 0 at the
// end (or on failure). A count must fit in the rest of the input at minLen bytes an
// item, which bounds the memory a value can make us allocate.
func (d *decoder) blockCount(path string, minLen int) int64 {
	n := d.readLong(path)
	if n < 0 {
		if n == math.MinInt64 {
			d.fail(path, reasonBadCount)
			return 0
		}
		n = -n
		d.readLong(path) // the block's size in bytes: only a hint for skipping
	}
	if minLen > 0 && n > int64((len(d.data)-d.pos)/minLen) {
		d.fail(path, "block of "+strconv.FormatInt(n, 10)+reasonLongInput)
		return 0
	}
	return n
}

func (d *decoder) index(path, what string, n int) int {
	i := d.readInt(path)
	if i < 0 || int(i) >= n {
		if !d.failed {
			d.fail(path, what+" index "+strconv.Itoa(int(i))+reasonIndexRange)
		}
		return -1
	}
	return int(i)
}

// grow returns s with length n, reusing its memory (and the memory of its elements)
// when it can.
func grow(s []rowcodec.Value, n int) []rowcodec.Value {
	if cap(s) < n {
		return make([]rowcodec.Value, n)
	}
	return s[:n]
}

// add appends one element to s, reusing the memory of an element an earlier value left.
func add(s []rowcodec.Value) []rowcodec.Value {
	if len(s) < cap(s) {
		return s[:len(s)+1]
	}
	return append(s, rowcodec.Value{})
}

func (d *decoder) read(p *pnode, v *rowcodec.Value) {
	switch p.op {
	case opBool:
		b := d.next(p.path, 1)
		if len(b) == 1 {
			if b[0] > 1 {
				d.fail(p.path, reasonBadBool)
			}
			v.Valid, v.Int = true, int64(b[0])
		}
	case opInt:
		v.Valid, v.Int = true, int64(d.readInt(p.path))
	case opIntMillis:
		v.Valid, v.Int = true, int64(d.readInt(p.path))*1000
	case opLong:
		v.Valid, v.Int = true, d.readLong(p.path)
	case opLongMillis:
		ms := d.readLong(p.path)
		if ms > math.MaxInt64/1000 || ms < math.MinInt64/1000 {
			d.fail(p.path, reasonTimeRange)
		}
		v.Valid, v.Int = true, ms*1000
	case opFloat:
		if b := d.next(p.path, 4); len(b) == 4 {
			v.Valid, v.Float = true, float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
	case opDouble:
		if b := d.next(p.path, 8); len(b) == 8 {
			v.Valid, v.Float = true, math.Float64frombits(binary.LittleEndian.Uint64(b))
		}
	case opBytes:
		v.Valid, v.Bytes = true, d.readBytes(p.path)
	case opString:
		b := d.readBytes(p.path)
		if !rowcodec.ValidUTF8(b) {
			d.fail(p.path, reasonBadUTF8)
		}
		v.Valid, v.Bytes = true, b
	case opFixed:
		v.Valid, v.Bytes = true, d.next(p.path, p.w.size)
	case opEnum:
		if i := d.index(p.path, "enum", len(p.w.symbols)); i >= 0 {
			v.Valid, v.Bytes = true, p.w.symbols[i]
		}
	case opUUIDString:
		d.uuid(p, d.readBytes(p.path), v)
	case opDecimalBytes:
		d.decimal(p, d.readBytes(p.path), v)
	case opDecimalFixed:
		d.decimal(p, d.next(p.path, p.w.size), v)
	case opRecord:
		elems := grow(v.Elems, p.n)
		for _, j := range p.nulls {
			elems[j].Valid = false
		}
		for i := range p.fields {
			if f := &p.fields[i]; f.slot >= 0 {
				d.read(f.p, &elems[f.slot])
			} else {
				d.skip(p.w.fields[i].node)
			}
		}
		v.Valid, v.Elems = true, elems
	case opArray:
		elems := v.Elems[:0]
		for {
			n := d.blockCount(p.path, p.w.items.minLen)
			if n == 0 {
				break
			}
			for ; n > 0; n-- {
				elems = add(elems)
				d.read(p.elem, &elems[len(elems)-1])
			}
		}
		v.Valid, v.Elems = true, elems
	case opMap:
		entries := v.Elems[:0]
		for {
			n := d.blockCount(p.path, 1+p.w.items.minLen)
			if n == 0 {
				break
			}
			for ; n > 0; n-- {
				entries = add(entries)
				e := &entries[len(entries)-1]
				kv := grow(e.Elems, 2)
				key := d.readBytes(p.keyPath)
				if !rowcodec.ValidUTF8(key) {
					d.fail(p.keyPath, reasonBadUTF8)
				}
				kv[0].Valid, kv[0].Bytes = true, key
				d.read(p.elem, &kv[1])
				e.Valid, e.Elems = true, kv
			}
		}
		v.Valid, v.Elems = true, entries
	case opUnion:
		i := d.index(p.path, "union", len(p.branches))
		if i < 0 {
			return
		}
		b := &p.branches[i]
		if b.null {
			d.skip(p.w.branches[i])
			v.Valid = false
			return
		}
		elems := grow(v.Elems, p.n)
		for j := range elems {
			elems[j].Valid = false
		}
		if b.slot >= 0 {
			d.read(b.p, &elems[b.slot])
		} else {
			d.skip(p.w.branches[i])
		}
		v.Valid, v.Elems = true, elems
	case opOptional:
		i := d.index(p.path, "union", len(p.w.branches))
		if i == p.w.single {
			d.read(p.elem, v)
			return
		}
		if i >= 0 {
			d.skip(p.w.branches[i])
		}
		v.Valid = false
	}
}

// skip reads past a value the target has no place for, checking its encoding as far as
// it must be understood to find its end.
func (d *decoder) skip(w *wnode) {
	switch w.kind {
	case wNull:
	case wBool:
		d.next(w.path, 1)
	case wInt:
		d.readInt(w.path)
	case wLong:
		d.readLong(w.path)
	case wFloat:
		d.next(w.path, 4)
	case wDouble:
		d.next(w.path, 8)
	case wBytes, wString:
		d.readBytes(w.path)
	case wFixed:
		d.next(w.path, w.size)
	case wEnum:
		d.index(w.path, "enum", len(w.symbols))
	case wRecord:
		for i := range w.fields {
			d.skip(w.fields[i].node)
		}
	case wArray:
		for {
			n := d.blockCount(w.path, w.items.minLen)
			if n == 0 {
				break
			}
			if w.items.minLen == 0 {
				continue // items of no bytes: nothing to walk
			}
			for ; n > 0; n-- {
				d.skip(w.items)
			}
		}
	case wMap:
		for {
			n := d.blockCount(w.path, 1+w.items.minLen)
			if n == 0 {
				break
			}
			for ; n > 0; n-- {
				d.readBytes(w.path)
				d.skip(w.items)
			}
		}
	case wUnion:
		if i := d.index(w.path, "union", len(w.branches)); i >= 0 {
			d.skip(w.branches[i])
		}
	}
}

var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := byte(0); i < 10; i++ {
		t['0'+i] = i
	}
	for i := byte(0); i < 6; i++ {
		t['a'+i], t['A'+i] = 10+i, 10+i
	}
	return t
}()

// uuidHex is where each byte's two hex digits start in the 8-4-4-4-12 text of a UUID.
var uuidHex = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// uuid parses the canonical text of a UUID (either case) into 16 bytes.
func (d *decoder) uuid(p *pnode, text []byte, v *rowcodec.Value) {
	if d.failed {
		return
	}
	if len(text) != 36 || text[8] != '-' || text[13] != '-' || text[18] != '-' || text[23] != '-' {
		d.fail(p.path, reasonBadUUID)
		return
	}
	start := len(d.scratch)
	for _, i := range uuidHex {
		hi, lo := hexVal[text[i]], hexVal[text[i+1]]
		if hi > 15 || lo > 15 {
			d.fail(p.path, reasonBadUUID)
			return
		}
		d.scratch = append(d.scratch, hi<<4|lo)
	}
	v.Valid, v.Bytes = true, d.scratch[start:len(d.scratch):len(d.scratch)]
}

// decimal stores the unscaled two's complement value twos, which must fit the writer's
// precision, in the form of the target's.
func (d *decoder) decimal(p *pnode, twos []byte, v *rowcodec.Value) {
	if d.failed {
		return
	}
	var ok bool
	*v, d.scratch, ok = decimalValue(twos, p.prec, p.tprec, d.scratch)
	if !ok {
		d.fail(p.path, p.tooWide)
	}
}
