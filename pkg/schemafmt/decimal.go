package schemafmt

import (
	"math/big"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// decimalLen[p] is tableschema.DecimalBytes(p), the fixed length of a decimal of
// precision p > 18, computed once.
var decimalLen = func() (t [39]int) {
	for p := 1; p <= 38; p++ {
		t[p] = tableschema.DecimalBytes(p)
	}
	return t
}()

// pow10[p] is 10^p for p ≤ 38.
var pow10 = func() (t [39]*big.Int) {
	for p := range t {
		t[p] = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)
	}
	return t
}()

// Decimal stores an unscaled decimal given as big-endian two's complement bytes of any
// length (Avro's form) in the rowcodec form of a decimal of precision prec (1..38): an
// Int for prec ≤ 18, otherwise DecimalBytes(prec) bytes appended to buf. It reports
// false when the value has more than prec digits.
func Decimal(twos []byte, prec int, buf []byte) (rowcodec.Value, []byte, bool) {
	// Drop leading sign bytes; what is left must fit.
	neg := len(twos) > 0 && twos[0]&0x80 != 0
	sign := byte(0)
	if neg {
		sign = 0xff
	}
	for len(twos) > 1 && twos[0] == sign && (twos[1]&0x80 != 0) == neg {
		twos = twos[1:]
	}
	if len(twos) == 0 {
		twos = []byte{0}
	}
	if len(twos) <= 8 {
		var x int64
		if neg {
			x = -1
		}
		for _, c := range twos {
			x = x<<8 | int64(c)
		}
		return DecimalInt64(x, prec, buf)
	}
	// Rare: more than 18 digits' worth of bytes. Go through big.Int.
	n := new(big.Int).SetBytes(twos)
	if neg {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(twos))))
	}
	return DecimalBig(n, prec, buf)
}

// DecimalInt64 is Decimal for an unscaled value held in an int64.
func DecimalInt64(x int64, prec int, buf []byte) (rowcodec.Value, []byte, bool) {
	if prec <= 18 {
		lim := pow10[prec].Int64()
		if x >= lim || x <= -lim {
			return rowcodec.Value{}, buf, false
		}
		return rowcodec.Value{Valid: true, Int: x}, buf, true
	}
	n := decimalLen[prec]
	start := len(buf)
	for i := 0; i < n; i++ {
		shift := uint(8 * (n - 1 - i))
		if shift >= 64 {
			if x < 0 {
				buf = append(buf, 0xff)
			} else {
				buf = append(buf, 0)
			}
			continue
		}
		buf = append(buf, byte(x>>shift))
	}
	return rowcodec.Value{Valid: true, Bytes: buf[start:len(buf):len(buf)]}, buf, true
}

// DecimalBig is Decimal for an unscaled value held in a big.Int.
func DecimalBig(x *big.Int, prec int, buf []byte) (rowcodec.Value, []byte, bool) {
	if new(big.Int).Abs(x).Cmp(pow10[prec]) >= 0 {
		return rowcodec.Value{}, buf, false
	}
	if x.IsInt64() {
		return DecimalInt64(x.Int64(), prec, buf)
	}
	// Beyond int64, so prec > 18: fixed two's complement.
	n := decimalLen[prec]
	v := new(big.Int).Set(x)
	if v.Sign() < 0 {
		v.Add(v, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	start := len(buf)
	buf = append(buf, make([]byte, n)...)
	v.FillBytes(buf[start:])
	return rowcodec.Value{Valid: true, Bytes: buf[start:len(buf):len(buf)]}, buf, true
}
