// Package httplimit is the bounds every HTTP server of a node (metrics, the Iceberg REST
// catalog, S3) keeps against slow and flooding clients: how long a request may take to
// arrive, how long an idle connection stays, how large its header may be, how many
// connections are open at once; and TLS, when the node has a certificate.
package httplimit

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The defaults of Limits.
const (
	// DefaultReadHeaderTimeout: a request's line and headers arrive within this of its
	// first byte (or of the connection, for the first request): a client that trickles
	// them (slowloris) is cut. It bounds a TLS handshake too.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout: the whole request, body included, arrives within this. It
	// covers the request only: once it is read (at once, for a body-less GET) the
	// deadline is lifted, so a long response is never cut by it.
	DefaultReadTimeout = time.Minute
	// DefaultIdleTimeout: a kept-alive connection waits this long for its next request.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's line and headers (a presigned URL's query
	// and an Iceberg client's headers are a few KiB).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConnections is the most open connections of one listener; more wait
	// in the kernel's accept queue until one closes.
	DefaultMaxConnections = 4096
)

// Limits bound one HTTP server; a zero field takes its default. There is no one
// WriteTimeout: each server passes its own to Server (the S3 API's handlers move a
// write deadline per chunk instead, so a large download is never cut while it moves).
type Limits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	MaxConnections    int
}

// WithDefaults is l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	return l
}

// Server is an HTTP server of h within l, with TLS when tlsCfg is set (Serve then
// serves HTTPS, HTTP/2 included). writeTimeout bounds each response, from the end of
// its request's header to its last byte (0: none; a handler may move it with
// http.ResponseController). Errors net/http logs go to lg at warn, TLS handshake
// failures (scanners, plaintext clients, clients that distrust the certificate) at
// debug.
func (l Limits) Server(h http.Handler, tlsCfg *tls.Config, writeTimeout time.Duration, lg *slog.Logger) *http.Server {
	l = l.WithDefaults()
	if lg == nil {
		lg = slog.Default()
	}
	if tlsCfg != nil {
		// Its own copy: net/http sets up HTTP/2 in the server's TLSConfig, and the
		// catalog's and S3's servers are given the same one.
		tlsCfg = tlsCfg.Clone()
	}
	return &http.Server{
		Handler:           h,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          log.New(errorLog{lg}, "", 0),
	}
}

// Serve serves srv on lis, taking at most MaxConnections connections at a time, over
// TLS when srv.TLSConfig is set. Like http.Server.Serve it returns
// http.ErrServerClosed after Shutdown or Close.
func (l Limits) Serve(srv *http.Server, lis net.Listener) error {
	lis = LimitListener(lis, l.WithDefaults().MaxConnections)
	if srv.TLSConfig != nil {
		// The certificate comes from TLSConfig (GetCertificate), so no files here.
		return srv.ServeTLS(lis, "", "")
	}
	return srv.Serve(lis)
}

// ServeAbove is Serve for a listener wrapper that must see the plaintext HTTP of each
// connection (s3api's, which answers what net/http refuses before any handler in S3
// XML): with TLS the connections are decrypted first (a TLS listener under wrap), which
// serves HTTP/1.1 only, as S3 clients speak it.
func (l Limits) ServeAbove(srv *http.Server, lis net.Listener, wrap func(net.Listener) net.Listener) error {
	lis = LimitListener(lis, l.WithDefaults().MaxConnections)
	if srv.TLSConfig != nil {
		cfg := srv.TLSConfig.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		lis = tls.NewListener(lis, cfg)
	}
	return srv.Serve(wrap(lis))
}

// ReadOnly serves GET and HEAD with h and answers every other method 405, and never
// reads a request body: a request that comes with one is answered and its connection
// closed, so a client cannot make the server take in what it sends (the metrics
// endpoint once took 50 MB).
func ReadOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			// Closing after the answer is what keeps net/http from reading the rest
			// of the body to reuse the connection.
			w.Header().Set("Connection", "close")
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: GET or HEAD only", http.StatusMethodNotAllowed)
			return
		}
		r.Body = http.NoBody
		h.ServeHTTP(w, r)
	})
}

// LimitListener is lis with at most n connections open at once: Accept waits while n
// are, so more wait in the kernel's accept queue (and beyond its length are refused)
// rather than take a file descriptor each. As golang.org/x/net/netutil.LimitListener,
// but its connections keep *net.TCPConn's ReadFrom (net/http sends files with
// sendfile through it) and CloseWrite (net/http's graceful close of a refused request).
func LimitListener(lis net.Listener, n int) net.Listener {
	return &limitListener{Listener: lis, slots: make(chan struct{}, max(n, 1)), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{} // one per open connection
	closeOnce sync.Once
	done      chan struct{} // closed by Close: a waiting Accept returns
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, slots: l.slots}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	slots       chan struct{}
	releaseOnce sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(func() { <-c.slots })
	return err
}

func (c *limitConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.Conn, r)
}

func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// errorLog writes net/http's error log lines to slog.
type errorLog struct{ lg *slog.Logger }

func (e errorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		level = slog.LevelDebug
	}
	e.lg.Log(context.Background(), level, msg)
	return len(p), nil
}
