package protofmt

import (
	"testing"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
)

func TestDecodeAllocs(t *testing.T) {
	s, data := benchData(t)
	dec, _ := bind(t, s)
	ks := compile(t, allProto, "acme.test.v1.Known")
	kdec, _ := bind(t, ks)
	kdata := fuzzSeeds(t, compile(t, allProto, ""), ks)[1] // every well-known type, JSON too
	all := compile(t, allProto, "")
	adec, _ := bind(t, all)
	adata := fuzzSeeds(t, all, ks)[0] // maps, lists, oneofs, enums
	for _, c := range []struct {
		name string
		dec  schemafmt.Decoder
		data []byte
	}{{"order", dec, data}, {"known", kdec, kdata}, {"all", adec, adata}} {
		var v rowcodec.Value
		c.dec.Decode(c.data, &v) // grows v and the scratch buffers
		if n := testing.AllocsPerRun(100, func() {
			if r := c.dec.Decode(c.data, &v); r != "" {
				t.Fatal(r)
			}
		}); n != 0 {
			t.Errorf("%s: Decode allocates %v times a value", c.name, n)
		}
	}
}
