package partition

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

func apply(t *testing.T, tr Transform, src iceberg.Type, v rowcodec.Value) rowcodec.Value {
	t.Helper()
	fn, err := tr.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	return fn(v)
}

func intv(x int64) rowcodec.Value       { return rowcodec.Value{Valid: true, Int: x} }
func bytesv(b []byte) rowcodec.Value    { return rowcodec.Value{Valid: true, Bytes: b} }
func strv(s string) rowcodec.Value      { return bytesv([]byte(s)) }
func micros(ts string) rowcodec.Value   { return intv(mustTime(ts).UnixMicro()) }
func daysOf(date string) rowcodec.Value { return intv(mustTime(date+"T00:00:00Z").Unix() / 86400) }

func mustTime(s string) time.Time {
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return tm
}

// The Iceberg spec's Appendix B: the 32-bit hash of each type's test value. bucket[N]
// is (hash & Integer.MAX_VALUE) % N, so bucket[MaxInt32] shows hash & MaxInt32.
func TestBucketSpecVectors(t *testing.T) {
	fixed16 := func(hex string) []byte { u := uuid.MustParse(hex); return u[:] }
	for _, c := range []struct {
		name string
		typ  iceberg.Type
		v    rowcodec.Value
		hash int32
	}{
		{"int 34", iceberg.PrimitiveTypes.Int32, intv(34), 2017239379},
		{"long 34", iceberg.PrimitiveTypes.Int64, intv(34), 2017239379},
		{"decimal 14.20", iceberg.DecimalTypeOf(9, 2), intv(1420), -500754589},
		{"decimal 14.20 as decimal(38,2)", iceberg.DecimalTypeOf(38, 2), bytesv(twos(big.NewInt(1420), 16)), -500754589},
		{"date 2017-11-16", iceberg.PrimitiveTypes.Date, daysOf("2017-11-16"), -653330422},
		{"time 22:31:08", iceberg.PrimitiveTypes.Time, intv((22*3600 + 31*60 + 8) * 1e6), -662762989},
		{"timestamp 2017-11-16T22:31:08", iceberg.PrimitiveTypes.Timestamp, micros("2017-11-16T22:31:08Z"), -2047944441},
		{"timestamptz 2017-11-16T14:31:08-08:00", iceberg.PrimitiveTypes.TimestampTz, micros("2017-11-16T14:31:08-08:00"), -2047944441},
		{"string iceberg", iceberg.PrimitiveTypes.String, strv("iceberg"), 1210000089},
		{"uuid f79c3e09-677c-4bbd-a479-3f349cb785e7", iceberg.PrimitiveTypes.UUID, bytesv(fixed16("f79c3e09-677c-4bbd-a479-3f349cb785e7")), 1488055340},
		{"fixed 00 01 02 03", iceberg.FixedTypeOf(4), bytesv([]byte{0, 1, 2, 3}), -188683207},
		{"binary 00 01 02 03", iceberg.PrimitiveTypes.Binary, bytesv([]byte{0, 1, 2, 3}), -188683207},
	} {
		got := apply(t, Transform{Kind: Bucket, Arg: MaxArg}, c.typ, c.v)
		if want := int64(c.hash & math.MaxInt32); !got.Valid || got.Int != want {
			t.Errorf("%s: bucket[MaxInt32] = %+v; want %d (hash %d)", c.name, got, want, c.hash)
		}
		// And as a bucket number.
		if got := apply(t, Transform{Kind: Bucket, Arg: 16}, c.typ, c.v); got.Int != int64(c.hash&math.MaxInt32)%16 {
			t.Errorf("%s: bucket[16] = %d", c.name, got.Int)
		}
	}
}

// twos is x as size big-endian two's-complement bytes, as rowcodec holds decimals of
// precision above 18.
func twos(x *big.Int, size int) []byte { return toTwos(x, size) }

// The Iceberg spec's truncate examples and the edges of each type.
func TestTruncate(t *testing.T) {
	tr := func(w int) Transform { return Transform{Kind: Truncate, Arg: w} }
	for _, c := range []struct {
		name string
		t    Transform
		typ  iceberg.Type
		v    rowcodec.Value
		want rowcodec.Value
	}{
		{"int 1 W=10", tr(10), iceberg.PrimitiveTypes.Int32, intv(1), intv(0)},
		{"int -1 W=10", tr(10), iceberg.PrimitiveTypes.Int32, intv(-1), intv(-10)},
		{"long -1 W=10", tr(10), iceberg.PrimitiveTypes.Int64, intv(-1), intv(-10)},
		{"long 10 W=10", tr(10), iceberg.PrimitiveTypes.Int64, intv(10), intv(10)},
		{"int min W=10 wraps as Java's int", tr(10), iceberg.PrimitiveTypes.Int32, intv(math.MinInt32), intv(math.MaxInt32 - 1)},
		{"decimal 10.65 W=50", tr(50), iceberg.DecimalTypeOf(9, 2), intv(1065), intv(1050)},
		{"decimal -0.01 W=50", tr(50), iceberg.DecimalTypeOf(9, 2), intv(-1), intv(-50)},
		{"decimal(38,2) -0.01 W=50", tr(50), iceberg.DecimalTypeOf(38, 2), bytesv(twos(big.NewInt(-1), 16)), bytesv(twos(big.NewInt(-50), 16))},
		{"string iceberg L=3", tr(3), iceberg.PrimitiveTypes.String, strv("iceberg"), strv("ice")},
		{"string by code points", tr(2), iceberg.PrimitiveTypes.String, strv("éàü"), strv("éà")},
		{"string of 4-byte code points", tr(1), iceberg.PrimitiveTypes.String, strv("😀😃"), strv("😀")},
		{"string shorter than L", tr(10), iceberg.PrimitiveTypes.String, strv("ab"), strv("ab")},
		{"binary by bytes", tr(2), iceberg.PrimitiveTypes.Binary, bytesv([]byte{1, 2, 3}), bytesv([]byte{1, 2})},
		{"null", tr(2), iceberg.PrimitiveTypes.String, rowcodec.Value{}, rowcodec.Value{}},
	} {
		got := apply(t, c.t, c.typ, c.v)
		if !sameValue(got, c.want) {
			t.Errorf("%s: %+v; want %+v", c.name, got, c.want)
		}
	}
	// The least decimal(38,S) truncated by the widest W fits its 16 bytes (Build lets
	// every W through for precision 38).
	least := new(big.Int).Neg(new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(38), nil), big.NewInt(1)))
	got := apply(t, tr(MaxArg), iceberg.DecimalTypeOf(38, 0), bytesv(twos(least, 16)))
	want := new(big.Int).Sub(least, new(big.Int).Mod(least, big.NewInt(MaxArg)))
	if fromTwos(got.Bytes).Cmp(want) != 0 || len(got.Bytes) != 16 {
		t.Errorf("least decimal(38,0) truncate[MaxInt32] = %v; want %v", fromTwos(got.Bytes), want)
	}
}

func sameValue(a, b rowcodec.Value) bool {
	return a.Valid == b.Valid && a.Int == b.Int && string(a.Bytes) == string(b.Bytes) &&
		(a.Float == b.Float || math.IsNaN(a.Float) && math.IsNaN(b.Float))
}

// Years, months, days and hours from the epoch floor before it, for dates and for
// timestamps with and without zone.
func TestTimeUnits(t *testing.T) {
	ts := []iceberg.Type{iceberg.PrimitiveTypes.Timestamp, iceberg.PrimitiveTypes.TimestampTz}
	for _, c := range []struct {
		at                     string
		year, month, day, hour int64
	}{
		{"1970-01-01T00:00:00Z", 0, 0, 0, 0},
		{"2017-11-16T22:31:08Z", 47, 574, 17486, 419686},
		{"2026-12-07T13:05:00Z", 56, 683, 20794, 499069},
		{"1969-12-31T23:59:59.999999Z", -1, -1, -1, -1},
		{"1969-01-01T00:00:00Z", -1, -12, -365, -8760},
		{"1968-12-31T23:00:00Z", -2, -13, -366, -8761},
		{"1900-03-01T00:00:00Z", -70, -838, -25508, -612192},
		{"2000-02-29T12:00:00Z", 30, 361, 11016, 264396},
	} {
		for _, typ := range ts {
			v := micros(c.at)
			for k, want := range map[Kind]int64{Year: c.year, Month: c.month, Day: c.day, Hour: c.hour} {
				if got := apply(t, Transform{Kind: k}, typ, v); !got.Valid || got.Int != want {
					t.Errorf("%s(%s %s) = %+v; want %d", k, typ, c.at, got, want)
				}
			}
		}
		// The same date as a date.
		d := daysOf(c.at[:10])
		for k, want := range map[Kind]int64{Year: c.year, Month: c.month, Day: c.day} {
			if got := apply(t, Transform{Kind: k}, iceberg.PrimitiveTypes.Date, d); !got.Valid || got.Int != want {
				t.Errorf("%s(date %s) = %+v; want %d", k, c.at[:10], got, want)
			}
		}
	}
	// A timestamp 290,000 years out wraps as Java's (int) cast does.
	hours := int64(math.MaxInt64 / microsPerHour)
	if got := apply(t, Transform{Kind: Hour}, ts[0], intv(math.MaxInt64)); got.Int != int64(int32(hours)) || got.Int == hours {
		t.Errorf("hour(max) = %d", got.Int)
	}
}

func TestNullAndVoid(t *testing.T) {
	for _, tr := range []Transform{{Kind: Identity}, {Kind: Year}, {Kind: Month}, {Kind: Day}, {Kind: Hour},
		{Kind: Bucket, Arg: 4}, {Kind: Void}} {
		if got := apply(t, tr, iceberg.PrimitiveTypes.TimestampTz, rowcodec.Value{}); got.Valid {
			t.Errorf("%s(null) = %+v", tr, got)
		}
	}
	if got := apply(t, Transform{Kind: Void}, iceberg.PrimitiveTypes.Int64, intv(3)); got.Valid {
		t.Errorf("void(3) = %+v", got)
	}
	if _, err := (Transform{Kind: Hour}).Compile(iceberg.PrimitiveTypes.Date); err == nil {
		t.Error("hour compiles for a date")
	}
	if _, err := (Transform{Kind: Identity}).Compile(&iceberg.ListType{Element: iceberg.PrimitiveTypes.Int32}); err == nil {
		t.Error("identity compiles for a list")
	}
}

// Every decimal precision that takes bytes holds its truncated least value at the
// widest width Build lets through.
func TestDecimalWidthBound(t *testing.T) {
	for p := 1; p <= tableschema.MaxDecimalPrecision; p++ {
		typ := iceberg.DecimalTypeOf(p, 0)
		lo, hi := 1, MaxArg
		// The widest W checkDecimalWidth allows.
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if checkDecimalWidth(Transform{Kind: Truncate, Arg: mid}, typ) == nil {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		least := new(big.Int).Neg(new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil), big.NewInt(1)))
		w := big.NewInt(int64(lo))
		// The smallest result over the least values: the largest multiple of W ≤ least.
		r := new(big.Int).Sub(least, new(big.Int).Mod(least, w))
		n := tableschema.DecimalBytes(p)
		if limit := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), uint(8*n-1))); r.Cmp(limit) < 0 {
			t.Errorf("decimal(%d,0): truncate[%d] of %v = %v, below the %d bytes' %v", p, lo, least, r, n, limit)
		}
		if lo < MaxArg {
			// One wider would not fit for some value: the check is as loose as it can be.
			w1 := big.NewInt(int64(lo + 1))
			worst := new(big.Int).Sub(least, new(big.Int).Sub(w1, big.NewInt(1)))
			limit := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), uint(8*n-1)))
			if worst.Cmp(limit) >= 0 {
				t.Errorf("decimal(%d,0): truncate[%d] refused, but every value fits", p, lo+1)
			}
		}
	}
}
