package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/layout"
)

// scanCeilings is what iceberg-go's scan of a table costs with no Mink in the way: the
// same table (metadata, manifests, data files) scanned by the same iceberg-go, once
// through its own FileIO over local copies of every file (no server at all: iceberg-go's
// own cost over pqarrow's) and once through its S3 FileIO from a bare S3 server
// (http.ServeContent of the same copies, on loopback: the S3 protocol and the AWS SDK,
// with no server work to speak of). No S3 server can serve a scan faster than the bare
// one, so a ratio of Mink's scan to pqarrow's above the bare server's ratio cannot be had
// on this machine by anything Mink does.
type scanCeilings struct {
	local, bareS3 time.Duration // best of the reps, scans only (no table load)
}

// mirror holds local copies of the files of one table under the keys the table names,
// fetched from Mink once.
type mirror struct {
	f   *fsCluster
	dir string
	mu  sync.Mutex
}

// path returns the local copy of an s3:// URI, fetching it first if it has none.
func (m *mirror) path(uri string) (string, error) {
	key, err := layout.KeyOf(uri)
	if err != nil {
		return "", err
	}
	p := filepath.Join(m.dir, filepath.FromSlash(key))
	m.mu.Lock()
	defer m.mu.Unlock()
	if fileExists(p) {
		return p, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	out, err := os.Create(p + ".part")
	if err != nil {
		return "", err
	}
	_, err = m.f.get(context.Background(), m.f.nodes[0].s3, key, out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(p+".part", p)
	}
	return p, err
}

// Open is iceberg-go's IO over the copies.
func (m *mirror) Open(name string) (iceio.File, error) {
	p, err := m.path(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.Open(p)
}

func (m *mirror) Remove(name string) error {
	return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrPermission}
}

// ceilings scans tbl (loaded from Mink) c.Reps+1 times through each of the two
// ceilings, the first scan of each to warm the copies, and checks every scan's rows.
func (f *fsCluster) ceilings(ctx context.Context, c Config, tbl *table.Table, name string, rows int64) (scanCeilings, error) {
	var r scanCeilings
	m := &mirror{f: f, dir: filepath.Join(f.e.Work, "mirror", name)}
	scan := func(fsF table.FSysF) (time.Duration, error) {
		t := table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), fsF, nil)
		start := time.Now()
		at, err := t.Scan().ToArrowTable(ctx)
		if err != nil {
			return 0, err
		}
		defer at.Release()
		if at.NumRows() != rows {
			return 0, fmt.Errorf("a ceiling's scan read %d rows, Mink's %d", at.NumRows(), rows)
		}
		return time.Since(start), nil
	}
	local := func(context.Context) (iceio.IO, error) { return m, nil }
	if _, err := scan(local); err != nil { // fetches the copies
		return r, err
	}
	var err error
	if r.local, err = best(c.Reps, func() (time.Duration, error) { return scan(local) }); err != nil {
		return r, err
	}
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key, ok := strings.CutPrefix(req.URL.Path, "/"+layout.Bucket+"/")
		if !ok {
			http.NotFound(w, req)
			return
		}
		fh, err := os.Open(filepath.Join(m.dir, filepath.FromSlash(key)))
		if err != nil {
			http.NotFound(w, req)
			return
		}
		defer fh.Close()
		http.ServeContent(w, req, "", time.Time{}, fh)
	}))
	defer bare.Close()
	props := map[string]string{
		"s3.endpoint": bare.URL, "s3.region": "us-east-1", "client.region": "us-east-1",
		"s3.path-style-access": "true", "s3.access-key-id": "bench", "s3.secret-access-key": "bench",
	}
	bareFS := iceio.LoadFSFunc(props, tbl.MetadataLocation())
	if _, err := scan(bareFS); err != nil {
		return r, fmt.Errorf("bare S3 server: %w", err)
	}
	if r.bareS3, err = best(c.Reps, func() (time.Duration, error) { return scan(bareFS) }); err != nil {
		return r, fmt.Errorf("bare S3 server: %w", err)
	}
	return r, nil
}

// ceilingRows are r's scans beside its ceilings; of names the table ("" for item 1's).
func (r scanResult) ceilingRows(of string) []Row {
	return []Row{
		Latency("iceberg-go's scan"+of+" over local copies of its files (its own FileIO: no server, no network)", r.ceil.local, r.local),
		Latency("iceberg-go's scan"+of+" through a bare S3 server (http.ServeContent of the same copies)", r.ceil.bareS3, r.local),
		Latency("first scan"+of+" without its table load, beside the bare S3 server's scan", r.first.total-r.first.load, r.ceil.bareS3),
		Latency("second scan"+of+" without its table load, beside the bare S3 server's scan", r.second.total-r.second.load, r.ceil.bareS3),
	}
}

// tcpRelay is the least a forwarding node can add: a second loopback hop that copies
// bytes between two TCP connections (splice on Linux), with no protocol of its own.
// It relays every connection to target until closed; closing it closes them all.
func tcpRelay(target string) (addr string, closeFn func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	track := func(c net.Conn, open bool) {
		mu.Lock()
		defer mu.Unlock()
		if open {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c, true)
			wg.Go(func() {
				defer track(c, false)
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() {
					defer close(done)
					io.Copy(u, c)
					u.(*net.TCPConn).CloseWrite()
				}()
				io.Copy(c, u)
				c.Close()
				<-done
			})
		}
	})
	return ln.Addr().String(), func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}, nil
}
