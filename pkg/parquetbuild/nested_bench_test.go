package parquetbuild

import (
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// orderFields is a typical nested table, as decoded from Avro or Protobuf.
func orderFields() []iceberg.NestedField {
	return withIDs([]iceberg.NestedField{
		req("order_id", tLong),
		opt("customer", structOf(
			req("id", tLong),
			opt("name", tString),
			opt("address", structOf(opt("city", tString), opt("zip", tString), opt("country", tFixed3))),
		)),
		opt("items", listOf(structOf(
			req("sku", tString),
			opt("qty", tInt),
			opt("price", iceberg.DecimalTypeOf(10, 2)),
		), true)),
		opt("attrs", mapOf(tString, tString, false)),
		opt("tags", listOf(tString, false)),
		opt("ts", iceberg.PrimitiveTypes.TimestampTz),
	})
}

const benchOrders = 50_000

var benchOrderRows = sync.OnceValue(func() []rowcodec.Row {
	fields := orderFields()
	g := &gen{rng: rand.New(rand.NewPCG(3, 4)), nullRate: 10, maxElems: 4}
	rows := make([]rowcodec.Row, benchOrders)
	for i := range rows {
		rows[i] = g.row(fields)
	}
	return rows
})

// BenchmarkBuildNested measures the builder alone on nested rows (the decoder hands
// out prepared rows), into io.Discard.
func BenchmarkBuildNested(b *testing.B) {
	dec := &rowsDecoder{fields: orderFields(), rows: benchOrderRows(), alias: true}
	recs := dec.records()
	b.ReportAllocs()
	var values int64
	for b.Loop() {
		bl, err := NewBuilderFor(io.Discard, dec, DefaultSettings())
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := bl.Add(r); err != nil {
				b.Fatal(err)
			}
		}
		st, err := bl.Close()
		if err != nil {
			b.Fatal(err)
		}
		values = 0
		for _, c := range st.Columns {
			values += c.ValueCount
		}
	}
	b.ReportMetric(float64(benchOrders)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(values)*float64(b.N)/b.Elapsed().Seconds(), "values/s")
}
