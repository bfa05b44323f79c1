package devcluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/hamba/avro/v2"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/schemafmt/avrofmt"
)

var timeZero = time.Date(2026, 1, 2, 3, 4, 5, 6789000, time.UTC)

// The Avro demo's schemas map to the column types the demo promises, version 2 is
// version 1 and one more column, and every order decodes with no error, a version 1
// order as null in the new column: as the table reads them after its evolution.
func TestDemoOrdersFitTheAvroTable(t *testing.T) {
	compile := func(text string) (schemafmt.Schema, *iceberg.StructType) {
		t.Helper()
		s, err := avrofmt.Compile(schemafmt.Source{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return s, s.Root().(*iceberg.StructType)
	}
	s1, root1 := compile(AvroSchemaV1)
	s2, root2 := compile(AvroSchemaV2)
	want := map[string]string{"id": "long", "customer": "string", "total": "double", "placed_at": "timestamptz",
		"status": "string", "shipping": "struct<0: country: optional string, 0: city: optional string, 0: zip: optional string>",
		"items": "list<struct<", AvroNewField: "string"}
	for i, f := range root2.FieldList {
		if w := want[f.Name]; w == "" || !bytes.HasPrefix([]byte(f.Type.String()), []byte(w)) {
			t.Errorf("column %d %s has type %s, want %s", i, f.Name, f.Type, w)
		}
		if i < len(root1.FieldList) && root1.FieldList[i].Name != f.Name {
			t.Errorf("version 2 column %d is %s, version 1's is %s", i, f.Name, root1.FieldList[i].Name)
		}
	}
	if len(root2.FieldList) != len(root1.FieldList)+1 || root2.FieldList[len(root1.FieldList)].Name != AvroNewField {
		t.Fatalf("version 2 is not version 1 plus %s:\n%s\n%s", AvroNewField, root1, root2)
	}
	dec1, err := s1.Bind(root2)
	if err != nil {
		t.Fatal(err)
	}
	dec2, err := s2.Bind(root2)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2 := avro.MustParse(AvroSchemaV1), avro.MustParse(AvroSchemaV2)
	coupon := len(root1.FieldList)
	var v rowcodec.Value
	statuses, withCoupon := map[string]int{}, 0
	for id := int64(1); id <= 2000; id++ {
		o := NewOrder(id, timeZero)
		for version, enc := range map[int]struct {
			dec    schemafmt.Decoder
			schema avro.Schema
			value  any
		}{1: {dec1, a1, orderV1(o)}, 2: {dec2, a2, orderV2(o)}} {
			b, err := avro.Marshal(enc.schema, enc.value)
			if err != nil {
				t.Fatalf("order %d, version %d: %v", id, version, err)
			}
			if why := enc.dec.Decode(b, &v); why != "" {
				t.Fatalf("order %d, version %d does not decode: %s", id, version, why)
			}
			if e := v.Elems[0]; !e.Valid || e.Int != id {
				t.Fatalf("order %d decodes to id %+v", id, e)
			}
			if e := v.Elems[3]; e.Int != timeZero.Truncate(time.Millisecond).UnixMicro() {
				t.Fatalf("order %d: placed_at %d µs", id, e.Int)
			}
			got := v.Elems[coupon]
			switch {
			case version == 1 && got.Valid:
				t.Fatalf("order %d of version 1 has a coupon %q", id, got.Bytes)
			case version == 2 && got.Valid != (o.Coupon != nil):
				t.Fatalf("order %d of version 2: coupon %+v, want %v", id, got, o.Coupon)
			case version == 2 && got.Valid && string(got.Bytes) != *o.Coupon:
				t.Fatalf("order %d of version 2: coupon %q, want %q", id, got.Bytes, *o.Coupon)
			}
		}
		if o.Total <= 0 || len(o.Items) == 0 {
			t.Fatalf("order %d: total %v, %d items", id, o.Total, len(o.Items))
		}
		statuses[o.Status]++
		if o.Coupon != nil {
			withCoupon++
		}
	}
	if len(statuses) != 4 || withCoupon < 300 || withCoupon > 700 {
		t.Errorf("statuses %v, %d of 2000 orders with a coupon", statuses, withCoupon)
	}
}

func TestNewOrderIsAFunctionOfItsID(t *testing.T) {
	a, b, c := NewOrder(42, timeZero), NewOrder(42, timeZero), NewOrder(43, timeZero)
	s := avro.MustParse(AvroSchemaV2)
	ab, _ := avro.Marshal(s, a)
	bb, _ := avro.Marshal(s, b)
	cb, _ := avro.Marshal(s, c)
	if !bytes.Equal(ab, bb) || bytes.Equal(ab, cb) {
		t.Errorf("NewOrder(42) twice: %x and %x; NewOrder(43): %x", ab, bb, cb)
	}
}
