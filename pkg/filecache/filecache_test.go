package filecache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func put(t *testing.T, c *Cache, key string, data []byte) {
	t.Helper()
	p, err := c.Create(int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(Entry{Key: key, Size: int64(len(data)), ETag: `"` + key + `"`, LastModified: time.Unix(1700000000, 0).UTC()}); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, c *Cache, key string) ([]byte, bool) {
	t.Helper()
	b, ok, err := readErr(c, key)
	if err != nil {
		t.Fatal(err)
	}
	return b, ok
}

// readErr is read for a goroutine other than the test's, which must not call t.Fatal.
func readErr(c *Cache, key string) ([]byte, bool, error) {
	f, ok := c.Get(key)
	if !ok {
		return nil, false, nil
	}
	defer f.Close()
	r, err := f.Section(0, f.Size)
	if err != nil {
		return nil, true, err
	}
	b, err := io.ReadAll(r)
	return b, true, err
}

func TestPutGetSection(t *testing.T) {
	c, err := Open(t.TempDir(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(strings.Repeat("0123456789", 100))
	put(t, c, "ns/t/data/a.parquet", data)
	f, ok := c.Get("ns/t/data/a.parquet")
	if !ok {
		t.Fatal("miss after put")
	}
	defer f.Close()
	if f.Size != int64(len(data)) || f.ETag != `"ns/t/data/a.parquet"` || !f.LastModified.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("entry %+v", f.Entry)
	}
	r, err := f.Section(995, 5)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(r); string(b) != "56789" {
		t.Fatalf("section = %q", b)
	}
	if _, err := f.Section(996, 5); err == nil {
		t.Fatal("a section past the end (into the trailer) was allowed")
	}
	buf := make([]byte, 10)
	if n, err := f.ReadAt(buf, 995); n != 5 || err != io.EOF || string(buf[:5]) != "56789" {
		t.Fatalf("ReadAt at the end: %d %v %q", n, err, buf[:n])
	}
	if _, ok := c.Get("other"); ok {
		t.Fatal("hit for a key never put")
	}
}

func TestRestartRescans(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "a", []byte("aaaa"))
	put(t, c, "b", []byte("bbbbbbbb"))
	p, err := c.Create(10)
	if err != nil {
		t.Fatal(err)
	}
	p.Write([]byte("half")) // a write interrupted by a crash: left as a temporary file

	// A damaged file (truncated trailer) and a foreign file.
	os.WriteFile(filepath.Join(dir, fileName("c")), []byte("garbageMINKFC01"), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("not ours"), 0o644)

	c2, err := Open(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := read(t, c2, "a"); !ok || string(b) != "aaaa" {
		t.Fatalf("a after restart: %q %v", b, ok)
	}
	if b, ok := read(t, c2, "b"); !ok || string(b) != "bbbbbbbb" {
		t.Fatalf("b after restart: %q %v", b, ok)
	}
	if _, ok := c2.Get("c"); ok {
		t.Fatal("damaged file adopted")
	}
	st := c2.Stats()
	if st.Files != 2 || st.Reserved != 0 {
		t.Fatalf("stats after restart: %+v", st)
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), tmpPrefix) || de.Name() == fileName("c") {
			t.Errorf("%s left behind", de.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
		t.Error("a foreign file was removed")
	}
}

func TestLRUEviction(t *testing.T) {
	c, err := Open(t.TempDir(), 400, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{'x'}, 100) // ~100 + trailer (~100) bytes on disk
	put(t, c, "k1", data)
	put(t, c, "k2", data)
	if _, ok := read(t, c, "k1"); !ok { // k1 now more recently used than k2
		t.Fatal("k1 missing")
	}
	put(t, c, "k3", data)
	if c.Contains("k2") {
		t.Error("k2, least recently used, was not evicted")
	}
	if !c.Contains("k1") || !c.Contains("k3") {
		t.Error("a recently used file was evicted")
	}
	if st := c.Stats(); st.Bytes > st.Max {
		t.Errorf("cache holds %d bytes over its bound %d", st.Bytes, st.Max)
	}
}

func TestEvictedWhileOpenStaysReadable(t *testing.T) {
	c, err := Open(t.TempDir(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "k", []byte("still here"))
	f, ok := c.Get("k")
	if !ok {
		t.Fatal("miss")
	}
	defer f.Close()
	c.Remove("k")
	if c.Contains("k") {
		t.Fatal("not removed")
	}
	r, _ := f.Section(0, f.Size)
	if b, _ := io.ReadAll(r); string(b) != "still here" {
		t.Fatalf("read after eviction: %q", b)
	}
}

func TestReservations(t *testing.T) {
	c, err := Open(t.TempDir(), 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(2000); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a file larger than the cache: %v", err)
	}
	p1, err := c.Create(600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(600); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("two reservations over the bound: %v", err)
	}
	p1.Abort()
	p2, err := c.Create(600)
	if err != nil {
		t.Fatalf("space not released by Abort: %v", err)
	}
	p2.Write([]byte("abc"))
	if err := p2.Commit(Entry{Key: "k", Size: 4}); err == nil {
		t.Fatal("commit with a wrong size succeeded")
	}
	if st := c.Stats(); st.Reserved != 0 || st.Files != 0 {
		t.Fatalf("after a failed commit: %+v", st)
	}
}

func TestConcurrent(t *testing.T) {
	c, err := Open(t.TempDir(), 20000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := fmt.Sprintf("k%d", (g*50+i)%40)
				switch b, ok, err := readErr(c, key); {
				case err != nil:
					t.Errorf("read %s: %v", key, err)
					return
				case ok && string(b) != strings.Repeat(key, 20):
					t.Errorf("%s read %q", key, b)
				}
				p, err := c.Create(int64(20 * len(key)))
				if err != nil {
					continue
				}
				p.Write([]byte(strings.Repeat(key, 20)))
				p.Commit(Entry{Key: key, Size: int64(20 * len(key))})
			}
		})
	}
	wg.Wait()
	if st := c.Stats(); st.Bytes > st.Max || st.Reserved != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The cache holds table data: its folder and files are the file server's user's alone,
// and a cache an older version left open to others is made private when opened.
func TestCacheIsPrivate(t *testing.T) {
	root := t.TempDir()
	os.Chmod(root, 0o755)
	dir := filepath.Join(root, "cache", "fs-1")
	c, err := Open(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "ns/t/data/a.parquet", []byte("rows"))
	private := func(when string) {
		t.Helper()
		for _, p := range []string{filepath.Join(root, "cache"), dir, filepath.Join(dir, fileName("ns/t/data/a.parquet"))} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: %s has mode %04o, open to other users", when, p, fi.Mode().Perm())
			}
		}
	}
	private("new cache")
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Join(dir, fileName("ns/t/data/a.parquet")), 0o644)
	if _, err := Open(dir, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	private("reopened")
}

// RemoveFunc evicts by entry (the files of one table), and a table id survives a restart.
func TestRemoveFunc(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"ns/a/1", "ns/a/2", "ns/b/1"} {
		p, err := c.Create(3)
		if err != nil {
			t.Fatal(err)
		}
		p.Write([]byte("abc"))
		table := int64(7)
		if i == 2 {
			table = 8
		}
		if err := p.Commit(Entry{Key: key, Size: 3, ETag: `"x"`, TableID: table}); err != nil {
			t.Fatal(err)
		}
	}
	c, err = Open(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := c.Get("ns/b/1"); !ok || f.TableID != 8 {
		t.Fatalf("after a restart: %+v %v", f, ok)
	} else {
		f.Close()
	}
	if n := c.RemoveFunc(func(e Entry) bool { return e.TableID == 7 }); n != 2 {
		t.Errorf("removed %d, want 2", n)
	}
	if c.Contains("ns/a/1") || c.Contains("ns/a/2") || !c.Contains("ns/b/1") || c.Stats().Files != 1 {
		t.Errorf("after RemoveFunc: %+v", c.Stats())
	}
	if _, err := os.Stat(filepath.Join(dir, fileName("ns/a/1"))); !os.IsNotExist(err) {
		t.Errorf("the file of a removed entry is still on disk: %v", err)
	}
}
