package partition

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// Human is the human string of each of t's values (HumanValue): what DescribeTable
// shows and a file's key holds.
func (e *Evaluator) Human(t Tuple) []string {
	out := make([]string, len(e.fields))
	for i, f := range e.fields {
		out[i] = HumanValue(e.spec.Fields[i].Transform, f.src, t[i])
	}
	return out
}

const (
	// maxPathValue bounds an escaped value in a path; a longer one is cut (the file
	// name, not its directories, makes a key unique).
	maxPathValue = 64
	// MaxPathLen bounds Path: the leading name=value segments that fit are kept.
	MaxPathLen = 512
)

// Path is t as the directories of a file's key, as Iceberg's partitionToPath writes
// them: name=value per field, joined by "/", names and human values escaped (Escape).
// A value longer than 64 escaped bytes is cut, and so is a path past MaxPathLen, after
// the last whole segment that fits: directories name a tuple for people, and the file
// name holds what makes the key unique.
func (e *Evaluator) Path(t Tuple) string {
	var b strings.Builder
	for i, h := range e.Human(t) {
		v := Escape(h)
		if len(v) > maxPathValue {
			cut := maxPathValue
			if j := strings.LastIndexByte(v[:cut], '%'); j >= cut-2 {
				cut = j // not inside a %XX
			}
			v = v[:cut]
		}
		seg := Escape(e.spec.Fields[i].Name) + "=" + v
		if b.Len() > 0 && b.Len()+1+len(seg) > MaxPathLen {
			break
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// Escape is Java's URLEncoder.encode(s, UTF-8), which Iceberg's partitionToPath uses:
// letters, digits and . - * _ stay, a space becomes +, every other byte %XX.
func Escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '*', c == '_':
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// HumanValue is a partition value's human string, as Iceberg's reference implementation
// writes it (Transform.toHumanString): null as "null"; year 2026, month 2026-12, day
// 2026-12-07, hour 2026-12-07-13; a bucket's number; an identity or truncate value as
// its source type src writes it (dates as days, timestamps ISO 8601 with +00:00 for
// timestamptz, binary and fixed in base64, numbers as Java prints them).
func HumanValue(t Transform, src iceberg.Type, v rowcodec.Value) string {
	if !v.Valid || t.Kind == Void {
		return "null"
	}
	switch t.Kind {
	case Year:
		return fmt.Sprintf("%04d", 1970+v.Int)
	case Month:
		return fmt.Sprintf("%04d-%02d", 1970+floorDiv(v.Int, 12), 1+floorMod(v.Int, 12))
	case Day:
		return humanDay(v.Int)
	case Hour:
		y, m, d := civil(floorDiv(v.Int, 24))
		return fmt.Sprintf("%04d-%02d-%02d-%02d", y, m, d, floorMod(v.Int, 24))
	case Bucket:
		return strconv.FormatInt(v.Int, 10)
	}
	switch src := src.(type) {
	case iceberg.BooleanType:
		return strconv.FormatBool(v.Int != 0)
	case iceberg.Int32Type, iceberg.Int64Type:
		return strconv.FormatInt(v.Int, 10)
	case iceberg.Float32Type:
		return javaFloat(v.Float, 32)
	case iceberg.Float64Type:
		return javaFloat(v.Float, 64)
	case iceberg.DecimalType:
		x := big.NewInt(v.Int)
		if src.Precision() > 18 {
			x = fromTwos(v.Bytes)
		}
		return javaDecimal(x, src.Scale())
	case iceberg.DateType:
		return humanDay(v.Int)
	case iceberg.TimeType:
		return javaLocalTime(v.Int)
	case iceberg.TimestampType:
		return isoDateTime(v.Int)
	case iceberg.TimestampTzType:
		return isoDateTime(v.Int) + "+00:00"
	case iceberg.StringType:
		return string(v.Bytes)
	case iceberg.UUIDType:
		if u, err := uuid.FromBytes(v.Bytes); err == nil {
			return u.String()
		}
	}
	return base64.StdEncoding.EncodeToString(v.Bytes) // binary, fixed
}

// humanDay is Java's String.format("%04d-%02d-%02d") of a day's date.
func humanDay(days int64) string {
	y, m, d := civil(days)
	return fmt.Sprintf("%04d-%02d-%02d", y, m, d)
}

// isoDateTime is Java's ISO_LOCAL_DATE_TIME of µs since the epoch: the year in at
// least 4 digits (+ before one of more, - before a negative one), seconds always, and
// the fraction only as long as it has digits.
func isoDateTime(us int64) string {
	days := floorDiv(us, microsPerDay)
	rem := us - days*microsPerDay
	y, m, d := civil(days)
	var year string
	switch {
	case y > 9999:
		year = "+" + strconv.FormatInt(y, 10)
	case y < 0:
		year = fmt.Sprintf("-%04d", -y)
	default:
		year = fmt.Sprintf("%04d", y)
	}
	s := fmt.Sprintf("%s-%02d-%02dT%02d:%02d:%02d", year, m, d, rem/microsPerHour, rem/60_000_000%60, rem/1_000_000%60)
	if frac := rem % 1_000_000; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
	}
	return s
}

// javaLocalTime is Java's LocalTime.toString of µs since midnight: HH:mm, then :ss when
// seconds or a fraction are not zero, then the fraction in groups of three digits.
func javaLocalTime(us int64) string {
	us = floorMod(us, microsPerDay)
	s := fmt.Sprintf("%02d:%02d", us/microsPerHour, us/60_000_000%60)
	sec, nano := us/1_000_000%60, us%1_000_000*1000
	if sec == 0 && nano == 0 {
		return s
	}
	s += fmt.Sprintf(":%02d", sec)
	switch {
	case nano == 0:
	case nano%1_000_000 == 0:
		s += fmt.Sprintf(".%03d", nano/1_000_000)
	default:
		s += fmt.Sprintf(".%06d", nano/1000)
	}
	return s
}

// javaFloat is Java's Float.toString (bits 32) or Double.toString (bits 64): the
// shortest decimal that reads back as f (of two digits when one digit would do and a
// two-digit one is nearer), plain from 10^-3 to 10^7, else computerized scientific
// notation (1.0E10).
func javaFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0 && math.Signbit(f):
		return "-0.0"
	case f == 0:
		return "0.0"
	}
	digits, exp := shortest(f, bits)
	sign := ""
	if f < 0 {
		sign = "-"
	}
	if abs := math.Abs(f); abs < 1e-3 || abs >= 1e7 {
		frac := digits[1:]
		if frac == "" {
			frac = "0"
		}
		return sign + digits[:1] + "." + frac + "E" + strconv.Itoa(exp)
	}
	var whole, frac string
	if exp >= 0 {
		if len(digits) <= exp+1 {
			whole, frac = digits+strings.Repeat("0", exp+1-len(digits)), "0"
		} else {
			whole, frac = digits[:exp+1], digits[exp+1:]
		}
	} else {
		whole, frac = "0", strings.Repeat("0", -exp-1)+digits
	}
	return sign + whole + "." + frac
}

// shortest is the significant digits of |f| and the decimal exponent of the first, as
// Java (since JDK 19) chooses them: the fewest that read back as f, except that where
// one digit does, a nearer decimal of two digits that also reads back wins.
func shortest(f float64, bits int) (string, int) {
	parse := func(s string) (string, int) {
		mant, e, _ := strings.Cut(strings.TrimPrefix(s, "-"), "e")
		exp, _ := strconv.Atoi(e)
		return strings.TrimRight(strings.Replace(mant, ".", "", 1), "0"), exp
	}
	digits, exp := parse(strconv.FormatFloat(f, 'e', -1, bits))
	if len(digits) == 1 {
		two := strconv.FormatFloat(f, 'e', 1, bits)
		if back, err := strconv.ParseFloat(two, bits); err == nil && back == f {
			digits, exp = parse(two)
		}
	}
	if digits == "" {
		digits = "0"
	}
	return digits, exp
}

// javaDecimal is Java's BigDecimal.toString of unscaled × 10^-scale (scale ≥ 0): plain,
// unless the exponent of its first digit is below -6 (1E-7, 0E-7).
func javaDecimal(unscaled *big.Int, scale int) string {
	sign := ""
	if unscaled.Sign() < 0 {
		sign = "-"
	}
	coeff := new(big.Int).Abs(unscaled).String()
	adjusted := len(coeff) - 1 - scale
	switch {
	case scale == 0:
		return sign + coeff
	case adjusted < -6:
		s := coeff[:1]
		if len(coeff) > 1 {
			s += "." + coeff[1:]
		}
		return sign + s + "E" + strconv.Itoa(adjusted)
	case len(coeff) > scale:
		return sign + coeff[:len(coeff)-scale] + "." + coeff[len(coeff)-scale:]
	}
	return sign + "0." + strings.Repeat("0", scale-len(coeff)) + coeff
}
