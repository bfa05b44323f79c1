package jsonfmt

import (
	"math"
	"strconv"
	"unsafe"
)

// The conversions below parse exactly what they accept themselves rather than through
// package time, whose accepted forms have changed between Go versions: a value must read
// the same in every build of Mink.

// integer converts a valid JSON number to an int64 exactly: 1e3 and 10.0 are integers,
// 1.5 is not. It returns a message fragment when it cannot.
func integer(tok []byte) (int64, string) {
	neg := tok[0] == '-'
	digits := tok
	if neg {
		digits = tok[1:]
	}
	plain := len(digits) <= 18 // below 10^18: no overflow on the fast path
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
		var arr [32]byte
		sig, exp := splitNumber(digits, arr[:0])
		if len(sig) == 0 {
			return 0, ""
		}
		if exp < 0 {
			return 0, "is not an integer"
		}
		if int64(len(sig))+exp > 19 {
			return 0, "is out of range for long"
		}
		// At most 19 digits in all: below 10^19 < 2^64, so nothing overflows here.
		for _, c := range sig {
			mag = mag*10 + uint64(c-'0')
		}
		for e := exp; e > 0; e-- {
			mag *= 10
		}
	}
	switch {
	case !neg && mag <= math.MaxInt64:
		return int64(mag), ""
	case neg && mag <= 1<<63:
		return int64(-mag), "" // -(1<<63) wraps to MinInt64, which is right
	}
	return 0, "is out of range for long"
}

// maxExp caps exponents while parsing; anything beyond is out of every range we have.
const maxExp = 1 << 30

// splitNumber splits an unsigned JSON number into its significant digits (no leading or
// trailing zeros; empty for zero), appended to buf, and a power of ten: the value is
// sig × 10^exp.
func splitNumber(tok, buf []byte) (sig []byte, exp int64) {
	i := 0
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
			exp--
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
		exp += e
	}
	// Trailing zeros move into the exponent so that 1.50 and 15e-1 are the same number.
	for len(buf) > 0 && buf[len(buf)-1] == '0' {
		buf = buf[:len(buf)-1]
		exp++
	}
	return buf, exp
}

// double converts a valid JSON number to the nearest float64. strconv rounds correctly,
// so the result is the same everywhere; only overflow to ±Inf is refused (underflow
// rounds to zero like any other rounding).
func double(tok []byte) (float64, bool) {
	f, err := strconv.ParseFloat(unsafeString(tok), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// unsafeString views b as a string for a call that only reads it and keeps nothing.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// num reads n ASCII digits of b at i as a number, or -1.
func num(b []byte, i, n int) int {
	if i+n > len(b) {
		return -1
	}
	v := 0
	for _, c := range b[i : i+n] {
		if !isDigit(c) {
			return -1
		}
		v = v*10 + int(c-'0')
	}
	return v
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian date
// (H. Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// parseDate reads RFC 3339 full-date, YYYY-MM-DD, as days since 1970-01-01.
func parseDate(b []byte) (int64, bool) {
	if len(b) != 10 {
		return 0, false
	}
	return date(b)
}

// date reads the YYYY-MM-DD at the start of b (at least 10 bytes).
func date(b []byte) (int64, bool) {
	y, m, d := num(b, 0, 4), num(b, 5, 2), num(b, 8, 2)
	if y < 0 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) || b[4] != '-' || b[7] != '-' {
		return 0, false
	}
	return daysFromCivil(y, m, d), true
}

// clock reads hh:mm:ss[.fraction] at the start of b as µs since midnight, the fraction
// truncated to microseconds, and returns the bytes read. A leap second (:60) is refused:
// a time of day cannot hold it.
func clock(b []byte) (int64, int, bool) {
	if len(b) < 8 || b[2] != ':' || b[5] != ':' {
		return 0, 0, false
	}
	h, mi, sec := num(b, 0, 2), num(b, 3, 2), num(b, 6, 2)
	if h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 {
		return 0, 0, false
	}
	us := (int64(h)*3600 + int64(mi)*60 + int64(sec)) * 1_000_000
	i := 8
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		scale := int64(100_000)
		for ; i < len(b) && isDigit(b[i]); i++ {
			us += int64(b[i]-'0') * scale
			scale /= 10
		}
		if i == start {
			return 0, 0, false
		}
	}
	return us, i, true
}

// offset reads an RFC 3339 time-offset (Z, z or ±hh:mm) that must fill b, as µs east of
// UTC. It reports found false when b is empty.
func offset(b []byte) (us int64, found, ok bool) {
	if len(b) == 0 {
		return 0, false, true
	}
	if len(b) == 1 && (b[0] == 'Z' || b[0] == 'z') {
		return 0, true, true
	}
	if len(b) != 6 || (b[0] != '+' && b[0] != '-') || b[3] != ':' {
		return 0, true, false
	}
	h, m := num(b, 1, 2), num(b, 4, 2)
	if h < 0 || h > 23 || m < 0 || m > 59 {
		return 0, true, false
	}
	us = (int64(h)*60 + int64(m)) * 60_000_000
	if b[0] == '-' {
		us = -us
	}
	return us, true, true
}

// parseDateTime reads an RFC 3339 date-time as µs since 1970-01-01T00:00:00Z. The result
// says why not: "" (fine), "noOffset" (a valid local date-time without offset) or "bad".
func parseDateTime(b []byte) (int64, string) {
	if len(b) < 19 || (b[10] != 'T' && b[10] != 't') {
		return 0, "bad"
	}
	days, ok := date(b)
	if !ok {
		return 0, "bad"
	}
	us, n, ok := clock(b[11:])
	if !ok {
		return 0, "bad"
	}
	off, found, ok := offset(b[11+n:])
	switch {
	case !ok:
		return 0, "bad"
	case !found:
		return 0, "noOffset"
	}
	return days*86_400_000_000 + us - off, ""
}

// parseTime reads hh:mm:ss[.fraction] with an optional offset as µs since midnight: a
// time with an offset is converted to UTC (wrapping around midnight), one without is
// taken as written, as a timestamp's is taken as UTC.
func parseTime(b []byte) (int64, bool) {
	us, n, ok := clock(b)
	if !ok {
		return 0, false
	}
	off, _, ok := offset(b[n:])
	if !ok {
		return 0, false
	}
	const day = 86_400_000_000
	return ((us-off)%day + day) % day, true
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
		h, l := unhex(b[i]), unhex(b[i+1])
		if h > 15 || l > 15 {
			return false
		}
		out[j] = h<<4 | l
		j++
		i += 2
	}
	return true
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0xff
}
