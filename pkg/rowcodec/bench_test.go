package rowcodec

import (
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/record"
)

// The harness's event is measured by pkg/parquetbuild's BenchmarkDecodeOnly and, beside
// the other decoders and with the encode, by the bench package's BenchmarkDecoders.

// BenchmarkDecodeAllTypes decodes one record with every column type.
func BenchmarkDecodeAllTypes(b *testing.B) {
	value := []byte(`{"b": true, "i": -2147483648, "l": 9007199254740993, "f": 1.5, "d": -2.25e-3,
		"dec": "-123.4", "big": -99999999999999999999999999999999999999, "mid": 123456789012345678.9,
		"dt": "1969-12-31", "tm": "13:45:30.1234567", "ts": "2024-01-02T03:04:05.123456789",
		"tz": "2024-01-02T05:04:05.5+02:00", "s": "h\u00e9\"llo\ud83d\ude00\n", "u": "123E4567-e89b-12d3-a456-426614174000",
		"bin": "aGVsbG8=", "tags": ["a", null, ""], "nums": [], "user": {"name": "bob", "id": 1e3, "x": [1]},
		"req": "here", "unknown": {"deep": [1, 2, {"a": null}]}}`)
	d, err := NewDecoder(allTypes)
	if err != nil {
		b.Fatal(err)
	}
	r := record.Record{Partition: 3, Offset: 42, Timestamp: time.UnixMilli(1700000000123), Value: value}
	var row Row
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if !d.Decode(r, &row) {
			b.Fatal(string(row.Values[len(row.Values)-1].Bytes))
		}
	}
}
