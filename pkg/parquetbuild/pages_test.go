package parquetbuild

import (
	"bytes"
	"testing"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// buildWith builds recs with the pages in p (nil: parquet-go's own buffers).
func buildWith(t *testing.T, p *Pages, n int) []byte {
	t.Helper()
	dec, err := rowcodec.NewDecoder(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	var opts []Option
	if p != nil {
		opts = append(opts, WithPages(p))
	}
	var out bytes.Buffer
	b, err := NewBuilderFor(&out, dec, smallSettings(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range makeRecords(n, 13, 40) {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// Pages bound what Builders hold in memory and spill the rest; the file's bytes are the
// same wherever its pages waited.
func TestPagesBoundMemoryNotBytes(t *testing.T) {
	want := buildWith(t, nil, 5000)
	for _, limit := range []int64{0, 16 << 10, 1 << 30} {
		p, err := NewPages(limit, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if got := buildWith(t, p, 5000); !bytes.Equal(got, want) {
			t.Fatalf("limit %d: %d bytes differ from the file built without Pages (%d bytes)", limit, len(got), len(want))
		}
		if p.Peak() > limit {
			t.Errorf("limit %d: peak %d bytes in memory", limit, p.Peak())
		}
		if p.InMemory() != 0 {
			t.Errorf("limit %d: %d bytes still held after Close", limit, p.InMemory())
		}
		switch {
		case limit < 1<<20 && p.Spilled() == 0:
			t.Errorf("limit %d: nothing spilled", limit)
		case limit >= 1<<20 && (p.Spilled() != 0 || p.Peak() == 0):
			t.Errorf("limit %d: spilled %d, peak %d: want all in memory", limit, p.Spilled(), p.Peak())
		}
	}
}

// A Builder given up midway (its lease lost) gives its pages back.
func TestAbortReleasesPages(t *testing.T) {
	p, err := NewPages(1<<30, "")
	if err != nil {
		t.Fatal(err)
	}
	dec, err := rowcodec.NewDecoder(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	s := smallSettings()
	s.RowGroupRows = 100_000 // all pages wait for the one row group
	b, err := NewBuilderFor(&bytes.Buffer{}, dec, s, WithPages(p))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range makeRecords(3000, 5, 0) {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if p.InMemory() == 0 {
		t.Fatal("no pages held before Abort: the test shows nothing")
	}
	b.Abort()
	if p.InMemory() != 0 {
		t.Fatalf("%d bytes still held after Abort", p.InMemory())
	}
	if _, err := b.Close(); err != ErrClosed {
		t.Fatalf("Close after Abort: %v, want ErrClosed", err)
	}
}
