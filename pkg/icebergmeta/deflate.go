package icebergmeta

// Deflate streams every Avro reader inflates. Go's compress/flate ends every stream with
// an empty stored block marked final (what Close writes), after the data's last Huffman
// block. Java, fastavro and Go read that; some inflaters do not: icebird's (the one
// hyparquet-compressors ships) decodes a stream again past its end and fails on any
// stored block it meets there ("RangeError: offset is out of bounds"). finalDeflate
// writes streams with no stored block at all, whose last Huffman block is the final one.

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
)

// finalDeflate compresses raw into a raw deflate stream (RFC 1951) made of Huffman
// blocks only, the last one marked final: compress/flate's stream at its default level
// with the trailing empty stored block cut off and the final bit moved onto the block
// before it. Should compress/flate store a block (incompressible input), the stream is
// instead one fixed-Huffman block of literals. Either way it is a function of raw alone,
// so a rebuilt file is byte-identical.
func finalDeflate(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		return nil, err
	}
	w.Write(raw) // a bytes.Buffer takes every write
	if err := w.Close(); err != nil {
		return nil, err
	}
	stream := buf.Bytes()
	blocks, err := deflateBlocks(stream)
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: compress/flate wrote a stream it cannot walk: %w", err)
	}
	n := len(blocks)
	last := blocks[n-1]
	if n < 2 || last.typ != blockStored || last.storedLen != 0 || !last.final {
		return literalDeflate(raw), nil
	}
	for _, b := range blocks[:n-1] {
		if b.typ == blockStored || b.final {
			return literalDeflate(raw), nil
		}
	}
	data := blocks[n-2]
	out := append([]byte(nil), stream[:(data.end+7)/8]...)
	out[data.start/8] |= 1 << (data.start % 8) // BFINAL is a block's first bit
	if rem := data.end % 8; rem != 0 {
		out[len(out)-1] &= byte(1)<<rem - 1 // zero the padding after the final block
	}
	return out, nil
}

// literalDeflate is raw as one final fixed-Huffman block of literals (RFC 1951 3.2.6):
// at most 9 bits a byte, and never a stored block.
func literalDeflate(raw []byte) []byte {
	var w bitWriter
	w.write(1, 1) // BFINAL
	w.write(1, 2) // BTYPE 01: fixed Huffman
	for _, c := range raw {
		if c < 144 {
			w.writeCode(0x30+uint32(c), 8)
		} else {
			w.writeCode(0x190+uint32(c)-144, 9)
		}
	}
	w.writeCode(0, 7) // end of block (symbol 256)
	return w.bytes()
}

// bitWriter packs bits least significant first, as deflate does.
type bitWriter struct {
	out  []byte
	acc  uint64
	nacc uint
}

func (w *bitWriter) write(v uint32, n uint) {
	w.acc |= uint64(v) << w.nacc
	w.nacc += n
	for w.nacc >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.nacc -= 8
	}
}

// writeCode writes a Huffman code, whose bits go most significant first.
func (w *bitWriter) writeCode(code uint32, n uint) {
	var rev uint32
	for i := range n {
		rev |= (code >> i & 1) << (n - 1 - i)
	}
	w.write(rev, n)
}

func (w *bitWriter) bytes() []byte {
	if w.nacc > 0 {
		return append(w.out, byte(w.acc))
	}
	return w.out
}

// Deflate block types (BTYPE).
const (
	blockStored  = 0
	blockFixed   = 1
	blockDynamic = 2
)

// deflateBlock is one block of a deflate stream: where it starts and ends, in bits from
// the stream's start.
type deflateBlock struct {
	start, end int
	typ        int
	final      bool
	storedLen  int // stored blocks: the bytes they hold
}

// deflateBlocks walks a raw deflate stream block by block, decoding its Huffman codes
// to find where each block ends, up to the final block. An error says what is wrong:
// the stream is cut short, or it is not deflate.
func deflateBlocks(stream []byte) ([]deflateBlock, error) {
	r := &bitReader{b: stream}
	var out []deflateBlock
	for {
		b := deflateBlock{start: r.pos}
		hdr, err := r.bits(3)
		if err != nil {
			return nil, err
		}
		b.final, b.typ = hdr&1 == 1, int(hdr>>1)
		switch b.typ {
		case blockStored:
			r.pos = (r.pos + 7) &^ 7
			lens, err := r.bits(32)
			if err != nil {
				return nil, err
			}
			if uint16(lens) != ^uint16(lens>>16) {
				return nil, errors.New("deflate: a stored block's length and its complement disagree")
			}
			b.storedLen = int(uint16(lens))
			if r.pos+8*b.storedLen > 8*len(stream) {
				return nil, io.ErrUnexpectedEOF
			}
			r.pos += 8 * b.storedLen
		case blockFixed:
			if err := r.codes(fixedLit, fixedDist); err != nil {
				return nil, err
			}
		case blockDynamic:
			lit, dist, err := r.dynamicTables()
			if err != nil {
				return nil, err
			}
			if err := r.codes(lit, dist); err != nil {
				return nil, err
			}
		default:
			return nil, errors.New("deflate: block type 3 is reserved")
		}
		b.end = r.pos
		out = append(out, b)
		if b.final {
			return out, nil
		}
	}
}

// bitReader reads bits least significant first.
type bitReader struct {
	b   []byte
	pos int // in bits
}

func (r *bitReader) bits(n int) (uint32, error) {
	if r.pos+n > 8*len(r.b) {
		return 0, io.ErrUnexpectedEOF
	}
	var v uint32
	for i := range n {
		p := r.pos + i
		v |= uint32(r.b[p/8]>>(p%8)&1) << i
	}
	r.pos += n
	return v, nil
}

// huffman is a canonical Huffman code: how many codes each length has, and the symbols
// in code order.
type huffman struct {
	count  [16]int
	symbol []int
}

func newHuffman(lengths []int) (*huffman, error) {
	h := &huffman{symbol: make([]int, 0, len(lengths))}
	for _, l := range lengths {
		h.count[l]++
	}
	h.count[0] = 0
	left := 1
	for l := 1; l < 16; l++ {
		left = left<<1 - h.count[l]
		if left < 0 {
			return nil, errors.New("deflate: over-subscribed Huffman code")
		}
	}
	for l := 1; l < 16; l++ {
		for s, sl := range lengths {
			if sl == l {
				h.symbol = append(h.symbol, s)
			}
		}
	}
	return h, nil
}

// decode reads one symbol: code bits arrive most significant first.
func (r *bitReader) decode(h *huffman) (int, error) {
	code, first, index := 0, 0, 0
	for l := 1; l < 16; l++ {
		bit, err := r.bits(1)
		if err != nil {
			return 0, err
		}
		code |= int(bit)
		if n := h.count[l]; code-first < n {
			return h.symbol[index+code-first], nil
		}
		index += h.count[l]
		first = (first + h.count[l]) << 1
		code <<= 1
	}
	return 0, errors.New("deflate: a code that no symbol has")
}

// The extra bits of length and distance codes (RFC 1951 3.2.5).
var (
	lengthExtra = [29]int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distExtra   = [30]int{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	// The code-length code's lengths come in this order.
	clOrder = [19]int{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

	fixedLit, fixedDist = fixedTables()
)

func fixedTables() (*huffman, *huffman) {
	lit := make([]int, 288)
	for s := range lit {
		switch {
		case s < 144:
			lit[s] = 8
		case s < 256:
			lit[s] = 9
		case s < 280:
			lit[s] = 7
		default:
			lit[s] = 8
		}
	}
	dist := make([]int, 30)
	for s := range dist {
		dist[s] = 5
	}
	l, _ := newHuffman(lit)
	d, _ := newHuffman(dist)
	return l, d
}

// dynamicTables reads a dynamic block's code tables.
func (r *bitReader) dynamicTables() (lit, dist *huffman, err error) {
	hdr, err := r.bits(14)
	if err != nil {
		return nil, nil, err
	}
	nlen, ndist, ncode := int(hdr&31)+257, int(hdr>>5&31)+1, int(hdr>>10)+4
	if nlen > 286 || ndist > 30 {
		return nil, nil, errors.New("deflate: too many length or distance codes")
	}
	var cl [19]int
	for i := range ncode {
		v, err := r.bits(3)
		if err != nil {
			return nil, nil, err
		}
		cl[clOrder[i]] = int(v)
	}
	clh, err := newHuffman(cl[:])
	if err != nil {
		return nil, nil, err
	}
	lengths := make([]int, 0, nlen+ndist)
	for len(lengths) < nlen+ndist {
		s, err := r.decode(clh)
		if err != nil {
			return nil, nil, err
		}
		if s < 16 {
			lengths = append(lengths, s)
			continue
		}
		rep, fill := 0, 0
		switch s {
		case 16:
			if len(lengths) == 0 {
				return nil, nil, errors.New("deflate: a repeat with nothing before it")
			}
			fill = lengths[len(lengths)-1]
			v, err := r.bits(2)
			if err != nil {
				return nil, nil, err
			}
			rep = 3 + int(v)
		case 17:
			v, err := r.bits(3)
			if err != nil {
				return nil, nil, err
			}
			rep = 3 + int(v)
		default:
			v, err := r.bits(7)
			if err != nil {
				return nil, nil, err
			}
			rep = 11 + int(v)
		}
		if len(lengths)+rep > nlen+ndist {
			return nil, nil, errors.New("deflate: code lengths run past their count")
		}
		for range rep {
			lengths = append(lengths, fill)
		}
	}
	if lengths[256] == 0 {
		return nil, nil, errors.New("deflate: no end-of-block code")
	}
	if lit, err = newHuffman(lengths[:nlen]); err != nil {
		return nil, nil, err
	}
	if dist, err = newHuffman(lengths[nlen:]); err != nil {
		return nil, nil, err
	}
	return lit, dist, nil
}

// codes reads a Huffman block's symbols up to its end-of-block code.
func (r *bitReader) codes(lit, dist *huffman) error {
	for {
		s, err := r.decode(lit)
		if err != nil {
			return err
		}
		switch {
		case s < 256:
			continue
		case s == 256:
			return nil
		case s > 285:
			return errors.New("deflate: an invalid length code")
		}
		if _, err := r.bits(lengthExtra[s-257]); err != nil {
			return err
		}
		d, err := r.decode(dist)
		if err != nil {
			return err
		}
		if d >= 30 {
			return errors.New("deflate: an invalid distance code")
		}
		if _, err := r.bits(distExtra[d]); err != nil {
			return err
		}
	}
}
