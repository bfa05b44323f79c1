package httplimit_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/httplimit"
	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
)

// served is a running server of Limits l: its address and how to stop it.
type served struct {
	addr  string
	srv   *http.Server
	read  *atomic.Int64 // bytes the server read from all its connections
	calls *atomic.Int64 // handler calls
}

func serve(t *testing.T, l httplimit.Limits, tlsCfg *tls.Config, writeTimeout time.Duration, h http.Handler) *served {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &served{addr: lis.Addr().String(), read: &atomic.Int64{}, calls: &atomic.Int64{}}
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	}
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.calls.Add(1); h.ServeHTTP(w, r) })
	s.srv = l.Server(counted, tlsCfg, writeTimeout, slog.New(slog.DiscardHandler))
	done := make(chan error, 1)
	go func() { done <- l.Serve(s.srv, countingListener{lis, s.read}) }()
	t.Cleanup(func() {
		s.srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// countingListener counts the bytes read from its connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// get is one request of a fresh client (no kept-alive connection shared).
func get(t *testing.T, url string, timeout time.Duration) (int, string, error) {
	t.Helper()
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// memInUse is the heap and stacks in use after a collection.
func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// TestIdleFlood: 2,000 connections that send nothing are held open; the server keeps
// answering a normal client at once, its memory grows by a bounded amount, and it cuts
// every idle connection after the header timeout.
func TestIdleFlood(t *testing.T) {
	const idle = 2000
	const headerTimeout = 2 * time.Second
	s := serve(t, httplimit.Limits{ReadHeaderTimeout: headerTimeout}, nil, time.Second, nil)
	before := memInUse()
	conns := make([]net.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	opened := time.Now()
	for range idle {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	t.Logf("%d idle connections opened in %v", idle, time.Since(opened).Round(time.Millisecond))
	// The normal client, while they are held: answered, and quickly.
	for i := range 5 {
		start := time.Now()
		code, body, err := get(t, "http://"+s.addr+"/", 2*time.Second)
		if err != nil || code != 200 || body != "ok" {
			t.Fatalf("request %d during the flood: %d %q %v", i, code, body, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("request %d during the flood took %v", i, d)
		}
	}
	grown := int64(memInUse()) - int64(before)
	t.Logf("heap+stacks grew by %d KiB for %d idle connections (%d B each)", grown>>10, idle, grown/idle)
	if grown > 64<<20 {
		t.Errorf("heap+stacks grew by %d MiB for %d idle connections", grown>>20, idle)
	}

	// Every idle connection is cut once the header timeout has passed since it opened.
	var wg sync.WaitGroup
	var cut atomic.Int64
	var latest atomic.Int64
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(headerTimeout + 10*time.Second))
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
				cut.Add(1)
				if d := int64(time.Since(opened)); d > latest.Load() {
					latest.Store(d)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d of %d idle connections cut by the server, the last %v after the flood began", cut.Load(), idle, time.Duration(latest.Load()).Round(time.Millisecond))
	if cut.Load() != idle {
		t.Errorf("%d of %d idle connections were cut", cut.Load(), idle)
	}
}

// TestSlowloris: a client that sends its header a byte at a time is cut once the
// header timeout has passed, however steadily it trickles.
func TestSlowloris(t *testing.T) {
	const headerTimeout = 500 * time.Millisecond
	s := serve(t, httplimit.Limits{ReadHeaderTimeout: headerTimeout}, nil, time.Second, nil)
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan time.Duration, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, c) // ends when the server closes
		closed <- time.Since(start)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case d := <-closed:
			t.Logf("slowloris cut after %v (header timeout %v)", d.Round(time.Millisecond), headerTimeout)
			if d < headerTimeout-50*time.Millisecond || d > headerTimeout+2*time.Second {
				t.Errorf("cut after %v, want about %v", d, headerTimeout)
			}
			if s.calls.Load() != 0 {
				t.Errorf("the handler ran for an incomplete request")
			}
			return
		case <-tick.C:
			c.Write([]byte("X")) // one more byte of a header that never ends
		}
	}
}

// TestConnectionsBeyondTheCapWait: with every slot held, a new client waits (it is not
// refused, nothing fails) and is served as soon as a slot frees.
func TestConnectionsBeyondTheCapWait(t *testing.T) {
	const max = 20
	s := serve(t, httplimit.Limits{MaxConnections: max}, nil, time.Second, nil)
	var held []net.Conn
	for range max {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Each held connection has been accepted once a request on it is answered.
	for _, c := range held[:1] {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("held connection: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	type result struct {
		code int
		err  error
		at   time.Duration
	}
	start := time.Now()
	done := make(chan result, 1)
	go func() {
		code, _, err := get(t, "http://"+s.addr+"/", 10*time.Second)
		done <- result{code, err, time.Since(start)}
	}()
	select {
	case r := <-done:
		t.Fatalf("served beyond the cap of %d: %+v", max, r)
	case <-time.After(300 * time.Millisecond):
	}
	held[0].Close()
	r := <-done
	t.Logf("the client beyond the cap waited %v, then got %d", r.at.Round(time.Millisecond), r.code)
	if r.err != nil || r.code != 200 {
		t.Errorf("after a slot freed: %+v", r)
	}
	for _, c := range held[1:] {
		c.Close()
	}
}

// TestReadTimeoutCoversTheRequestOnly: a response that takes far longer than
// ReadTimeout to send is not cut, and its request's context stays alive.
func TestReadTimeoutCoversTheRequestOnly(t *testing.T) {
	s := serve(t, httplimit.Limits{ReadTimeout: 200 * time.Millisecond}, nil, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 10 {
			if r.Context().Err() != nil {
				return
			}
			io.WriteString(w, "x")
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}))
	code, body, err := get(t, "http://"+s.addr+"/", 10*time.Second)
	if err != nil || code != 200 || body != strings.Repeat("x", 10) {
		t.Errorf("a 1s response under a 200ms ReadTimeout: %d %q %v", code, body, err)
	}
}

// TestReadOnlyReadsNoBody: the metrics endpoint answers GET and HEAD; a POST of 50 MB
// is answered 405 without the server taking it in.
func TestReadOnlyReadsNoBody(t *testing.T) {
	s := serve(t, httplimit.Limits{}, nil, time.Second, httplimit.ReadOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if n != 0 {
			t.Errorf("the handler read %d body bytes", n)
		}
		io.WriteString(w, "metrics")
	})))
	code, body, err := get(t, "http://"+s.addr+"/metrics", 5*time.Second)
	if err != nil || code != 200 || body != "metrics" {
		t.Fatalf("GET: %d %q %v", code, body, err)
	}
	resp, err := http.Head("http://" + s.addr + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD: %v %v", resp, err)
	}
	resp.Body.Close()

	for _, method := range []string{http.MethodPost, http.MethodGet} {
		readBefore := s.read.Load()
		start := time.Now()
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		const size = 50 << 20
		io.WriteString(c, method+" /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 52428800\r\n\r\n")
		sent := make(chan int64, 1)
		var out atomic.Int64
		go func() {
			// Keep sending until the server stops taking it.
			n, _ := io.Copy(c, io.LimitReader(countingReader{zeros{}, &out}, size))
			sent <- n
		}()
		for out.Load() < 64<<10 && time.Since(start) < 2*time.Second {
			time.Sleep(time.Millisecond) // the body is on its way before the answer is read
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s with a 50 MB body: %v", method, err)
		}
		resp.Body.Close()
		c.Close()
		n := <-sent
		read := s.read.Load() - readBefore
		t.Logf("%s with a 50 MB body: %d in %v; the client got %d bytes out, the server read %d bytes (header included)",
			method, resp.StatusCode, time.Since(start).Round(time.Millisecond), n, read)
		want := http.StatusMethodNotAllowed
		if method == http.MethodGet {
			want = http.StatusOK
		}
		if resp.StatusCode != want || (method == http.MethodPost && resp.Header.Get("Allow") != "GET, HEAD") {
			t.Errorf("%s with a body: %d (Allow %q), want %d", method, resp.StatusCode, resp.Header.Get("Allow"), want)
		}
		if read > 1<<20 {
			t.Errorf("%s: the server read %d KiB of a body it does not want", method, read>>10)
		}
	}
}

type zeros struct{}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestTLS: Serve speaks TLS (HTTP/2 too) when the server has a TLS config; a plaintext
// request to it is refused without reaching the handler.
func TestTLS(t *testing.T) {
	ca := tlsfilestest.NewCA(t, "ca")
	cert := ca.Issue(t, "server", tlsfilestest.Loopback...)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	s := serve(t, httplimit.Limits{}, cfg, time.Second, nil)
	serve(t, httplimit.Limits{}, cfg, time.Second, nil) // two servers of one config (the catalog and S3): no race under -race
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + s.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" || resp.ProtoMajor != 2 {
		t.Errorf("https: %d %q over %s", resp.StatusCode, b, resp.Proto)
	}
	calls := s.calls.Load()
	code, body, err := get(t, "http://"+s.addr+"/", 5*time.Second)
	t.Logf("plaintext to the TLS port: %d %q %v", code, strings.TrimSpace(body), err)
	if code == 200 || s.calls.Load() != calls {
		t.Errorf("a plaintext request reached the handler: %d %q", code, body)
	}
	if _, err := (&http.Client{Timeout: 5 * time.Second}).Get("https://" + s.addr + "/"); err == nil {
		t.Error("a client that does not trust the CA got through")
	}
}

// TestLimitListenerKeepsTCPMethods: a capped connection still offers the TCP
// connection's ReadFrom (net/http's sendfile path) and CloseWrite; one beyond the cap is
// accepted once a slot frees, however often the connection before is closed.
func TestLimitListenerKeepsTCPMethods(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := httplimit.LimitListener(raw, 1)
	defer lis.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first := <-accepted
	if _, ok := first.(io.ReaderFrom); !ok {
		t.Error("the connection lost ReadFrom")
	}
	if _, ok := first.(interface{ CloseWrite() error }); !ok {
		t.Error("the connection lost CloseWrite")
	}
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted beyond the cap of 1")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	first.Close() // frees one slot, not two
	second := <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while the second is open")
	case <-time.After(200 * time.Millisecond):
	}
	second.Close()
	third := <-accepted
	third.Close()
}
