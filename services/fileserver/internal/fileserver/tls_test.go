package fileserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/minkhq/mink/pkg/httplimit"
	"github.com/minkhq/mink/pkg/tlsfiles"
	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
)

// tlsServerOptions serve the node's gRPC over TLS, as pkg/node does with its flags.
func tlsServerOptions(cfg *tls.Config) []grpc.ServerOption {
	if cfg == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(cfg))}
}

// tlsDialOptions are a node's dial options with TLS, as pkg/node's Deps.DialOptions;
// nil (the server's own, plaintext) without it.
func tlsDialOptions(cfg *tls.Config, tp trace.TracerProvider, mp metric.MeterProvider, prop propagation.TextMapPropagator) []grpc.DialOption {
	if cfg == nil {
		return nil
	}
	return []grpc.DialOption{
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithMeterProvider(mp), otelgrpc.WithPropagators(prop))),
		grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
	}
}

func tlsScheme(cfg *tls.Config) string {
	if cfg == nil {
		return "http://"
	}
	return "https://"
}

// tlsNodes are TLS file servers of one CA, each with its own reloadable pair.
type tlsNodes struct {
	ca    *tlsfilestest.CA
	roots *x509.CertPool
	files map[string]tlsfilestest.Files
	pairs map[string]*tlsfiles.KeyPair
}

func (e *env) startTLSNodes(ids ...string) (*tlsNodes, []*node) {
	e.t.Helper()
	tn := &tlsNodes{ca: tlsfilestest.NewCA(e.t, "cluster ca"), files: map[string]tlsfilestest.Files{}, pairs: map[string]*tlsfiles.KeyPair{}}
	tn.roots = tn.ca.Pool()
	var nodes []*node
	for _, id := range ids {
		files, _ := tn.ca.Write(e.t, e.t.TempDir(), id, tlsfilestest.Loopback...)
		pair, err := tlsfiles.LoadKeyPair(files.Cert, files.Key, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		tn.files[id], tn.pairs[id] = files, pair
		server := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate,
			ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: tn.roots}
		peer := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: tn.roots, GetClientCertificate: pair.GetClientCertificate}
		nodes = append(nodes, e.startNode(id, nodeOptions{tls: server, peerTLS: peer}))
	}
	e.waitMembers(nodes)
	return tn, nodes
}

// tlsHTTP is an HTTPS client that trusts the CA.
func (tn *tlsNodes) tlsHTTP(t *testing.T) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tn.roots}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// tlsScan loads the table through n's catalog over HTTPS and reads every row, its S3
// reads over HTTPS too, as an engine configured with the cluster's CA does.
func (e *env) tlsScan(n *node, roots *x509.CertPool) ([]row, error) {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	})
	ctx := utils.WithAwsConfig(e.ctx, &aws.Config{HTTPClient: hc})
	cat, err := rest.NewCatalog(ctx, "mink", n.catalog, rest.WithTLSConfig(&tls.Config{RootCAs: roots}))
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{ns, tableName})
	if err != nil {
		return nil, err
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		return nil, err
	}
	defer at.Release()
	return rowsOf(e.t, at), nil
}

// serial is the serial of the certificate a new TLS connection to addr is shown.
func serial(t *testing.T, addr string, roots *x509.CertPool) *big.Int {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestTLSCatalogS3AndForwardedReads: with TLS, iceberg-go loads and scans the table over
// HTTPS through either node, the reads of files the other node owns forwarded to it over
// TLS gRPC; plaintext is refused on both HTTP listeners; a reloaded certificate is what
// new connections to the catalog and S3 see.
func TestTLSCatalogS3AndForwardedReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	tn, nodes := e.startTLSNodes("fs-a", "fs-b")
	for _, n := range nodes {
		if !strings.HasPrefix(n.s3, "https://") || !strings.HasPrefix(n.catalog, "https://") {
			t.Fatalf("%s: catalog %s, S3 endpoint %s: want https", n.id, n.catalog, n.s3)
		}
		start := time.Now()
		got, err := e.tlsScan(n, tn.roots)
		if err != nil {
			t.Fatalf("scan over TLS through %s: %v", n.id, err)
		}
		if !slices.Equal(got, e.rows) {
			t.Fatalf("scan over TLS through %s: %d rows, want the %d produced", n.id, len(got), len(e.rows))
		}
		t.Logf("scan over TLS through %s: %d rows in %v", n.id, len(got), time.Since(start).Round(time.Millisecond))
	}
	owned := map[string]int{}
	for _, f := range e.files {
		own, _ := e.owner(f.key)
		owned[own.id]++
	}
	for _, n := range nodes {
		st, _ := n.srv.Stats()
		if want := int64(len(e.files) - owned[n.id]); st.Forwarded < want {
			t.Errorf("%s forwarded %d reads over TLS, want at least %d", n.id, st.Forwarded, want)
		}
	}

	// One file through the node that does not own it, over HTTPS: forwarded, whole.
	own, other := e.owner(e.files[0].key)
	hc := tn.tlsHTTP(t)
	before, _ := other.srv.Stats()
	resp, err := hc.Get(objectURL(other, e.files[0].key))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	after, _ := other.srv.Stats()
	if resp.StatusCode != 200 || string(body) != string(e.files[0].bytes) || after.Forwarded != before.Forwarded+1 {
		t.Errorf("GET through %s (owner %s): %d, %d bytes of %d, forwarded %d → %d", other.id, own.id,
			resp.StatusCode, len(body), len(e.files[0].bytes), before.Forwarded, after.Forwarded)
	}

	// Plaintext to either HTTPS listener: refused, no handler reached.
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, u := range []string{strings.Replace(nodes[0].catalog, "https://", "http://", 1) + "/v1/config",
		strings.Replace(objectURL(nodes[0], e.files[0].key), "https://", "http://", 1)} {
		resp, err := plain.Get(u)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "HTTPS") {
				t.Errorf("plaintext %s: %d %q", u, resp.StatusCode, b)
			}
		}
	}

	// What net/http refuses before any handler is still S3 XML over TLS: the error
	// listener sees the decrypted request.
	func() {
		u, _ := url.Parse(nodes[0].s3)
		c, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: tn.roots})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /mink/%%ZZ HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host)
		b, _ := io.ReadAll(c)
		if !strings.HasPrefix(string(b), "HTTP/1.1 400") || !strings.Contains(string(b), "<Code>InvalidURI</Code>") {
			t.Errorf("GET /mink/%%ZZ over TLS: %q", b)
		}
	}()

	// Rotation: the pair reloaded from new files is what new connections see.
	n := nodes[0]
	next := tn.ca.Issue(t, n.id, tlsfilestest.Loopback...)
	tn.files[n.id].Replace(t, next)
	if changed, err := tn.pairs[n.id].Reload(); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	for _, addr := range []string{n.srv.CatalogAddr().String(), n.srv.S3Addr().String(), n.grpcAddr} {
		if s := serial(t, addr, tn.roots); s.Cmp(next.Leaf.SerialNumber) != 0 {
			t.Errorf("%s serves serial %v after the reload, want %v", addr, s, next.Leaf.SerialNumber)
		}
	}
	if got, err := e.tlsScan(nodes[1], tn.roots); err != nil || len(got) != len(e.rows) {
		t.Errorf("scan after the rotation: %d rows, %v", len(got), err)
	}
}

// memInUse is the heap and stacks in use after a collection.
func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// holdIdle opens n connections to addr that send nothing, closed when the test ends.
func holdIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("idle connection %d to %s: %v", len(conns), addr, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// cutAfter waits for the server to close every connection and returns when the last
// one was closed, measured from since.
func cutAfter(t *testing.T, conns []net.Conn, since time.Time, limit time.Duration) (cut int, last time.Duration) {
	var wg sync.WaitGroup
	var n, latest atomic.Int64
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(since.Add(limit))
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
				n.Add(1)
				for d := int64(time.Since(since)); ; {
					l := latest.Load()
					if d <= l || latest.CompareAndSwap(l, d) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return int(n.Load()), time.Duration(latest.Load())
}

// TestFloodAndSlowClients: 2,000 idle connections held on the S3 listener: the catalog
// and S3 keep answering a normal client at once, memory grows by a bounded amount, and
// every idle connection is cut after the header timeout, as is a slowloris client of
// the catalog. A node capped at 50 connections makes the 51st wait, not fail, and
// serves it once the idle ones are cut.
func TestFloodAndSlowClients(t *testing.T) {
	e := newEnv(t, envOptions{})
	const headerTimeout = time.Second
	n := e.startNode("fs-a", nodeOptions{limits: httplimit.Limits{ReadHeaderTimeout: headerTimeout}})
	capped := e.startNode("fs-cap", nodeOptions{limits: httplimit.Limits{ReadHeaderTimeout: headerTimeout, MaxConnections: 50}})
	e.waitMembers([]*node{n, capped})
	f := e.files[0]
	plain := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	getOK := func(url string) (time.Duration, error) {
		start := time.Now()
		resp, err := plain.Get(url)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, errors.New(resp.Status)
		}
		return time.Since(start), nil
	}
	// Warm: the file is in its owner's cache and every pool is filled.
	for _, u := range []string{objectURL(n, f.key), objectURL(capped, f.key), n.catalog + "/v1/config"} {
		if _, err := getOK(u); err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
	}

	before := memInUse()
	opened := time.Now()
	idle := holdIdle(t, n.srv.S3Addr().String(), 2000)
	cappedIdle := holdIdle(t, capped.srv.S3Addr().String(), 50)
	t.Logf("2000 + 50 idle connections opened in %v", time.Since(opened).Round(time.Millisecond))

	// Slowloris on the catalog: a header trickled a byte every 100ms.
	slow, err := net.Dial("tcp", n.srv.CatalogAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slowStart := time.Now()
	io.WriteString(slow, "GET /v1/config HTTP/1.1\r\nHost: x\r\n")
	slowCut := make(chan time.Duration, 1)
	go func() {
		slow.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, slow)
		slowCut <- time.Since(slowStart)
	}()
	stopTrickle := make(chan struct{})
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopTrickle:
				return
			case <-tick.C:
				slow.Write([]byte("X"))
			}
		}
	}()
	defer close(stopTrickle)

	// A normal client, meanwhile: answered at once by the flooded listener and the other.
	for _, u := range []string{objectURL(n, f.key), n.catalog + "/v1/config"} {
		d, err := getOK(u)
		t.Logf("GET %s during the flood: %v %v", u, d.Round(time.Millisecond), err)
		if err != nil || d > headerTimeout/2 {
			t.Errorf("GET %s during the flood: %v after %v", u, err, d)
		}
	}
	grown := int64(memInUse()) - int64(before)
	t.Logf("heap+stacks grew by %d KiB for 2050 idle connections", grown>>10)
	if grown > 96<<20 {
		t.Errorf("heap+stacks grew by %d MiB for 2050 idle connections", grown>>20)
	}

	// The capped node: a 51st connection waits (its catalog, another listener, answers),
	// and is served once the idle ones are cut.
	waited := make(chan error, 1)
	waitStart := time.Now()
	go func() { _, err := getOK(objectURL(capped, f.key)); waited <- err }()
	select {
	case err := <-waited:
		t.Fatalf("the capped node served a connection beyond its cap at once: %v", err)
	case <-time.After(headerTimeout / 4):
	}
	if d, err := getOK(capped.catalog + "/v1/config"); err != nil || d > headerTimeout/2 {
		t.Errorf("the capped node's catalog while its S3 is full: %v after %v", err, d)
	}
	if err := <-waited; err != nil {
		t.Errorf("the connection beyond the cap: %v", err)
	}
	t.Logf("the connection beyond the cap of 50 was served after %v", time.Since(waitStart).Round(time.Millisecond))

	d := <-slowCut
	t.Logf("slowloris cut after %v (header timeout %v)", d.Round(time.Millisecond), headerTimeout)
	if d < headerTimeout-100*time.Millisecond || d > headerTimeout+2*time.Second {
		t.Errorf("slowloris cut after %v, want about %v", d, headerTimeout)
	}
	cut, last := cutAfter(t, append(idle, cappedIdle...), opened, 10*time.Second)
	t.Logf("%d of 2050 idle connections cut, the last %v after they were opened", cut, last.Round(time.Millisecond))
	if cut != 2050 || last > headerTimeout+3*time.Second {
		t.Errorf("%d of 2050 idle connections cut, the last after %v", cut, last)
	}
	if _, err := getOK(objectURL(n, f.key)); err != nil {
		t.Errorf("after the flood: %v", err)
	}
}
