package upsert

import (
	"bytes"
	"math"
	"testing"

	"github.com/apache/iceberg-go"
	"pgregory.net/rapid"

	"github.com/minkhq/mink/pkg/rowcodec"
)

func null() rowcodec.Value                       { return rowcodec.Value{} }
func vInt(n int64) rowcodec.Value                { return rowcodec.Value{Valid: true, Int: n} }
func vFloat(f float64) rowcodec.Value            { return rowcodec.Value{Valid: true, Float: f} }
func vStr(s string) rowcodec.Value               { return rowcodec.Value{Valid: true, Bytes: []byte(s)} }
func vBytes(b []byte) rowcodec.Value             { return rowcodec.Value{Valid: true, Bytes: b} }
func vElems(vs ...rowcodec.Value) rowcodec.Value { return rowcodec.Value{Valid: true, Elems: vs} }

func field(id int, name string, t iceberg.Type) iceberg.NestedField {
	return iceberg.NestedField{ID: id, Name: name, Type: t}
}

func structOf(fs ...iceberg.NestedField) *iceberg.StructType {
	return &iceberg.StructType{FieldList: fs}
}

// hashOf is the identity of decoded key v of type t.
func hashOf(t *testing.T, typ iceberg.Type, v rowcodec.Value) Hash {
	t.Helper()
	e, err := NewKeyEncoder(typ)
	if err != nil {
		t.Fatal(err)
	}
	return DecodedKeyHash(e.Append(nil, v))
}

// TestKeyEncoderOneKeyAcrossVersions: the identity of a decoded key does not depend on
// where a table version puts its fields (field-id order), on fields a later version adds
// (null in older records: left out), nor on promotions (int→long, float→double, a
// decimal held in Int or in Bytes).
func TestKeyEncoderOneKeyAcrossVersions(t *testing.T) {
	v1 := structOf(field(1, "id", iceberg.Int32Type{}), field(2, "region", iceberg.StringType{}))
	// A later version: id widened, a field added, the fields in another order (what a
	// version may hold them in; the decoded struct follows the version's order).
	v2 := structOf(field(7, "note", iceberg.StringType{}), field(2, "region", iceberg.StringType{}), field(1, "id", iceberg.Int64Type{}))
	a := hashOf(t, v1, vElems(vInt(1), vStr("eu")))
	if b := hashOf(t, v2, vElems(null(), vStr("eu"), vInt(1))); a != b {
		t.Error("one key at two versions (fields reordered, a null field added, int→long) has two identities")
	}
	if b := hashOf(t, v2, vElems(vStr("gift"), vStr("eu"), vInt(1))); a == b {
		t.Error("a key with one more non-null field is the same key")
	}
	if b := hashOf(t, v1, vElems(vInt(1), vStr("us"))); a == b {
		t.Error("keys differing in one field are one key")
	}
	// Nulls are left out, so a null field is an absent one; their field ids keep which
	// field holds a value apart.
	ab := structOf(field(1, "a", iceberg.StringType{}), field(2, "b", iceberg.StringType{}))
	if hashOf(t, ab, vElems(vStr("x"), null())) == hashOf(t, ab, vElems(null(), vStr("x"))) {
		t.Error("{a: x} and {b: x} are one key")
	}
	if hashOf(t, ab, vElems(null(), null())) == hashOf(t, ab, null()) {
		t.Error("a key of null fields is the null key")
	}

	f32, f64 := iceberg.Float32Type{}, iceberg.Float64Type{}
	if hashOf(t, f32, vFloat(float64(float32(1.1)))) != hashOf(t, f64, vFloat(float64(float32(1.1)))) {
		t.Error("float→double changes the identity")
	}
	if hashOf(t, f64, vFloat(math.Copysign(0, -1))) != hashOf(t, f64, vFloat(0)) {
		t.Error("-0 and 0 are two keys")
	}
	if hashOf(t, f64, vFloat(math.NaN())) != hashOf(t, f64, vFloat(math.Float64frombits(0x7ff8000000000001))) {
		t.Error("two NaNs are two keys")
	}
	if hashOf(t, f64, vFloat(1)) == hashOf(t, f64, vFloat(2)) {
		t.Error("1.0 and 2.0 are one key")
	}

	// decimal(10,2) holds the unscaled value in Int, decimal(30,2) in 13 bytes.
	d10, d30 := iceberg.DecimalTypeOf(10, 2), iceberg.DecimalTypeOf(30, 2)
	for _, n := range []int64{0, 1, -1, 127, 128, -128, -129, 1 << 40, -(1 << 40)} {
		wide := make([]byte, 13)
		for i := range wide {
			if n < 0 {
				wide[i] = 0xff
			}
		}
		for i := range 8 {
			wide[12-i] = byte(n >> (8 * i))
		}
		if hashOf(t, d10, vInt(n)) != hashOf(t, d30, vBytes(wide)) {
			t.Errorf("decimal %d: two identities for decimal(10,2) and decimal(30,2)", n)
		}
	}
	if hashOf(t, d10, vInt(128)) == hashOf(t, d10, vInt(-128)) {
		t.Error("decimals 1.28 and -1.28 are one key")
	}
}

// TestKeyEncoderShapes: maps are their entries whatever their order; lists keep the
// order and the place of their nulls; lengths keep adjacent strings apart.
func TestKeyEncoderShapes(t *testing.T) {
	m := &iceberg.MapType{KeyID: 2, KeyType: iceberg.StringType{}, ValueID: 3, ValueType: iceberg.Int64Type{}, ValueRequired: false}
	entry := func(k string, v rowcodec.Value) rowcodec.Value { return vElems(vStr(k), v) }
	if hashOf(t, m, vElems(entry("a", vInt(1)), entry("b", null()))) != hashOf(t, m, vElems(entry("b", null()), entry("a", vInt(1)))) {
		t.Error("a map's entries in another order are another key")
	}
	if hashOf(t, m, vElems(entry("a", vInt(1)))) == hashOf(t, m, vElems(entry("a", vInt(2)))) {
		t.Error("maps with different values are one key")
	}
	l := &iceberg.ListType{ElementID: 2, Element: iceberg.StringType{}}
	for _, c := range [][2]rowcodec.Value{
		{vElems(null(), vStr("a")), vElems(vStr("a"), null())},
		{vElems(vStr("a"), vStr("b")), vElems(vStr("b"), vStr("a"))},
		{vElems(vStr("ab")), vElems(vStr("a"), vStr("b"))},
		{vElems(), vElems(null())},
	} {
		if hashOf(t, l, c[0]) == hashOf(t, l, c[1]) {
			t.Errorf("lists %v and %v are one key", c[0], c[1])
		}
	}
	s := structOf(field(1, "a", iceberg.StringType{}), field(2, "b", iceberg.StringType{}))
	if hashOf(t, s, vElems(vStr("ab"), vStr(""))) == hashOf(t, s, vElems(vStr("a"), vStr("b"))) {
		t.Error("{a: ab, b: ''} and {a: a, b: b} are one key")
	}
}

// TestKeyIdentitySpaces: no key, a key as bytes, a key that does not decode and a
// decoded key (even one whose encoding is those bytes) are four identities.
func TestKeyIdentitySpaces(t *testing.T) {
	raw := []byte("k1")
	e, err := NewKeyEncoder(iceberg.BinaryType{})
	if err != nil {
		t.Fatal(err)
	}
	enc := e.Append(nil, vBytes(raw))
	hs := map[Hash]string{}
	for name, h := range map[string]Hash{
		"no key": KeyHash(nil), "bytes": KeyHash(raw), "undecoded": UndecodedKeyHash(raw),
		"decoded": DecodedKeyHash(enc), "decoded null": DecodedKeyHash(e.Append(nil, null())),
		"undecoded encoding": UndecodedKeyHash(enc[1:]), "bytes of the encoding": KeyHash(enc[1:]),
	} {
		if other, dup := hs[h]; dup {
			t.Errorf("%s and %s have one identity", name, other)
		}
		hs[h] = name
	}
}

// TestKeyEncoderInjective: over random keys of one struct type, two keys have one
// encoding exactly when they are equal values (nulls of struct fields aside: a null
// field is an absent one), and encoding is a pure function of the value.
func TestKeyEncoderInjective(t *testing.T) {
	typ := structOf(field(3, "id", iceberg.Int64Type{}), field(1, "name", iceberg.StringType{}),
		field(2, "tags", &iceberg.ListType{ElementID: 4, Element: iceberg.StringType{}}),
		field(5, "attrs", &iceberg.MapType{KeyID: 6, KeyType: iceberg.StringType{}, ValueID: 7, ValueType: iceberg.Float64Type{}}))
	e, err := NewKeyEncoder(typ)
	if err != nil {
		t.Fatal(err)
	}
	str := rapid.Custom(func(t *rapid.T) rowcodec.Value {
		if rapid.IntRange(0, 4).Draw(t, "null") == 0 {
			return null()
		}
		return vStr(rapid.StringMatching(`[ab]{0,3}`).Draw(t, "s"))
	})
	gen := rapid.Custom(func(t *rapid.T) rowcodec.Value {
		v := vElems(null(), str.Draw(t, "name"), null(), null())
		if rapid.Bool().Draw(t, "has id") {
			v.Elems[0] = vInt(rapid.Int64Range(-2, 2).Draw(t, "id"))
		}
		if rapid.Bool().Draw(t, "has tags") {
			v.Elems[2] = vElems(rapid.SliceOfN(str, 0, 3).Draw(t, "tags")...)
		}
		if rapid.Bool().Draw(t, "has attrs") {
			keys := rapid.SliceOfNDistinct(rapid.StringMatching(`[ab]{1,2}`), 0, 3, rapid.ID[string]).Draw(t, "keys")
			var es []rowcodec.Value
			for _, k := range keys {
				es = append(es, vElems(vStr(k), vFloat(float64(rapid.IntRange(0, 1).Draw(t, "x")))))
			}
			v.Elems[3] = vElems(es...)
		}
		return v
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
		ea := bytes.Clone(e.Append(nil, a))
		if again := e.Append(nil, a); !bytes.Equal(ea, again) {
			t.Fatalf("two encodings of one value")
		}
		eb := e.Append(nil, b)
		if same := bytes.Equal(ea, eb); same != equalKeys(a, b) {
			t.Fatalf("keys %v and %v: one encoding %v", a, b, same)
		}
	})
}

// equalKeys is the model of key equality for TestKeyEncoderInjective's type: fields
// equal, a list element by element (nulls in place), a map as a set of entries.
func equalKeys(a, b rowcodec.Value) bool {
	eq := func(x, y rowcodec.Value) bool {
		return x.Valid == y.Valid && (!x.Valid || x.Int == y.Int && x.Float == y.Float && bytes.Equal(x.Bytes, y.Bytes))
	}
	if !eq(a.Elems[0], b.Elems[0]) || !eq(a.Elems[1], b.Elems[1]) {
		return false
	}
	ta, tb := a.Elems[2], b.Elems[2]
	if ta.Valid != tb.Valid || len(ta.Elems) != len(tb.Elems) {
		return false
	}
	for i := range ta.Elems {
		if !eq(ta.Elems[i], tb.Elems[i]) {
			return false
		}
	}
	ma, mb := a.Elems[3], b.Elems[3]
	if ma.Valid != mb.Valid || len(ma.Elems) != len(mb.Elems) {
		return false
	}
	for _, x := range ma.Elems {
		found := false
		for _, y := range mb.Elems {
			found = found || eq(x.Elems[0], y.Elems[0]) && eq(x.Elems[1], y.Elems[1])
		}
		if !found {
			return false
		}
	}
	return true
}

// BenchmarkKeyHash: a 24-byte key as bytes, today's identity for tables without a key
// format.
func BenchmarkKeyHash(b *testing.B) {
	key := []byte("customer-0000012345-eu-w")
	b.ReportAllocs()
	for b.Loop() {
		KeyHash(key)
	}
}

// BenchmarkDecodedKeyHash: the canonical encoding and hash of a decoded key
// {id long, region string}, beside BenchmarkKeyHash (decoding aside: see tablecodec's
// BenchmarkDecoderKeyHash).
func BenchmarkDecodedKeyHash(b *testing.B) {
	e, err := NewKeyEncoder(structOf(field(1, "id", iceberg.Int64Type{}), field(2, "region", iceberg.StringType{})))
	if err != nil {
		b.Fatal(err)
	}
	v := vElems(vInt(12345), vStr("eu-west"))
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = e.Append(buf[:0], v)
		DecodedKeyHash(buf)
	}
}
