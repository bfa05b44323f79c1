package fileserver_test

import (
	"crypto/rand"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/filecache"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/owner"
)

// BenchmarkCachedRead measures the read path of a cached 64 MiB file over loopback:
// served by its owner from the cache file (sendfile), and through the other node, which
// streams it from the owner over gRPC. Whole-file, 4 KiB and 1 MiB range reads (what
// Parquet readers send).
func BenchmarkCachedRead(b *testing.B) {
	e := newEnv(b, envOptions{})
	const size = 64 << 20
	key := "default/orders/data/_kafka_partition=0/bench.parquet"
	ids := []string{"fs-a", "fs-b"}
	ownerID := owner.Of(key, ids)
	dirs := map[string]string{"fs-a": b.TempDir(), "fs-b": b.TempDir()}
	c, err := filecache.Open(dirs[ownerID], 1<<30, nil)
	if err != nil {
		b.Fatal(err)
	}
	p, err := c.Create(size)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(p, rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	if err := p.Commit(filecache.Entry{Key: key, Size: size, ETag: objects.ETag("00"), LastModified: time.Now()}); err != nil {
		b.Fatal(err)
	}
	var nodes []*node
	for _, id := range ids {
		nodes = append(nodes, e.startNode(id, nodeOptions{cacheDir: dirs[id]}))
	}
	e.waitMembers(nodes)
	own, other := e.owner(key)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	read := func(b *testing.B, n *node, rng string, want int64) {
		req, _ := http.NewRequest("GET", objectURL(n, key), nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || got != want || resp.StatusCode/100 != 2 {
			b.Fatalf("%d: %d bytes, %v", resp.StatusCode, got, err)
		}
	}
	for _, c := range []struct {
		name string
		n    *node
	}{{"owner", own}, {"forwarded", other}} {
		b.Run(c.name+"/whole", func(b *testing.B) {
			b.SetBytes(size)
			defer reportCPU(b)()
			for b.Loop() {
				read(b, c.n, "", size)
			}
		})
		b.Run(c.name+"/range-4KiB", func(b *testing.B) { // per-request costs, next to none per byte
			b.SetBytes(4 << 10)
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				off := int64(i%60) << 20
				read(b, c.n, "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(off+4<<10-1, 10), 4<<10)
			}
		})
		// What iceberg-go's FileIO does on opening a file: a GET of the whole object whose
		// body it never reads (it reads by ranged GETs) and closes with the file.
		b.Run(c.name+"/abandoned-whole", func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				resp, err := client.Get(objectURL(c.n, key))
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
		b.Run(c.name+"/range-1MiB", func(b *testing.B) {
			b.SetBytes(1 << 20)
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				off := int64(i%60) << 20
				read(b, c.n, "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(off+1<<20-1, 10), 1<<20)
			}
		})
	}
}

// reportCPU reports the process's CPU time (user and system) per operation, both nodes
// and the client together: on a busy machine it varies less than the wall time.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op") }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
