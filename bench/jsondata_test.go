package bench

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
)

// Item 1's bare decoder gives the rows pkg/rowcodec gives, so both loops feed the builder
// the same rows (the harness also checks the files byte for byte).
func TestBareJSONDecoderGivesMinksRows(t *testing.T) {
	bare, err := NewJSONRows()
	if err != nil {
		t.Fatal(err)
	}
	mink, err := rowcodec.NewDecoder(EventSpec)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var want, got rowcodec.Row
	for i := range 1000 {
		k, v := event(rng, i)
		r := record.Record{Partition: 0, Offset: int64(i), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)), Key: k, Value: v}
		if !mink.Decode(r, &want) {
			t.Fatalf("record %d: Mink: %s", i, want.Values[len(want.Values)-1].Bytes)
		}
		if !bare.Decode(r, &got) {
			t.Fatalf("record %d: bare: %s", i, got.Values[len(got.Values)-1].Bytes)
		}
		for j, f := range mink.Fields() {
			if !sameValue(want.Values[j], got.Values[j]) {
				t.Fatalf("record %d, column %s: bare %+v, Mink %+v", i, f.Name, got.Values[j], want.Values[j])
			}
		}
	}
}
