package node

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/httplimit"
	"github.com/minkhq/mink/pkg/tlsfiles"
)

// The gRPC server's bounds.
const (
	// grpcConnectionTimeout bounds a new connection's TLS handshake and HTTP/2 preface:
	// a client that connects and says nothing is cut after it.
	grpcConnectionTimeout = 10 * time.Second
	// grpcMaxRecvMsgSize is the largest request message (gRPC's default, made explicit:
	// admin requests and forwarded-read requests are a few KiB).
	grpcMaxRecvMsgSize = 4 << 20
	// grpcMaxHeaderListSize bounds a call's metadata (gRPC's own default is 16 MiB).
	grpcMaxHeaderListSize = 64 << 10
	// grpcMaxConcurrentStreams is the most calls one connection carries at once. The
	// connection between two file servers carries every read one forwards to the
	// other: beyond this, new calls wait for a free stream rather than fail.
	grpcMaxConcurrentStreams = 1024
	// grpcWriteBuffer is what the server gathers before a write to the socket: a
	// forwarded read streams 1 MiB chunks, which gRPC's 32 KiB default writes in 32
	// syscalls each. Shared, the buffer is taken from a pool per flush, not held per
	// connection. BenchmarkCachedRead/forwarded/whole on a loaded machine (load 14-17):
	// 68-106 ms of CPU per 64 MiB read, against 86-105 ms with the default; within the
	// noise, but never worse.
	grpcWriteBuffer = 512 << 10
	// Keepalive: a client may ping every 15s, with or without calls in flight (more
	// often is a protocol violation that closes its connection); the server pings a
	// connection quiet for a minute and closes it when no answer comes in 20s, and
	// closes one that has carried no call for 5 minutes (a peer's pooled connection
	// is made again on its next call).
	grpcKeepaliveMinTime     = 15 * time.Second
	grpcKeepaliveTime        = time.Minute
	grpcKeepaliveTimeout     = 20 * time.Second
	grpcKeepaliveMaxConnIdle = 5 * time.Minute
	metricsWriteTimeout      = 30 * time.Second // a scrape's answer is written within this
	certReloadInterval       = time.Second      // how often the TLS files are read for a change
)

// transport is how a node's listeners and its calls to other nodes are secured and
// bounded: TLS from --tls-*-file (reloaded when the files change), and the limits every
// server keeps against slow and flooding clients.
type transport struct {
	cfg    Config
	log    *slog.Logger
	limits httplimit.Limits
	pair   *tlsfiles.KeyPair  // nil without TLS
	cas    *tlsfiles.CABundle // --tls-client-ca-file; nil without it
	server *tls.Config        // of every listener; nil without TLS
	client *tls.Config        // of calls to other nodes, but for RootCAs (clientTLS); nil without TLS
}

func newTransport(cfg Config, log *slog.Logger) (*transport, error) {
	t := &transport{cfg: cfg, log: log, limits: httplimit.Limits{MaxConnections: cfg.MaxConnections}.WithDefaults()}
	if cfg.TLSCertFile == "" {
		return t, nil
	}
	pair, err := tlsfiles.LoadKeyPair(cfg.TLSCertFile, cfg.TLSKeyFile, log)
	if err != nil {
		return nil, &flagenv.FlagError{Flag: "tls-cert-file", Err: err}
	}
	var cas *tlsfiles.CABundle // nil: the system's roots verify other nodes
	if cfg.TLSClientCAFile != "" {
		if cas, err = tlsfiles.LoadCABundle(cfg.TLSClientCAFile, log); err != nil {
			return nil, &flagenv.FlagError{Flag: "tls-client-ca-file", Err: err}
		}
	}
	t.pair, t.cas = pair, cas
	t.server = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate}
	if cas != nil {
		// Clients need no certificate (tokens say who they are); one they present
		// must verify, and then the handshake carries it (a peer's, say) to the node.
		// Verified by the callback, against the bundle in force, not by ClientCAs,
		// which a listener's copy of this config would keep from the node's start.
		t.server.ClientAuth = tls.RequestClientCert
		t.server.VerifyConnection = cas.VerifyClientCertificate
	}
	t.client = &tls.Config{MinVersion: tls.VersionTLS12, GetClientCertificate: pair.GetClientCertificate}
	leaf := pair.Certificate().Leaf
	attrs := append(tlsfiles.Describe(leaf), "client_ca_file", cfg.TLSClientCAFile)
	if cas != nil {
		attrs = append(attrs, "client_cas", cas.Subjects())
	}
	log.Info("TLS on every listener and on calls to other nodes", attrs...)
	// Soon: within a week, or a third of its lifetime for a short-lived one (a
	// certificate renewed on time never is, cert-manager renews with a third left).
	if left := time.Until(leaf.NotAfter); left < min(7*24*time.Hour, leaf.NotAfter.Sub(leaf.NotBefore)/3) {
		log.Warn("the TLS certificate expires soon (or has expired); it is reloaded when its files change",
			"expires", leaf.NotAfter, "cert_file", cfg.TLSCertFile)
	}
	return t, nil
}

// ServerTLS is the TLS config of every listener; nil without TLS.
func (t *transport) ServerTLS() *tls.Config {
	if t.server == nil {
		return nil
	}
	return t.server.Clone()
}

// grpcServerOptions secure and bound the gRPC server.
func (t *transport) grpcServerOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.ConnectionTimeout(grpcConnectionTimeout),
		grpc.MaxRecvMsgSize(grpcMaxRecvMsgSize),
		grpc.MaxHeaderListSize(grpcMaxHeaderListSize),
		grpc.MaxConcurrentStreams(grpcMaxConcurrentStreams),
		grpc.WriteBufferSize(grpcWriteBuffer), // released after each flush: gRPC shares write buffers by default
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: grpcKeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: grpcKeepaliveMaxConnIdle, Time: grpcKeepaliveTime, Timeout: grpcKeepaliveTimeout,
		}),
	}
	if t.server != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(t.server)))
	}
	return opts
}

// listener caps lis at --max-connections open connections (the gRPC listener).
func (t *transport) listener(lis net.Listener) net.Listener {
	return httplimit.LimitListener(lis, t.limits.MaxConnections)
}

// httpServer is an HTTP server of h with the node's limits (the metrics endpoint): GET
// and HEAD only, never reading a body.
func (t *transport) httpServer(h http.Handler, log *slog.Logger) *http.Server {
	return t.limits.Server(httplimit.ReadOnly(h), t.ServerTLS(), metricsWriteTimeout, log)
}

// serveHTTP serves srv (made by httpServer) on lis: capped, over TLS when configured.
func (t *transport) serveHTTP(srv *http.Server, lis net.Listener) error {
	return t.limits.Serve(srv, lis)
}

// watch runs what keeps the transport current (certificate and CA reloads) until ctx
// ends.
func (t *transport) watch(ctx context.Context, g *errgroup.Group) {
	if t.pair != nil {
		g.Go(func() error { t.pair.Watch(ctx, certReloadInterval); return nil })
	}
	if t.cas != nil {
		g.Go(func() error { t.cas.Watch(ctx, certReloadInterval); return nil })
	}
}

// clientTLS is the TLS config of a new connection to another node: verified against the
// CA bundle in force.
func (t *transport) clientTLS() *tls.Config {
	c := t.client.Clone()
	if t.cas != nil {
		c.RootCAs = t.cas.Pool()
	}
	return c
}

// catalogTLS is the TLS config of the console's reads through a file server's catalog
// and S3 API, as a client verified as calls to other nodes are (with TLS only).
func (t *transport) catalogTLS() *tls.Config {
	c := t.clientTLS()
	c.GetClientCertificate = nil // the catalog needs a principal's token, not a certificate
	return c
}

// dialOptions secure calls to other nodes: TLS verified against --tls-client-ca-file
// (or the system's roots), presenting this node's certificate; plaintext without TLS.
func (t *transport) dialOptions() []grpc.DialOption {
	if t.client == nil {
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(reloadingTLS{t.clientTLS})}
}

// reloadingTLS is gRPC's TLS credentials made anew for every handshake from config:
// credentials.NewTLS copies its config once, so connections to peers made after a CA
// bundle reload would otherwise verify against the bundle of the node's start. Each
// handshake is crypto/tls's own, with gRPC's ALPN and server name checks; connections
// already made keep the roots they were verified with.
type reloadingTLS struct{ config func() *tls.Config }

func (r reloadingTLS) now() credentials.TransportCredentials { return credentials.NewTLS(r.config()) }

func (r reloadingTLS) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return r.now().ClientHandshake(ctx, authority, conn)
}

func (r reloadingTLS) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return r.now().ServerHandshake(conn)
}

func (r reloadingTLS) Info() credentials.ProtocolInfo { return r.now().Info() }

// Clone is r: it holds nothing a caller could change.
func (r reloadingTLS) Clone() credentials.TransportCredentials { return r }

// OverrideServerName is refused (deprecated in gRPC, which no longer calls it; the
// authority of a dial names the server).
func (r reloadingTLS) OverrideServerName(string) error {
	return errors.New("node: the server name of peer credentials is the dialed authority")
}
