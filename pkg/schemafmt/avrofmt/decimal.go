package avrofmt

import (
	"math/bits"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/tableschema"
)

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

// pow10x[p] is 10^p for p ≤ 38 (10^38 < 2^127).
var pow10x = func() (t [39]u128) {
	t[0] = u128{0, 1}
	for p := 1; p < len(t); p++ {
		hi, lo := bits.Mul64(t[p-1].lo, 10)
		t[p] = u128{t[p-1].hi*10 + hi, lo}
	}
	return t
}()

// decimalLen[p] is tableschema.DecimalBytes(p), at most 16.
var decimalLen = func() (t [39]int) {
	for p := 1; p < len(t); p++ {
		t[p] = tableschema.DecimalBytes(p)
	}
	return t
}()

// decimalValue stores an unscaled decimal, big-endian two's complement of any length,
// in the rowcodec form of a decimal of precision tprec, appending to buf for tprec > 18.
// It reports false when the value has more digits than prec (≤ tprec), the writer's
// precision. It is schemafmt.Decimal with the fit checked against another precision,
// and without big.Int: any value that fits 38 digits fits 16 bytes.
func decimalValue(twos []byte, prec, tprec int, buf []byte) (rowcodec.Value, []byte, bool) {
	neg := len(twos) > 0 && twos[0]&0x80 != 0
	sign := byte(0)
	if neg {
		sign = 0xff
	}
	// Drop leading sign bytes; the length left says how large the value can be.
	for len(twos) > 1 && twos[0] == sign && (twos[1]&0x80 != 0) == neg {
		twos = twos[1:]
	}
	if len(twos) <= 8 {
		var x int64
		if neg {
			x = -1
		}
		for _, c := range twos {
			x = x<<8 | int64(c)
		}
		if prec <= 18 {
			lim := int64(pow10x[prec].lo)
			if x >= lim || x <= -lim {
				return rowcodec.Value{}, buf, false
			}
		}
		if tprec <= 18 {
			return rowcodec.Value{Valid: true, Int: x}, buf, true // the common case, inline
		}
		return schemafmt.DecimalInt64(x, tprec, buf)
	}
	// More than 8 bytes hold at least 2^63 > 10^18; more than 16 at least 2^127 > 10^38.
	if len(twos) > 16 || prec <= 18 {
		return rowcodec.Value{}, buf, false
	}
	var x u128
	if neg {
		x = u128{^uint64(0), ^uint64(0)}
	}
	for _, c := range twos {
		x = u128{x.hi<<8 | x.lo>>56, x.lo<<8 | uint64(c)}
	}
	m := x
	if neg {
		lo, borrow := bits.Add64(^x.lo, 1, 0)
		m = u128{^x.hi + borrow, lo}
	}
	if lim := pow10x[prec]; m.hi > lim.hi || m.hi == lim.hi && m.lo >= lim.lo {
		return rowcodec.Value{}, buf, false
	}
	// tprec ≥ prec > 18: DecimalBytes(tprec) bytes, sign-extended.
	start := len(buf)
	for i := decimalLen[tprec] - 1; i >= 0; i-- {
		if i >= 8 {
			buf = append(buf, byte(x.hi>>(8*(i-8))))
		} else {
			buf = append(buf, byte(x.lo>>(8*i)))
		}
	}
	return rowcodec.Value{Valid: true, Bytes: buf[start:len(buf):len(buf)]}, buf, true
}
