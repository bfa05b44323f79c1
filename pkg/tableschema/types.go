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
	return nil, fmt.Errorf("unknown type %q", s)
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
