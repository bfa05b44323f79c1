package rowcodec

import (
	"encoding/binary"
	"unicode/utf8"
)

// ValidUTF8 reports whether b is valid UTF-8, as utf8.Valid does. Every decoder checks
// each string value it stores, and record strings are mostly short and ASCII, where
// utf8.Valid walks byte by byte below 8 bytes and for each string's tail: this tests
// ASCII a word at a time (the last word overlapping the one before), and leaves
// anything else to utf8.Valid.
func ValidUTF8(b []byte) bool {
	const hi8, hi4 = 0x8080808080808080, 0x80808080
	switch n := len(b); {
	case n >= 8:
		var acc uint64
		for i := 0; i+8 <= n; i += 8 {
			acc |= binary.LittleEndian.Uint64(b[i:])
		}
		acc |= binary.LittleEndian.Uint64(b[n-8:])
		if acc&hi8 == 0 {
			return true
		}
	case n >= 4:
		if (binary.LittleEndian.Uint32(b)|binary.LittleEndian.Uint32(b[n-4:]))&hi4 == 0 {
			return true
		}
	case n > 0:
		if (b[0]|b[n/2]|b[n-1])&0x80 == 0 { // every byte of 1 to 3
			return true
		}
	default:
		return true
	}
	return utf8.Valid(b)
}
