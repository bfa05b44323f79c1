package tableschema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/apache/iceberg-go"
)

// The field ids end up in every data file and manifest: these goldens freeze them.
func TestIcebergSchemaGolden(t *testing.T) {
	cases := []struct {
		spec Spec
		want string
	}{
		{
			Spec{Format: FormatJSON, Columns: []Column{
				{Name: "id", Type: "long", Required: true},
				{Name: "tags", Type: "list<string>"},
				{Name: "price", Type: "decimal(10, 2)", JSONPath: "item.price"},
			}},
			`{"type":"struct","schema-id":0,"identifier-field-ids":[],"fields":[
{"type":"long","id":1,"name":"id","required":false},
{"type":{"type":"list","element-id":10,"element":"string","element-required":false},"id":2,"name":"tags","required":false},
{"type":"decimal(10, 2)","id":3,"name":"price","required":false},
{"type":"int","id":4,"name":"_kafka_partition","required":true},
{"type":"long","id":5,"name":"_kafka_offset","required":true},
{"type":"timestamptz","id":6,"name":"_kafka_timestamp","required":true},
{"type":"binary","id":7,"name":"_kafka_key","required":false},
{"type":{"type":"list","element-id":11,"element":{"type":"struct","fields":[
 {"type":"string","id":12,"name":"key","required":true},
 {"type":"binary","id":13,"name":"value","required":false}]},"element-required":true},"id":8,"name":"_kafka_headers","required":false},
{"type":"string","id":9,"name":"_mink_error","required":false}]}`,
		},
		{
			Spec{Format: FormatRaw},
			`{"type":"struct","schema-id":0,"identifier-field-ids":[],"fields":[
{"type":"binary","id":1,"name":"value","required":false},
{"type":"int","id":2,"name":"_kafka_partition","required":true},
{"type":"long","id":3,"name":"_kafka_offset","required":true},
{"type":"timestamptz","id":4,"name":"_kafka_timestamp","required":true},
{"type":"binary","id":5,"name":"_kafka_key","required":false},
{"type":{"type":"list","element-id":8,"element":{"type":"struct","fields":[
 {"type":"string","id":9,"name":"key","required":true},
 {"type":"binary","id":10,"name":"value","required":false}]},"element-required":true},"id":6,"name":"_kafka_headers","required":false},
{"type":"string","id":7,"name":"_mink_error","required":false}]}`,
		},
	}
	for _, c := range cases {
		sc, err := c.spec.IcebergSchema()
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := canonicalJSON(t, got), canonicalJSON(t, []byte(c.want)); !bytes.Equal(g, w) {
			t.Errorf("schema of %+v\n got %s\nwant %s", c.spec, g, w)
		}
		if sc.ID != SchemaID {
			t.Errorf("schema id %d", sc.ID)
		}
		// What we produce must read back as the same Iceberg schema (catalog round trip).
		var back iceberg.Schema
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if !back.Equals(sc) {
			t.Errorf("schema does not survive a JSON round trip: %s", got)
		}
		if n := len(sc.Fields()); n != c.spec.UserColumnCount()+KafkaColumnCount {
			t.Errorf("%d top-level fields, want %d", n, c.spec.UserColumnCount()+KafkaColumnCount)
		}
	}
}

func TestFieldsRejectsInvalidSpec(t *testing.T) {
	if _, err := (Spec{Format: FormatJSON}).IcebergSchema(); err == nil {
		t.Fatal("IcebergSchema of an invalid spec succeeded")
	}
}

func TestFieldsAreFresh(t *testing.T) {
	// Fields must not share list/struct types between calls: callers may hold them.
	s := Spec{Format: FormatJSON, Columns: []Column{{Name: "a", Type: "list<int>"}}}
	f1, _ := s.Fields()
	f2, _ := s.Fields()
	f1[0].Type.(*iceberg.ListType).ElementID = 99
	if f2[0].Type.(*iceberg.ListType).ElementID == 99 {
		t.Fatal("Fields results share list types")
	}
}

// canonicalJSON re-encodes b with sorted keys so that key order does not matter.
func canonicalJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
