package avrofmt

import (
	"testing"

	"github.com/minkhq/mink/pkg/rowcodec"
)

func TestDecodeAllocs(t *testing.T) {
	s := mustCompile(t, richSchema)
	d := mustBind(t, s)
	data := marshal(t, richSchema, richValue())
	var v rowcodec.Value
	d.Decode(data, &v) // grows v and the scratch buffer
	if n := testing.AllocsPerRun(100, func() {
		if r := d.Decode(data, &v); r != "" {
			t.Fatal(r)
		}
	}); n != 0 {
		t.Errorf("Decode allocates %v times a value", n)
	}
}
