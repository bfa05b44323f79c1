package tableschema

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
)

var decimalRE = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$`)

// MaxDecimalPrecision is the largest decimal precision Iceberg allows.
const MaxDecimalPrecision = 38

// parseType parses a column type: a primitive, or list<primitive> (list reports true).
func parseType(s string) (elem iceberg.PrimitiveType, list bool, err error) {
	t := strings.TrimSpace(s)
	if inner, ok := strings.CutPrefix(t, "list<"); ok {
		inner, ok = strings.CutSuffix(inner, ">")
		if !ok {
			return nil, false, fmt.Errorf("type %q: list is missing its closing >", s)
		}
		inner = strings.TrimSpace(inner)
		if strings.HasPrefix(inner, "list<") {
			return nil, false, fmt.Errorf("type %q: lists of lists are not supported", s)
		}
		p, err := parsePrimitive(inner)
		if err != nil {
			return nil, false, fmt.Errorf("type %q: list element: %w", s, err)
		}
		return p, true, nil
	}
	p, err := parsePrimitive(t)
	return p, false, err
}

func parsePrimitive(s string) (iceberg.PrimitiveType, error) {
	switch s {
	case "boolean":
		return iceberg.PrimitiveTypes.Bool, nil
	case "int":
		return iceberg.PrimitiveTypes.Int32, nil
	case "long":
		return iceberg.PrimitiveTypes.Int64, nil
	case "float":
		return iceberg.PrimitiveTypes.Float32, nil
	case "double":
		return iceberg.PrimitiveTypes.Float64, nil
	case "date":
		return iceberg.PrimitiveTypes.Date, nil
	case "time":
		return iceberg.PrimitiveTypes.Time, nil
	case "timestamp":
		return iceberg.PrimitiveTypes.Timestamp, nil
	case "timestamptz":
		return iceberg.PrimitiveTypes.TimestampTz, nil
	case "string":
		return iceberg.PrimitiveTypes.String, nil
	case "uuid":
		return iceberg.PrimitiveTypes.UUID, nil
	case "binary":
		return iceberg.PrimitiveTypes.Binary, nil
	}
	if strings.HasPrefix(s, "decimal") {
		m := decimalRE.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("type %q: want decimal(P,S)", s)
		}
		p, perr := strconv.Atoi(m[1])
		sc, serr := strconv.Atoi(m[2])
		if perr != nil || p < 1 || p > MaxDecimalPrecision {
			return nil, fmt.Errorf("type %q: decimal precision must be 1..%d", s, MaxDecimalPrecision)
		}
		if serr != nil || sc > p {
			return nil, fmt.Errorf("type %q: decimal scale must be 0..precision (%d)", s, p)
		}
		return iceberg.DecimalTypeOf(p, sc), nil
	}
	return nil, unknownType(s)
}

// typeNames are the column types parseType takes, as an error lists them.
var typeNames = []string{"boolean", "int", "long", "float", "double", "decimal(P,S)", "date", "time",
	"timestamp", "timestamptz", "string", "uuid", "binary"}

// typeAliases are other systems' names of the types (SQL, Avro, Go, Postgres) and what
// they are here.
var typeAliases = map[string][]string{
	"integer": {"int", "long"}, "int32": {"int"}, "int4": {"int"}, "smallint": {"int"}, "tinyint": {"int"},
	"short": {"int"}, "int16": {"int"}, "byte": {"int"}, "serial": {"int"},
	"bigint": {"long"}, "int64": {"long"}, "int8": {"long"}, "bigserial": {"long"},
	"bool": {"boolean"}, "bit": {"boolean"},
	"real": {"float"}, "float32": {"float"}, "float4": {"float"},
	"float64": {"double"}, "float8": {"double"}, "double precision": {"double"},
	"number": {"double", "decimal(P,S)"}, "numeric": {"decimal(P,S)", "double"},
	"varchar": {"string"}, "text": {"string"}, "char": {"string"}, "character": {"string"}, "nvarchar": {"string"},
	"str": {"string"}, "json": {"string"}, "jsonb": {"string"}, "enum": {"string"},
	"datetime": {"timestamp", "timestamptz"}, "timestamp_ntz": {"timestamp"}, "timestamp_ltz": {"timestamptz"},
	"timestamp with time zone": {"timestamptz"}, "timestamp without time zone": {"timestamp"}, "instant": {"timestamptz"},
	"bytes": {"binary"}, "bytea": {"binary"}, "blob": {"binary"}, "varbinary": {"binary"}, "fixed": {"binary"},
	"array": {"list<T>"},
}

// unknownType says that s is no type, which types there are, and the ones s may have
// meant: another system's name for one, another case, or a typo of one.
func unknownType(s string) error {
	t := strings.ToLower(strings.TrimSpace(s))
	if i := strings.IndexAny(t, "(<"); i > 0 && t != "double precision" {
		t = t[:i] // varchar(20), array<int>
	}
	near := typeAliases[t]
	if near == nil {
		for _, name := range typeNames {
			if plain, _, _ := strings.Cut(name, "("); t == plain || EditDistance(t, plain) <= 2 && len(t) > 2 {
				near = append(near, name)
			}
		}
	}
	hint := ""
	if len(near) > 0 {
		hint = " (did you mean " + strings.Join(near, " or ") + "?)"
	}
	return fmt.Errorf("unknown type %q%s; the types are %s, or list<T> of one", s, hint, strings.Join(typeNames, ", "))
}

// EditDistance is the Levenshtein distance of a and b, in bytes: how far a typed name
// is from one that exists, for "did you mean" hints.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// DecimalBytes is the number of bytes of the fixed-length two's-complement form of a
// decimal of the given precision: the fewest that hold every unscaled value, as Iceberg's
// Parquet mapping requires for precision above 18 (16 bytes for precision 38).
func DecimalBytes(precision int) int {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(precision)), nil) // 10^p
	for n := 1; ; n++ {
		// n bytes hold magnitudes up to 2^(8n-1)-1, so they hold 10^p-1 iff 2^(8n-1) >= 10^p.
		if new(big.Int).Lsh(big.NewInt(1), uint(8*n-1)).Cmp(limit) >= 0 {
			return n
		}
	}
}
