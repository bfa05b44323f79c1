package schemafmt

import (
	"bytes"
	"math/big"
	"testing"

	"github.com/minkhq/mink/pkg/tableschema"
)

func twos(x *big.Int, n int) []byte {
	v := new(big.Int).Set(x)
	if v.Sign() < 0 {
		v.Add(v, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	out := make([]byte, n)
	v.FillBytes(out)
	return out
}

func TestDecimal(t *testing.T) {
	cases := []struct {
		val  string
		prec int
		ok   bool
	}{
		{"0", 1, true}, {"9", 1, true}, {"10", 1, false}, {"-9", 1, true}, {"-10", 1, false},
		{"123456789012345678", 18, true}, {"-999999999999999999", 18, true}, {"1000000000000000000", 18, false},
		{"1000000000000000000", 19, true}, {"-1", 38, true}, {"12345678901234567890123456789012345678", 38, true},
		{"-99999999999999999999999999999999999999", 38, true}, {"100000000000000000000000000000000000000", 38, false},
		{"-5", 20, true}, {"170141183460469231731687303715884105727", 38, false},
	}
	for _, c := range cases {
		x, _ := new(big.Int).SetString(c.val, 10)
		for _, n := range []int{len(x.Bytes()) + 1, 17} {
			v, _, ok := Decimal(twos(x, n), c.prec, nil)
			if ok != c.ok {
				t.Errorf("Decimal(%s, %d) ok=%v want %v", c.val, c.prec, ok, c.ok)
				continue
			}
			if !ok {
				continue
			}
			if c.prec <= 18 {
				if v.Int != x.Int64() {
					t.Errorf("Decimal(%s, %d) = %d", c.val, c.prec, v.Int)
				}
				continue
			}
			want := twos(x, tableschema.DecimalBytes(c.prec))
			if !bytes.Equal(v.Bytes, want) {
				t.Errorf("Decimal(%s, %d) = %x want %x", c.val, c.prec, v.Bytes, want)
			}
		}
	}
}
