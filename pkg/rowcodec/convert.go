package rowcodec

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/bits"
	"time"
	"unsafe"

	"github.com/minkhq/mink/pkg/jsonscan"
)

// scalar decodes one non-null primitive value of column c; it returns false only on a
// syntax error. A value of the wrong kind or out of range is recorded with valueError.
func (d *Decoder) scalar(s *jsonscan.Scanner, c *column, elem int, v *Value) bool {
	switch c.kind {
	case kBool:
		switch s.Peek() {
		case 't':
			*v = Value{Valid: true, Int: 1}
			return s.Lit("true")
		case 'f':
			*v = Value{Valid: true, Int: 0}
			return s.Lit("false")
		}
		return d.mismatch(s, c, elem, "a boolean")

	case kInt, kLong:
		if !jsonscan.IsNumberStart(s.Peek()) {
			return d.mismatch(s, c, elem, "a number")
		}
		tok, ok := s.Number()
		if !ok {
			return false
		}
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if c.kind == kInt {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		n, msg := jsonscan.Integer(tok, lo, hi)
		if msg != "" {
			d.valueError(c, elem, fmt.Sprintf("%s %s for %s", tok, msg, c.typeName))
			return true
		}
		*v = Value{Valid: true, Int: n}

	case kFloat, kDouble:
		if !jsonscan.IsNumberStart(s.Peek()) {
			return d.mismatch(s, c, elem, "a number")
		}
		tok, ok := s.Number()
		if !ok {
			return false
		}
		size := 64
		if c.kind == kFloat {
			size = 32
		}
		f, ok := jsonscan.Float(tok, size)
		if !ok {
			d.valueError(c, elem, fmt.Sprintf("%s is out of range for %s", tok, c.typeName))
			return true
		}
		*v = Value{Valid: true, Float: f}

	case kDecimal:
		var tok []byte
		switch p := s.Peek(); {
		case jsonscan.IsNumberStart(p):
			t, ok := s.Number()
			if !ok {
				return false
			}
			tok = t
		case p == '"':
			start := s.Pos()
			t, ok := s.Str()
			if !ok {
				return false
			}
			if !jsonscan.ValidNumber(t) {
				d.valueError(c, elem, fmt.Sprintf("%s is not a decimal number", jsonscan.Snippet(s.Since(start))))
				return true
			}
			tok = t
		default:
			return d.mismatch(s, c, elem, "a number or a numeric string")
		}
		val, msg := d.decimal(tok, c)
		if msg != "" {
			d.valueError(c, elem, fmt.Sprintf("%s %s", jsonscan.Snippet(tok), msg))
			return true
		}
		*v = val

	case kTimestamp, kTimestampTz:
		if jsonscan.IsNumberStart(s.Peek()) {
			tok, ok := s.Number()
			if !ok {
				return false
			}
			// Epoch milliseconds, as Kafka and most producers write them.
			ms, msg := jsonscan.Integer(tok, math.MinInt64/1000, math.MaxInt64/1000)
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
func (d *Decoder) text(s *jsonscan.Scanner, c *column, elem int, v *Value, want string) bool {
	if s.Peek() != '"' {
		return d.mismatch(s, c, elem, want)
	}
	start := s.Pos()
	b, ok := s.Str()
	if !ok {
		return false
	}
	quoted := func() string { return jsonscan.Snippet(s.Since(start)) }
	switch c.kind {
	case kString:
		if !ValidUTF8(b) {
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
		if !jsonscan.ParseUUID(b, out) {
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
		us, zone, ok := parseTimestamp(b)
		if !ok || (!zone && c.kind == kTimestampTz) {
			// What the strict form leaves out, and every error, as time.Parse reads it.
			var msg string
			if us, msg = parseTimestampSlow(b, c.kind == kTimestampTz); msg != "" {
				d.valueError(c, elem, quoted()+msg)
				return true
			}
		}
		*v = Value{Valid: true, Int: us}
	}
	return true
}

// parseTimestampSlow reads b with time.Parse as RFC 3339 or, without zone, as a
// wall-clock time (refused when tz: a timestamptz is an instant and needs the offset).
// It returns µs since 1970-01-01 UTC, or the message's end after the quoted value.
func parseTimestampSlow(b []byte, tz bool) (int64, string) {
	str := unsafeString(b)
	t, err := time.Parse(time.RFC3339Nano, str)
	if err != nil {
		local, lerr := time.Parse("2006-01-02T15:04:05.999999999", str)
		switch {
		case lerr == nil && !tz:
			t = local
		case lerr == nil:
			return 0, " has no UTC offset (want Z or ±hh:mm)"
		default:
			return 0, " is not an RFC 3339 timestamp"
		}
	}
	// UnixMicro floors sub-microsecond digits; years 0000-9999 always fit.
	return t.UnixMicro(), ""
}

// grow returns n bytes of scratch memory that stay valid until the next record.
func (d *Decoder) grow(n int) []byte {
	start := len(d.scratch)
	d.scratch = append(d.scratch, make([]byte, n)...)
	return d.scratch[start : start+n : start+n]
}

// unsafeString views b as a string for a call that only reads it and keeps nothing,
// which saves an allocation per value on the hot path.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// decimal converts a JSON number to column c's decimal exactly: no rounding; a value
// with more fractional digits than the scale, or too many digits, is an error.
func (d *Decoder) decimal(tok []byte, c *column) (Value, string) {
	var buf [48]byte
	n := jsonscan.SplitNumber(tok, buf[:0])
	if len(n.Digits) == 0 {
		return d.decimalValue(c, false, 0, 0), ""
	}
	shift := n.Exp + int64(c.scale) // unscaled = digits × 10^shift
	if shift < 0 {
		return Value{}, fmt.Sprintf("has more than %d digits after the point for %s", c.scale, c.typeName)
	}
	if int64(len(n.Digits))+shift > int64(c.prec) {
		return Value{}, "is out of range for " + c.typeName
	}
	// At most 38 digits: exact in 128 bits.
	var hi, lo uint64
	mul10 := func() {
		h1, l1 := bits.Mul64(lo, 10)
		hi = hi*10 + h1
		lo = l1
	}
	for _, ch := range n.Digits {
		mul10()
		var carry uint64
		lo, carry = bits.Add64(lo, uint64(ch-'0'), 0)
		hi += carry
	}
	for e := shift; e > 0; e-- {
		mul10()
	}
	return d.decimalValue(c, n.Neg, hi, lo), ""
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
