package jsonfmt

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/minkhq/mink/pkg/jsonscan"
	"github.com/minkhq/mink/pkg/rowcodec"
)

// decoder decodes JSON documents into one target shape. It is not safe for concurrent use.
type decoder struct {
	root    *dec
	scratch []byte  // unescaped strings, JSON text, UUIDs of the current document
	reason  string  // the first problem with a value; parsing goes on to find syntax errors
	path    []frame // where the value being read is, for messages
	idx     []int   // map deduplication scratch
	drop    []bool
}

// frame is one step of a value's path: a property or map key, or a list index.
type frame struct {
	name  string
	key   []byte
	index int // ≥ 0 for a list element
}

// Decode reads one JSON document into v. See schemafmt.Decoder.
func (d *decoder) Decode(data []byte, v *rowcodec.Value) string {
	d.scratch = d.scratch[:0]
	d.reason = ""
	d.path = d.path[:0]
	s := jsonscan.New(data, &d.scratch)
	if !s.Start() {
		return s.Err()
	}
	if d.value(&s, d.root, v) {
		s.End()
	}
	if s.Err() != "" {
		return s.Err() // a syntax error outranks what we made of the part before it
	}
	return d.reason
}

// fail records the first problem with a value, with where it is.
func (d *decoder) fail(msg string) {
	if d.reason != "" {
		return
	}
	if len(d.path) == 0 {
		d.reason = msg
		return
	}
	var b strings.Builder
	for i, f := range d.path {
		switch {
		case f.index >= 0:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
			continue
		case i > 0:
			b.WriteByte('.')
		}
		if f.key != nil {
			b.WriteString(jsonscan.Snippet(f.key))
		} else {
			b.WriteString(f.name)
		}
	}
	d.reason = "field " + quote(b.String()) + ": " + msg
}

// quote puts s in double quotes for a message, escaping only '"', '\\' and control
// characters: unlike strconv.Quote it does not depend on Unicode tables, which change
// between Go versions, so the text stays the same in every build.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// mismatch records that the value is not what the field takes and skips it.
func (d *decoder) mismatch(s *jsonscan.Scanner, want string) bool {
	msg, ok := s.Mismatch(want)
	if ok {
		d.fail(msg)
	}
	return ok
}

// grow returns n bytes of scratch memory that stay valid until the next document.
func (d *decoder) grow(n int) []byte {
	start := len(d.scratch)
	d.scratch = append(d.scratch, make([]byte, n)...)
	return d.scratch[start : start+n : start+n]
}

// value reads one value; it returns false only on a syntax error. After the first
// problem with a value the rest is only checked.
func (d *decoder) value(s *jsonscan.Scanner, dc *dec, v *rowcodec.Value) bool {
	if d.reason != "" {
		return s.Skip()
	}
	c := s.Peek()
	if c == 'n' {
		v.Valid = false
		return s.Lit("null")
	}
	switch dc.kind {
	case kStruct:
		if c != '{' {
			return d.mismatch(s, "an object")
		}
		return d.object(s, dc, v)
	case kMap:
		if c != '{' {
			return d.mismatch(s, "an object")
		}
		return d.mapValue(s, dc, v)
	case kList:
		if c != '[' {
			return d.mismatch(s, "an array")
		}
		return d.list(s, dc, v)
	case kJSON:
		start := len(d.scratch)
		if !s.Compact() {
			return false
		}
		b := d.scratch[start:len(d.scratch):len(d.scratch)]
		if !rowcodec.ValidUTF8(b) {
			d.fail("invalid UTF-8 in " + jsonscan.Snippet(b))
			return true
		}
		*v = rowcodec.Value{Valid: true, Bytes: b}
		return true
	case kLong:
		if !jsonscan.IsNumberStart(c) {
			return d.mismatch(s, "an integer")
		}
		tok, ok := s.Number()
		if !ok {
			return false
		}
		n, msg := integer(tok)
		if msg != "" {
			d.fail(jsonscan.Snippet(tok) + " " + msg)
			return true
		}
		*v = rowcodec.Value{Valid: true, Int: n}
		return true
	case kDouble:
		if !jsonscan.IsNumberStart(c) {
			return d.mismatch(s, "a number")
		}
		tok, ok := s.Number()
		if !ok {
			return false
		}
		f, ok := jsonscan.Float(tok, 64)
		if !ok {
			d.fail(jsonscan.Snippet(tok) + " is out of range for double")
			return true
		}
		*v = rowcodec.Value{Valid: true, Float: f}
		return true
	case kBool:
		switch c {
		case 't':
			*v = rowcodec.Value{Valid: true, Int: 1}
			return s.Lit("true")
		case 'f':
			*v = rowcodec.Value{Valid: true, Int: 0}
			return s.Lit("false")
		}
		return d.mismatch(s, "a boolean")
	}
	return d.text(s, dc, v)
}

// text reads a value whose JSON form is a string.
func (d *decoder) text(s *jsonscan.Scanner, dc *dec, v *rowcodec.Value) bool {
	want := "a string"
	switch dc.kind {
	case kTimestampTz:
		want = "an RFC 3339 date-time string"
	case kDate:
		want = "a date string"
	case kTime:
		want = "a time string"
	case kUUID:
		want = "a UUID string"
	}
	if s.Peek() != '"' {
		return d.mismatch(s, want)
	}
	start := s.Pos()
	b, ok := s.Str()
	if !ok {
		return false
	}
	quoted := func() string { return jsonscan.Snippet(s.Since(start)) }
	switch dc.kind {
	case kString:
		if !rowcodec.ValidUTF8(b) {
			d.fail("invalid UTF-8 in " + quoted())
			return true
		}
		*v = rowcodec.Value{Valid: true, Bytes: b}
	case kTimestampTz:
		us, why := parseDateTime(b)
		switch why {
		case "noOffset":
			d.fail(quoted() + " has no UTC offset (want Z or ±hh:mm)")
			return true
		case "bad":
			d.fail(quoted() + " is not an RFC 3339 date-time (want YYYY-MM-DDThh:mm:ss[.ffffff] and Z or ±hh:mm)")
			return true
		}
		*v = rowcodec.Value{Valid: true, Int: us}
	case kDate:
		days, ok := parseDate(b)
		if !ok {
			d.fail(quoted() + " is not a date (want YYYY-MM-DD)")
			return true
		}
		*v = rowcodec.Value{Valid: true, Int: days}
	case kTime:
		us, ok := parseTime(b)
		if !ok {
			d.fail(quoted() + " is not a time (want hh:mm:ss[.ffffff], optionally with Z or ±hh:mm)")
			return true
		}
		*v = rowcodec.Value{Valid: true, Int: us}
	case kUUID:
		out := d.grow(16)
		if !jsonscan.ParseUUID(b, out) {
			d.fail(quoted() + " is not a UUID (want 8-4-4-4-12 hex digits)")
			return true
		}
		*v = rowcodec.Value{Valid: true, Bytes: out}
	}
	return true
}

// object reads a struct: the target's fields in target order, null unless present.
func (d *decoder) object(s *jsonscan.Scanner, dc *dec, v *rowcodec.Value) bool {
	elems := v.Elems[:cap(v.Elems)]
	if len(elems) < dc.nTarget {
		elems = append(elems, make([]rowcodec.Value, dc.nTarget-len(elems))...)
	}
	elems = elems[:dc.nTarget]
	for i := range elems {
		elems[i].Valid = false
	}
	*v = rowcodec.Value{Valid: true, Elems: elems}
	if empty, ok := s.Open(); !ok || empty {
		return ok
	}
	for {
		key, ok := s.Key()
		if !ok {
			return false
		}
		if k := dc.lookup(key); k < 0 {
			ok = s.Skip() // a property the target does not have, or unknown
		} else {
			d.path = append(d.path, frame{name: dc.keys[k], index: -1})
			ok = d.value(s, dc.kids[k], &elems[dc.index[k]])
			d.path = d.path[:len(d.path)-1]
		}
		if !ok {
			return false
		}
		if done, ok := s.Next('}'); !ok || done {
			return ok
		}
	}
}

// next returns the next element of a slice being refilled, reusing what it held.
func next(elems []rowcodec.Value) ([]rowcodec.Value, *rowcodec.Value) {
	if len(elems) < cap(elems) {
		elems = elems[:len(elems)+1]
	} else {
		elems = append(elems, rowcodec.Value{})
	}
	return elems, &elems[len(elems)-1]
}

func (d *decoder) list(s *jsonscan.Scanner, dc *dec, v *rowcodec.Value) bool {
	elems := v.Elems[:0]
	if empty, ok := s.Open(); !ok {
		return false
	} else if empty {
		*v = rowcodec.Value{Valid: true, Elems: elems}
		return true
	}
	for i := 0; ; i++ {
		var e *rowcodec.Value
		elems, e = next(elems)
		d.path = append(d.path, frame{index: i})
		ok := d.value(s, dc.elem, e)
		d.path = d.path[:len(d.path)-1]
		if !ok {
			return false
		}
		done, ok := s.Next(']')
		if !ok {
			return false
		}
		if done {
			*v = rowcodec.Value{Valid: true, Elems: elems}
			return true
		}
	}
}

// mapValue reads a map: its entries in document order; of a key given more than once the
// last value counts, as for a struct's properties.
func (d *decoder) mapValue(s *jsonscan.Scanner, dc *dec, v *rowcodec.Value) bool {
	entries := v.Elems[:0]
	*v = rowcodec.Value{Valid: true, Elems: entries}
	if empty, ok := s.Open(); !ok || empty {
		return ok
	}
	for {
		key, ok := s.Key()
		if !ok {
			return false
		}
		if rowcodec.ValidUTF8(key) {
			var e *rowcodec.Value
			entries, e = next(entries)
			kv := e.Elems[:cap(e.Elems)]
			if len(kv) < 2 {
				kv = make([]rowcodec.Value, 2)
			}
			kv = kv[:2]
			kv[0] = rowcodec.Value{Valid: true, Bytes: key}
			kv[1].Valid = false
			*e = rowcodec.Value{Valid: true, Elems: kv}
			d.path = append(d.path, frame{key: key, index: -1})
			ok = d.value(s, dc.elem, &kv[1])
			d.path = d.path[:len(d.path)-1]
		} else {
			d.fail("invalid UTF-8 in the key " + quote(string(key)))
			ok = s.Skip()
		}
		if !ok {
			return false
		}
		done, ok := s.Next('}')
		if !ok {
			return false
		}
		if done {
			if d.reason == "" {
				entries = d.dedupe(entries)
			}
			*v = rowcodec.Value{Valid: true, Elems: entries}
			return true
		}
	}
}

// dedupe drops every entry whose key a later entry has, keeping the order of the rest.
// Dropped entries move past the end, so their memory is reused.
func (d *decoder) dedupe(entries []rowcodec.Value) []rowcodec.Value {
	n := len(entries)
	if n < 2 {
		return entries
	}
	key := func(i int) []byte { return entries[i].Elems[0].Bytes }
	d.drop = slices.Grow(d.drop[:0], n)[:n]
	clear(d.drop)
	dups := false
	if n <= 8 {
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if bytes.Equal(key(i), key(j)) {
					d.drop[i], dups = true, true
					break
				}
			}
		}
	} else {
		d.idx = d.idx[:0]
		for i := 0; i < n; i++ {
			d.idx = append(d.idx, i)
		}
		// Stable: equal keys stay in document order, so the last of a run is the latest.
		slices.SortStableFunc(d.idx, func(a, b int) int { return bytes.Compare(key(a), key(b)) })
		for j := 1; j < n; j++ {
			if bytes.Equal(key(d.idx[j-1]), key(d.idx[j])) {
				d.drop[d.idx[j-1]], dups = true, true
			}
		}
	}
	if !dups {
		return entries
	}
	w := 0
	for r := 0; r < n; r++ {
		if !d.drop[r] {
			entries[w], entries[r] = entries[r], entries[w]
			w++
		}
	}
	return entries[:w]
}
