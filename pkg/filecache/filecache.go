// Package filecache is a file server's disk cache of whole files: bounded in bytes, least
// recently used evicted, written atomically (temporary file, fsync, rename), and found
// again after a restart by rescanning its folder.
//
// Space is reserved before a file is written (Create) and counted until it is committed
// or aborted, so files being built count against the bound too.
//
// Design notes: docs/design/filecache.md.
package filecache

import (
	"bufio"
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Entry is what the cache knows of one file.
type Entry struct {
	Key          string    `json:"key"`
	Size         int64     `json:"size"`
	ETag         string    `json:"etag"` // as sent in HTTP, quoted
	LastModified time.Time `json:"last_modified"`
	// TableID is the table the file belongs to (0: not recorded, by an older version), so
	// that the files of a dropped table are known without asking Postgres.
	TableID int64 `json:"table_id,omitempty"`
}

// ErrNoSpace: the reservation cannot fit, even after evicting every committed file,
// because the file is larger than the cache or other files being written hold the space.
var ErrNoSpace = errors.New("filecache: not enough space")

const (
	fileSuffix = ".mc"
	tmpPrefix  = "tmp-"
	magic      = "MINKFC01" // last 8 bytes of every committed file
	// trailer: JSON Entry, then its length (uint32, big endian), then magic.
	maxTrailer = 64 << 10
)

// Cache is one folder of cached files. It is safe for concurrent use.
type Cache struct {
	dir string
	max int64
	log *slog.Logger

	mu       sync.Mutex
	entries  map[string]*list.Element // of *item
	lru      *list.List               // front: most recently used
	used     int64                    // committed bytes (file sizes on disk)
	reserved int64                    // space held by files being written
}

type item struct {
	Entry
	disk int64 // bytes on disk, trailer included
}

// Open opens (creating it if need be) the cache in dir, bounded to maxBytes. It deletes
// leftovers of interrupted writes and files that are not whole, adopts every other file,
// least recently modified first in line for eviction, and evicts down to maxBytes.
func Open(dir string, maxBytes int64, log *slog.Logger) (*Cache, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("filecache: size %d must be positive", maxBytes)
	}
	if log == nil {
		log = slog.Default()
	}
	// The files are table data, for the file server's user alone: the folder is made
	// private, and so is every file in it (a cache of an older version's made them 0644).
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("filecache: %w", err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, fi.Mode().Perm()&0o700); err != nil {
			log.Warn("filecache: the cache folder is open to other users and cannot be made private", "dir", dir, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()), "error", err)
		}
	}
	c := &Cache{dir: dir, max: maxBytes, log: log, entries: map[string]*list.Element{}, lru: list.New()}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("filecache: %w", err)
	}
	type found struct {
		it    *item
		mtime time.Time
	}
	var all []found
	for _, de := range des {
		name := de.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasPrefix(name, tmpPrefix):
			os.Remove(path) // an interrupted write
			continue
		case !strings.HasSuffix(name, fileSuffix) || !de.Type().IsRegular():
			continue // not ours; leave it alone
		}
		it, mtime, err := readTrailer(path)
		if err != nil || fileName(it.Key) != name {
			log.Warn("filecache: removing a damaged cache file", "path", path, "error", err)
			os.Remove(path)
			continue
		}
		if info, err := de.Info(); err == nil && info.Mode().Perm()&0o077 != 0 {
			os.Chmod(path, 0o600)
		}
		all = append(all, found{it, mtime})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mtime.After(all[j].mtime) })
	for _, f := range all {
		c.entries[f.it.Key] = c.lru.PushBack(f.it)
		c.used += f.it.disk
	}
	c.mu.Lock()
	c.evictLocked(0)
	c.mu.Unlock()
	return c, nil
}

// readTrailer reads and checks a committed file's trailer.
func readTrailer(path string) (*item, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	var tail [12]byte
	if st.Size() < int64(len(tail)) {
		return nil, time.Time{}, errors.New("too short")
	}
	if _, err := f.ReadAt(tail[:], st.Size()-12); err != nil {
		return nil, time.Time{}, err
	}
	if string(tail[4:]) != magic {
		return nil, time.Time{}, errors.New("no trailer")
	}
	n := int64(binary.BigEndian.Uint32(tail[:4]))
	if n > maxTrailer || n > st.Size()-12 {
		return nil, time.Time{}, errors.New("bad trailer length")
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, st.Size()-12-n); err != nil {
		return nil, time.Time{}, err
	}
	var e Entry
	if err := json.Unmarshal(buf, &e); err != nil {
		return nil, time.Time{}, fmt.Errorf("trailer: %w", err)
	}
	if e.Key == "" || e.Size != st.Size()-12-n {
		return nil, time.Time{}, fmt.Errorf("trailer says %d bytes, file holds %d", e.Size, st.Size()-12-n)
	}
	return &item{Entry: e, disk: st.Size()}, st.ModTime(), nil
}

// fileName is where a key is cached: a hash, so that no key, however written, names a
// path outside the folder.
func fileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:]) + fileSuffix
}

// File is an open cached file. Its bytes stay readable until Close even if the cache
// evicts it meanwhile (an open file outlives its unlinking).
type File struct {
	Entry
	f *os.File
}

// Section returns a reader of n bytes from off. It is an *io.LimitedReader over the
// *os.File, which net/http sends with sendfile. Use one Section at a time.
func (f *File) Section(off, n int64) (io.Reader, error) {
	if off < 0 || n < 0 || off+n > f.Size {
		return nil, fmt.Errorf("filecache: section [%d, %d) outside %d bytes", off, off+n, f.Size)
	}
	if _, err := f.f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return &io.LimitedReader{R: f.f, N: n}, nil
}

// ReadAt reads within the file's bytes, never the trailer.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.Size {
		return 0, io.EOF
	}
	if rest := f.Size - off; int64(len(p)) > rest {
		n, err := f.f.ReadAt(p[:rest], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return f.f.ReadAt(p, off)
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Get opens the cached file of key and marks it recently used; false when it is not
// cached.
func (c *Cache) Get(key string) (*File, bool) {
	c.mu.Lock()
	el, ok := c.entries[key]
	if ok {
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	it := el.Value.(*item)
	f, err := os.Open(filepath.Join(c.dir, fileName(key)))
	if err != nil {
		// Evicted between the lookup and the open, or removed behind our back.
		if !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("filecache: cannot open a cached file; dropping it", "key", key, "error", err)
		}
		c.drop(key, el)
		return nil, false
	}
	return &File{Entry: it.Entry, f: f}, true
}

// Contains reports whether key is cached, without marking it used.
func (c *Cache) Contains(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[key]
	return ok
}

func (c *Cache) drop(key string, el *list.Element) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.entries[key]; ok && cur == el {
		c.removeLocked(el)
	}
}

// Remove evicts key now, if cached.
func (c *Cache) Remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.removeLocked(el)
		os.Remove(filepath.Join(c.dir, fileName(key)))
	}
}

// RemoveFunc evicts every cached file whose entry match says so, and returns how many.
func (c *Cache) RemoveFunc(match func(Entry) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for key, el := range c.entries {
		if match(el.Value.(*item).Entry) {
			c.removeLocked(el)
			os.Remove(filepath.Join(c.dir, fileName(key)))
			n++
		}
	}
	return n
}

func (c *Cache) removeLocked(el *list.Element) {
	it := el.Value.(*item)
	c.lru.Remove(el)
	delete(c.entries, it.Key)
	c.used -= it.disk
}

// evictLocked evicts least recently used files until need more bytes fit; it reports
// whether they do.
func (c *Cache) evictLocked(need int64) bool {
	for c.used+c.reserved+need > c.max {
		el := c.lru.Back()
		if el == nil {
			return false
		}
		it := el.Value.(*item)
		c.removeLocked(el)
		// An open File keeps reading its bytes; new readers miss and rebuild.
		if err := os.Remove(filepath.Join(c.dir, fileName(it.Key))); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("filecache: evict", "key", it.Key, "error", err)
		}
	}
	return true
}

// Stats are the cache's figures.
type Stats struct {
	Files    int
	Bytes    int64 // committed bytes on disk
	Reserved int64 // held by files being written
	Max      int64
}

// Stats returns the cache's figures now.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Files: len(c.entries), Bytes: c.used, Reserved: c.reserved, Max: c.max}
}

// Create starts writing a file of about size bytes: it reserves the space (evicting
// least recently used files) and opens a temporary file. Write to it, then Commit or
// Abort it. ErrNoSpace when the space cannot be had.
func (c *Cache) Create(size int64) (*Pending, error) {
	if size < 0 {
		size = 0
	}
	c.mu.Lock()
	if !c.evictLocked(size) {
		st := Stats{Files: len(c.entries), Bytes: c.used, Reserved: c.reserved, Max: c.max}
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %d bytes wanted; cache holds %d of %d bytes, %d reserved by files being written",
			ErrNoSpace, size, st.Bytes, st.Max, st.Reserved)
	}
	c.reserved += size
	c.mu.Unlock()
	var b [8]byte
	rand.Read(b[:])
	path := filepath.Join(c.dir, tmpPrefix+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		c.release(size)
		return nil, fmt.Errorf("filecache: %w", err)
	}
	return &Pending{c: c, f: f, path: path, reserved: size, bw: bufio.NewWriterSize(f, 256<<10)}, nil
}

func (c *Cache) release(n int64) {
	c.mu.Lock()
	c.reserved -= n
	c.mu.Unlock()
}

// Pending is a file being written into the cache. It is not safe for concurrent use.
type Pending struct {
	c        *Cache
	f        *os.File
	bw       *bufio.Writer
	path     string
	n        int64
	reserved int64
	done     bool
}

// Write appends to the file.
func (p *Pending) Write(b []byte) (int, error) {
	n, err := p.bw.Write(b)
	p.n += int64(n)
	return n, err
}

// Written is the number of bytes written so far.
func (p *Pending) Written() int64 { return p.n }

// Commit makes the file visible under e.Key, whose e.Size must be what was written:
// trailer, fsync and rename, so a reader (or a restart) sees the whole file or nothing.
func (p *Pending) Commit(e Entry) error {
	if p.done {
		return errors.New("filecache: pending file already committed or aborted")
	}
	if e.Key == "" || e.Size != p.n {
		p.Abort()
		return fmt.Errorf("filecache: commit %q: entry says %d bytes, %d written", e.Key, e.Size, p.n)
	}
	trailer, err := json.Marshal(e)
	if err != nil || len(trailer) > maxTrailer {
		p.Abort()
		return fmt.Errorf("filecache: commit %q: trailer: %v", e.Key, err)
	}
	var tail [12]byte
	binary.BigEndian.PutUint32(tail[:4], uint32(len(trailer)))
	copy(tail[4:], magic)
	if _, err := p.bw.Write(trailer); err != nil {
		p.Abort()
		return fmt.Errorf("filecache: commit %q: %w", e.Key, err)
	}
	if _, err := p.bw.Write(tail[:]); err != nil {
		p.Abort()
		return fmt.Errorf("filecache: commit %q: %w", e.Key, err)
	}
	if err := p.bw.Flush(); err != nil {
		p.Abort()
		return fmt.Errorf("filecache: commit %q: %w", e.Key, err)
	}
	// fsync before rename: after a crash a renamed file holds its bytes, never zeros,
	// so a restart cannot adopt a file whose bytes were not written.
	if err := p.f.Sync(); err != nil {
		p.Abort()
		return fmt.Errorf("filecache: commit %q: %w", e.Key, err)
	}
	if err := p.f.Close(); err != nil {
		p.Abort()
		return fmt.Errorf("filecache: commit %q: %w", e.Key, err)
	}
	disk := p.n + int64(len(trailer)) + 12
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	p.done = true
	c.reserved -= p.reserved
	if err := os.Rename(p.path, filepath.Join(c.dir, fileName(e.Key))); err != nil {
		os.Remove(p.path)
		return fmt.Errorf("filecache: commit %q: %w", e.Key, err)
	}
	if el, ok := c.entries[e.Key]; ok { // replaced by the rename
		c.removeLocked(el)
	}
	c.entries[e.Key] = c.lru.PushFront(&item{Entry: e, disk: disk})
	c.used += disk
	// The file may be larger than reserved (the trailer, a wrong estimate): evict
	// others to stay within the bound, never the file just committed.
	for c.used+c.reserved > c.max && c.lru.Len() > 1 {
		back := c.lru.Back()
		it := back.Value.(*item)
		c.removeLocked(back)
		os.Remove(filepath.Join(c.dir, fileName(it.Key)))
	}
	return nil
}

// Abort discards the file and its reservation. It is a no-op after Commit.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	p.f.Close()
	os.Remove(p.path)
	p.c.release(p.reserved)
}
