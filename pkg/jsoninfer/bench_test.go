package jsoninfer

import (
	"fmt"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

func benchRecords() [][]byte {
	var out [][]byte
	for i := range 1000 {
		out = append(out, fmt.Appendf(nil, `{"id":%d,"name":"name %d","amount":%d,"ok":true,"user":{"id":%d,"tier":"gold"}}`, i, i, i*3, i*7))
	}
	return out
}

// What indexing an inferred table costs per record (Check's Needs, then Decode) beside
// the same records with declared columns (rowcodec's decoder).
func BenchmarkDecode(b *testing.B) {
	recs := benchRecords()
	b.Run("declared", func(b *testing.B) {
		dec, err := rowcodec.NewDecoder(tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
			{Name: "id", Type: "long"}, {Name: "name", Type: "string"}, {Name: "amount", Type: "long"}, {Name: "ok", Type: "boolean"},
			{Name: "user_id", Type: "long", JSONPath: "user.id"}, {Name: "user_tier", Type: "string", JSONPath: "user.tier"}}})
		if err != nil {
			b.Fatal(err)
		}
		var row rowcodec.Row
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			dec.Decode(record.Record{Value: recs[i%len(recs)], Timestamp: time.Unix(0, 0)}, &row)
		}
	})
	b.Run("inferred", func(b *testing.B) {
		fields, in := First([]Sample{{Value: recs[0]}})
		dec, err := NewDecoder(fields, in)
		if err != nil {
			b.Fatal(err)
		}
		row := make([]rowcodec.Value, len(fields))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			v := recs[i%len(recs)]
			if dec.Needs(v) {
				b.Fatal("needs")
			}
			dec.Decode(v, row)
		}
	})
}
