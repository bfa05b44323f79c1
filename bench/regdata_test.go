package bench

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/schemafmt/avrofmt"
	"github.com/minkhq/mink/pkg/schemafmt/protofmt"
	"github.com/minkhq/mink/pkg/tableschema"
)

// The bare loops' decoders give the rows Mink's format decoders give, so both loops
// feed the builder the same rows (the harness also checks the files byte for byte).
func TestBareDecodersGiveMinksRows(t *testing.T) {
	for _, f := range []RegFormat{AvroFormat, ProtoFormat} {
		t.Run(f.Name, func(t *testing.T) {
			fields, mink, cols, prefix := minkDecoder(t, f)
			bare, err := f.Bare(7, fields)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := f.Encoder(7)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var row rowcodec.Row
			var root rowcodec.Value
			for i := range 300 {
				k, ev := regEventAt(rng, i)
				val, err := enc(ev)
				if err != nil {
					t.Fatal(err)
				}
				r := record.Record{Partition: 0, Offset: int64(i), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)), Key: k, Value: val}
				if !bare.Decode(r, &row) {
					t.Fatalf("record %d: bare decode failed: %s", i, row.Values[len(row.Values)-1].Bytes)
				}
				if why := mink.Decode(val[prefix:], &root); why != "" {
					t.Fatalf("record %d: %s", i, why)
				}
				for j, c := range cols {
					if !sameValue(row.Values[c], root.Elems[j]) {
						t.Fatalf("record %d, column %s: bare %+v, Mink %+v", i, fields[c].Name, row.Values[c], root.Elems[j])
					}
				}
				if row.Values[len(fields)-1].Valid {
					t.Fatalf("record %d has an error", i)
				}
			}
		})
	}
}

// minkDecoder is Mink's decoder of f's values, bound to the table over f's schema as
// pkg/tablecodec binds it: the table's fields, the decoder, the columns its record's
// fields go to, and the length of the wire prefix.
func minkDecoder(t testing.TB, f RegFormat) (fields []iceberg.NestedField, dec schemafmt.Decoder, cols []int, prefix int) {
	var s schemafmt.Schema
	var err error
	prefix = 5 // magic byte and schema id
	if f.Format == tableschema.FormatAvro {
		s, err = avrofmt.Compile(schemafmt.Source{Text: f.Schema})
	} else {
		s, err = protofmt.Compile(schemafmt.Source{Text: f.Schema}, f.Message)
		prefix++ // the message index [0]
	}
	if err != nil {
		t.Fatal(err)
	}
	spec := f.Spec("bench-value")
	if fields, err = tableschema.Compose(spec, s.Root(), nil); err != nil {
		t.Fatal(err)
	}
	v := tableschema.Version{Spec: spec, Schema: iceberg.NewSchema(0, fields...)}
	target, cols, ok := v.ValueTarget(s.Root())
	if !ok {
		t.Fatal("no value target")
	}
	if dec, err = s.Bind(target); err != nil {
		t.Fatal(err)
	}
	return fields, dec, cols, prefix
}

func sameValue(a, b rowcodec.Value) bool {
	if a.Valid != b.Valid {
		return false
	}
	if !a.Valid {
		return true
	}
	if a.Int != b.Int || a.Float != b.Float || string(a.Bytes) != string(b.Bytes) || len(a.Elems) != len(b.Elems) {
		return false
	}
	for i := range a.Elems {
		if !sameValue(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}
