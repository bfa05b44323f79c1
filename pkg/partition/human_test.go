package partition

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// What Iceberg's Java reference implementation writes (Transform.toHumanString, and
// java.lang and java.time's toString where it uses them).
func TestHumanVectors(t *testing.T) {
	id := Transform{Kind: Identity}
	dbl := func(f float64) rowcodec.Value { return rowcodec.Value{Valid: true, Float: f} }
	dec := func(unscaled int64) rowcodec.Value { return intv(unscaled) }
	tod := func(h, m, s, us int64) rowcodec.Value { return intv(((h*60+m)*60+s)*1e6 + us) }
	u := uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7")
	big38, _ := new(big.Int).SetString("-12345678901234567890123456789012345678", 10)
	for _, c := range []struct {
		t    Transform
		typ  iceberg.Type
		v    rowcodec.Value
		want string
	}{
		{Transform{Kind: Year}, nil, intv(56), "2026"},
		{Transform{Kind: Year}, nil, intv(-1), "1969"},
		{Transform{Kind: Year}, nil, intv(-1000), "0970"},
		{Transform{Kind: Month}, nil, intv(683), "2026-12"},
		{Transform{Kind: Month}, nil, intv(-1), "1969-12"},
		{Transform{Kind: Day}, nil, intv(20794), "2026-12-07"},
		{Transform{Kind: Day}, nil, intv(-1), "1969-12-31"},
		{Transform{Kind: Hour}, nil, intv(499069), "2026-12-07-13"},
		{Transform{Kind: Hour}, nil, intv(-1), "1969-12-31-23"},
		{Transform{Kind: Bucket, Arg: 8}, nil, intv(3), "3"},
		{Transform{Kind: Void}, iceberg.PrimitiveTypes.Int32, intv(3), "null"},
		{id, iceberg.PrimitiveTypes.Int32, rowcodec.Value{}, "null"},
		{id, iceberg.PrimitiveTypes.Bool, intv(1), "true"},
		{id, iceberg.PrimitiveTypes.Int64, intv(-42), "-42"},
		{id, iceberg.PrimitiveTypes.String, strv("a b/c"), "a b/c"},
		{id, iceberg.PrimitiveTypes.Binary, bytesv([]byte{0, 1, 2, 3}), "AAECAw=="},
		{id, iceberg.FixedTypeOf(4), bytesv([]byte{0, 1, 2, 3}), "AAECAw=="},
		{id, iceberg.PrimitiveTypes.UUID, bytesv(u[:]), "f79c3e09-677c-4bbd-a479-3f349cb785e7"},
		{id, iceberg.PrimitiveTypes.Date, daysOf("2017-11-16"), "2017-11-16"},
		// LocalTime.toString: seconds only when they or a fraction are not zero, the
		// fraction in groups of three digits.
		{id, iceberg.PrimitiveTypes.Time, tod(22, 31, 8, 0), "22:31:08"},
		{id, iceberg.PrimitiveTypes.Time, tod(22, 31, 0, 0), "22:31"},
		{id, iceberg.PrimitiveTypes.Time, tod(0, 0, 0, 0), "00:00"},
		{id, iceberg.PrimitiveTypes.Time, tod(22, 31, 8, 500000), "22:31:08.500"},
		{id, iceberg.PrimitiveTypes.Time, tod(22, 31, 0, 1000), "22:31:00.001"},
		{id, iceberg.PrimitiveTypes.Time, tod(22, 31, 8, 123), "22:31:08.000123"},
		// ISO_LOCAL_DATE_TIME, and +00:00 for timestamptz.
		{id, iceberg.PrimitiveTypes.Timestamp, micros("2017-11-16T22:31:08Z"), "2017-11-16T22:31:08"},
		{id, iceberg.PrimitiveTypes.Timestamp, micros("2017-11-16T22:31:08.5Z"), "2017-11-16T22:31:08.5"},
		{id, iceberg.PrimitiveTypes.Timestamp, micros("2017-11-16T22:31:08.000123Z"), "2017-11-16T22:31:08.000123"},
		{id, iceberg.PrimitiveTypes.TimestampTz, micros("2017-11-16T14:31:08-08:00"), "2017-11-16T22:31:08+00:00"},
		{id, iceberg.PrimitiveTypes.Timestamp, intv(253402300800000000), "+10000-01-01T00:00:00"},
		{id, iceberg.PrimitiveTypes.Timestamp, intv(-62198755200000000), "-0001-01-01T00:00:00"},
		{id, iceberg.PrimitiveTypes.Timestamp, intv(-62167219200000000), "0000-01-01T00:00:00"},
		// Double.toString and Float.toString.
		{id, iceberg.PrimitiveTypes.Float64, dbl(1), "1.0"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(0.1), "0.1"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(100), "100.0"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(-2.5), "-2.5"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(0.001), "0.001"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(0.002), "0.002"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(1e-4), "1.0E-4"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(123456.789), "123456.789"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(9999999), "9999999.0"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(1e7), "1.0E7"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(1.25e21), "1.25E21"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(math.MaxFloat64), "1.7976931348623157E308"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(math.SmallestNonzeroFloat64), "4.9E-324"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(math.Copysign(0, -1)), "-0.0"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(0), "0.0"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(math.NaN()), "NaN"},
		{id, iceberg.PrimitiveTypes.Float64, dbl(math.Inf(-1)), "-Infinity"},
		{id, iceberg.PrimitiveTypes.Float32, dbl(float64(float32(0.1))), "0.1"},
		{id, iceberg.PrimitiveTypes.Float32, dbl(float64(float32(3.14))), "3.14"},
		{id, iceberg.PrimitiveTypes.Float32, dbl(float64(float32(1e10))), "1.0E10"},
		{id, iceberg.PrimitiveTypes.Float32, dbl(math.MaxFloat32), "3.4028235E38"},
		{id, iceberg.PrimitiveTypes.Float32, dbl(math.SmallestNonzeroFloat32), "1.4E-45"},
		// BigDecimal.toString.
		{id, iceberg.DecimalTypeOf(9, 2), dec(1420), "14.20"},
		{id, iceberg.DecimalTypeOf(9, 1), dec(-5), "-0.5"},
		{id, iceberg.DecimalTypeOf(9, 2), dec(0), "0.00"},
		{id, iceberg.DecimalTypeOf(9, 0), dec(12345), "12345"},
		{id, iceberg.DecimalTypeOf(10, 8), dec(123), "0.00000123"},
		{id, iceberg.DecimalTypeOf(12, 10), dec(123), "1.23E-8"},
		{id, iceberg.DecimalTypeOf(9, 7), dec(1), "1E-7"},
		{id, iceberg.DecimalTypeOf(9, 7), dec(0), "0E-7"},
		{id, iceberg.DecimalTypeOf(38, 2), bytesv(toTwos(big38, 16)), "-123456789012345678901234567890123456.78"},
		{Transform{Kind: Truncate, Arg: 2}, iceberg.PrimitiveTypes.Binary, bytesv([]byte{0, 1}), "AAE="},
	} {
		if got := HumanValue(c.t, c.typ, c.v); got != c.want {
			t.Errorf("%s of %v %+v: %q; want %q", c.t, c.typ, c.v, got, c.want)
		}
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"2026-12-07":                "2026-12-07",
		"a b+c/é*~":                 "a+b%2Bc%2F%C3%A9*%7E",
		"2017-11-16T22:31:08+00:00": "2017-11-16T22%3A31%3A08%2B00%3A00",
		"AAECAw==":                  "AAECAw%3D%3D",
		"100%":                      "100%25",
		"_.-":                       "_.-",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestPath(t *testing.T) {
	s := jsonSchema(t, "event_ts:timestamptz", "user_id:string", "name:string", "ts:timestamp")
	e, err := NewEvaluator(mustBuild(t, s, nil, "day(event_ts)", "bucket[8](user_id)", "name", "ts"), s)
	if err != nil {
		t.Fatal(err)
	}
	tu := Tuple{intv(20794), intv(3), strv("a b/c"), micros("2017-11-16T22:31:08Z")}
	if got, want := e.Path(tu), "event_ts_day=2026-12-07/user_id_bucket=3/name=a+b%2Fc/ts=2017-11-16T22%3A31%3A08"; got != want {
		t.Errorf("Path = %q; want %q", got, want)
	}
	if got, want := e.Path(Tuple{{}, {}, {}, {}}), "event_ts_day=null/user_id_bucket=null/name=null/ts=null"; got != want {
		t.Errorf("Path of nulls = %q; want %q", got, want)
	}
	// A long value is cut, never inside a %XX; a long path keeps the segments that fit.
	long := e.Path(Tuple{intv(0), intv(0), strv(strings.Repeat("é", 100)), {}})
	if want := "name=" + strings.Repeat("%C3%A9", 10) + "%C3/"; !strings.Contains(long, want) {
		t.Errorf("Path of a long name = %q; want it to hold %q", long, want)
	}
	wide := make([]string, MaxFields)
	cols := make([]string, MaxFields)
	for i := range wide {
		cols[i] = "c" + strings.Repeat("x", 100) + itoa(i) + ":string"
		wide[i] = "c" + strings.Repeat("x", 100) + itoa(i)
	}
	ws := jsonSchema(t, cols...)
	we, err := NewEvaluator(mustBuild(t, ws, nil, wide...), ws)
	if err != nil {
		t.Fatal(err)
	}
	tu = make(Tuple, MaxFields)
	for i := range tu {
		tu[i] = strv(strings.Repeat("v", 100))
	}
	p := we.Path(tu)
	if len(p) > MaxPathLen || strings.Count(p, "/") != 2 || strings.HasSuffix(p, "/") {
		t.Errorf("wide path (%d bytes) = %q", len(p), p)
	}
}

func TestHumanOfTuple(t *testing.T) {
	s := jsonSchema(t, "event_ts:timestamptz", "n:long")
	e, err := NewEvaluator(mustBuild(t, s, nil, "hour(event_ts)", "truncate[10](n)"), s)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.Human(Tuple{intv(499069), intv(-20)}), ","); got != "2026-12-07-13,-20" {
		t.Errorf("Human = %s", got)
	}
}
