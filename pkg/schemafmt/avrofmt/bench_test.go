package avrofmt

import (
	"math/big"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/minkhq/mink/pkg/rowcodec"
)

const benchSchema = `{"type": "record", "name": "Event", "namespace": "com.acme", "fields": [
  {"name": "id", "type": "long"},
  {"name": "user", "type": "string"},
  {"name": "email", "type": ["null", "string"]},
  {"name": "age", "type": "int"},
  {"name": "score", "type": "double"},
  {"name": "active", "type": "boolean"},
  {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
  {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "CLICK", "BUY"]}},
  {"name": "session", "type": {"type": "string", "logicalType": "uuid"}},
  {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
    {"name": "street", "type": "string"},
    {"name": "city", "type": "string"},
    {"name": "zip", "type": "string"}]}},
  {"name": "tags", "type": {"type": "array", "items": "string"}}
]}`

type bAddress struct {
	Street string `avro:"street"`
	City   string `avro:"city"`
	Zip    string `avro:"zip"`
}

type bEvent struct {
	ID      int64     `avro:"id"`
	User    string    `avro:"user"`
	Email   *string   `avro:"email"`
	Age     int32     `avro:"age"`
	Score   float64   `avro:"score"`
	Active  bool      `avro:"active"`
	Amount  *big.Rat  `avro:"amount"`
	Created time.Time `avro:"created"`
	Kind    string    `avro:"kind"`
	Session string    `avro:"session"`
	Address bAddress  `avro:"address"`
	Tags    []string  `avro:"tags"`
}

func benchData(b *testing.B) []byte {
	return marshal(b, benchSchema, bEvent{
		ID: 1234567890123, User: "alice.smith", Email: ptr("alice@example.com"), Age: 42, Score: 98.25,
		Active: true, Amount: rat("12345.67"), Created: time.UnixMilli(1700000000123), Kind: "CLICK",
		Session: "0f8fad5b-d9cb-469f-a165-70867728950e",
		Address: bAddress{Street: "221B Baker Street", City: "London", Zip: "NW1 6XE"},
		Tags:    []string{"mobile", "campaign-42", "eu"},
	})
}

func BenchmarkDecode(b *testing.B) {
	data := benchData(b)
	as, err := avro.ParseWithCache(benchSchema, "", &avro.SchemaCache{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("avrofmt", func(b *testing.B) {
		d := mustBind(b, mustCompile(b, benchSchema))
		var v rowcodec.Value
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if r := d.Decode(data, &v); r != "" {
				b.Fatal(r)
			}
		}
	})
	b.Run("hamba-struct", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var e bEvent
			if err := avro.Unmarshal(as, data, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hamba-map", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := avro.Unmarshal(as, data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDecodeRich(b *testing.B) {
	d := mustBind(b, mustCompile(b, richSchema))
	data := marshal(b, richSchema, richValue())
	var v rowcodec.Value
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if r := d.Decode(data, &v); r != "" {
			b.Fatal(r)
		}
	}
}
