package rowcodec

// parseTimestamp reads the strict RFC 3339 form producers write,
// YYYY-MM-DDThh:mm:ss[.f…](Z|±hh:mm), or the same without zone, in µs since 1970-01-01
// UTC (sub-microsecond digits floored, digits past the ninth ignored), and reports
// whether a zone was given. Whatever it accepts, time.Parse reads to the same instant
// (RFC3339Nano, or without zone "2006-01-02T15:04:05.999999999"); the rest (ok false) is
// left to parseTimestampSlow, which also makes every message. It exists because
// time.Parse builds a time.Time through time.Date for each value, a cost per record.
func parseTimestamp(b []byte) (us int64, zone, ok bool) {
	if len(b) < len("2006-01-02T15:04:05") || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return 0, false, false
	}
	ok = true
	num := func(s []byte, lo, hi int) int {
		x := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				ok = false
			}
			x = x*10 + int(c-'0')
		}
		if x < lo || x > hi {
			ok = false
		}
		return x
	}
	year := num(b[0:4], 0, 9999)
	month := num(b[5:7], 1, 12)
	if !ok {
		return 0, false, false
	}
	day := num(b[8:10], 1, daysIn(month, year))
	hour := num(b[11:13], 0, 23)
	minute := num(b[14:16], 0, 59)
	sec := num(b[17:19], 0, 59)
	if !ok {
		return 0, false, false
	}
	rest := b[19:]
	nsec := 0
	if len(rest) >= 2 && rest[0] == '.' && isDigit(rest[1]) {
		n := 1
		for ; n < len(rest) && isDigit(rest[n]); n++ {
			if n <= 9 {
				nsec = nsec*10 + int(rest[n]-'0')
			}
		}
		for i := n; i <= 9; i++ {
			nsec *= 10
		}
		rest = rest[n:]
	}
	offset := 0
	switch {
	case len(rest) == 0:
	case len(rest) == 1 && rest[0] == 'Z':
		zone = true
	case len(rest) == len("+07:00") && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		offset = (num(rest[1:3], 0, 23)*60 + num(rest[4:6], 0, 59)) * 60
		if rest[0] == '-' {
			offset = -offset
		}
		zone = true
	default:
		return 0, false, false
	}
	if !ok {
		return 0, false, false
	}
	secs := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	return secs*1_000_000 + int64(nsec/1000), zone, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// daysIn is the length of month (1-12) of year in the proleptic Gregorian calendar.
func daysIn(month, year int) int {
	if month == 2 {
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	}
	return 30 + (month+month/8)%2 // 31 in Jan, Mar, May, Jul, Aug, Oct, Dec
}

// daysFromCivil is the day of year-month-day counted from 1970-01-01, for years from
// 0 on (Howard Hinnant's days_from_civil).
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	m := int64(month)
	if m > 2 {
		m -= 3
	} else {
		m += 9
	}
	doy := (153*m+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
