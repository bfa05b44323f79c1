package jsonfmt

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A hand-written JSON reader in the style of pkg/rowcodec's: one pass over the payload,
// strings without escapes point into it, numbers stay exact text, nothing is allocated
// per value, and every message is made of constant text and input bytes only. It accepts
// exactly RFC 8259 JSON.

// maxDepth bounds nesting so that a hostile record cannot exhaust the stack.
const maxDepth = 1000

type scanner struct {
	buf     []byte
	pos     int
	depth   int
	err     string // first syntax error; once set, parsing stops
	scratch *[]byte
}

// fail records a syntax error at the current position and returns false.
func (s *scanner) fail(want string) bool {
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

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		if c == '\'' || c == '\\' {
			return `'\` + string(c) + `'`
		}
		return "'" + string(c) + "'"
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (s *scanner) peek() byte {
	if s.pos < len(s.buf) {
		return s.buf[s.pos]
	}
	return 0
}

func (s *scanner) ws() {
	for s.pos < len(s.buf) {
		switch s.buf[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// end checks that nothing but whitespace follows the top-level value.
func (s *scanner) end() {
	s.ws()
	if s.pos < len(s.buf) {
		s.fail("want the end of the value")
	}
}

func (s *scanner) enter() bool {
	s.depth++
	if s.depth > maxDepth {
		if s.err == "" {
			s.err = fmt.Sprintf("JSON nested deeper than %d levels", maxDepth)
		}
		return false
	}
	return true
}

// kindName names the JSON kind of the value starting with c, for messages.
func kindName(c byte) string {
	switch {
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
	case isNumberStart(c):
		return "a number"
	}
	return "an invalid value"
}

func isNumberStart(c byte) bool { return c == '-' || (c >= '0' && c <= '9') }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipValue checks one value and moves past it.
func (s *scanner) skipValue() bool {
	switch c := s.peek(); {
	case c == '{':
		if !s.enter() {
			return false
		}
		s.pos++
		s.ws()
		if s.peek() == '}' {
			s.pos++
			s.depth--
			return true
		}
		for {
			s.ws()
			if s.peek() != '"' {
				return s.fail("want a string key")
			}
			if _, ok := s.str(false); !ok || !s.colon() || !s.skipValue() {
				return false
			}
			if done, ok := s.next('}'); !ok || done {
				return ok
			}
		}
	case c == '[':
		if !s.enter() {
			return false
		}
		s.pos++
		s.ws()
		if s.peek() == ']' {
			s.pos++
			s.depth--
			return true
		}
		for {
			s.ws()
			if !s.skipValue() {
				return false
			}
			if done, ok := s.next(']'); !ok || done {
				return ok
			}
		}
	case c == '"':
		_, ok := s.str(false)
		return ok
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case isNumberStart(c):
		_, ok := s.number()
		return ok
	default:
		return s.fail("want a value")
	}
}

// colon reads the ':' after an object key and the whitespace around it.
func (s *scanner) colon() bool {
	s.ws()
	if s.peek() != ':' {
		return s.fail("want : after an object key")
	}
	s.pos++
	s.ws()
	return true
}

// next reads what follows a member or element: ',' (done false) or the closing byte
// (done true, depth restored).
func (s *scanner) next(closing byte) (done, ok bool) {
	s.ws()
	switch s.peek() {
	case ',':
		s.pos++
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

func (s *scanner) lit(word string) bool {
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

// number reads a number and returns its text, which is exactly RFC 8259's grammar.
func (s *scanner) number() ([]byte, bool) {
	start := s.pos
	if s.peek() == '-' {
		s.pos++
	}
	switch c := s.peek(); {
	case c == '0':
		s.pos++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return nil, s.fail("want a digit")
	}
	if s.peek() == '.' {
		s.pos++
		if !isDigit(s.peek()) {
			return nil, s.fail("want a digit after the decimal point")
		}
		s.digits()
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.pos++
		if c := s.peek(); c == '+' || c == '-' {
			s.pos++
		}
		if !isDigit(s.peek()) {
			return nil, s.fail("want a digit in the exponent")
		}
		s.digits()
	}
	return s.buf[start:s.pos], true
}

func (s *scanner) digits() {
	for s.pos < len(s.buf) && isDigit(s.buf[s.pos]) {
		s.pos++
	}
}

// str reads a string starting at its opening quote. With decode it returns the string's
// bytes: a slice of the input when there are no escapes, else unescaped into scratch.
// Lone surrogate escapes become U+FFFD, as in encoding/json. Invalid UTF-8 is passed
// through; callers that store text check it.
func (s *scanner) str(decode bool) ([]byte, bool) {
	s.pos++ // "
	start := s.pos
	// Eight bytes at a time while none is special (", \ or a control character).
	for s.pos+8 <= len(s.buf) && !special8(binary.LittleEndian.Uint64(s.buf[s.pos:])) {
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

// special8 reports whether any byte of w is '"', '\\' or below 0x20 (SWAR: a byte is zero
// after xor with c exactly when it equals c, and "below n" is tested by subtraction).
func special8(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	hasZero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return (hasZero(w^(ones*'"')) | hasZero(w^(ones*'\\')) | ((w - ones*0x20) &^ w & highs)) != 0
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// compact checks one value and appends its JSON text to *s.scratch without insignificant
// whitespace; strings and numbers are copied exactly as written.
func (s *scanner) compact() bool {
	switch c := s.peek(); {
	case c == '{' || c == '[':
		if !s.enter() {
			return false
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.pos++
		*s.scratch = append(*s.scratch, c)
		s.ws()
		if s.peek() == closing {
			s.pos++
			s.depth--
			*s.scratch = append(*s.scratch, closing)
			return true
		}
		for {
			s.ws()
			if c == '{' {
				if s.peek() != '"' {
					return s.fail("want a string key")
				}
				if !s.compactString() || !s.colon() {
					return false
				}
				*s.scratch = append(*s.scratch, ':')
			}
			if !s.compact() {
				return false
			}
			done, ok := s.next(closing)
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
		if !s.skipValue() {
			return false
		}
		*s.scratch = append(*s.scratch, s.buf[start:s.pos]...)
		return true
	}
}

func (s *scanner) compactString() bool {
	start := s.pos
	if _, ok := s.str(false); !ok {
		return false
	}
	*s.scratch = append(*s.scratch, s.buf[start:s.pos]...)
	return true
}

// snippet is a value's JSON text for an error message, cut to a readable length.
func snippet(b []byte) string {
	const max = 40
	if len(b) <= max {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return strings.ToValidUTF8(string(b[:cut]), "\uFFFD") + "…"
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
