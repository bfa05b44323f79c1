package parquetbuild

import (
	"bytes"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// fixedType wraps parquet-go's FIXED_LEN_BYTE_ARRAY types (uuid, fixed(L), and decimals
// of precision > 18) to fix two things engines rely on for pruning:
//
//   - DECIMAL sorts as signed two's complement (Parquet LogicalTypes.md); parquet-go
//     orders fixed bytes unsigned, which gives a wrong min/max to any page or row group
//     holding both signs. With signed set, page bounds and chunk statistics use the
//     signed order.
//   - parquet-go's fixed-length column index drops the entry of an all-null page, which
//     leaves min_values shorter than null_pages (a corrupt page index). Our indexer
//     writes the empty entries the format asks for.
type fixedType struct {
	parquet.Type
	signed bool
}

func (t fixedType) compare(a, b []byte) int {
	if t.signed {
		return compareSigned(a, b)
	}
	return bytes.Compare(a, b)
}

func (t fixedType) Compare(a, b parquet.Value) int { return t.compare(a.ByteArray(), b.ByteArray()) }

func (t fixedType) NewColumnBuffer(columnIndex, numValues int) parquet.ColumnBuffer {
	buf := t.Type.NewColumnBuffer(columnIndex, numValues)
	if !t.signed {
		return buf
	}
	return signedBuffer{buf}
}

func (t fixedType) NewColumnIndexer(int) parquet.ColumnIndexer {
	// No truncation: uuid and decimals are at most 16 bytes, the column index size
	// limit, and a truncated fixed(L) bound would no longer be L bytes long, which
	// readers of fixed-length columns do not expect.
	return &fixedIndexer{t: t}
}

// signedBuffer makes its pages report signed bounds.
type signedBuffer struct{ parquet.ColumnBuffer }

func (b signedBuffer) Page() parquet.Page          { return signedPage{b.ColumnBuffer.Page()} }
func (b signedBuffer) Clone() parquet.ColumnBuffer { return signedBuffer{b.ColumnBuffer.Clone()} }

type signedPage struct{ parquet.Page }

func (p signedPage) Slice(i, j int64) parquet.Page { return signedPage{p.Page.Slice(i, j)} }

func (p signedPage) Bounds() (lo, hi parquet.Value, ok bool) {
	values := p.Data()
	data, size := values.FixedLenByteArray()
	if size == 0 || len(data) < size {
		return lo, hi, false
	}
	minV, maxV := data[:size], data[:size]
	for i := size; i+size <= len(data); i += size {
		v := data[i : i+size]
		if compareSigned(v, minV) < 0 {
			minV = v
		}
		if compareSigned(v, maxV) > 0 {
			maxV = v
		}
	}
	col := p.Column()
	return parquet.FixedLenByteArrayValue(minV).Level(0, 0, col), parquet.FixedLenByteArrayValue(maxV).Level(0, 0, col), true
}

// fixedIndexer builds the column index of a fixed-length column.
type fixedIndexer struct {
	t          fixedType
	nullPages  []bool
	nullCounts []int64
	mins, maxs [][]byte
}

func (i *fixedIndexer) Reset() {
	i.nullPages, i.nullCounts, i.mins, i.maxs = i.nullPages[:0], i.nullCounts[:0], i.mins[:0], i.maxs[:0]
}

func (i *fixedIndexer) IndexPage(numValues, numNulls int64, lo, hi parquet.Value) {
	null := numValues == numNulls || lo.IsNull() || hi.IsNull()
	i.nullPages = append(i.nullPages, null)
	i.nullCounts = append(i.nullCounts, numNulls)
	if null {
		i.mins, i.maxs = append(i.mins, []byte{}), append(i.maxs, []byte{})
		return
	}
	i.mins = append(i.mins, bytes.Clone(lo.ByteArray()))
	i.maxs = append(i.maxs, bytes.Clone(hi.ByteArray()))
}

func (i *fixedIndexer) ColumnIndex() format.ColumnIndex {
	return format.ColumnIndex{
		NullPages:     append([]bool(nil), i.nullPages...),
		NullCounts:    append([]int64(nil), i.nullCounts...),
		MinValues:     append([][]byte(nil), i.mins...),
		MaxValues:     append([][]byte(nil), i.maxs...),
		BoundaryOrder: i.order(),
	}
}

// order is ascending or descending only when both bound lists are, over non-null pages.
func (i *fixedIndexer) order() format.BoundaryOrder {
	asc, desc := true, true
	prev := -1
	for k := range i.nullPages {
		if i.nullPages[k] {
			continue
		}
		if prev >= 0 {
			cmin, cmax := i.t.compare(i.mins[prev], i.mins[k]), i.t.compare(i.maxs[prev], i.maxs[k])
			asc = asc && cmin <= 0 && cmax <= 0
			desc = desc && cmin >= 0 && cmax >= 0
		}
		prev = k
	}
	switch {
	case prev < 0:
		return format.Unordered
	case asc:
		return format.Ascending
	case desc:
		return format.Descending
	}
	return format.Unordered
}
