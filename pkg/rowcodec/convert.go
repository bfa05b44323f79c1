package rowcodec

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// scalar decodes one non-null primitive value of column c; it returns false only on a
// syntax error. A value of the wrong kind or out of range is recorded with valueError.
func (d *Decoder) scalar(s *scanner, c *column, elem int, v *Value) bool {
	switch c.kind {
	case kBool:
		switch s.peek() {
		case 't':
			*v = Value{Valid: true, Int: 1}
			return s.lit("true")
		case 'f':
			*v = Value{Valid: true, Int: 0}
			return s.lit("false")
		}
		return d.mismatch(s, c, elem, "a boolean")

	case kInt, kLong:
		if !isNumberStart(s.peek()) {
			return d.mismatch(s, c, elem, "a number")
		}
		tok, ok := s.number()
		if !ok {
			return false
		}
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if c.kind == kInt {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		n, msg := integer(tok, lo, hi)
		if msg != "" {
			d.valueError(c, elem, fmt.Sprintf("%s %s for %s", tok, msg, c.typeName))
			return true
		}
		*v = Value{Valid: true, Int: n}

	case kFloat, kDouble:
		if !isNumberStart(s.peek()) {
			return d.mismatch(s, c, elem, "a number")
		}
		tok, ok := s.number()
		if !ok {
			return false
		}
		size := 64
		if c.kind == kFloat {
			size = 32
		}
		// The token is valid JSON, so the only possible error is overflow to ±Inf;
		// underflow rounds to zero like any other rounding.
		f, err := strconv.ParseFloat(unsafeString(tok), size)
		if err != nil || math.IsInf(f, 0) {
			d.valueError(c, elem, fmt.Sprintf("%s is out of range for %s", tok, c.typeName))
			return true
		}
		*v = Value{Valid: true, Float: f}

	case kDecimal:
		var tok []byte
		switch p := s.peek(); {
		case isNumberStart(p):
			t, ok := s.number()
			if !ok {
				return false
			}
			tok = t
		case p == '"':
			start := s.pos
			t, ok := s.str(true)
			if !ok {
				return false
			}
			if !validNumber(t) {
				d.valueError(c, elem, fmt.Sprintf("%s is not a decimal number", snippet(s.buf[start:s.pos])))
				return true
			}
			tok = t
		default:
			return d.mismatch(s, c, elem, "a number or a numeric string")
		}
		val, msg := d.decimal(tok, c)
		if msg != "" {
			d.valueError(c, elem, fmt.Sprintf("%s %s", snippet(tok), msg))
			return true
		}
		*v = val

	case kTimestamp, kTimestampTz:
		if isNumberStart(s.peek()) {
			tok, ok := s.number()
			if !ok {
				return false
			}
			// Epoch milliseconds, as Kafka and most producers write them.
			ms, msg := integer(tok, math.MinInt64/1000, math.MaxInt64/1000)
			if msg != "" {
				d.valueError(c, elem, fmt.Sprintf("%s %s as epoch milliseconds", tok, msg))
				return true
			}
			*v = Value{Valid: true, Int: ms * 1000}
			return true
		}
		return d.text(s, c, elem, v, "an RFC 3339 timestamp string or epoch milliseconds")

	case kString, kBinary, kUUID, kDate, kTime:
		return d.text(s, c, elem, v, "a string")
	}
	return true
}

// text decodes a column whose JSON form is a string.
func (d *Decoder) text(s *scanner, c *column, elem int, v *Value, want string) bool {
	if s.peek() != '"' {
		return d.mismatch(s, c, elem, want)
	}
	start := s.pos
	b, ok := s.str(true)
	if !ok {
		return false
	}
	quoted := func() string { return snippet(s.buf[start:s.pos]) }
	switch c.kind {
	case kString:
		if !utf8.Valid(b) {
			d.valueError(c, elem, "invalid UTF-8 in "+quoted())
			return true
		}
		*v = Value{Valid: true, Bytes: b}

	case kBinary:
		out := d.grow(base64.StdEncoding.DecodedLen(len(b)))
		n, err := base64.StdEncoding.Decode(out, b)
		if err != nil {
			d.valueError(c, elem, quoted()+" is not valid base64")
			return true
		}
		*v = Value{Valid: true, Bytes: out[:n]}

	case kUUID:
		out := d.grow(16)
		if !parseUUID(b, out) {
			d.valueError(c, elem, quoted()+" is not a UUID (want 8-4-4-4-12 hex digits)")
			return true
		}
		*v = Value{Valid: true, Bytes: out}

	case kDate:
		t, err := time.Parse("2006-01-02", unsafeString(b))
		if err != nil {
			d.valueError(c, elem, quoted()+" is not a date (want YYYY-MM-DD)")
			return true
		}
		*v = Value{Valid: true, Int: t.Unix() / 86400} // midnight UTC: exact

	case kTime:
		t, err := time.Parse("15:04:05.999999999", unsafeString(b))
		if err != nil {
			d.valueError(c, elem, quoted()+" is not a time (want hh:mm:ss[.ffffff])")
			return true
		}
		*v = Value{Valid: true, Int: int64(t.Hour())*3_600_000_000 + int64(t.Minute())*60_000_000 +
			int64(t.Second())*1_000_000 + int64(t.Nanosecond()/1000)}

	case kTimestamp, kTimestampTz:
		str := unsafeString(b)
		t, err := time.Parse(time.RFC3339Nano, str)
		if err != nil {
			// A timestamp without zone is a wall-clock time: take it as written. A
			// timestamptz is an instant and needs the offset.
			local, lerr := time.Parse("2006-01-02T15:04:05.999999999", str)
			switch {
			case lerr == nil && c.kind == kTimestamp:
				t = local
			case lerr == nil:
				d.valueError(c, elem, quoted()+" has no UTC offset (want Z or ±hh:mm)")
				return true
			default:
				d.valueError(c, elem, quoted()+" is not an RFC 3339 timestamp")
				return true
			}
		}
		// UnixMicro floors sub-microsecond digits; years 0000-9999 always fit.
		*v = Value{Valid: true, Int: t.UnixMicro()}
	}
	return true
}

// grow returns n bytes of scratch memory that stay valid until the next record.
func (d *Decoder) grow(n int) []byte {
	start := len(d.scratch)
	d.scratch = append(d.scratch, make([]byte, n)...)
	return d.scratch[start : start+n : start+n]
}

func isNumberStart(c byte) bool { return c == '-' || (c >= '0' && c <= '9') }

// validNumber reports whether b is exactly a JSON number.
func validNumber(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	s := scanner{buf: b}
	if _, ok := s.number(); !ok {
		return false
	}
	return s.pos == len(b)
}

// unsafeString views b as a string for a call that only reads it and keeps nothing,
// which saves an allocation per value on the hot path.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// decNum is a JSON number as sign, significant digits and a power of ten: the value is
// ±digits × 10^exp, exactly.
type decNum struct {
	neg    bool
	digits []byte // no leading zeros; empty means zero
	exp    int64
}

// maxExp caps exponents while parsing; anything beyond is out of every range we have.
const maxExp = 1 << 30

// parseNumber splits a valid JSON number (RFC 8259 grammar) into its parts.
// The digits are written to buf, which is returned for reuse.
func parseNumber(tok []byte, buf []byte) (decNum, []byte) {
	var n decNum
	i := 0
	if tok[0] == '-' {
		n.neg = true
		i++
	}
	buf = buf[:0]
	for ; i < len(tok) && isDigit(tok[i]); i++ {
		if len(buf) > 0 || tok[i] != '0' {
			buf = append(buf, tok[i])
		}
	}
	if i < len(tok) && tok[i] == '.' {
		for i++; i < len(tok) && isDigit(tok[i]); i++ {
			if len(buf) > 0 || tok[i] != '0' {
				buf = append(buf, tok[i])
			}
			n.exp--
		}
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		eneg := false
		if tok[i] == '+' || tok[i] == '-' {
			eneg = tok[i] == '-'
			i++
		}
		var e int64
		for ; i < len(tok); i++ {
			if e < maxExp {
				e = e*10 + int64(tok[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		n.exp += e
	}
	// Trailing zeros move into the exponent so that 1.50 and 15e-1 are the same number.
	for len(buf) > 0 && buf[len(buf)-1] == '0' {
		buf = buf[:len(buf)-1]
		n.exp++
	}
	n.digits = buf
	return n, buf
}

// integer converts a JSON number to an integer in [lo, hi], exactly: 1e3 and 10.0 are
// integers, 1.5 is not. It returns a message fragment when it cannot.
func integer(tok []byte, lo, hi int64) (int64, string) {
	// Fast path: plain digits, the common case.
	neg := tok[0] == '-'
	digits := tok
	if neg {
		digits = tok[1:]
	}
	plain := len(digits) <= 18
	for _, c := range digits {
		if !isDigit(c) {
			plain = false
			break
		}
	}
	var mag uint64
	if plain {
		for _, c := range digits {
			mag = mag*10 + uint64(c-'0')
		}
	} else {
		var buf [64]byte
		n, _ := parseNumber(tok, buf[:0])
		if len(n.digits) == 0 {
			return 0, ""
		}
		if n.exp < 0 {
			return 0, "is not an integer"
		}
		if int64(len(n.digits))+n.exp > 19 {
			return 0, "is out of range"
		}
		// At most 19 digits in all: below 10^19 < 2^64, so nothing overflows here.
		for _, c := range n.digits {
			mag = mag*10 + uint64(c-'0')
		}
		for e := n.exp; e > 0; e-- {
			mag *= 10
		}
	}
	var v int64
	switch {
	case !neg && mag <= math.MaxInt64:
		v = int64(mag)
	case neg && mag <= 1<<63:
		v = int64(-mag) // -(1<<63) wraps to MinInt64, which is right
	default:
		return 0, "is out of range"
	}
	if v < lo || v > hi {
		return 0, "is out of range"
	}
	return v, ""
}

// decimal converts a JSON number to column c's decimal exactly: no rounding; a value
// with more fractional digits than the scale, or too many digits, is an error.
func (d *Decoder) decimal(tok []byte, c *column) (Value, string) {
	var buf [48]byte
	n, _ := parseNumber(tok, buf[:0])
	if len(n.digits) == 0 {
		return d.decimalValue(c, false, 0, 0), ""
	}
	shift := n.exp + int64(c.scale) // unscaled = digits × 10^shift
	if shift < 0 {
		return Value{}, fmt.Sprintf("has more than %d digits after the point for %s", c.scale, c.typeName)
	}
	if int64(len(n.digits))+shift > int64(c.prec) {
		return Value{}, "is out of range for " + c.typeName
	}
	// At most 38 digits: exact in 128 bits.
	var hi, lo uint64
	mul10 := func() {
		h1, l1 := bits.Mul64(lo, 10)
		hi = hi*10 + h1
		lo = l1
	}
	for _, ch := range n.digits {
		mul10()
		var carry uint64
		lo, carry = bits.Add64(lo, uint64(ch-'0'), 0)
		hi += carry
	}
	for e := shift; e > 0; e-- {
		mul10()
	}
	return d.decimalValue(c, n.neg, hi, lo), ""
}

// decimalValue stores an unscaled magnitude (hi:lo) with its sign in the column's form.
func (d *Decoder) decimalValue(c *column, neg bool, hi, lo uint64) Value {
	if neg { // two's complement of the 128-bit magnitude
		lo, hi = ^lo, ^hi
		var carry uint64
		lo, carry = bits.Add64(lo, 1, 0)
		hi += carry
	}
	if c.fixedLen == 0 {
		return Value{Valid: true, Int: int64(lo)} // ≤ 18 digits: fits, sign included
	}
	var be [16]byte
	for i := 0; i < 8; i++ {
		be[i] = byte(hi >> (56 - 8*i))
		be[8+i] = byte(lo >> (56 - 8*i))
	}
	out := d.grow(c.fixedLen)
	copy(out, be[16-c.fixedLen:]) // the value fits fixedLen bytes, so the rest is sign
	return Value{Valid: true, Bytes: out}
}

// parseUUID parses the canonical 8-4-4-4-12 form (either case) into out.
func parseUUID(b []byte, out []byte) bool {
	if len(b) != 36 || b[8] != '-' || b[13] != '-' || b[18] != '-' || b[23] != '-' {
		return false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		h, ok1 := unhex(b[i])
		l, ok2 := unhex(b[i+1])
		if !ok1 || !ok2 {
			return false
		}
		out[j] = h<<4 | l
		j++
		i += 2
	}
	return true
}

func unhex(c byte) (byte, bool) {
	v := unhexTable[c]
	return v, v != 0xff
}

// unhexTable maps a hex digit to its value and anything else to 0xff.
var unhexTable = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
		t[c-'a'+'A'] = byte(c-'a') + 10
	}
	return t
}()
