package rowcodec

import (
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// ValidUTF8 is utf8.Valid, at every length and with a non-ASCII byte at every position.
func TestValidUTF8IsUTF8Valid(t *testing.T) {
	for n := range 40 {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(i%26)
		}
		if !ValidUTF8(b) {
			t.Fatalf("ASCII of %d bytes: invalid", n)
		}
		for i := range n {
			for _, c := range []byte{0x80, 0xc3, 0xff, 0x7f, 0x00} {
				old := b[i]
				b[i] = c
				if got, want := ValidUTF8(b), utf8.Valid(b); got != want {
					t.Fatalf("%q: %v, utf8.Valid %v", b, got, want)
				}
				b[i] = old
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOf(rapid.Byte()).Draw(t, "b")
		if s := rapid.String().Draw(t, "s"); len(s) > 0 {
			b = append(b, s...)
		}
		if got, want := ValidUTF8(b), utf8.Valid(b); got != want {
			t.Fatalf("%q: %v, utf8.Valid %v", b, got, want)
		}
	})
}

func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{"", "a", "abc", "é", "日本語", "abcdefgh\xff", "\xed\xa0\x80", "0123456789abcdéf"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := ValidUTF8(b), utf8.Valid(b); got != want {
			t.Fatalf("%q: %v, utf8.Valid %v", b, got, want)
		}
	})
}
