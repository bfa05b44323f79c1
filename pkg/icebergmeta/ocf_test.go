package icebergmeta

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/tableschema"
)

// strictInflate is what the strictest common inflaters accept: a stream of Huffman
// blocks only (icebird's inflater fails on stored blocks once it runs past a stream's
// end), whose final block ends in the stream's last byte, followed by zero padding
// alone. It returns the inflated bytes (compress/flate's, an independent decoder).
func strictInflate(t *testing.T, stream []byte) []byte {
	t.Helper()
	blocks, err := deflateBlocks(stream)
	if err != nil {
		t.Fatalf("not a deflate stream: %v", err)
	}
	for i, b := range blocks {
		if b.typ == blockStored {
			t.Fatalf("block %d of %d is a stored block (%d bytes)", i, len(blocks), b.storedLen)
		}
	}
	last := blocks[len(blocks)-1]
	if !last.final || (last.end+7)/8 != len(stream) {
		t.Fatalf("the final block ends at bit %d of %d", last.end, 8*len(stream))
	}
	if rem := last.end % 8; rem != 0 && stream[len(stream)-1]>>rem != 0 {
		t.Fatalf("bits after the final block: %08b", stream[len(stream)-1])
	}
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(stream)))
	if err != nil {
		t.Fatalf("compress/flate: %v", err)
	}
	return raw
}

func deflateInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 70_000) // incompressible: compress/flate stores it
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	var manifest strings.Builder // a manifest's records: long, repetitive, some binary
	for i := range 3000 {
		fmt.Fprintf(&manifest, "s3://mink/ns/t/data/_kafka_partition=%d/%d-%d-%064x.parquet\x02\x10%c", i%7, i*100, i*100+100, i*7919, byte(i))
	}
	mixed := append(append([]byte("header "), random[:5000]...), manifest.String()[:20000]...)
	return map[string][]byte{
		"empty": {}, "one byte": {0xfe}, "short text": []byte("avro.schema"),
		"manifest-like": []byte(manifest.String()), "random": random, "mixed": mixed,
		"all bytes": func() []byte {
			b := make([]byte, 256*3)
			for i := range b {
				b[i] = byte(i)
			}
			return b
		}(),
	}
}

// TestFinalDeflate: Go's own deflate streams end with an empty stored block (the
// problem); finalDeflate's never hold a stored block, end with their final Huffman
// block, inflate to the input with compress/flate, and are the same bytes every time.
func TestFinalDeflate(t *testing.T) {
	for name, raw := range deflateInputs() {
		t.Run(name, func(t *testing.T) {
			var goStream bytes.Buffer
			w, _ := flate.NewWriter(&goStream, flate.DefaultCompression)
			w.Write(raw)
			w.Close()
			blocks, err := deflateBlocks(goStream.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if last := blocks[len(blocks)-1]; last.typ != blockStored || last.storedLen != 0 {
				t.Fatalf("compress/flate no longer ends with an empty stored block (%+v): revisit finalDeflate", last)
			}
			enc, err := finalDeflate(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := strictInflate(t, enc); !bytes.Equal(got, raw) {
				t.Fatalf("inflates to %d bytes, want the %d given", len(got), len(raw))
			}
			again, _ := finalDeflate(raw)
			if !bytes.Equal(again, enc) {
				t.Error("two encodings of the same bytes differ")
			}
			if name == "manifest-like" && len(enc) > goStream.Len() {
				t.Errorf("%d bytes, more than compress/flate's %d", len(enc), goStream.Len())
			}
		})
	}
}

// TestLiteralDeflate: the fallback alone, for every byte value.
func TestLiteralDeflate(t *testing.T) {
	for name, raw := range deflateInputs() {
		if got := strictInflate(t, literalDeflate(raw)); !bytes.Equal(got, raw) {
			t.Errorf("%s: inflates to %d bytes, want %d", name, len(got), len(raw))
		}
	}
}

func TestDeflateBlocksRefusesBadStreams(t *testing.T) {
	good, _ := finalDeflate([]byte(strings.Repeat("manifest entry ", 500)))
	for name, s := range map[string][]byte{
		"empty":         {},
		"cut":           good[:len(good)/2],
		"reserved type": {0x07},
		"stored length": {0x01, 0x05, 0x00, 0x00, 0x00},
	} {
		if _, err := deflateBlocks(s); err == nil {
			t.Errorf("%s: walked without an error", name)
		}
	}
}

// TestManifestsAreStrictDeflate: every block of every manifest and manifest list a
// commit writes passes strictInflate, and rewriting a file again changes nothing.
func TestManifestsAreStrictDeflate(t *testing.T) {
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "id", Type: "long"}}}
	schema, err := spec.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	tbl := Table{Namespace: "ns", Name: "t", Schema: schema}
	first, err := Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	var add []DataFile
	for i := range int64(200) {
		sha := fmt.Sprintf("%064x", i)
		add = append(add, DataFile{Key: layout.DataKey("ns", "t", int32(i%3), i*10, i*10+10, sha), Partition: int32(i % 3),
			Start: i * 10, End: i*10 + 10, Records: 10, Size: 900 + i, SHA256: sha})
	}
	res, err := Commit(context.Background(), NewReader(StoreFunc(func(context.Context, string) ([]byte, error) {
		return nil, errors.New("no earlier manifests")
	})), tbl, Base{Version: 1, Key: first.Key, Metadata: first.Metadata},
		Change{Operation: table.OpAppend, Add: add, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	avros := 0
	for _, f := range res.Files {
		if !strings.HasSuffix(f.Key, ".avro") {
			continue
		}
		avros++
		r := &ocfReader{b: f.Content}
		codec, sync, err := r.header()
		if err != nil || codec != "deflate" {
			t.Fatalf("%s: codec %q, %v", f.Key, codec, err)
		}
		blocks := 0
		for r.pos < len(f.Content) {
			if _, err := r.long(); err != nil {
				t.Fatal(err)
			}
			data, err := r.bytes()
			if err != nil {
				t.Fatal(err)
			}
			strictInflate(t, data)
			r.pos += len(sync)
			blocks++
		}
		if blocks == 0 {
			t.Errorf("%s has no block", f.Key)
		}
		if again, err := portableAvro(f.Content); err != nil || !bytes.Equal(again, f.Content) {
			t.Errorf("%s changes when rewritten again (%v)", f.Key, err)
		}
	}
	if avros != 2 {
		t.Errorf("%d avro files, want a manifest and a manifest list", avros)
	}
}
