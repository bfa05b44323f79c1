package icebergmeta

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// portableAvro rewrites an Avro object container file (manifest or manifest list, as
// iceberg-go writes them with the deflate codec) so that each block's data is a
// finalDeflate stream: the same header, records, counts and sync marker, and blocks
// every common inflater reads. Each rewritten block is inflated again and compared, so a
// bad rewrite fails the commit rather than reach a reader. Files of another codec are
// returned as they are.
func portableAvro(file []byte) ([]byte, error) {
	r := &ocfReader{b: file}
	codec, sync, err := r.header()
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: avro header: %w", err)
	}
	if codec != "deflate" {
		return file, nil
	}
	out := append(make([]byte, 0, len(file)), file[:r.pos]...)
	for r.pos < len(file) {
		count, err := r.long()
		if err != nil {
			return nil, fmt.Errorf("icebergmeta: avro block at %d: %w", r.pos, err)
		}
		data, err := r.bytes()
		if err != nil {
			return nil, fmt.Errorf("icebergmeta: avro block at %d: %w", r.pos, err)
		}
		if r.pos+len(sync) > len(file) || !bytes.Equal(file[r.pos:r.pos+len(sync)], sync) {
			return nil, fmt.Errorf("icebergmeta: avro block ending at %d lacks the file's sync marker", r.pos)
		}
		r.pos += len(sync)
		raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(data)))
		if err != nil {
			return nil, fmt.Errorf("icebergmeta: avro block: %w", err)
		}
		enc, err := finalDeflate(raw)
		if err != nil {
			return nil, err
		}
		if back, err := io.ReadAll(flate.NewReader(bytes.NewReader(enc))); err != nil || !bytes.Equal(back, raw) {
			return nil, fmt.Errorf("icebergmeta: a rewritten avro block does not inflate to its records (%v)", err)
		}
		out = binary.AppendVarint(out, count) // Avro longs are zigzag varints, as Go's
		out = binary.AppendVarint(out, int64(len(enc)))
		out = append(append(out, enc...), sync...)
	}
	return out, nil
}

// ocfReader reads the parts of an Avro object container file.
type ocfReader struct {
	b   []byte
	pos int
}

func (r *ocfReader) long() (int64, error) {
	v, n := binary.Varint(r.b[r.pos:])
	if n <= 0 {
		return 0, errors.New("bad or cut varint")
	}
	r.pos += n
	return v, nil
}

func (r *ocfReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(r.b)-r.pos) {
		return nil, fmt.Errorf("a length of %d bytes runs past the file", n)
	}
	b := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

// header reads the magic, the metadata map and the sync marker, and returns the codec
// ("null" when the metadata names none).
func (r *ocfReader) header() (codec string, sync []byte, err error) {
	if !bytes.HasPrefix(r.b, []byte("Obj\x01")) {
		return "", nil, errors.New("not an Avro object container file")
	}
	r.pos = 4
	codec = "null"
	for {
		n, err := r.long()
		if err != nil {
			return "", nil, err
		}
		if n == 0 {
			break
		}
		if n < 0 { // a block count given with the block's size in bytes
			n = -n
			if _, err := r.long(); err != nil {
				return "", nil, err
			}
		}
		for range n {
			k, err := r.bytes()
			if err != nil {
				return "", nil, err
			}
			v, err := r.bytes()
			if err != nil {
				return "", nil, err
			}
			if string(k) == "avro.codec" {
				codec = string(v)
			}
		}
	}
	if r.pos+16 > len(r.b) {
		return "", nil, io.ErrUnexpectedEOF
	}
	sync = r.b[r.pos : r.pos+16]
	r.pos += 16
	return codec, sync, nil
}
