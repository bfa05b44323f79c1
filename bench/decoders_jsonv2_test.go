//go:build goexperiment.jsonv2

package bench

import (
	jsonv2 "encoding/json/v2"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// jsonV2Decoders: encoding/json/v2's Unmarshal into the same struct. With the experiment
// on, encoding/json (the "encoding-json" rows) runs on v2's implementation too.
var jsonV2Decoders = []struct {
	name string
	mk   func() (rowcodec.RowDecoder, error)
}{
	{"encoding-json-v2", func() (rowcodec.RowDecoder, error) {
		return newJSONRowsWith(func(b []byte, v any) error { return jsonv2.Unmarshal(b, v) })
	}},
}
