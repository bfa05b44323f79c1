// Package partition holds a table's partition specs: the Iceberg transforms (identity,
// year, month, day, hour, bucket[N], truncate[W], void) as users write them, checked
// against the table's schema, and computed on decoded rows exactly as the Iceberg spec
// says, so that every file holds the rows of one partition tuple and engines prune by it.
// It is pure: parsing (Parse, ParseTransform), binding to a schema (Build), evaluating
// rows (Evaluator) and naming tuples (Human, Path, Key).
package partition

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
)

// Kind is which transform a partition field applies.
type Kind uint8

const (
	Identity Kind = iota + 1
	Year
	Month
	Day
	Hour
	Bucket   // bucket[N]: Murmur3 hash of the value, modulo N
	Truncate // truncate[W]: the value cut to width W
	Void     // always null
)

var kindNames = [...]string{Identity: "identity", Year: "year", Month: "month", Day: "day", Hour: "hour",
	Bucket: "bucket", Truncate: "truncate", Void: "void"}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// MaxArg is the largest N of bucket[N] and W of truncate[W]: Iceberg's are Java ints.
const MaxArg = math.MaxInt32

// Transform is a partition transform: its kind and, for Bucket and Truncate, N or W.
// Its text form is Iceberg's: identity, year, month, day, hour, bucket[16],
// truncate[4], void.
type Transform struct {
	Kind Kind
	Arg  int // N of bucket[N], W of truncate[W]; 0 for the other kinds
}

func (t Transform) String() string {
	if t.Kind == Bucket || t.Kind == Truncate {
		return t.Kind.String() + "[" + strconv.Itoa(t.Arg) + "]"
	}
	return t.Kind.String()
}

// MarshalText writes Iceberg's form, as partition specs in table metadata carry it.
func (t Transform) MarshalText() ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	return []byte(t.String()), nil
}

// UnmarshalText reads any form ParseTransform takes.
func (t *Transform) UnmarshalText(b []byte) error {
	p, err := ParseTransform(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

func (t Transform) check() error {
	switch t.Kind {
	case Bucket, Truncate:
		if t.Arg <= 0 || t.Arg > MaxArg {
			what := "N"
			if t.Kind == Truncate {
				what = "W"
			}
			return fmt.Errorf("%s: %s must be 1..%d, not %d", t.Kind, what, MaxArg, t.Arg)
		}
	case Identity, Year, Month, Day, Hour, Void:
		if t.Arg != 0 {
			return fmt.Errorf("%s takes no argument", t.Kind)
		}
	default:
		return fmt.Errorf("unknown transform %s", t.Kind)
	}
	return nil
}

// transformNames are the transform names ParseTransform and Parse take, ignoring case:
// Iceberg's, and Spark SQL's plurals and aliases (years, months, days, date, hours,
// date_hour).
var transformNames = map[string]Kind{
	"identity": Identity, "void": Void,
	"year": Year, "years": Year,
	"month": Month, "months": Month,
	"day": Day, "days": Day, "date": Day,
	"hour": Hour, "hours": Hour, "date_hour": Hour,
	"bucket": Bucket, "truncate": Truncate,
}

const transformList = "identity, year, month, day, hour, bucket[N], truncate[W] or void"

// ParseTransform reads a transform as the admin API carries it: Iceberg's form (day,
// bucket[16], truncate[4]), ignoring case, Spark SQL's names (days, hours, ...) and
// bucket(16) or truncate(4). The empty string is identity, as a column named alone is
// in Spark's PARTITIONED BY.
func ParseTransform(s string) (Transform, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Transform{Kind: Identity}, nil
	}
	name, arg, hasArg := t, "", false
	if i := strings.IndexAny(t, "[("); i >= 0 {
		closer := byte(']')
		if t[i] == '(' {
			closer = ')'
		}
		if t[len(t)-1] != closer {
			return Transform{}, fmt.Errorf("transform %q: want %s", s, transformList)
		}
		name, arg, hasArg = strings.TrimSpace(t[:i]), strings.TrimSpace(t[i+1:len(t)-1]), true
	}
	k, ok := transformNames[strings.ToLower(name)]
	if !ok {
		return Transform{}, fmt.Errorf("unknown transform %q (want %s)", s, transformList)
	}
	if k != Bucket && k != Truncate {
		if hasArg {
			if strings.ContainsAny(arg, " ,") || arg != "" && !isNumber(arg) {
				return Transform{}, fmt.Errorf("transform %q holds a column: give the column on its own and the transform as %s", s, k)
			}
			return Transform{}, fmt.Errorf("transform %q: %s takes no argument", s, k)
		}
		return Transform{Kind: k}, nil
	}
	if !hasArg {
		return Transform{}, fmt.Errorf("transform %q: %s needs its %s, as in %s[%d]", s, k, argName(k), k, exampleArg(k))
	}
	if !isNumber(arg) {
		if strings.Contains(arg, ",") {
			return Transform{}, fmt.Errorf("transform %q holds a column: give the column on its own and the transform as %s[N]", s, k)
		}
		return Transform{}, fmt.Errorf("transform %q: %s %s must be a whole number, as in %s[%d]", s, k, argName(k), k, exampleArg(k))
	}
	n, err := parseArg(k, arg)
	if err != nil {
		return Transform{}, fmt.Errorf("transform %q: %v", s, err)
	}
	return Transform{Kind: k, Arg: n}, nil
}

func argName(k Kind) string {
	if k == Bucket {
		return "N (the number of buckets)"
	}
	return "W (the width)"
}

func exampleArg(k Kind) int {
	if k == Bucket {
		return 16
	}
	return 4
}

// isNumber reports whether s is an optionally signed run of decimal digits.
func isNumber(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseArg reads N or W of kind k, which must be 1..MaxArg.
func parseArg(k Kind, s string) (int, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	what := "N"
	if k == Truncate {
		what = "W"
	}
	if err != nil || n <= 0 || n > MaxArg {
		return 0, fmt.Errorf("%s %s must be 1..%d, not %s", k, what, MaxArg, s)
	}
	return int(n), nil
}

// Applies reports whether the transform is defined for values of type typ, by the
// Iceberg spec's table: identity and void of any primitive; bucket of int, long,
// decimal, date, time, timestamp, timestamptz, string, uuid, fixed and binary; truncate
// of int, long, decimal, string and binary; year, month and day of date, timestamp and
// timestamptz; hour of timestamp and timestamptz.
func (t Transform) Applies(typ iceberg.Type) bool {
	switch t.Kind {
	case Identity:
		_, ok := typ.(iceberg.PrimitiveType)
		return ok
	case Void:
		return true
	case Bucket:
		switch typ.(type) {
		case iceberg.Int32Type, iceberg.Int64Type, iceberg.DecimalType, iceberg.DateType, iceberg.TimeType,
			iceberg.TimestampType, iceberg.TimestampTzType, iceberg.StringType, iceberg.UUIDType,
			iceberg.FixedType, iceberg.BinaryType:
			return true
		}
	case Truncate:
		switch typ.(type) {
		case iceberg.Int32Type, iceberg.Int64Type, iceberg.DecimalType, iceberg.StringType, iceberg.BinaryType:
			return true
		}
	case Year, Month, Day:
		switch typ.(type) {
		case iceberg.DateType, iceberg.TimestampType, iceberg.TimestampTzType:
			return true
		}
	case Hour:
		switch typ.(type) {
		case iceberg.TimestampType, iceberg.TimestampTzType:
			return true
		}
	}
	return false
}

// appliesTo names the types a transform is defined for, for messages.
func (t Transform) appliesTo() string {
	switch t.Kind {
	case Bucket:
		return "int, long, decimal, date, time, timestamp, timestamptz, string, uuid, fixed and binary columns"
	case Truncate:
		return "int, long, decimal, string and binary columns"
	case Year, Month, Day:
		return "date, timestamp and timestamptz columns"
	case Hour:
		return "timestamp and timestamptz columns"
	}
	return "primitive columns"
}

// ResultType is the type of the partition values the transform makes of values of type
// src: int for year, month, hour and bucket; date for day (as Iceberg's reference
// implementations type it); src for identity, truncate and void.
func (t Transform) ResultType(src iceberg.Type) iceberg.Type {
	switch t.Kind {
	case Year, Month, Hour, Bucket:
		return iceberg.PrimitiveTypes.Int32
	case Day:
		return iceberg.PrimitiveTypes.Date
	}
	return src
}

// Iceberg is the same transform as iceberg-go has it.
func (t Transform) Iceberg() iceberg.Transform {
	switch t.Kind {
	case Identity:
		return iceberg.IdentityTransform{}
	case Year:
		return iceberg.YearTransform{}
	case Month:
		return iceberg.MonthTransform{}
	case Day:
		return iceberg.DayTransform{}
	case Hour:
		return iceberg.HourTransform{}
	case Bucket:
		return iceberg.BucketTransform{NumBuckets: t.Arg}
	case Truncate:
		return iceberg.TruncateTransform{Width: t.Arg}
	case Void:
		return iceberg.VoidTransform{}
	}
	return nil
}

// isTime reports whether the transform is one of year, month, day and hour: a field
// has at most one of them per source column, since each prunes what the finer ones do.
func (t Transform) isTime() bool {
	return t.Kind == Year || t.Kind == Month || t.Kind == Day || t.Kind == Hour
}
