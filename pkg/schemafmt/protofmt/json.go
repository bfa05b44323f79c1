package protofmt

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The JSON of google.protobuf.Struct, Value, ListValue and Any is written here rather
// than by protojson, which varies its whitespace on purpose. The form is fixed: no
// whitespace; object keys sorted bytewise (the last of equal keys wins, as in a map);
// numbers in the shortest form that round-trips, as encoding/json writes them; NaN and
// ±Inf as the strings "NaN", "Infinity", "-Infinity"; a Value with no kind set as null;
// strings escaped as encoding/json does without HTML escaping (", \, control
// characters, U+2028 and U+2029), so that the output is what encoding/json would write
// for the same JSON value with sorted keys. Any is
// {"@type":type_url,"value":base64 of value} with padded standard base64.

// maxJSONDepth bounds the nesting of Struct, Value and ListValue messages in one value
// (each message is a level), so that hostile input cannot exhaust the stack.
const maxJSONDepth = 1000

// kv is one Struct entry: its key and its Value's payload.
type kv struct {
	key, val []byte
}

// structJSON appends google.protobuf.Struct payload b as a JSON object to d.buf.
func (d *decoder) structJSON(p *valPlan, b []byte, depth int) string {
	if depth > maxJSONDepth {
		return p.badDepth
	}
	base := len(d.kvs)
	defer func() { d.kvs = d.kvs[:base] }()
	for len(b) > 0 {
		num, wt, n, ok := tag(b)
		if !ok {
			return p.bad
		}
		b = b[n:]
		if num != 1 || wt != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
				return p.bad
			}
			b = b[n:]
			continue
		}
		entry, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return p.bad
		}
		b = b[n:]
		var e kv
		sawVal := false
		for len(entry) > 0 {
			num, wt, n, ok := tag(entry)
			if !ok {
				return p.bad
			}
			entry = entry[n:]
			if (num == 1 || num == 2) && wt == protowire.BytesType {
				s, n := protowire.ConsumeBytes(entry)
				if n < 0 {
					return p.bad
				}
				if num == 1 {
					e.key = s
				} else {
					if sawVal {
						return errDup // the Value messages merge
					}
					e.val, sawVal = s, true
				}
				entry = entry[n:]
				continue
			}
			if n = protowire.ConsumeFieldValue(num, wt, entry); n < 0 {
				return p.bad
			}
			entry = entry[n:]
		}
		if !utf8.Valid(e.key) {
			return p.badUTF8
		}
		d.kvs = append(d.kvs, e)
	}

	es := d.kvs[base:]
	cmp := func(a, b kv) int { return bytes.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(es, cmp) {
		slices.SortStableFunc(es, cmp)
	}
	// Values replaced by a later entry of the same key are still checked, as a parser
	// would.
	for i := base; i+1 < len(d.kvs); i++ {
		if e := d.kvs[i]; bytes.Equal(e.key, d.kvs[i+1].key) {
			mark := len(d.buf)
			if r := d.valueJSON(p, e.val, depth+1); r != "" {
				return r
			}
			d.buf = d.buf[:mark]
		}
	}
	es = d.kvs[base:]
	w := 0
	for i := range es {
		if i+1 < len(es) && bytes.Equal(es[i].key, es[i+1].key) {
			continue // a later entry has the same key
		}
		es[w] = es[i]
		w++
	}
	d.kvs = d.kvs[:base+w]

	d.buf = append(d.buf, '{')
	for i := 0; i < w; i++ {
		e := d.kvs[base+i] // d.kvs may move as nested Structs use it
		if i > 0 {
			d.buf = append(d.buf, ',')
		}
		d.buf = appendJSONString(d.buf, e.key)
		d.buf = append(d.buf, ':')
		if r := d.valueJSON(p, e.val, depth+1); r != "" {
			return r
		}
	}
	d.buf = append(d.buf, '}')
	return ""
}

// valueJSON appends google.protobuf.Value payload b as JSON to d.buf.
func (d *decoder) valueJSON(p *valPlan, b []byte, depth int) string {
	if depth > maxJSONDepth {
		return p.badDepth
	}
	// The kind is a oneof: the last one on the wire wins.
	var kind protowire.Number
	var x uint64
	var s []byte
	for len(b) > 0 {
		num, wt, n, ok := tag(b)
		if !ok {
			return p.bad
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 4) && wt == protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case num == 2 && wt == protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case (num == 3 || num == 5 || num == 6) && wt == protowire.BytesType:
			if num != 3 && kind == num {
				return errDup // the Struct or ListValue messages merge
			}
			s, n = protowire.ConsumeBytes(b)
		default:
			if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
				return p.bad
			}
			b = b[n:]
			continue
		}
		if n < 0 {
			return p.bad
		}
		kind = num
		b = b[n:]
	}
	switch kind {
	case 0, 1:
		d.buf = append(d.buf, "null"...)
	case 2:
		d.buf = appendJSONNumber(d.buf, math.Float64frombits(x))
	case 3:
		if !utf8.Valid(s) {
			return p.badUTF8
		}
		d.buf = appendJSONString(d.buf, s)
	case 4:
		d.buf = strconv.AppendBool(d.buf, x != 0)
	case 5:
		return d.structJSON(p, s, depth+1)
	case 6:
		return d.listJSON(p, s, depth+1)
	}
	return ""
}

// listJSON appends google.protobuf.ListValue payload b as a JSON array to d.buf.
func (d *decoder) listJSON(p *valPlan, b []byte, depth int) string {
	if depth > maxJSONDepth {
		return p.badDepth
	}
	d.buf = append(d.buf, '[')
	first := true
	for len(b) > 0 {
		num, wt, n, ok := tag(b)
		if !ok {
			return p.bad
		}
		b = b[n:]
		if num != 1 || wt != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
				return p.bad
			}
			b = b[n:]
			continue
		}
		s, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return p.bad
		}
		b = b[n:]
		if !first {
			d.buf = append(d.buf, ',')
		}
		first = false
		if r := d.valueJSON(p, s, depth+1); r != "" {
			return r
		}
	}
	d.buf = append(d.buf, ']')
	return ""
}

// anyJSON appends google.protobuf.Any payload b to d.buf as
// {"@type":type_url,"value":base64}; the packed message is not expanded, as its type
// need not be known.
func (d *decoder) anyJSON(p *valPlan, b []byte) string {
	var url, val []byte
	for len(b) > 0 {
		num, wt, n, ok := tag(b)
		if !ok {
			return p.bad
		}
		b = b[n:]
		if (num == 1 || num == 2) && wt == protowire.BytesType {
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return p.bad
			}
			if num == 1 {
				url = s
			} else {
				val = s
			}
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
			return p.bad
		}
		b = b[n:]
	}
	if !utf8.Valid(url) {
		return p.badUTF8
	}
	d.buf = append(d.buf, `{"@type":`...)
	d.buf = appendJSONString(d.buf, url)
	d.buf = append(d.buf, `,"value":"`...)
	d.buf = base64.StdEncoding.AppendEncode(d.buf, val)
	d.buf = append(d.buf, `"}`...)
	return ""
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s, valid UTF-8, as a JSON string.
func appendJSONString(b, s []byte) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xa8 {
			// U+2028 and U+2029, which JavaScript does not allow in strings.
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&1+8])
			i += 2
			start = i + 1
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONNumber appends f in the shortest form that reads back as f, as
// encoding/json does; NaN and ±Inf, which JSON lacks, as strings.
func appendJSONNumber(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 → 1e-7, as encoding/json writes it.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
