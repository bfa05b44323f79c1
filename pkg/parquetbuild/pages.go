package parquetbuild

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/minkhq/mink/pkg/atomicmax"
)

// Pages bounds the memory that the Builders of a process spend on finished pages.
//
// Why: parquet-go holds every compressed page of a row group until the row group is
// written (a column chunk's pages must be contiguous in the file), so a Builder's
// memory grows with its row group, up to Settings.RowGroupRows rows, and an indexer
// holds one Builder per partition. With Pages, pages stay in memory while all Builders
// sharing it hold fewer than Limit bytes of them; beyond that, new pages go to a
// temporary file in Dir and are read back when the row group is written. Where the
// pages wait changes nothing in the file's bytes.
//
// What a Builder holds besides: one page being filled per leaf column, at most
// Settings.PageBufferBytes uncompressed each.
type Pages struct {
	limit int64
	dir   string

	inMemory atomic.Int64 // bytes of pages held in memory now
	peak     atomic.Int64 // the most inMemory has been
	spilled  atomic.Int64 // bytes of pages written to temporary files, in all
}

// NewPages returns a pool that keeps at most limit bytes of pages in memory and
// spills the rest into temporary files in dir ("" is os.TempDir()).
func NewPages(limit int64, dir string) (*Pages, error) {
	if limit < 0 {
		return nil, fmt.Errorf("parquetbuild: page memory limit %d is negative", limit)
	}
	if dir == "" {
		dir = os.TempDir()
	}
	return &Pages{limit: limit, dir: dir}, nil
}

// InMemory is how many bytes of pages the pool's Builders hold in memory now.
func (p *Pages) InMemory() int64 { return p.inMemory.Load() }

// Peak is the most bytes of pages the pool's Builders have held in memory at once.
func (p *Pages) Peak() int64 { return p.peak.Load() }

// Spilled is how many bytes of pages have gone to temporary files.
func (p *Pages) Spilled() int64 { return p.spilled.Load() }

// reserve takes n bytes of the in-memory budget, or reports that they do not fit.
func (p *Pages) reserve(n int64) bool {
	for {
		cur := p.inMemory.Load()
		if cur+n > p.limit {
			return false
		}
		if p.inMemory.CompareAndSwap(cur, cur+n) {
			atomicmax.Store(&p.peak, cur+n)
			return true
		}
	}
}

// GetBuffer and PutBuffer make Pages a parquet.BufferPool: parquet-go asks for one
// buffer per column per row group, appends the column's pages to it, reads it back
// once from the start when the row group is written, then puts it back.
func (p *Pages) GetBuffer() io.ReadWriteSeeker { return &pageBuffer{pool: p} }

func (p *Pages) PutBuffer(b io.ReadWriteSeeker) {
	if pb, ok := b.(*pageBuffer); ok {
		pb.release()
	}
}

// pageBuffer is one column's pages of one row group: in memory while the pool's budget
// allows, then in a temporary file (its memory returned to the budget).
type pageBuffer struct {
	pool *Pages
	mem  []byte
	pos  int64 // read position in mem
	file *os.File
}

func (b *pageBuffer) Write(p []byte) (int, error) {
	if b.file == nil {
		if b.pool.reserve(int64(len(p))) {
			b.mem = append(b.mem, p...)
			return len(p), nil
		}
		if err := b.spill(); err != nil {
			return 0, err
		}
	}
	n, err := b.file.Write(p)
	b.pool.spilled.Add(int64(n))
	return n, err
}

// spill moves what is in memory to a new temporary file, which then takes every write.
func (b *pageBuffer) spill() error {
	f, err := os.CreateTemp(b.pool.dir, "mink-pages-*")
	if err != nil {
		return fmt.Errorf("parquetbuild: page buffer: %w", err)
	}
	// Unlinked at once: the file lives as long as it is open, and a crash leaves
	// nothing behind.
	_ = os.Remove(f.Name())
	if _, err := f.Write(b.mem); err != nil {
		f.Close()
		return fmt.Errorf("parquetbuild: page buffer: %w", err)
	}
	b.pool.spilled.Add(int64(len(b.mem)))
	b.pool.inMemory.Add(-int64(len(b.mem)))
	b.mem, b.file = nil, f
	return nil
}

func (b *pageBuffer) Read(p []byte) (int, error) {
	if b.file != nil {
		return b.file.Read(p)
	}
	if b.pos >= int64(len(b.mem)) {
		return 0, io.EOF
	}
	n := copy(p, b.mem[b.pos:])
	b.pos += int64(n)
	return n, nil
}

// Seek supports what parquet-go does: rewind to the start (before writing, and before
// reading back), and asking the position.
func (b *pageBuffer) Seek(offset int64, whence int) (int64, error) {
	if b.file != nil {
		return b.file.Seek(offset, whence)
	}
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = b.pos + offset
	case io.SeekEnd:
		abs = int64(len(b.mem)) + offset
	default:
		return 0, errors.New("parquetbuild: page buffer: bad whence")
	}
	if abs < 0 {
		return 0, errors.New("parquetbuild: page buffer: negative position")
	}
	b.pos = abs
	return abs, nil
}

func (b *pageBuffer) release() {
	if b.file != nil {
		b.file.Close()
		b.file = nil
	}
	b.pool.inMemory.Add(-int64(len(b.mem)))
	b.mem, b.pos = nil, 0
}
