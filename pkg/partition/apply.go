package partition

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"

	"github.com/apache/iceberg-go"
	"github.com/twmb/murmur3"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

const (
	microsPerHour = 3_600_000_000
	microsPerDay  = 24 * microsPerHour
)

// Compile returns the function computing t of values of type src, both in rowcodec's
// form (rowcodec.Value): the partition value, of type t.ResultType(src), exactly as the
// Iceberg spec defines it. A null value gives null. What it returns may alias its
// argument's bytes (identity, truncate).
func (t Transform) Compile(src iceberg.Type) (func(rowcodec.Value) rowcodec.Value, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if _, ok := src.(iceberg.PrimitiveType); !ok || !t.Applies(src) {
		return nil, fmt.Errorf("partition: %s is not defined for %s", t, src)
	}
	var fn func(rowcodec.Value) rowcodec.Value
	switch t.Kind {
	case Identity:
		return func(v rowcodec.Value) rowcodec.Value { return v }, nil
	case Void:
		return func(rowcodec.Value) rowcodec.Value { return rowcodec.Value{} }, nil
	case Bucket:
		fn = bucket(src, int32(t.Arg))
	case Truncate:
		fn = truncate(src, t.Arg)
	case Year, Month, Day, Hour:
		fn = timeUnit(src, t.Kind)
	}
	return func(v rowcodec.Value) rowcodec.Value {
		if !v.Valid {
			return rowcodec.Value{}
		}
		return fn(v)
	}, nil
}

func intValue(x int32) rowcodec.Value { return rowcodec.Value{Valid: true, Int: int64(x)} }

// bucket is (murmur3_x86_32(bytes of v) & MaxInt32) % n, with the bytes of the spec's
// Appendix B: int, long, date, time and timestamps as an 8-byte little-endian long;
// decimals as the fewest big-endian two's-complement bytes of the unscaled value;
// strings, binary, fixed and uuid as their bytes.
func bucket(src iceberg.Type, n int32) func(rowcodec.Value) rowcodec.Value {
	mod := func(h uint32) rowcodec.Value { return intValue(int32(h&math.MaxInt32) % n) }
	switch src := src.(type) {
	case iceberg.DecimalType:
		if src.Precision() <= 18 {
			return func(v rowcodec.Value) rowcodec.Value {
				var b [8]byte
				binary.BigEndian.PutUint64(b[:], uint64(v.Int))
				return mod(murmur3.Sum32(rowcodec.MinimalTwos(b[:])))
			}
		}
		return func(v rowcodec.Value) rowcodec.Value { return mod(murmur3.Sum32(rowcodec.MinimalTwos(v.Bytes))) }
	case iceberg.StringType, iceberg.BinaryType, iceberg.FixedType, iceberg.UUIDType:
		return func(v rowcodec.Value) rowcodec.Value { return mod(murmur3.Sum32(v.Bytes)) }
	}
	return func(v rowcodec.Value) rowcodec.Value { return mod(hashLong(v.Int)) }
}

// hashLong is the spec's hashLong: murmur3 of the 8 little-endian bytes of x.
func hashLong(x int64) uint32 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(x))
	return murmur3.Sum32(b[:])
}

// truncate is v - (((v % w) + w) % w) for numbers (in the type's own width, wrapping as
// Java's int and long do), the first w code points of a string, the first w bytes of
// binary; decimals truncate their unscaled value.
func truncate(src iceberg.Type, w int) func(rowcodec.Value) rowcodec.Value {
	switch src := src.(type) {
	case iceberg.Int32Type:
		w := int32(w)
		return func(v rowcodec.Value) rowcodec.Value {
			x := int32(v.Int)
			return intValue(x - (((x % w) + w) % w))
		}
	case iceberg.Int64Type:
		w := int64(w)
		return func(v rowcodec.Value) rowcodec.Value {
			return rowcodec.Value{Valid: true, Int: v.Int - (((v.Int % w) + w) % w)}
		}
	case iceberg.DecimalType:
		if src.Precision() <= 18 {
			// |unscaled| < 10^18 and w ≤ MaxInt32 (checkDecimalWidth): no overflow.
			w := int64(w)
			return func(v rowcodec.Value) rowcodec.Value {
				return rowcodec.Value{Valid: true, Int: v.Int - (((v.Int % w) + w) % w)}
			}
		}
		size, bw := tableschema.DecimalBytes(src.Precision()), big.NewInt(int64(w))
		return func(v rowcodec.Value) rowcodec.Value {
			x := fromTwos(v.Bytes)
			r := new(big.Int).Mod(x, bw) // Go's Mod is Euclidean: already 0 ≤ r < w
			return rowcodec.Value{Valid: true, Bytes: toTwos(x.Sub(x, r), size)}
		}
	case iceberg.StringType:
		return func(v rowcodec.Value) rowcodec.Value {
			n := 0
			for i := range string(v.Bytes) { // code points, not bytes
				if n == w {
					return rowcodec.Value{Valid: true, Bytes: v.Bytes[:i]}
				}
				n++
			}
			return v
		}
	}
	return func(v rowcodec.Value) rowcodec.Value { // binary
		if len(v.Bytes) > w {
			return rowcodec.Value{Valid: true, Bytes: v.Bytes[:w]}
		}
		return v
	}
}

// fromTwos reads a big-endian two's-complement number.
func fromTwos(b []byte) *big.Int {
	x := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return x
}

// toTwos writes x as size big-endian two's-complement bytes; x must fit.
func toTwos(x *big.Int, size int) []byte {
	if x.Sign() >= 0 {
		return x.FillBytes(make([]byte, size))
	}
	y := new(big.Int).Add(x, new(big.Int).Lsh(big.NewInt(1), uint(8*size)))
	return y.FillBytes(make([]byte, size))
}

// timeUnit counts whole years, months, days or hours from 1970-01-01 00:00 UTC to a
// date (days) or timestamp (µs), flooring before the epoch (1969-12-31 is day -1 and
// year -1), as the spec's int results, which wrap as Java's (int) casts do.
func timeUnit(src iceberg.Type, k Kind) func(rowcodec.Value) rowcodec.Value {
	_, date := src.(iceberg.DateType)
	return func(v rowcodec.Value) rowcodec.Value {
		days := v.Int
		if !date {
			if k == Hour {
				return intValue(int32(floorDiv(v.Int, microsPerHour)))
			}
			days = floorDiv(v.Int, microsPerDay)
		}
		switch k {
		case Day:
			return intValue(int32(days))
		case Year:
			y, _, _ := civil(days)
			return intValue(int32(y - 1970))
		}
		y, m, _ := civil(days)
		return intValue(int32((y-1970)*12 + m - 1))
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// civil is the proleptic Gregorian year, month (1..12) and day (1..31) of a day counted
// from 1970-01-01 (Howard Hinnant's civil_from_days).
func civil(days int64) (y, m, d int64) {
	z := days + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365]
	mp := (5*doy + 2) / 153                                // [0, 11], from March
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}
