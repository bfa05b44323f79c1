package parquetbuild

import (
	"bytes"
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// FileStats describes a built file: what an Iceberg manifest's data_file needs, plus the
// size and checksum a rebuild is checked against.
type FileStats struct {
	Size         int64  `json:"size"`
	SHA256       string `json:"sha256"` // hex
	RowCount     int64  `json:"row_count"`
	DecodeErrors int64  `json:"decode_errors"` // rows whose _mink_error is set
	// FirstOffset and LastOffset are the offsets of the first and last record; both -1
	// for a file without rows.
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
	// SplitOffsets are the byte offsets where row groups start (data_file split_offsets),
	// ascending, so engines can split a large file between tasks.
	SplitOffsets []int64 `json:"split_offsets,omitempty"`
	// Columns has one entry per Parquet column (primitive field), in field-id order.
	Columns []ColumnStats `json:"columns"`
}

// ColumnStats are one primitive field's metrics, as Iceberg's own Parquet writer records
// them: counts are Parquet's (one entry per value of the column: for a field inside a
// list, one per element, plus one null entry per null or empty list; for a field inside
// a struct, one null entry per null struct), and bounds exist only for primitive fields
// reached through structs alone, never inside a list or map (Iceberg Java's
// ParquetUtil.shouldStoreBounds). Bounds use Iceberg's single-value binary serialization
// (spec Appendix D); strings are truncated to 16 characters and binary to 16 bytes, the
// upper bound then incremented, as with Iceberg's default metrics mode truncate(16);
// fixed(L) bounds are whole values in unsigned byte order, as iceberg-go keeps them.
type ColumnStats struct {
	FieldID    int   `json:"field_id"`
	ValueCount int64 `json:"value_count"`
	NullCount  int64 `json:"null_count"`
	// nil: no bound. Empty (not nil) is a real bound: the empty string or binary.
	LowerBound []byte `json:"lower_bound"`
	UpperBound []byte `json:"upper_bound"`
	ColumnSize int64  `json:"column_size"` // compressed bytes of the column in all row groups
}

// truncateLen is Iceberg's default bound truncation: truncate(16).
const truncateLen = 16

// leaf tracks one Parquet column while rows are added.
type leaf struct {
	fieldID       int
	values, nulls int64
	bounds        bounds // nil: no bounds for this column
	size          int64
}

// bounds accumulates the min and max of a column's non-null values.
type bounds interface {
	observe(v *rowcodec.Value)
	// result returns the serialized bounds; nil when there is none.
	result() (lower, upper []byte)
}

// boundsFor returns the accumulator for a primitive field outside lists and maps, or nil
// when Iceberg bounds are not kept for it.
func boundsFor(t iceberg.Type) bounds {
	switch t := t.(type) {
	case iceberg.BooleanType:
		return &intBounds{size: 1}
	case iceberg.Int32Type, iceberg.DateType:
		return &intBounds{size: 4}
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType:
		return &intBounds{size: 8}
	case iceberg.Float32Type:
		return &floatBounds{size: 4}
	case iceberg.Float64Type:
		return &floatBounds{size: 8}
	case iceberg.DecimalType:
		if t.Precision() <= 18 {
			return &intBounds{decimal: true}
		}
		return &fixedBounds{signed: true}
	case iceberg.FixedType:
		return &fixedBounds{}
	case iceberg.StringType:
		return &prefixBounds{text: true}
	case iceberg.BinaryType:
		return &prefixBounds{}
	}
	// uuid: Iceberg Java long compared UUIDs as signed longs while the spec and
	// iceberg-go use unsigned bytes; a bound either side could misread would prune files
	// wrongly, so none is written.
	return nil
}

type intBounds struct {
	size     int  // 1 (boolean), 4 or 8 bytes little-endian
	decimal  bool // big-endian two's complement, fewest bytes
	set      bool
	min, max int64
}

func (b *intBounds) observe(v *rowcodec.Value) {
	if !b.set {
		b.min, b.max, b.set = v.Int, v.Int, true
		return
	}
	b.min = min(b.min, v.Int)
	b.max = max(b.max, v.Int)
}

func (b *intBounds) result() ([]byte, []byte) {
	if !b.set {
		return nil, nil
	}
	return b.encode(b.min), b.encode(b.max)
}

func (b *intBounds) encode(x int64) []byte {
	if b.decimal {
		var be [8]byte
		binary.BigEndian.PutUint64(be[:], uint64(x))
		return minimalTwosComplement(be[:])
	}
	out := make([]byte, 8)
	binary.LittleEndian.PutUint64(out, uint64(x))
	return out[:b.size]
}

// minimalTwosComplement drops leading bytes that only repeat the sign, into bytes of
// its own (bounds outlive the buffers they are read from).
func minimalTwosComplement(b []byte) []byte {
	return append([]byte(nil), rowcodec.MinimalTwos(b)...)
}

type floatBounds struct {
	size     int
	set      bool
	min, max float64
}

func (b *floatBounds) observe(v *rowcodec.Value) {
	f := v.Float
	if math.IsNaN(f) { // never decoded, but a NaN must not become a bound
		return
	}
	if !b.set {
		b.min, b.max, b.set = f, f, true
		return
	}
	// -0 sorts below +0, as in Java's Double.compare.
	if f < b.min || (f == 0 && b.min == 0 && math.Signbit(f)) {
		b.min = f
	}
	if f > b.max || (f == 0 && b.max == 0 && !math.Signbit(f)) {
		b.max = f
	}
}

func (b *floatBounds) result() ([]byte, []byte) {
	if !b.set {
		return nil, nil
	}
	enc := func(f float64) []byte {
		if b.size == 4 {
			return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(f)))
		}
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(f))
	}
	return enc(b.min), enc(b.max)
}

// fixedBounds: fixed(L), and decimals of precision > 18 (signed), held as fixed-length
// bytes (decimals: two's complement).
type fixedBounds struct {
	signed   bool
	min, max []byte
}

func compareSigned(a, b []byte) int {
	// Same length within a column: flipping the sign bit makes unsigned order signed.
	if len(a) > 0 && len(b) > 0 && (a[0]^b[0])&0x80 != 0 {
		if a[0]&0x80 != 0 {
			return -1
		}
		return 1
	}
	return bytes.Compare(a, b)
}

func (b *fixedBounds) compare(x, y []byte) int {
	if b.signed {
		return compareSigned(x, y)
	}
	return bytes.Compare(x, y)
}

func (b *fixedBounds) observe(v *rowcodec.Value) {
	if b.min == nil {
		b.min = append([]byte{}, v.Bytes...)
		b.max = append([]byte{}, v.Bytes...)
		return
	}
	if b.compare(v.Bytes, b.min) < 0 {
		b.min = append(b.min[:0], v.Bytes...)
	}
	if b.compare(v.Bytes, b.max) > 0 {
		b.max = append(b.max[:0], v.Bytes...)
	}
}

func (b *fixedBounds) result() ([]byte, []byte) {
	if b.min == nil {
		return nil, nil
	}
	if b.signed {
		// Iceberg serializes decimals as the minimal two's complement.
		return minimalTwosComplement(b.min), minimalTwosComplement(b.max)
	}
	return bytes.Clone(b.min), bytes.Clone(b.max)
}

// prefixBounds keeps only what truncated bounds need: the least prefix, the greatest
// prefix, and whether the greatest value was longer than its prefix. Truncation keeps
// order (a ≤ b implies prefix(a) ≤ prefix(b)), so these are exact, without copying every
// new maximum of a growing column in full.
type prefixBounds struct {
	text         bool // string: truncate by characters; binary: by bytes
	set          bool
	min, max     []byte
	maxTruncated bool
}

func (b *prefixBounds) prefix(v []byte) ([]byte, bool) {
	if !b.text {
		if len(v) > truncateLen {
			return v[:truncateLen], true
		}
		return v, false
	}
	// v is valid UTF-8 (the decoder checks it): count characters by their first bytes.
	n := 0
	for i, c := range v {
		if c&0xc0 != 0x80 {
			if n == truncateLen {
				return v[:i], true
			}
			n++
		}
	}
	return v, false
}

func (b *prefixBounds) observe(v *rowcodec.Value) {
	p, truncated := b.prefix(v.Bytes)
	if !b.set {
		b.min = append(b.min[:0], p...)
		b.max = append(b.max[:0], p...)
		b.maxTruncated, b.set = truncated, true
		return
	}
	if bytes.Compare(p, b.min) < 0 {
		b.min = append(b.min[:0], p...)
	}
	switch c := bytes.Compare(p, b.max); {
	case c > 0:
		b.max = append(b.max[:0], p...)
		b.maxTruncated = truncated
	case c == 0 && truncated:
		b.maxTruncated = true
	}
}

func (b *prefixBounds) result() ([]byte, []byte) {
	if !b.set {
		return nil, nil
	}
	lower := append([]byte{}, b.min...)
	if !b.maxTruncated {
		return lower, append([]byte{}, b.max...)
	}
	if b.text {
		return lower, incrementText(b.max)
	}
	return lower, incrementBinary(b.max)
}

// incrementBinary returns the least byte string greater than every string starting
// with p: the last byte below 0xff incremented, the rest dropped; nil if none exists.
func incrementBinary(p []byte) []byte {
	out := append([]byte(nil), p...)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] < 0xff {
			out[i]++
			return out[:i+1]
		}
	}
	return nil
}

// incrementText is incrementBinary for characters: the last character that has a
// successor (skipping the surrogate range) is replaced by it; nil if none has.
func incrementText(p []byte) []byte {
	for len(p) > 0 {
		r, size := utf8.DecodeLastRune(p)
		p = p[:len(p)-size]
		next := r + 1
		if next == 0xD800 {
			next = 0xE000
		}
		if next <= utf8.MaxRune {
			return utf8.AppendRune(append([]byte(nil), p...), next)
		}
	}
	return nil
}
