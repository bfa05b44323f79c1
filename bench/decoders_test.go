package bench

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	gojson "github.com/goccy/go-json"

	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
)

// The decoders of items 1, 9 and 10 on the benchmarks' own records held in memory:
// Mink's (pkg/rowcodec, avrofmt, protofmt) beside each item's bare decoder and, for JSON,
// the other decoders issue 17 asks about. "decode" is the decoder alone; "encode" adds
// the same parquetbuild builder into io.Discard, as the loops do.
//
//	go test ./bench -run '^$' -bench Decoders -benchmem
//	GOEXPERIMENT=jsonv2 go test ./bench -run '^$' -bench Decoders/JSON -benchmem

const decoderRecords = 20_000

func jsonRecords() []record.Record {
	rng := rand.New(rand.NewPCG(1, 0))
	recs := make([]record.Record, decoderRecords)
	for i := range recs {
		k, v := event(rng, i)
		recs[i] = record.Record{Offset: int64(i), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)), Key: k, Value: v}
	}
	return recs
}

func BenchmarkDecoders(b *testing.B) {
	b.Run("JSON", func(b *testing.B) {
		recs := jsonRecords()
		mink := func() (rowcodec.RowDecoder, error) { return rowcodec.NewDecoder(EventSpec) }
		decoders := []struct {
			name string
			mk   func() (rowcodec.RowDecoder, error)
		}{
			{"rowcodec", mink},
			{"encoding-json", NewJSONRows}, // item 1's bare decoder
			{"goccy-go-json", func() (rowcodec.RowDecoder, error) { return newJSONRowsWith(gojson.Unmarshal) }},
		}
		decoders = append(decoders, jsonV2Decoders...)
		for _, d := range decoders {
			benchDecoder(b, d.name, recs, d.mk)
		}
		// A table's columns are declared, not compiled into Go types: a decoder that
		// cannot be generated per table reads into a map, then looks the columns up.
		for _, m := range []struct {
			name      string
			unmarshal func([]byte, any) error
		}{{"encoding-json-map", json.Unmarshal}, {"goccy-go-json-map", gojson.Unmarshal}} {
			b.Run(m.name+"/decode", func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					for _, r := range recs {
						var v map[string]any
						if err := m.unmarshal(r.Value, &v); err != nil {
							b.Fatal(err)
						}
					}
				}
				perRecord(b, len(recs), cpu0)
			})
		}
	})
	for _, f := range []RegFormat{AvroFormat, ProtoFormat} {
		b.Run(f.Name, func(b *testing.B) {
			recs, fields, mink := regRecords(b, f)
			benchDecoder(b, "mink", recs, func() (rowcodec.RowDecoder, error) { return mink, nil })
			benchDecoder(b, "bare", recs, func() (rowcodec.RowDecoder, error) { return f.Bare(7, fields) })
		})
	}
}

// benchDecoder measures a decoder alone, then with the builder.
func benchDecoder(b *testing.B, name string, recs []record.Record, mk func() (rowcodec.RowDecoder, error)) {
	b.Run(name+"/decode", func(b *testing.B) {
		d, err := mk()
		if err != nil {
			b.Fatal(err)
		}
		var row rowcodec.Row
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			for _, r := range recs {
				if !d.Decode(r, &row) {
					b.Fatalf("offset %d: %s", r.Offset, row.Values[len(row.Values)-1].Bytes)
				}
			}
		}
		perRecord(b, len(recs), cpu0)
	})
	b.Run(name+"/encode", func(b *testing.B) {
		d, err := mk()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			bl, err := parquetbuild.NewBuilderFor(io.Discard, d, parquetbuild.DefaultSettings())
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range recs {
				if err := bl.Add(r); err != nil {
					b.Fatal(err)
				}
			}
			if st, err := bl.Close(); err != nil || st.DecodeErrors != 0 {
				b.Fatal(err, st.DecodeErrors)
			}
		}
		perRecord(b, len(recs), cpu0)
	})
}

// perRecord reports the time per record rather than per pass over them: wall time, and
// the process's CPU time since cpu0 (from cpuTime before the loop), which other load on
// a shared machine moves less.
func perRecord(b *testing.B, n int, cpu0 time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/record")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/record")
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// regRecords encodes the Schema Registry items' events and returns them with the table's
// fields and Mink's decoder of them: the format's decoder bound to the table, with the
// Kafka columns of pkg/rowcodec, as pkg/tablecodec composes them (its schema lookups by
// id need Postgres; they are one map lookup per record).
func regRecords(b *testing.B, f RegFormat) ([]record.Record, []iceberg.NestedField, rowcodec.RowDecoder) {
	fields, dec, cols, prefix := minkDecoder(b, f)
	rc, err := rowcodec.NewDecoderAt(f.Spec("bench-value"), fields)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := f.Encoder(7)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 0))
	recs := make([]record.Record, decoderRecords)
	for i := range recs {
		k, ev := regEventAt(rng, i)
		val, err := enc(ev)
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = record.Record{Offset: int64(i), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)), Key: k, Value: val}
	}
	return recs, fields, &boundRows{rc: rc, dec: dec, cols: cols, prefix: prefix}
}

// boundRows is pkg/tablecodec's Decode for one known schema.
type boundRows struct {
	rc     *rowcodec.Decoder
	dec    schemafmt.Decoder
	cols   []int
	prefix int
	root   rowcodec.Value
}

func (d *boundRows) Fields() []iceberg.NestedField { return d.rc.Fields() }

func (d *boundRows) Decode(r record.Record, row *rowcodec.Row) bool {
	d.rc.Begin(row)
	reason := d.dec.Decode(r.Value[d.prefix:], &d.root)
	if reason == "" {
		for i, c := range d.cols {
			row.Values[c] = d.root.Elems[i]
		}
	}
	return d.rc.Finish(r, row, reason)
}
