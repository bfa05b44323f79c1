//go:build !goexperiment.jsonv2

package bench

import "github.com/minkhq/mink/pkg/rowcodec"

// jsonV2Decoders are encoding/json/v2's, built with GOEXPERIMENT=jsonv2 only.
var jsonV2Decoders []struct {
	name string
	mk   func() (rowcodec.RowDecoder, error)
}
