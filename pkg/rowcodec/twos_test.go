package rowcodec

import (
	"bytes"
	"testing"
)

func TestMinimalTwos(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{[]byte{0, 0, 0, 0}, []byte{0}},
		{[]byte{0, 0, 0, 0x7f}, []byte{0x7f}},
		{[]byte{0, 0, 0, 0x80}, []byte{0, 0x80}}, // 128 needs its 0 byte
		{[]byte{0xff, 0xff, 0xff, 0xff}, []byte{0xff}},
		{[]byte{0xff, 0xff, 0xff, 0x80}, []byte{0x80}},
		{[]byte{0xff, 0xff, 0xff, 0x7f}, []byte{0xff, 0x7f}}, // -129 needs its 0xff byte
		{[]byte{0x01, 0x00}, []byte{0x01, 0x00}},
		{[]byte{0x05}, []byte{0x05}},
	} {
		if got := MinimalTwos(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("MinimalTwos(%x) = %x; want %x", c.in, got, c.want)
		}
	}
}
