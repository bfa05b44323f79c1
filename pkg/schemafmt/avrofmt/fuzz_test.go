package avrofmt

import (
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
)

// FuzzDecode checks that no input makes a decoder panic or loop, that decoding is
// deterministic, and that what we accept hamba/avro can read too.
func FuzzDecode(f *testing.F) {
	type bound struct {
		text string      // the writer schema
		as   avro.Schema // parsed by hamba
		d    schemafmt.Decoder
		d2   schemafmt.Decoder // a second decoder of the same binding
	}
	var cases []bound
	add := func(text string, target func(schemafmt.Schema) any) {
		s := mustCompile(f, text)
		var tt = withIDs(s.Root())
		if target != nil {
			tt = withIDs(target(s).(schemafmt.Schema).Root())
		}
		d, err := s.Bind(tt)
		if err != nil {
			f.Fatal(err)
		}
		d2, _ := s.Bind(tt)
		as, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			f.Fatal(err)
		}
		cases = append(cases, bound{text: text, as: as, d: d, d2: d2})
	}
	add(richSchema, nil)
	add(v1Schema, func(schemafmt.Schema) any { return mustCompile(f, v2Schema) }) // skips and promotions
	add(`["null", "int", {"type": "array", "items": {"type": "map", "values": ["null", "string", "long"]}}]`, nil)

	f.Add(uint8(0), marshal(f, richSchema, richValue()))
	f.Add(uint8(1), marshal(f, v1Schema, tItem1{ID: 3, Gone: "x", Price: rat("1.00"), Tags: []int32{1, 2},
		Attrs: map[string]tA1{"a": {N: 1}}, U: map[string]any{"int": 1}}))
	f.Add(uint8(2), marshal(f, cases[2].text, map[string]any{"array": []map[string]any{{"k": map[string]any{"long": int64(1)}}}}))
	f.Add(uint8(2), []byte("\x04\x01\x02\x02\x02a\x00\x00\x00"))

	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		c := cases[int(which)%len(cases)]
		var v rowcodec.Value
		r1 := c.d.Decode(data, &v)
		r2 := c.d.Decode(data, &v) // into reused memory
		var fresh rowcodec.Value
		r3 := c.d2.Decode(data, &fresh)
		if r1 != r2 || r1 != r3 {
			t.Fatalf("reasons differ: %q, %q, %q", r1, r2, r3)
		}
		if r1 != "" {
			return
		}
		var out any
		if err := avro.Unmarshal(c.as, data, &out); err != nil {
			t.Fatalf("we decoded what hamba/avro refuses: %v", err)
		}
	})
}
