// Package jsonscan is the JSON reader under Mink's JSON decoders: pkg/rowcodec (tables
// with declared columns) and pkg/schemafmt/jsonfmt (JSON Schema registry tables). Both
// read a record in one pass without building a tree, so what they share is a scanner
// that the decoder drives value by value, and the conversions of JSON text to values
// that must come out the same in both.
//
// Design notes: docs/design/jsonscan.md.
package jsonscan

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds nesting so that a hostile record cannot exhaust the stack. It is
// exported for schema compilers: a type nested deeper could never be read.
const MaxDepth = 1000

// A Scanner reads one JSON document, driven by a decoder that knows what it expects.
// Its methods read the value (or the part of one) at the current position and report
// false on a syntax error, which Err keeps (the first one): the decoder then unwinds.
// Values are read without leading whitespace: Start, Open, Next and Key leave the
// position at the next token.
type Scanner struct {
	buf     []byte
	pos     int
	depth   int
	err     string // first syntax error; once set, parsing stops
	scratch *[]byte
}

// New returns a scanner of buf. Unescaped strings (Str, Key) and compacted text
// (Compact) are appended to *scratch, which the caller owns and recycles per document.
func New(buf []byte, scratch *[]byte) Scanner {
	return Scanner{buf: buf, scratch: scratch}
}

// Err returns the first syntax error, or "".
func (s *Scanner) Err() string { return s.err }

// Start skips the whitespace before the document's value and reports whether there is
// one; a document of only whitespace is a syntax error.
func (s *Scanner) Start() bool {
	s.ws()
	if s.pos >= len(s.buf) {
		s.err = "malformed JSON: empty value"
		return false
	}
	return true
}

// End checks that nothing but whitespace follows the top-level value.
func (s *Scanner) End() {
	s.ws()
	if s.pos < len(s.buf) {
		s.fail("want the end of the value")
	}
}

// Peek returns the byte at the current position, or 0 at the end: what kind of value
// comes next, for the decoder to choose how to read it.
func (s *Scanner) Peek() byte {
	if s.pos < len(s.buf) {
		return s.buf[s.pos]
	}
	return 0
}

// Pos returns the current position. With Since it gives a value's JSON text as written,
// for messages: note Pos before reading the value, then Since(start) is its text.
func (s *Scanner) Pos() int { return s.pos }

// Since returns the input from start to the current position.
func (s *Scanner) Since(start int) []byte { return s.buf[start:s.pos] }

// Kind names the JSON kind of the value at the current position, for messages: "an
// object", "an array", "a string", "a boolean", "null", "a number" or "an invalid value".
func (s *Scanner) Kind() string {
	switch c := s.Peek(); {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case IsNumberStart(c):
		return "a number"
	}
	return "an invalid value"
}

// IsNumberStart reports whether c starts a JSON number, so that a decoder can tell a
// number of the wrong kind from a syntax error before calling Number.
func IsNumberStart(c byte) bool { return c == '-' || isDigit(c) }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Mismatch skips a value that is not what the decoder takes and returns the message
// "expected <want>, got <what it is>", quoting the value's text unless it is an object
// or an array. It reports false on a syntax error in the value.
func (s *Scanner) Mismatch(want string) (string, bool) {
	start := s.pos
	k := s.Kind()
	if !s.Skip() {
		return "", false
	}
	got := k
	if k != "an object" && k != "an array" {
		got = k + " " + Snippet(s.buf[start:s.pos])
	}
	return "expected " + want + ", got " + got, true
}

// fail records a syntax error at the current position and returns false.
func (s *Scanner) fail(want string) bool {
	if s.err != "" {
		return false
	}
	if s.pos >= len(s.buf) {
		s.err = "malformed JSON: unexpected end of input, " + want
	} else {
		s.err = fmt.Sprintf("malformed JSON at byte %d: unexpected %s, %s", s.pos, describeByte(s.buf[s.pos]), want)
	}
	return false
}

// describeByte names c for a syntax error: 'x' for printable ASCII (with ' and \
// escaped, as %q writes a rune), else its hex value.
func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		if c == '\'' || c == '\\' {
			return `'\` + string(c) + `'`
		}
		return "'" + string(c) + "'"
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (s *Scanner) ws() {
	// Most records are compact: one test for the common case (whitespace is <= ' ').
	if s.pos < len(s.buf) && s.buf[s.pos] > ' ' {
		return
	}
	s.wsLoop()
}

// wsLoop is the rest of ws, kept out of line so that ws stays small where it is inlined.
//
//go:noinline
func (s *Scanner) wsLoop() {
	for s.pos < len(s.buf) {
		switch s.buf[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// tooDeep records that the document nests deeper than MaxDepth.
func (s *Scanner) tooDeep() bool {
	if s.err == "" {
		s.err = fmt.Sprintf("JSON nested deeper than %d levels", MaxDepth)
	}
	return false
}

// Open reads the '{' or '[' at the current position (which the caller has checked) and
// the whitespace after it, and reports whether the object or array is empty, in which
// case its closing byte is read too. Otherwise the caller reads members (Key, then the
// value) or elements, each followed by Next.
func (s *Scanner) Open() (empty, ok bool) {
	s.depth++
	if s.depth > MaxDepth {
		return false, s.tooDeep()
	}
	closing := s.buf[s.pos] + 2 // '{'+2 is '}', '['+2 is ']'
	s.pos++
	s.ws()
	if s.Peek() == closing {
		s.pos++
		s.depth--
		return true, true
	}
	return false, true
}

// Key reads an object member's key, unescaped, and the ':' after it with the whitespace
// around it. The key is valid until the scratch memory is recycled; it is not checked
// for valid UTF-8.
func (s *Scanner) Key() ([]byte, bool) {
	if s.Peek() != '"' {
		return nil, s.fail("want a string key")
	}
	key, ok := s.str(true)
	if !ok {
		return nil, false
	}
	// colon, written out: a key is read per member, and this saves a call.
	s.ws()
	if s.Peek() != ':' {
		return nil, s.fail("want : after an object key")
	}
	s.pos++
	s.ws()
	return key, true
}

// Next reads what follows a member or element: ',' and the whitespace after it (done
// false), or the closing byte (done true), '}' for an object and ']' for an array.
func (s *Scanner) Next(closing byte) (done, ok bool) {
	s.ws()
	switch s.Peek() {
	case ',':
		s.pos++
		s.ws()
		return false, true
	case closing:
		s.pos++
		s.depth--
		return true, true
	}
	if closing == '}' {
		return false, s.fail("want , or } in an object")
	}
	return false, s.fail("want , or ] in an array")
}

// colon reads the ':' after an object key and the whitespace around it.
func (s *Scanner) colon() bool {
	s.ws()
	if s.Peek() != ':' {
		return s.fail("want : after an object key")
	}
	s.pos++
	s.ws()
	return true
}

// Skip checks one value and moves past it.
func (s *Scanner) Skip() bool {
	switch c := s.Peek(); {
	case c == '{':
		if empty, ok := s.Open(); !ok || empty {
			return ok
		}
		for {
			if s.Peek() != '"' {
				return s.fail("want a string key")
			}
			if _, ok := s.str(false); !ok || !s.colon() || !s.Skip() {
				return false
			}
			if done, ok := s.Next('}'); !ok || done {
				return ok
			}
		}
	case c == '[':
		if empty, ok := s.Open(); !ok || empty {
			return ok
		}
		for {
			if !s.Skip() {
				return false
			}
			if done, ok := s.Next(']'); !ok || done {
				return ok
			}
		}
	case c == '"':
		_, ok := s.str(false)
		return ok
	case c == 't':
		return s.Lit("true")
	case c == 'f':
		return s.Lit("false")
	case c == 'n':
		return s.Lit("null")
	case IsNumberStart(c):
		_, ok := s.Number()
		return ok
	default:
		return s.fail("want a value")
	}
}

// Lit reads the literal word (true, false or null); a decoder calls it once Peek has
// told it which one should be there.
func (s *Scanner) Lit(word string) bool {
	if len(s.buf)-s.pos >= len(word) && string(s.buf[s.pos:s.pos+len(word)]) == word {
		s.pos += len(word)
		return true
	}
	// Point at the first byte that differs.
	for i := 0; i < len(word) && s.pos < len(s.buf) && s.buf[s.pos] == word[i]; i++ {
		s.pos++
	}
	return s.fail("want " + word)
}

// Number reads a number and returns its text, which is exactly RFC 8259's grammar: the
// conversions below (Integer, SplitNumber, Float) take it as it is.
func (s *Scanner) Number() ([]byte, bool) {
	start := s.pos
	if s.Peek() == '-' {
		s.pos++
	}
	switch c := s.Peek(); {
	case c == '0':
		s.pos++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return nil, s.fail("want a digit")
	}
	if s.Peek() == '.' {
		s.pos++
		if !isDigit(s.Peek()) {
			return nil, s.fail("want a digit after the decimal point")
		}
		s.digits()
	}
	if c := s.Peek(); c == 'e' || c == 'E' {
		s.pos++
		if c := s.Peek(); c == '+' || c == '-' {
			s.pos++
		}
		if !isDigit(s.Peek()) {
			return nil, s.fail("want a digit in the exponent")
		}
		s.digits()
	}
	return s.buf[start:s.pos], true
}

func (s *Scanner) digits() {
	for s.pos < len(s.buf) && isDigit(s.buf[s.pos]) {
		s.pos++
	}
}

// Str reads a string and returns its bytes: a slice of the input when it has no
// escapes, else unescaped into the scratch memory. Lone surrogate escapes become U+FFFD,
// as in encoding/json. Invalid UTF-8 is passed through; callers that store text check it.
func (s *Scanner) Str() ([]byte, bool) { return s.str(true) }

// str reads a string starting at its opening quote; without decode it only checks it.
func (s *Scanner) str(decode bool) ([]byte, bool) {
	s.pos++ // "
	start := s.pos
	// Eight bytes at a time while none is special (", \ or a control character), then
	// straight to the first special one.
	for s.pos+8 <= len(s.buf) {
		if m := special8Mask(binary.LittleEndian.Uint64(s.buf[s.pos:])); m != 0 {
			s.pos += bits.TrailingZeros64(m) >> 3
			break
		}
		s.pos += 8
	}
	for s.pos < len(s.buf) {
		c := s.buf[s.pos]
		if c == '"' {
			s.pos++
			return s.buf[start : s.pos-1], true
		}
		if c == '\\' || c < 0x20 {
			break
		}
		s.pos++
	}
	var out []byte
	mark := 0
	if decode {
		mark = len(*s.scratch)
		out = append(*s.scratch, s.buf[start:s.pos]...)
	}
	for {
		if s.pos >= len(s.buf) {
			return nil, s.fail("want the end of a string")
		}
		c := s.buf[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !decode {
				return nil, true
			}
			*s.scratch = out
			return out[mark:], true
		case c < 0x20:
			return nil, s.fail("control characters in a string must be escaped")
		case c != '\\':
			if decode {
				out = append(out, c)
			}
			s.pos++
			continue
		}
		if s.pos+1 >= len(s.buf) {
			s.pos++
			return nil, s.fail("want an escape")
		}
		var b byte
		switch s.buf[s.pos+1] {
		case '"', '\\', '/':
			b = s.buf[s.pos+1]
		case 'b':
			b = '\b'
		case 'f':
			b = '\f'
		case 'n':
			b = '\n'
		case 'r':
			b = '\r'
		case 't':
			b = '\t'
		case 'u':
			r, ok := hex4(s.buf, s.pos+2)
			if !ok {
				s.pos += 2
				return nil, s.fail("want 4 hex digits after \\u")
			}
			s.pos += 6
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(0), false
				if s.pos+1 < len(s.buf) && s.buf[s.pos] == '\\' && s.buf[s.pos+1] == 'u' {
					if r2, ok2 = hex4(s.buf, s.pos+2); !ok2 {
						s.pos += 2
						return nil, s.fail("want 4 hex digits after \\u")
					}
				}
				if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
					r = dec
					s.pos += 6
				} else {
					r = utf8.RuneError
				}
			}
			if decode {
				out = utf8.AppendRune(out, r)
			}
			continue
		default:
			s.pos++
			return nil, s.fail("want an escape (one of \"\\/bfnrtu)")
		}
		if decode {
			out = append(out, b)
		}
		s.pos += 2
	}
}

// Special8 reports whether any byte of w is '"', '\\' or below 0x20: the eight bytes at
// a time test of Str's fast path (SWAR: a byte is zero after xor with c exactly when it
// equals c, and "below n" is tested by subtraction). It is exported only because
// pkg/rowcodec's test of it against a byte loop predates this package.
func Special8(w uint64) bool { return special8Mask(w) != 0 }

// special8Mask has the high bit set of the first byte of w (little-endian) that is '"',
// '\\' or below 0x20, and maybe of later bytes: a borrow only ever runs from a flagged
// byte to the bytes above it, so the lowest set bit is exact.
func special8Mask(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	hasZero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return hasZero(w^(ones*'"')) | hasZero(w^(ones*'\\')) | ((w - ones*0x20) &^ w & highs)
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		v := unhexTable[c]
		if v == 0xff {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// Compact checks one value and appends its JSON text to the scratch memory without
// insignificant whitespace; strings and numbers are copied exactly as written, so the
// text is deterministic. jsonfmt stores values of no fixed shape this way.
func (s *Scanner) Compact() bool {
	switch c := s.Peek(); {
	case c == '{' || c == '[':
		closing := c + 2
		empty, ok := s.Open()
		if !ok {
			return false
		}
		*s.scratch = append(*s.scratch, c)
		if empty {
			*s.scratch = append(*s.scratch, closing)
			return true
		}
		for {
			if c == '{' {
				if s.Peek() != '"' {
					return s.fail("want a string key")
				}
				if !s.compactString() || !s.colon() {
					return false
				}
				*s.scratch = append(*s.scratch, ':')
			}
			if !s.Compact() {
				return false
			}
			done, ok := s.Next(closing)
			if !ok {
				return false
			}
			if done {
				*s.scratch = append(*s.scratch, closing)
				return true
			}
			*s.scratch = append(*s.scratch, ',')
		}
	case c == '"':
		return s.compactString()
	default:
		start := s.pos
		if !s.Skip() {
			return false
		}
		*s.scratch = append(*s.scratch, s.buf[start:s.pos]...)
		return true
	}
}

func (s *Scanner) compactString() bool {
	start := s.pos
	if _, ok := s.str(false); !ok {
		return false
	}
	*s.scratch = append(*s.scratch, s.buf[start:s.pos]...)
	return true
}
