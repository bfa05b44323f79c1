package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// check reads one document with Skip and returns its syntax error, or "".
func check(doc string) string {
	var scratch []byte
	s := New([]byte(doc), &scratch)
	if s.Start() && s.Skip() {
		s.End()
	}
	return s.Err()
}

func TestSyntaxErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"a": [1, 2.5e-3, "x\u00e9", true, false, null, {}, []]}`, ""},
		{"", "malformed JSON: empty value"},
		{" \t\r\n", "malformed JSON: empty value"},
		{`{"a": 1,}`, `malformed JSON at byte 8: unexpected '}', want a string key`},
		{`{"a" 1}`, `malformed JSON at byte 5: unexpected '1', want : after an object key`},
		{`{"a": 1`, `malformed JSON: unexpected end of input, want , or } in an object`},
		{`[1 2]`, `malformed JSON at byte 3: unexpected '2', want , or ] in an array`},
		{`[1,]`, `malformed JSON at byte 3: unexpected ']', want a value`},
		{`nul`, `malformed JSON: unexpected end of input, want null`},
		{`trux`, `malformed JSON at byte 3: unexpected 'x', want true`},
		{`01`, `malformed JSON at byte 1: unexpected '1', want the end of the value`},
		{`-`, `malformed JSON: unexpected end of input, want a digit`},
		{`1.`, `malformed JSON: unexpected end of input, want a digit after the decimal point`},
		{`1e+x`, `malformed JSON at byte 3: unexpected 'x', want a digit in the exponent`},
		{`"ab`, `malformed JSON: unexpected end of input, want the end of a string`},
		{"\"a\x01\"", `malformed JSON at byte 2: unexpected byte 0x01, control characters in a string must be escaped`},
		{`"\x"`, `malformed JSON at byte 2: unexpected 'x', want an escape (one of "\/bfnrtu)`},
		{`"\u12G4"`, `malformed JSON at byte 3: unexpected '1', want 4 hex digits after \u`},
		{`"\ud800\u12"`, `malformed JSON at byte 9: unexpected '1', want 4 hex digits after \u`},
		{`'`, `malformed JSON at byte 0: unexpected '\'', want a value`},
		{`\`, `malformed JSON at byte 0: unexpected '\\', want a value`},
		{"\xff", `malformed JSON at byte 0: unexpected byte 0xff, want a value`},
		{strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), ""},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), "JSON nested deeper than 1000 levels"},
		{strings.Repeat(`{"a":`, MaxDepth+1), "JSON nested deeper than 1000 levels"},
	} {
		if got := check(c.doc); got != c.want {
			t.Errorf("%.40q:\n got %s\nwant %s", c.doc, got, c.want)
		}
	}
}

// describeByte must name printable ASCII as %q names a rune: pkg/rowcodec's messages
// were written with %q before this package, jsonfmt's without.
func TestDescribeByteIsQuotedRune(t *testing.T) {
	for c := 0x20; c < 0x7f; c++ {
		if got, want := describeByte(byte(c)), fmt.Sprintf("%q", rune(c)); got != want {
			t.Errorf("describeByte(%#x) = %s, want %s", c, got, want)
		}
	}
}

func TestStrAndKeys(t *testing.T) {
	doc := []byte(`{"plain": "abc", "esc\u00e9": "a\"\\\/\b\f\n\r\t\ud83d\ude00\ud800x", "k": [ ] , "n": {}}`)
	var scratch []byte
	s := New(doc, &scratch)
	if !s.Start() || s.Peek() != '{' {
		t.Fatal("start")
	}
	var got []string
	empty, ok := s.Open()
	for ok && !empty {
		var key []byte
		if key, ok = s.Key(); !ok {
			break
		}
		start := s.Pos()
		if s.Peek() == '"' {
			v, ok2 := s.Str()
			ok = ok2
			got = append(got, fmt.Sprintf("%s=%q (%s)", key, v, s.Since(start)))
		} else {
			got = append(got, fmt.Sprintf("%s=%s", key, s.Kind()))
			ok = s.Skip()
		}
		if ok {
			empty, ok = s.Next('}')
		}
	}
	s.End()
	if s.Err() != "" {
		t.Fatal(s.Err())
	}
	want := []string{
		`plain="abc" ("abc")`,
		"esc\u00e9=" + `"a\"\\/\b\f\n\r\t😀` + "\uFFFD" + `x"` + ` ("a\"\\\/\b\f\n\r\t\ud83d\ude00\ud800x")`,
		`k=an array`,
		`n=an object`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A string without escapes points into the input; one with escapes is in scratch.
	s = New(doc, &scratch)
	s.Start()
	s.Open()
	k, _ := s.Key()
	if &k[0] != &doc[2] {
		t.Error("plain key copied")
	}
	s.Skip()
	s.Next('}')
	scratch = scratch[:0]
	k, _ = s.Key()
	if string(k) != "esc\u00e9" || &k[0] != &scratch[:1][0] {
		t.Errorf("escaped key %q not unescaped into scratch", k)
	}
}

func TestMismatch(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`"abc"`, `expected a number, got a string "abc"`},
		{`{"a": [1]}`, `expected a number, got an object`},
		{`[1]`, `expected a number, got an array`},
		{`true`, `expected a number, got a boolean true`},
		{`null`, `expected a number, got null null`},
		{`"` + strings.Repeat("é", 30) + `"`, `expected a number, got a string "` + strings.Repeat("é", 19) + `…`},
	} {
		var scratch []byte
		s := New([]byte(c.doc), &scratch)
		s.Start()
		if got, ok := s.Mismatch("a number"); !ok || got != c.want {
			t.Errorf("%s: got %s %v, want %s", c.doc, got, ok, c.want)
		}
	}
	s := New([]byte(`[1,`), nil)
	s.Start()
	if _, ok := s.Mismatch("x"); ok || s.Err() == "" {
		t.Error("a syntax error inside a mismatched value must be reported")
	}
}

func TestCompact(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{` { "a" : [ 1 , 2.50 , "x\n\u00e9" ] , "b" : { } , "c" : [ ] , "d" : null } `,
			`{"a":[1,2.50,"x\n\u00e9"],"b":{},"c":[],"d":null}`},
		{`-0.0e+00`, `-0.0e+00`},
		{`"\ud800"`, `"\ud800"`},
	} {
		scratch := []byte("prefix")
		s := New([]byte(c.doc), &scratch)
		if !s.Start() || !s.Compact() {
			t.Fatalf("%s: %s", c.doc, s.Err())
		}
		s.End()
		if got := string(scratch[len("prefix"):]); got != c.want || s.Err() != "" {
			t.Errorf("%s: got %s (%s), want %s", c.doc, got, s.Err(), c.want)
		}
	}
}

func TestInteger(t *testing.T) {
	for _, c := range []struct {
		tok    string
		lo, hi int64
		n      int64
		msg    string
	}{
		{"0", math.MinInt64, math.MaxInt64, 0, ""},
		{"-0.0e5", math.MinInt64, math.MaxInt64, 0, ""},
		{"1e3", math.MinInt64, math.MaxInt64, 1000, ""},
		{"10.0", math.MinInt64, math.MaxInt64, 10, ""},
		{"1.5", math.MinInt64, math.MaxInt64, 0, NotInteger},
		{"123456789012345678", math.MinInt64, math.MaxInt64, 123456789012345678, ""},
		{"9223372036854775807", math.MinInt64, math.MaxInt64, math.MaxInt64, ""},
		{"9223372036854775808", math.MinInt64, math.MaxInt64, 0, OutOfRange},
		{"-9223372036854775808", math.MinInt64, math.MaxInt64, math.MinInt64, ""},
		{"-9223372036854775809", math.MinInt64, math.MaxInt64, 0, OutOfRange},
		{"1e19", math.MinInt64, math.MaxInt64, 0, OutOfRange},
		{"1e999999999999", math.MinInt64, math.MaxInt64, 0, OutOfRange},
		{"1e-999999999999", math.MinInt64, math.MaxInt64, 0, NotInteger},
		{"2147483648", math.MinInt32, math.MaxInt32, 0, OutOfRange},
		{"-2147483648", math.MinInt32, math.MaxInt32, math.MinInt32, ""},
	} {
		if n, msg := Integer([]byte(c.tok), c.lo, c.hi); n != c.n || msg != c.msg {
			t.Errorf("Integer(%s) = %d %q, want %d %q", c.tok, n, msg, c.n, c.msg)
		}
	}
}

func TestSplitNumber(t *testing.T) {
	for _, c := range []struct {
		tok  string
		want string
	}{
		{"0", "+[]e0"},
		{"-0.000", "-[]e-3"}, // zero: the exponent means nothing
		{"1.50", "+[15]e-1"},
		{"15e-1", "+[15]e-1"},
		{"-1200.0340E+2", "-[1200034]e-1"},
		{"1e-1073741825", "+[1]e-1073741825"},
	} {
		var buf [8]byte
		n := SplitNumber([]byte(c.tok), buf[:0])
		sign := "+"
		if n.Neg {
			sign = "-"
		}
		if got := fmt.Sprintf("%s[%s]e%d", sign, n.Digits, n.Exp); got != c.want {
			t.Errorf("SplitNumber(%s) = %s, want %s", c.tok, got, c.want)
		}
	}
}

func TestValidNumberAndFloat(t *testing.T) {
	for _, s := range []string{"", "-", "01", "1.", ".5", "+1", "1e", " 1", "1 ", "0x1", "NaN"} {
		if ValidNumber([]byte(s)) {
			t.Errorf("ValidNumber(%q)", s)
		}
	}
	for _, s := range []string{"0", "-0", "1.5", "1e400", "-1E-400", "123"} {
		if !ValidNumber([]byte(s)) {
			t.Errorf("!ValidNumber(%q)", s)
		}
	}
	if f, ok := Float([]byte("1e-400"), 64); !ok || f != 0 {
		t.Error("underflow must round to zero")
	}
	if _, ok := Float([]byte("1e400"), 64); ok {
		t.Error("overflow must be refused")
	}
	if _, ok := Float([]byte("1e39"), 32); ok {
		t.Error("float32 overflow must be refused")
	}
	if f, ok := Float([]byte("0.1"), 32); !ok || f != float64(float32(0.1)) {
		t.Error("float32 rounding")
	}
}

func TestParseUUID(t *testing.T) {
	out := make([]byte, 16)
	if !ParseUUID([]byte("123E4567-e89b-12d3-a456-426614174000"), out) ||
		fmt.Sprintf("%x", out) != "123e4567e89b12d3a456426614174000" {
		t.Errorf("got %x", out)
	}
	for _, s := range []string{"", "123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g",
		"123e4567-e89b-12d3-a456_426614174000", "{123e4567-e89b-12d3-a456-426614174000}"} {
		if ParseUUID([]byte(s), out) {
			t.Errorf("ParseUUID(%q)", s)
		}
	}
}

func TestSnippet(t *testing.T) {
	if got := Snippet([]byte("a\xffb")); got != "a\uFFFDb" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("x", 39) + "é" + "yyy"
	if got := Snippet([]byte(long)); got != strings.Repeat("x", 39)+"…" {
		t.Errorf("got %q", got)
	}
}

func TestSpecial8(t *testing.T) {
	for c := 0; c < 256; c++ {
		w := uint64(c) << 40
		w |= 0x4141414141414141 &^ (0xff << 40)
		want := c == '"' || c == '\\' || c < 0x20
		if got := Special8(w); got != want {
			t.Errorf("Special8 with byte %#x = %v", c, got)
		}
	}
}

// Reading a document allocates nothing once the scratch memory has grown.
func TestNoAllocations(t *testing.T) {
	doc := []byte(`{"id": "0191e2c4-6f0e-7c3a-9b1d-2a3b4c5d6e7f", "n": -12.5e3, "s": "a\nb", "l": [true, null, {"k": "v"}]}`)
	scratch := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		scratch = scratch[:0]
		s := New(doc, &scratch)
		if !s.Start() || !s.Skip() {
			t.Fatal(s.Err())
		}
		scratch = scratch[:0]
		s = New(doc, &scratch)
		s.Start()
		empty, ok := s.Open()
		for ok && !empty {
			if _, ok = s.Key(); !ok {
				break
			}
			switch {
			case s.Peek() == '"':
				_, ok = s.Str()
			case IsNumberStart(s.Peek()):
				var tok []byte
				tok, ok = s.Number()
				var buf [32]byte
				_ = SplitNumber(tok, buf[:0])
				_, _ = Float(tok, 64)
			default:
				ok = s.Compact()
			}
			if ok {
				empty, ok = s.Next('}')
			}
		}
		s.End()
		if s.Err() != "" {
			t.Fatal(s.Err())
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per document", allocs)
	}
}

// FuzzSkip checks that the scanner's notion of valid JSON is encoding/json's, up to the
// depth limit, and that Compact keeps the value.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{`{}`, `[1, "a\u00e9", {"b": null}]`, `{"a":1,}`, `"\ud800"`, `1e700`, `-`, "\"\x00\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		msg := check(string(doc))
		if strings.HasPrefix(msg, "JSON nested deeper") {
			return
		}
		if valid := json.Valid(doc); valid != (msg == "") {
			t.Fatalf("json.Valid %v, error %q", valid, msg)
		}
		if msg != "" {
			return
		}
		var scratch []byte
		s := New(doc, &scratch)
		s.Start()
		s.Compact()
		var want bytes.Buffer
		if err := json.Compact(&want, doc); err != nil || !bytes.Equal(scratch, want.Bytes()) {
			t.Fatalf("Compact(%q) = %q, json.Compact %q", doc, scratch, want.Bytes())
		}
	})
}

// ParseUUID reads what google/uuid reads of the canonical 36-byte form, to the same bytes.
func TestParseUUIDAsGoogleUUID(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alphabet := []byte("0123456789abcdefABCDEF-gG{ \xff")
		b := make([]byte, 36)
		for i := range b {
			if rapid.IntRange(0, 9).Draw(t, "mutate") == 0 {
				b[i] = rapid.SampledFrom(alphabet).Draw(t, "c")
			} else if i == 8 || i == 13 || i == 18 || i == 23 {
				b[i] = '-'
			} else {
				b[i] = rapid.SampledFrom(alphabet[:22]).Draw(t, "hex")
			}
		}
		want, err := uuid.ParseBytes(b)
		out := make([]byte, 16)
		if got := ParseUUID(b, out); got != (err == nil) {
			t.Fatalf("%q: %v, google/uuid %v", b, got, err)
		} else if got && !bytes.Equal(out, want[:]) {
			t.Fatalf("%q: %x, google/uuid %x", b, out, want)
		}
	})
}

// special8Mask's lowest set bit is the first special byte of the word: str jumps to it.
func TestSpecial8MaskFindsTheFirst(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b [8]byte
		for i := range b {
			b[i] = rapid.SampledFrom([]byte{'"', '\\', 0x00, 0x1f, 0x20, 0x21, 'a', 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff}).Draw(t, "b")
		}
		first := 8
		for i, c := range b {
			if c == '"' || c == '\\' || c < 0x20 {
				first = i
				break
			}
		}
		m := special8Mask(binary.LittleEndian.Uint64(b[:]))
		if got := bits.TrailingZeros64(m) >> 3; got != first {
			t.Fatalf("%q: first special byte at %d, mask says %d", b, first, got)
		}
	})
}
