package avrofmt

import (
	"bytes"
	"math/big"
	"math/rand"
	"testing"

	"github.com/minkhq/mink/pkg/schemafmt"
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

// TestDecimalValue checks decimalValue against schemafmt.Decimal, the reference.
func TestDecimalValue(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		// Values of every size up to beyond 38 digits, near powers of ten too.
		x := new(big.Int).Rand(r, new(big.Int).Lsh(big.NewInt(1), uint(1+r.Intn(140))))
		if r.Intn(4) == 0 {
			p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(r.Intn(40))), nil)
			x = p.Sub(p, big.NewInt(int64(r.Intn(3))))
		}
		if r.Intn(2) == 0 {
			x.Neg(x)
		}
		n := (x.BitLen()+8)/8 + r.Intn(3) // minimal length or longer
		data := twos(x, n)
		prec := 1 + r.Intn(38)
		tprec := prec + r.Intn(39-prec)
		got, _, gotOK := decimalValue(data, prec, tprec, nil)
		// Fits prec, stored as tprec.
		_, _, fits := schemafmt.Decimal(data, prec, nil)
		want, _, _ := schemafmt.Decimal(data, tprec, nil)
		if gotOK != fits {
			t.Fatalf("decimalValue(%s, %d, %d) ok = %v, want %v", x, prec, tprec, gotOK, fits)
		}
		if !fits {
			continue
		}
		if got.Valid != want.Valid || got.Int != want.Int || !bytes.Equal(got.Bytes, want.Bytes) {
			t.Fatalf("decimalValue(%s, %d, %d) = %+v, want %+v", x, prec, tprec, got, want)
		}
	}
}
