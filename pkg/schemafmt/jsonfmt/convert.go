package jsonfmt

import (
	"math"

	"github.com/minkhq/mink/pkg/jsonscan"
)

// The conversions below parse exactly what they accept themselves rather than through
// package time, whose accepted forms have changed between Go versions: a value must read
// the same in every build of Mink.

// integer converts a valid JSON number to an int64 exactly: 1e3 and 10.0 are integers,
// 1.5 is not. It returns a message fragment when it cannot, naming long when the number
// is out of its range.
func integer(tok []byte) (int64, string) {
	n, msg := jsonscan.Integer(tok, math.MinInt64, math.MaxInt64)
	if msg == jsonscan.OutOfRange {
		msg += " for long"
	}
	return n, msg
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

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
