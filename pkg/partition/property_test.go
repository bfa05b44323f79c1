package partition

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"pgregory.net/rapid"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// typeKinds are the primitive types Mink stores, by drawTypeOf's numbering.
var typeKinds = []string{"boolean", "int", "long", "float", "double", "decimal", "date", "time", "timestamp",
	"timestamptz", "string", "uuid", "fixed", "binary"}

// sampleTypes has a type of each of typeKinds.
var sampleTypes = []iceberg.PrimitiveType{iceberg.PrimitiveTypes.Bool, iceberg.PrimitiveTypes.Int32, iceberg.PrimitiveTypes.Int64,
	iceberg.PrimitiveTypes.Float32, iceberg.PrimitiveTypes.Float64, iceberg.DecimalTypeOf(9, 2), iceberg.PrimitiveTypes.Date,
	iceberg.PrimitiveTypes.Time, iceberg.PrimitiveTypes.Timestamp, iceberg.PrimitiveTypes.TimestampTz,
	iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.UUID, iceberg.FixedTypeOf(4), iceberg.PrimitiveTypes.Binary}

// drawTypeOf draws the type of typeKinds[kind] (a decimal's precision and scale, a
// fixed's length).
func drawTypeOf(t *rapid.T, kind int) iceberg.PrimitiveType {
	switch typeKinds[kind] {
	case "decimal":
		p := rapid.IntRange(1, tableschema.MaxDecimalPrecision).Draw(t, "precision")
		return iceberg.DecimalTypeOf(p, rapid.IntRange(0, p).Draw(t, "scale"))
	case "fixed":
		return iceberg.FixedTypeOf(rapid.IntRange(1, 24).Draw(t, "fixed length"))
	}
	return sampleTypes[kind]
}

// drawValue draws a value of typ in rowcodec's form, null now and then. inRange keeps
// dates and timestamps within years 1000..9999, which every formatter prints alike
// (before 1000 Java pads years to four digits and iceberg-go's year does not).
func drawValue(t *rapid.T, typ iceberg.Type, inRange bool) rowcodec.Value {
	if rapid.IntRange(0, 9).Draw(t, "null") == 0 {
		return rowcodec.Value{}
	}
	const (
		minDay = -354285 // 1000-01-01
		maxDay = 2932896 // 9999-12-31
	)
	v := rowcodec.Value{Valid: true}
	switch typ := typ.(type) {
	case iceberg.BooleanType:
		v.Int = int64(rapid.IntRange(0, 1).Draw(t, "bool"))
	case iceberg.Int32Type:
		v.Int = int64(rapid.Int32().Draw(t, "int"))
	case iceberg.Int64Type:
		v.Int = rapid.Int64().Draw(t, "long")
	case iceberg.Float32Type:
		v.Float = float64(math.Float32frombits(rapid.Uint32().Draw(t, "float bits")))
	case iceberg.Float64Type:
		v.Float = math.Float64frombits(rapid.Uint64().Draw(t, "double bits"))
	case iceberg.DecimalType:
		digits := rapid.StringMatching(`[0-9]{1,38}`).Draw(t, "digits")
		if len(digits) > typ.Precision() {
			digits = digits[:typ.Precision()]
		}
		x, _ := new(big.Int).SetString(digits, 10)
		if rapid.Bool().Draw(t, "negative") {
			x.Neg(x)
		}
		if typ.Precision() <= 18 {
			v.Int = x.Int64()
		} else {
			v.Bytes = toTwos(x, tableschema.DecimalBytes(typ.Precision()))
		}
	case iceberg.DateType:
		if inRange {
			v.Int = int64(rapid.IntRange(minDay, maxDay).Draw(t, "date"))
		} else {
			v.Int = int64(rapid.Int32().Draw(t, "date"))
		}
	case iceberg.TimeType:
		v.Int = rapid.Int64Range(0, microsPerDay-1).Draw(t, "time")
	case iceberg.TimestampType, iceberg.TimestampTzType:
		if inRange {
			v.Int = rapid.Int64Range(minDay*microsPerDay, (maxDay+1)*microsPerDay-1).Draw(t, "timestamp")
		} else {
			v.Int = rapid.Int64().Draw(t, "timestamp")
		}
	case iceberg.StringType:
		v.Bytes = []byte(rapid.String().Draw(t, "string"))
	case iceberg.UUIDType:
		v.Bytes = rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid")
	case iceberg.FixedType:
		v.Bytes = rapid.SliceOfN(rapid.Byte(), typ.Len(), typ.Len()).Draw(t, "fixed")
	case iceberg.BinaryType:
		v.Bytes = rapid.SliceOf(rapid.Byte()).Draw(t, "binary")
	}
	return v
}

// drawTransformOf draws a transform of kind k for typ: N or W from a few up to
// MaxArg, within what Build lets through.
func drawTransformOf(t *rapid.T, typ iceberg.Type, k Kind) Transform {
	tr := Transform{Kind: k}
	if k == Bucket || k == Truncate {
		tr.Arg = rapid.OneOf(rapid.IntRange(1, 64), rapid.IntRange(1, MaxArg)).Draw(t, "arg")
		for checkDecimalWidth(tr, typ) != nil {
			tr.Arg /= 2
		}
	}
	return tr
}

// eachTypeAndKind runs check as a subtest for every type Mink stores and every
// transform kind defined for it, so that each pair gets its own random values; skip
// leaves pairs out.
func eachTypeAndKind(t *testing.T, skip func(typ string, k Kind) bool, check func(t *rapid.T, typ iceberg.PrimitiveType, k Kind)) {
	for kind, name := range typeKinds {
		for k := Identity; k <= Void; k++ {
			if skip != nil && skip(name, k) {
				continue
			}
			// Whether k applies does not depend on a decimal's precision or a fixed's length.
			sample := sampleTypes[kind]
			if !(Transform{Kind: k, Arg: 1}).Applies(sample) {
				continue
			}
			t.Run(k.String()+"/"+name, func(t *testing.T) {
				rapid.Check(t, func(rt *rapid.T) { check(rt, drawTypeOf(rt, kind), k) })
			})
		}
	}
}

// Every transform of every type Mink stores computes what iceberg-go v0.7.0's own
// transform computes, nulls included.
func TestTransformsMatchIcebergGo(t *testing.T) {
	eachTypeAndKind(t, nil, func(t *rapid.T, typ iceberg.PrimitiveType, k Kind) {
		tr := drawTransformOf(t, typ, k)
		fn, err := tr.Compile(typ)
		if err != nil {
			t.Fatal(err)
		}
		for range rapid.IntRange(1, 50).Draw(t, "values") {
			v := drawValue(t, typ, false)
			got := Literal(tr.ResultType(typ), fn(v))
			var in iceberg.Optional[iceberg.Literal]
			if v.Valid {
				in = iceberg.Optional[iceberg.Literal]{Valid: true, Val: Literal(typ, v)}
			}
			want := tr.Iceberg().Apply(in)
			switch {
			case want.Valid != (got != nil):
				t.Fatalf("%s(%s %+v) = %v; iceberg-go %+v", tr, typ, v, got, want)
			case !want.Valid:
			case isNaN(got) && isNaN(want.Val):
			case !got.Equals(want.Val):
				t.Fatalf("%s(%s %+v) = %v (%T); iceberg-go %v (%T)", tr, typ, v, got, got, want.Val, want.Val)
			}
		}
	})
}

func isNaN(l iceberg.Literal) bool {
	switch l := l.(type) {
	case iceberg.Float32Literal:
		return math.IsNaN(float64(l))
	case iceberg.Float64Literal:
		return math.IsNaN(float64(l))
	}
	return false
}

// Human strings are iceberg-go's (and so Java's) for the transforms and types where
// iceberg-go writes as Java does: time units, buckets, and identity or truncate values
// of dates, timestamps, strings, binary, uuids, integers and booleans.
func TestHumanMatchesIcebergGo(t *testing.T) {
	// iceberg-go writes values of these types as Go does, not as Java (TestHumanVectors).
	goFormat := func(typ string, k Kind) bool {
		return (k == Identity || k == Truncate) && (typ == "float" || typ == "double" || typ == "decimal" || typ == "time")
	}
	eachTypeAndKind(t, goFormat, func(t *rapid.T, typ iceberg.PrimitiveType, k Kind) {
		tr := drawTransformOf(t, typ, k)
		fn, _ := tr.Compile(typ)
		res := tr.ResultType(typ)
		for range rapid.IntRange(1, 50).Draw(t, "values") {
			v := drawValue(t, typ, true)
			p := fn(v)
			var goValue any
			if lit := Literal(res, p); lit != nil {
				goValue = lit.Any()
			}
			got, want := HumanValue(tr, typ, p), tr.Iceberg().ToHumanStrType(res, goValue)
			if got != want {
				t.Fatalf("%s(%s %+v): human %q; iceberg-go %q", tr, typ, v, got, want)
			}
		}
	})
}

// A tuple's key reads back as the tuple, and two tuples have one key exactly when
// their values are equal.
func TestKeys(t *testing.T) {
	s := jsonSchema(t, "ts:timestamptz", "d:date", "n:long", "i:int", "s:string", "b:binary", "u:uuid",
		"dec:decimal(9,2)", "big:decimal(30,3)", "x:double", "f:float", "ok:boolean", "tm:time")
	spec := unchecked(t, s, "hour(ts)", "d", "bucket[7](n)", "truncate[10](i)", "truncate[2](s)", "b", "u",
		"truncate[3](dec)", "big", "x", "f", "ok", "tm", "void(s)")
	e, err := NewEvaluator(spec, s)
	if err != nil {
		t.Fatal(err)
	}
	types := e.Types()
	drawTuple := func(t *rapid.T, label string) Tuple {
		tu := make(Tuple, len(types))
		for i, typ := range types {
			if spec.Fields[i].Transform.Kind == Void {
				continue
			}
			if rapid.Bool().Draw(t, label+" small") {
				// From few values, so that equal tuples come up.
				tu[i] = drawValue(t, typ, true)
				if tu[i].Valid && classOf(typ) == classInt {
					tu[i].Int %= 3
				}
				if len(tu[i].Bytes) > 1 && classOf(typ) == classBytes && !isType[iceberg.UUIDType](typ) {
					tu[i].Bytes = tu[i].Bytes[:1]
				}
				continue
			}
			tu[i] = drawValue(t, typ, false)
		}
		return tu
	}
	rapid.Check(t, func(t *rapid.T) {
		a, b := drawTuple(t, "a"), drawTuple(t, "b")
		ka := e.AppendKey(nil, a)
		back, err := e.ParseKey(ka)
		if err != nil {
			t.Fatalf("ParseKey(%x): %v", ka, err)
		}
		if !equalTuples(types, back, a) {
			t.Fatalf("key %x reads back as %+v; want %+v", ka, back, a)
		}
		if kb := e.AppendKey(nil, b); (string(ka) == string(kb)) != equalTuples(types, a, b) {
			t.Fatalf("tuples %+v and %+v: keys %x and %x", a, b, ka, kb)
		}
		// No key is a prefix of another's reading: a cut key does not parse.
		if len(ka) > 0 {
			if _, err := e.ParseKey(ka[:len(ka)-1]); err == nil {
				t.Fatalf("key %x cut by a byte parses", ka)
			}
		}
	})
}

// equalTuples compares tuples as partition values: by literal, NaN equal to NaN.
func equalTuples(types []iceberg.Type, a, b Tuple) bool {
	for i, typ := range types {
		la, lb := Literal(typ, a[i]), Literal(typ, b[i])
		switch {
		case (la == nil) != (lb == nil):
			return false
		case la == nil:
		case isNaN(la) && isNaN(lb):
		case !la.Equals(lb):
			return false
		}
	}
	return true
}

func TestParseKeyRefusesGarbage(t *testing.T) {
	s := jsonSchema(t, "n:long", "s:string")
	e, err := NewEvaluator(mustBuild(t, s, nil, "n", "s"), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "\x00", "\x02\x00", "\x01", "\x00\x01\x05ab", "\x00\x00\x00"} {
		if tu, err := e.ParseKey([]byte(key)); err == nil {
			t.Errorf("ParseKey(%q) = %+v", key, tu)
		}
	}
	if !strings.Contains(errKey.Error(), "malformed") {
		t.Error(errKey)
	}
}
