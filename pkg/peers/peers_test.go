package peers

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
)

func TestOneConnPerAddrAndClose(t *testing.T) {
	p := New()
	a1, err := p.Conn("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := p.Conn("127.0.0.1:1")
	b, _ := p.Conn("127.0.0.1:2")
	if a1 != a2 || a1 == b || p.Len() != 2 {
		t.Fatalf("want one connection per address, got %d", p.Len())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Conn("127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Conn after Close: %v", err)
	}
}

// TestTransportCredentialsReplacePlaintext: a pool given TLS credentials reaches a TLS
// peer (presenting its own certificate, which the peer verifies); the plaintext default
// does not.
func TestTransportCredentialsReplacePlaintext(t *testing.T) {
	ca := tlsfilestest.NewCA(t, "cluster ca")
	server := ca.Issue(t, "node-b", tlsfilestest.Loopback...)
	client := ca.Issue(t, "node-a", tlsfilestest.Loopback...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var peerCN atomic.Value
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool(),
	})), grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if p, ok := peer.FromContext(ctx); ok {
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
				peerCN.Store(ti.State.PeerCertificates[0].Subject.CommonName)
			}
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(lis)
	defer gs.Stop()

	check := func(p *Pool) error {
		defer p.Close()
		conn, err := p.Conn(lis.Addr().String())
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(New(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS},
	})))); err != nil {
		t.Fatalf("TLS pool: %v", err)
	}
	if cn, _ := peerCN.Load().(string); cn != "node-a" {
		t.Errorf("the peer saw client certificate %q, want node-a", cn)
	}
	if err := check(New()); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext pool to a TLS peer: %v, want Unavailable", err)
	}
}
