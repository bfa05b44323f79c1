package jsonscan

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// The conversions of JSON text to values that both decoders make. They are exact (no
// rounding unless the target is a float) and take numbers as Number returns them.

// Messages of Integer, fragments of "<number> <fragment>" that a caller may complete,
// for instance with the type it wanted.
const (
	NotInteger = "is not an integer"
	OutOfRange = "is out of range"
)

// Integer converts a JSON number to an integer in [lo, hi], exactly: 1e3 and 10.0 are
// integers, 1.5 is not. When it cannot, it returns NotInteger or OutOfRange.
func Integer(tok []byte, lo, hi int64) (int64, string) {
	// Fast path: plain digits, the common case.
	neg := tok[0] == '-'
	digits := tok
	if neg {
		digits = tok[1:]
	}
	plain := len(digits) <= 18 // below 10^18: no overflow
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
		n := SplitNumber(tok, buf[:0])
		if len(n.Digits) == 0 {
			return 0, ""
		}
		if n.Exp < 0 {
			return 0, NotInteger
		}
		if int64(len(n.Digits))+n.Exp > 19 {
			return 0, OutOfRange
		}
		// At most 19 digits in all: below 10^19 < 2^64, so nothing overflows here.
		for _, c := range n.Digits {
			mag = mag*10 + uint64(c-'0')
		}
		for e := n.Exp; e > 0; e-- {
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
		return 0, OutOfRange
	}
	if v < lo || v > hi {
		return 0, OutOfRange
	}
	return v, ""
}

// Number is a JSON number as sign, significant digits and a power of ten: the value is
// ±Digits × 10^Exp, exactly. It is what exact conversions (Integer, decimals) start from.
type Number struct {
	Neg    bool
	Digits []byte // ASCII digits, no leading or trailing zeros; empty means zero
	Exp    int64
}

// maxExp caps exponents while parsing; anything beyond is out of every range we have.
const maxExp = 1 << 30

// SplitNumber splits a valid JSON number (as Number returns it) into its parts. The
// digits are appended to buf, typically a caller's stack array, so it does not allocate
// when they fit. Exponents are capped near ±2^30, far beyond every range.
func SplitNumber(tok, buf []byte) Number {
	var n Number
	i := 0
	if tok[0] == '-' {
		n.Neg = true
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
			n.Exp--
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
		n.Exp += e
	}
	// Trailing zeros move into the exponent so that 1.50 and 15e-1 are the same number.
	for len(buf) > 0 && buf[len(buf)-1] == '0' {
		buf = buf[:len(buf)-1]
		n.Exp++
	}
	n.Digits = buf
	return n
}

// ValidNumber reports whether b is exactly a JSON number: decoders that take numbers
// written as strings check them with it before converting.
func ValidNumber(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	s := Scanner{buf: b}
	_, ok := s.Number()
	return ok && s.pos == len(b)
}

// Float converts a JSON number to the nearest float of bitSize 32 or 64. strconv rounds
// correctly, so the result is the same everywhere; only overflow to ±Inf is refused
// (underflow rounds to zero like any other rounding).
func Float(tok []byte, bitSize int) (float64, bool) {
	// The token is valid JSON, so the only possible error is overflow.
	f, err := strconv.ParseFloat(unsafeString(tok), bitSize)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// unsafeString views b as a string for a call that only reads it and keeps nothing,
// which saves an allocation per value on the hot path.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// ParseUUID parses the canonical 8-4-4-4-12 form (either case) into out, 16 bytes.
func ParseUUID(b []byte, out []byte) bool {
	if len(b) != 36 || b[8] != '-' || b[13] != '-' || b[18] != '-' || b[23] != '-' {
		return false
	}
	out = out[:16]
	// One test at the end: a bad digit maps to 0xff, which sets a high bit.
	var bad byte
	for j, i := range uuidDigits {
		h, l := unhexTable[b[i]], unhexTable[b[i+1]]
		bad |= h | l
		out[j] = h<<4 | l
	}
	return bad&0xf0 == 0
}

// uuidDigits are where the 16 byte pairs of a UUID's text start.
var uuidDigits = [16]uint8{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

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

// Snippet is a value's JSON text (or any input bytes) for a message: cut to a readable
// length at a character boundary, invalid UTF-8 replaced, so messages stay short and
// valid text whatever the input.
func Snippet(b []byte) string {
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
