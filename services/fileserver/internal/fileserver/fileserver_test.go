package fileserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/goleak"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/fileserver"
)

// TestScanWithIcebergGo: iceberg-go, as an engine uses it, loads the table from either
// node's catalog and scans it to Arrow through the S3 endpoint the load hands out; every
// record produced to Kafka is exactly one row. Reads that land on the node that does not
// own a file are forwarded to its owner within one trace.
func TestScanWithIcebergGo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	nodes := e.startNodes(2)
	for _, n := range nodes {
		start := time.Now()
		got, err := e.scan(n)
		if err != nil {
			t.Fatalf("scan through %s: %v", n.id, err)
		}
		if !slices.Equal(got, e.rows) {
			t.Fatalf("scan through %s: %d rows, want the %d produced:\n got %v\nwant %v", n.id, len(got), len(e.rows), got, e.rows)
		}
		t.Logf("scan through %s: %d rows in %v", n.id, len(got), time.Since(start))
	}
	// Every node read every file: the files each node does not own went to their owner.
	owned := map[string]int{}
	for _, f := range e.files {
		own, _ := e.owner(f.key)
		owned[own.id]++
	}
	for _, n := range nodes {
		st, _ := n.srv.Stats()
		if want := int64(len(e.files) - owned[n.id]); st.Forwarded < want {
			t.Errorf("%s forwarded %d reads, want at least %d (the data files it does not own)", n.id, st.Forwarded, want)
		}
	}
	// Each data file was built once, by its owner, however many nodes read it.
	for _, n := range nodes {
		if got := counter(t, n, "mink.fileserver.builds", map[string]string{"kind": "data"}); got != int64(owned[n.id]) {
			t.Errorf("%s built %d data files, want the %d it owns", n.id, got, owned[n.id])
		}
	}

	// One trace per forwarded read: the owner's gRPC server span shares the trace of
	// the S3 request on the node that forwarded it.
	httpTraces := map[string]bool{}
	for _, s := range e.spans.Ended() {
		if s.SpanKind().String() == "server" && strings.HasPrefix(s.Name(), "s3") {
			httpTraces[s.SpanContext().TraceID().String()] = true
		}
	}
	joined := 0
	for _, s := range e.spans.Ended() {
		if s.SpanKind().String() == "server" && strings.Contains(s.Name(), "FileService/ReadFile") {
			if !httpTraces[s.SpanContext().TraceID().String()] || !s.Parent().IsValid() {
				t.Errorf("forwarded read span %s is not part of an S3 request's trace", s.Name())
			}
			joined++
		}
	}
	if joined == 0 {
		t.Error("no forwarded read was traced")
	}
}

// TestForwardedReadThenCacheHit: a read through the node that does not own the file is
// forwarded to the owner, which builds the file; the next read, through the owner, is a
// cache hit. Concurrent reads of an uncached file share one build, and the cache
// survives a restart of the owner.
func TestForwardedReadThenCacheHit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.startNodes(2)
	f := e.files[0]
	own, other := e.owner(f.key)

	resp, body := get(t, "GET", objectURL(other, f.key), nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, f.bytes) {
		t.Fatalf("read through %s: %d, %d bytes, want 200 and the file's %d bytes", other.id, resp.StatusCode, len(body), len(f.bytes))
	}
	if resp.Header.Get("X-Mink-Served-By") != own.id || resp.Header.Get("X-Mink-Cache") != "miss" {
		t.Fatalf("first read: served by %q, cache %q; want %s, miss", resp.Header.Get("X-Mink-Served-By"), resp.Header.Get("X-Mink-Cache"), own.id)
	}
	if got := counter(t, other, "mink.fileserver.forwarded_reads", map[string]string{"result": "ok"}); got != 1 {
		t.Errorf("%s forwarded_reads{ok} = %d, want 1", other.id, got)
	}

	resp, body = get(t, "GET", objectURL(own, f.key), nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, f.bytes) || resp.Header.Get("X-Mink-Cache") != "hit" {
		t.Fatalf("read through the owner: %d, cache %q", resp.StatusCode, resp.Header.Get("X-Mink-Cache"))
	}
	if hits, misses := counter(t, own, "mink.fileserver.cache.hits", nil), counter(t, own, "mink.fileserver.cache.misses", nil); hits != 1 || misses != 1 {
		t.Errorf("owner cache hits %d misses %d, want 1 and 1", hits, misses)
	}
	// The owner counts a chunk once sent, which may be just after the client has it.
	leasetest.Eventually(t, 5*time.Second, "the owner to count the bytes it forwarded", func() bool {
		return counter(t, own, "mink.fileserver.bytes_served", map[string]string{"api": "forward"}) == int64(len(f.bytes))
	})

	// Eight concurrent first reads of another file, half through each node: one build.
	g := e.fileOwnedBy(own, f.key)
	before := counter(t, own, "mink.fileserver.builds", nil)
	var wg sync.WaitGroup
	for i := range 8 {
		n := []*node{own, other}[i%2]
		wg.Go(func() {
			req, _ := http.NewRequest("GET", objectURL(n, g.key), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			if resp.StatusCode != 200 || !bytes.Equal(buf.Bytes(), g.bytes) {
				t.Errorf("concurrent read: %d, %d bytes", resp.StatusCode, buf.Len())
			}
		})
	}
	wg.Wait()
	if got := counter(t, own, "mink.fileserver.builds", nil) - before; got != 1 {
		t.Errorf("8 concurrent reads made %d builds, want 1", got)
	}

	// The owner restarts on the same cache folder: its first read is a hit, from the
	// files the last run left, with no build.
	dir := own.cacheDir
	if err := own.stop(); err != nil {
		t.Fatal(err)
	}
	again := e.startNode(own.id, nodeOptions{cacheDir: dir})
	e.nodes = slices.DeleteFunc(e.nodes, func(n *node) bool { return n == own })
	e.waitMembers([]*node{again, other})
	resp, body = get(t, "GET", objectURL(other, f.key), nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, f.bytes) || resp.Header.Get("X-Mink-Cache") != "hit" || resp.Header.Get("X-Mink-Served-By") != own.id {
		t.Fatalf("after the owner's restart: %d, cache %q, served by %q", resp.StatusCode, resp.Header.Get("X-Mink-Cache"), resp.Header.Get("X-Mink-Served-By"))
	}
	if got := counter(t, again, "mink.fileserver.builds", nil); got != 0 {
		t.Errorf("restarted owner built %d files, want 0", got)
	}
}

// TestOwnerUnreachable: an owner that does not answer (crashed, its membership not yet
// expired) does not make its files unreadable: the node the read landed on builds and
// serves them itself.
func TestOwnerUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	nodes := e.startNodes(2)
	a, b := nodes[0], nodes[1]
	f := e.fileOwnedBy(b)
	b.gs.Stop() // b's member row stays live; only its gRPC server is gone
	resp, body := get(t, "GET", objectURL(a, f.key), map[string]string{"Range": "bytes=0-9"})
	if resp.StatusCode != 206 || !bytes.Equal(body, f.bytes[:10]) || resp.Header.Get("X-Mink-Served-By") != a.id {
		t.Fatalf("read of an unreachable owner's file: %d, served by %q", resp.StatusCode, resp.Header.Get("X-Mink-Served-By"))
	}
	if got := counter(t, a, "mink.fileserver.forwarded_reads", map[string]string{"result": "fallback"}); got != 1 {
		t.Errorf("forwarded_reads{fallback} = %d, want 1", got)
	}
}

// TestOwnerStopping: an owner shutting down (its server stopped, its gRPC server and
// member row not yet gone) still serves what it has cached, and leaves what it would
// have to build to the node the read landed on.
func TestOwnerStopping(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	nodes := e.startNodes(2)
	a, b := nodes[0], nodes[1]
	cached := e.fileOwnedBy(b)
	if resp, _ := get(t, "GET", objectURL(a, cached.key), nil); resp.StatusCode != 200 {
		t.Fatalf("warm: %d", resp.StatusCode)
	}
	uncached := e.fileOwnedBy(b, cached.key)
	if err := b.stopRun(); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, "GET", objectURL(a, cached.key), nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, cached.bytes) || resp.Header.Get("X-Mink-Served-By") != b.id {
		t.Errorf("cached file of a stopping owner: %d, served by %q", resp.StatusCode, resp.Header.Get("X-Mink-Served-By"))
	}
	resp, body = get(t, "GET", objectURL(a, uncached.key), nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, uncached.bytes) || resp.Header.Get("X-Mink-Served-By") != a.id {
		t.Errorf("uncached file of a stopping owner: %d, served by %q", resp.StatusCode, resp.Header.Get("X-Mink-Served-By"))
	}
}

// TestS3API: ranges, HEAD, conditional reads, and every error, through the owner and
// through a node that forwards.
func TestS3API(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.startNodes(2)
	f := e.files[1]
	size := int64(len(f.bytes))
	own, other := e.owner(f.key)
	for _, n := range []*node{other, own} {
		t.Run("via "+n.id, func(t *testing.T) {
			url := objectURL(n, f.key)
			for _, c := range []struct {
				rng        string
				first, end int64 // expected bytes [first, end)
			}{
				{"bytes=0-99", 0, 100},
				{"bytes=10-10", 10, 11},
				{"bytes=100-", 100, size},
				{"bytes=-8", size - 8, size},                 // a Parquet footer read
				{fmt.Sprintf("bytes=5-%d", size*2), 5, size}, // a last byte past the end is clamped
				{fmt.Sprintf("bytes=-%d", size+10), 0, size},
			} {
				resp, body := get(t, "GET", url, map[string]string{"Range": c.rng})
				wantCR := fmt.Sprintf("bytes %d-%d/%d", c.first, c.end-1, size)
				if resp.StatusCode != 206 || resp.Header.Get("Content-Range") != wantCR || !bytes.Equal(body, f.bytes[c.first:c.end]) ||
					resp.ContentLength != c.end-c.first {
					t.Errorf("%s: %d %q, %d bytes; want 206 %q and bytes [%d, %d)", c.rng, resp.StatusCode,
						resp.Header.Get("Content-Range"), len(body), wantCR, c.first, c.end)
				}
			}

			resp, body := get(t, "HEAD", url, nil)
			etag := resp.Header.Get("ETag")
			lm, lmErr := http.ParseTime(resp.Header.Get("Last-Modified"))
			if resp.StatusCode != 200 || resp.ContentLength != size || len(body) != 0 || len(etag) != 34 || lmErr != nil ||
				time.Since(lm) > time.Hour || resp.Header.Get("Accept-Ranges") != "bytes" {
				t.Errorf("HEAD: %d, length %d, etag %q, last-modified %q", resp.StatusCode, resp.ContentLength, etag, resp.Header.Get("Last-Modified"))
			}
			resp, _ = get(t, "HEAD", url, map[string]string{"Range": "bytes=0-99"})
			if resp.StatusCode != 206 || resp.ContentLength != 100 || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 0-99/%d", size) {
				t.Errorf("HEAD with a range: %d, length %d, %q", resp.StatusCode, resp.ContentLength, resp.Header.Get("Content-Range"))
			}
			resp, _ = get(t, "GET", url, nil)
			if resp.Header.Get("ETag") != etag || resp.ContentLength != size {
				t.Errorf("GET: etag %q length %d, HEAD said %q %d", resp.Header.Get("ETag"), resp.ContentLength, etag, size)
			}
			if resp, _ := get(t, "GET", url, map[string]string{"If-None-Match": etag}); resp.StatusCode != 304 {
				t.Errorf("If-None-Match with the current ETag: %d, want 304", resp.StatusCode)
			}
			if resp, body := get(t, "GET", url, map[string]string{"If-Match": `"other"`}); resp.StatusCode != 412 || s3Error(t, body).Code != "PreconditionFailed" {
				t.Errorf("If-Match with another ETag: %d, want 412", resp.StatusCode)
			}

			// Unsatisfiable: 416 with the size, as RFC 9110 says, also from a forwarding
			// node (the owner's answer carries it).
			wantCR := fmt.Sprintf("bytes */%d", size)
			for _, rng := range []string{fmt.Sprintf("bytes=%d-", size), fmt.Sprintf("bytes=%d-%d", size+5, size+9), "bytes=-0",
				"bytes=99999999999999999999-"} {
				resp, body := get(t, "GET", url, map[string]string{"Range": rng})
				if e := s3Error(t, body); resp.StatusCode != 416 || e.Code != "InvalidRange" || e.Key != f.key || resp.Header.Get("Content-Range") != wantCR {
					t.Errorf("%s: %d %+v, Content-Range %q; want 416 InvalidRange, %q", rng, resp.StatusCode, e, resp.Header.Get("Content-Range"), wantCR)
				}
			}
			resp, body = get(t, "HEAD", url, map[string]string{"Range": fmt.Sprintf("bytes=%d-", size)})
			if resp.StatusCode != 416 || len(body) != 0 || resp.Header.Get("X-Mink-Error-Code") != "InvalidRange" || resp.Header.Get("Content-Range") != wantCR {
				t.Errorf("HEAD with a bad range: %d, %q, Content-Range %q", resp.StatusCode, body, resp.Header.Get("Content-Range"))
			}
			// Not one byte range (invalid, several, another unit): ignored, the whole file.
			for _, rng := range []string{"bytes=9-5", "bytes=0-1,4-5", "bytes=0-1, 5-6", "items=0-1", "bytes=x-", "bytes="} {
				resp, body := get(t, "GET", url, map[string]string{"Range": rng})
				if resp.StatusCode != 200 || !bytes.Equal(body, f.bytes) || resp.Header.Get("Content-Range") != "" || resp.ContentLength != size {
					t.Errorf("%s: %d, %d bytes, Content-Range %q; want 200 and the whole file", rng, resp.StatusCode, len(body), resp.Header.Get("Content-Range"))
				}
			}

			missing := layout.DataKey(ns, tableName, 0, 0, 15, strings.Repeat("0", 64))
			resp, body = get(t, "GET", objectURL(n, missing), nil)
			if e := s3Error(t, body); resp.StatusCode != 404 || e.Code != "NoSuchKey" || e.Key != missing || e.RequestID == "" {
				t.Errorf("unknown key: %d %+v", resp.StatusCode, e)
			}
			if resp, _ := get(t, "HEAD", objectURL(n, missing), nil); resp.StatusCode != 404 {
				t.Errorf("HEAD of an unknown key: %d", resp.StatusCode)
			}
			resp, body = get(t, "GET", n.s3+"/warehouse/"+f.key, nil)
			if e := s3Error(t, body); resp.StatusCode != 404 || e.Code != "NoSuchBucket" {
				t.Errorf("unknown bucket: %d %+v", resp.StatusCode, e)
			}
			for _, bad := range []string{"default/../../etc/passwd", "default/%2e%2e/secret", "default//orders", "./x", "default/orders/%00"} {
				resp, body := get(t, "GET", n.s3+"/mink/"+bad, nil)
				if e := s3Error(t, body); resp.StatusCode != 400 || e.Code != "InvalidArgument" {
					t.Errorf("key %q: %d %+v, want 400 InvalidArgument", bad, resp.StatusCode, e)
				}
			}
			resp, body = get(t, "PUT", url, nil)
			if e := s3Error(t, body); resp.StatusCode != 405 || e.Code != "MethodNotAllowed" {
				t.Errorf("PUT: %d %+v", resp.StatusCode, e)
			}
			resp, body = get(t, "GET", n.s3+"/mink?list-type=2&prefix="+f.key, nil)
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte("<Key>"+f.key+"</Key>")) {
				t.Errorf("list objects: %d %s", resp.StatusCode, body)
			}
			if resp, _ := get(t, "HEAD", n.s3+"/mink", nil); resp.StatusCode != 200 {
				t.Errorf("HEAD bucket: %d", resp.StatusCode)
			}

			// Metadata files come from Postgres, with ranges like any file.
			var meta []byte
			if err := e.db.QueryRow(e.ctx, `SELECT content FROM mink_meta_files WHERE key = $1`, e.metaKey).Scan(&meta); err != nil {
				t.Fatal(err)
			}
			resp, body = get(t, "GET", objectURL(n, e.metaKey), nil)
			if resp.StatusCode != 200 || !bytes.Equal(body, meta) || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("metadata file: %d, %d bytes", resp.StatusCode, len(body))
			}
			resp, body = get(t, "GET", objectURL(n, e.metaKey), map[string]string{"Range": "bytes=1-3"})
			if resp.StatusCode != 206 || !bytes.Equal(body, meta[1:4]) {
				t.Errorf("metadata range: %d %q", resp.StatusCode, body)
			}
		})
	}
}

// TestCatalog: the REST catalog's read endpoints and errors, with iceberg-go and raw.
func TestCatalog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	n := e.startNodes(1)[0]
	cat := e.catalogClient(n)
	ctx := e.ctx

	nss, err := cat.ListNamespaces(ctx, nil)
	if err != nil || len(nss) != 1 || !slices.Equal(nss[0], []string{ns}) {
		t.Fatalf("namespaces: %v %v", nss, err)
	}
	if props, err := cat.LoadNamespaceProperties(ctx, table.Identifier{ns}); err != nil || props == nil {
		t.Errorf("namespace properties: %v %v", props, err)
	}
	if ok, err := cat.CheckNamespaceExists(ctx, table.Identifier{ns}); !ok || err != nil {
		t.Errorf("namespace exists: %v %v", ok, err)
	}
	if ok, err := cat.CheckNamespaceExists(ctx, table.Identifier{"nope"}); ok || err != nil {
		t.Errorf("unknown namespace exists: %v %v", ok, err)
	}
	if ok, err := cat.CheckNamespaceExists(ctx, table.Identifier{ns, "sub"}); ok || err != nil {
		t.Errorf("multi-level namespace exists: %v %v", ok, err)
	}
	var ids []table.Identifier
	for id, err := range cat.ListTables(ctx, table.Identifier{ns}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != 1 || !slices.Equal(ids[0], table.Identifier{ns, tableName}) {
		t.Errorf("tables: %v", ids)
	}
	for _, err := range cat.ListTables(ctx, table.Identifier{"nope"}) {
		if !errors.Is(err, catalog.ErrNoSuchNamespace) {
			t.Errorf("tables of an unknown namespace: %v", err)
		}
	}
	if ok, err := cat.CheckTableExists(ctx, table.Identifier{ns, tableName}); !ok || err != nil {
		t.Errorf("table exists: %v %v", ok, err)
	}
	if ok, err := cat.CheckTableExists(ctx, table.Identifier{ns, "nope"}); ok || err != nil {
		t.Errorf("unknown table exists: %v %v", ok, err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{ns, tableName})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.MetadataLocation() != layout.URI(e.metaKey) || tbl.Metadata().CurrentSnapshot() == nil || tbl.Location() != layout.Location(ns, tableName) {
		t.Errorf("load: location %s, metadata %s", tbl.Location(), tbl.MetadataLocation())
	}
	if _, err := cat.LoadTable(ctx, table.Identifier{ns, "nope"}); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("load of an unknown table: %v", err)
	}

	// Raw: the load's config, the envelope of every error, 0x1F namespaces.
	resp, body := get(t, "GET", n.catalog+"/v1/namespaces/default/tables/orders", nil)
	for _, want := range []string{`"metadata-location":"s3://mink/default/orders/metadata/`, `"s3.endpoint":"` + n.s3 + `"`,
		`"s3.region":"us-east-1"`, `"s3.path-style-access":"true"`, `"s3.access-key-id":`, `"s3.secret-access-key":`} {
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("load response lacks %s: %d %.300s", want, resp.StatusCode, body)
		}
	}
	if resp2, _ := get(t, "GET", n.catalog+"/v1/namespaces/default/tables/orders", map[string]string{"If-None-Match": resp.Header.Get("ETag")}); resp2.StatusCode != 304 {
		t.Errorf("load with the current ETag: %d, want 304", resp2.StatusCode)
	}
	resp, body = get(t, "GET", n.catalog+"/v1/config", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}"`) {
		t.Errorf("config: %d %s", resp.StatusCode, body)
	}

	// A table created but not committed yet.
	if _, err := tables.Create(ctx, e.db, tables.Table{Namespace: ns, Name: "fresh", Topic: tableName, Spec: spec}, partitions); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		status       int
		typ, msg     string
	}{
		{"GET", "/v1/namespaces/default/tables/fresh", 404, "NoSuchTableException", "no committed snapshot yet"},
		{"GET", "/v1/namespaces/default/tables/nope", 404, "NoSuchTableException", "table default.nope does not exist"},
		{"GET", "/v1/namespaces/nope/tables/orders", 404, "NoSuchNamespaceException", "namespace nope does not exist"},
		{"GET", "/v1/namespaces/nope", 404, "NoSuchNamespaceException", "namespace nope"},
		{"GET", "/v1/namespaces/nope/tables", 404, "NoSuchNamespaceException", "namespace nope"},
		{"GET", "/v1/namespaces/default%1Fsub", 404, "NoSuchNamespaceException", "one level"},
		{"GET", "/v1/namespaces/default%1Fsub/tables/orders", 404, "NoSuchNamespaceException", "one level"},
		{"GET", "/v1/namespaces?parent=nope", 404, "NoSuchNamespaceException", "nope"},
		{"POST", "/v1/namespaces/default/tables", 403, "ForbiddenException", "admin API"},
		{"DELETE", "/v1/namespaces/default/tables/orders", 403, "ForbiddenException", "read-only"},
		{"POST", "/v1/namespaces", 406, "UnsupportedOperationException", "read-only"},
		{"POST", "/v1/transactions/commit", 403, "ForbiddenException", "read-only"},
		{"PUT", "/v1/namespaces/default", 405, "MethodNotAllowedException", "PUT"},
		{"GET", "/v1/nothing", 404, "NotFoundException", "no endpoint"},
	} {
		resp, body := get(t, c.method, n.catalog+c.path, nil)
		e := icebergError(t, body)
		if resp.StatusCode != c.status || e.Code != c.status || e.Type != c.typ || !strings.Contains(e.Message, c.msg) ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %+v; want %d %s containing %q", c.method, c.path, resp.StatusCode, e, c.status, c.typ, c.msg)
		}
	}
	if resp, _ := get(t, "HEAD", n.catalog+"/v1/namespaces/default/tables/fresh", nil); resp.StatusCode != 404 {
		t.Errorf("HEAD of an uncommitted table: %d, want 404 like its load", resp.StatusCode)
	}
	if resp, _ := get(t, "HEAD", n.catalog+"/v1/namespaces/default/tables/orders", nil); resp.StatusCode != 204 {
		t.Errorf("HEAD of a table: %d", resp.StatusCode)
	}
	resp, body = get(t, "GET", n.catalog+"/v1/namespaces/default/tables", nil)
	if resp.StatusCode != 200 || strings.Contains(string(body), "fresh") {
		t.Errorf("an uncommitted table is listed: %s", body)
	}
}

// TestRunStopsCleanly: Run returns once ctx ends, with no goroutine left behind, even
// with a read in flight.
func TestRunStopsCleanly(t *testing.T) {
	e := newEnv(t, envOptions{})
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	kc, err := kafkasrc.New(e.kafka.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	srv, err := fileserver.New(fileserver.Options{NodeID: "solo", DB: e.db, Kafka: kc, CatalogAddr: "127.0.0.1:0",
		S3Addr: "127.0.0.1:0", CacheDir: t.TempDir(), CacheBytes: 1 << 30, ShutdownTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	leasetest.Eventually(t, 5*time.Second, "the S3 API to answer", func() bool {
		resp, err := client.Get(srv.S3Endpoint() + "/mink/" + e.files[0].key)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	// A read held open (body not read) while the server stops.
	resp, err := client.Get(srv.S3Endpoint() + "/mink/" + e.files[1].key)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	resp.Body.Close()
	if _, err := net.DialTimeout("tcp", srv.S3Addr().String(), time.Second); err == nil {
		t.Error("the S3 listener is still open")
	}
	if err := srv.Run(context.Background()); err == nil {
		t.Error("a second Run succeeded")
	}
}
