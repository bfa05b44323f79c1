package node_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
)

// tlsNode is a node of role run in process with TLS files, and what a test dials it with.
type tlsNode struct {
	n     *node.Node
	files tlsfilestest.Files
	logs  *logBuffer
	stop  func()
}

// logBuffer keeps a node's log lines, so a test can wait for one.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
	w  io.Writer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	return l.w.Write(p)
}

func (l *logBuffer) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

func startTLSNode(t *testing.T, url, id string, files tlsfilestest.Files, extra ...string) *tlsNode {
	t.Helper()
	args := append([]string{"--node-id", id, "--postgres-url", url, "--kafka-brokers", "127.0.0.1:9",
		"--grpc-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--lease-ttl", "1500ms",
		"--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--tls-client-ca-file", files.ClientCAs}, extra...)
	cfg, err := parse(t, lease.RoleWriter, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{w: t.Output()}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test_node", id)
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var stopped bool
	tn := &tlsNode{n: n, files: files, logs: logs, stop: func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Run: %v", id, err)
		}
	}}
	t.Cleanup(tn.stop)
	return tn
}

// dial is a gRPC client of addr with TLS config cfg (nil: plaintext).
func dial(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func status1(conn *grpc.ClientConn, node string) (*adminv1.GetStatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return adminv1.NewAdminServiceClient(conn).GetStatus(ctx, &adminv1.GetStatusRequest{Node: node})
}

// serverSerial is the serial of the certificate a new TLS connection to addr is shown.
func serverSerial(t *testing.T, addr string, roots *x509.CertPool) *big.Int {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestTLSListenersAndPeers: with the TLS flags, gRPC and metrics speak TLS only: a client
// without a certificate is served, one whose certificate another CA signed is refused,
// plaintext is refused; a forwarded admin call goes over TLS and presents the node's
// own certificate; a rotated certificate is served to new connections without a restart.
func TestTLSListenersAndPeers(t *testing.T) {
	_, url := pgtest.DB(t)
	noLeaks(t)
	ca := tlsfilestest.NewCA(t, "cluster ca")
	files1, cert1 := ca.Write(t, t.TempDir(), "n1", tlsfilestest.Loopback...)
	files2, _ := ca.Write(t, t.TempDir(), "n2", tlsfilestest.Loopback...)
	n1 := startTLSNode(t, url, "n1", files1)
	n2 := startTLSNode(t, url, "n2", files2)
	addr1 := n1.n.GRPCAddr().String()
	roots := ca.Pool()

	conn := dial(t, addr1, &tls.Config{RootCAs: roots})
	waitServing(t, conn)
	waitServing(t, dial(t, n2.n.GRPCAddr().String(), &tls.Config{RootCAs: roots}))

	// A client without a certificate; one with a certificate of the cluster's CA.
	if st, err := status1(conn, ""); err != nil || st.GetNodeId() != "n1" {
		t.Fatalf("GetStatus over TLS, no client certificate: %v %v", st, err)
	}
	client := ca.Issue(t, "ops")
	if _, err := status1(dial(t, addr1, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client.TLS}}), ""); err != nil {
		t.Errorf("GetStatus with a client certificate of the CA: %v", err)
	}
	// Refused: a certificate another CA signed; plaintext; a client that does not know the CA.
	other := tlsfilestest.NewCA(t, "another ca").Issue(t, "intruder")
	for name, cfg := range map[string]*tls.Config{
		// GetClientCertificate, because a Go client leaves out of the handshake a
		// certificate in Certificates that the server's accepted CAs did not sign.
		"a client certificate of another CA": {RootCAs: roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &other.TLS, nil
		}},
		"plaintext":                        nil,
		"a client that distrusts the node": {},
	} {
		_, err := status1(dial(t, addr1, cfg), "")
		t.Logf("%s: %v", name, err)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want Unavailable", name, err)
		}
	}

	// The server's bounds: a request over 4 MiB, metadata over 64 KiB.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := adminv1.NewAdminServiceClient(conn).CreateTable(ctx, &adminv1.CreateTableRequest{Name: strings.Repeat("x", 5<<20)})
	t.Logf("a 5 MiB request: %v", err)
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 5 MiB request: %v, want ResourceExhausted", err)
	}
	_, err = adminv1.NewAdminServiceClient(conn).GetStatus(metadata.AppendToOutgoingContext(ctx, "x-big", strings.Repeat("x", 100<<10)), &adminv1.GetStatusRequest{})
	t.Logf("100 KiB of metadata: %v", err)
	if err == nil {
		t.Errorf("100 KiB of metadata was taken")
	}
	if _, err := status1(conn, ""); err != nil {
		t.Errorf("after the refused calls: %v", err)
	}

	// A forwarded call: n1 dials n2 over TLS (verified against the CA) and presents n1's
	// certificate.
	st := await.For(t, 10*time.Second, "n1 to forward GetStatus to n2", func() (*adminv1.GetStatusResponse, bool) {
		st, err := status1(conn, "n2")
		return st, err == nil && st.GetNodeId() == "n2"
	})
	t.Logf("forwarded over TLS: %s", st.GetNodeId())

	// Metrics over HTTPS only, GET only.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: roots}}}
	metrics := "https://" + n1.n.MetricsAddr().String() + "/metrics"
	resp, err := hc.Get(metrics)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "mink_lease_rounds_total") {
		t.Errorf("metrics over https: %d", resp.StatusCode)
	}
	// (A small body: a large one is cut off unread, which httplimit's tests show.)
	resp, err = hc.Post(metrics, "text/plain", strings.NewReader("x=1"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}
	resp, err = (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + n1.n.MetricsAddr().String() + "/metrics")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plaintext metrics answered 200")
		}
	}

	// Rotation: new files; new connections to every listener see the new certificate,
	// the connection made before keeps working.
	if got := serverSerial(t, addr1, roots); got.Cmp(cert1.Leaf.SerialNumber) != 0 {
		t.Fatalf("serial %v, want %v", got, cert1.Leaf.SerialNumber)
	}
	next := ca.Issue(t, "n1", tlsfilestest.Loopback...)
	files1.Replace(t, next)
	rotated := time.Now()
	await.For(t, 10*time.Second, "the gRPC listener to serve the rotated certificate", func() (*big.Int, bool) {
		s := serverSerial(t, addr1, roots)
		return s, s.Cmp(next.Leaf.SerialNumber) == 0
	})
	t.Logf("rotated certificate served %v after the files changed", time.Since(rotated).Round(time.Millisecond))
	if s := serverSerial(t, n1.n.MetricsAddr().String(), roots); s.Cmp(next.Leaf.SerialNumber) != 0 {
		t.Errorf("metrics listener serves serial %v after rotation, want %v", s, next.Leaf.SerialNumber)
	}
	if _, err := status1(conn, "n2"); err != nil {
		t.Errorf("after rotation, the connection made before: %v", err)
	}
	// A broken rotation (a key that is not the certificate's) leaves the last good pair.
	tlsfilestest.WriteFile(t, files1.Key, ca.Issue(t, "n1").KeyPEM)
	await.For(t, 10*time.Second, "n1 to refuse the broken pair", func() (bool, bool) {
		ok := n1.logs.has("TLS certificate not reloaded; the one in force stays")
		return ok, ok
	})
	if s := serverSerial(t, addr1, roots); s.Cmp(next.Leaf.SerialNumber) != 0 {
		t.Errorf("after a broken rotation the serial is %v, want the last good %v", s, next.Leaf.SerialNumber)
	}
}

// TestTLSPeerCertificateIsVerified: a node whose client CA did not sign its peer's
// certificate refuses the peer's forwarded calls, so a peer does present its own
// certificate; clients without one are still served.
func TestTLSPeerCertificateIsVerified(t *testing.T) {
	_, url := pgtest.DB(t)
	noLeaks(t)
	ca := tlsfilestest.NewCA(t, "cluster ca")
	files1, _ := ca.Write(t, t.TempDir(), "n1", tlsfilestest.Loopback...)
	files2, _ := ca.Write(t, t.TempDir(), "n2", tlsfilestest.Loopback...)
	// n2 trusts only another CA's client certificates (and dials with it: n2 calls nobody here).
	other := tlsfilestest.NewCA(t, "another ca")
	tlsfilestest.WriteFile(t, files2.ClientCAs, other.PEM)
	n1 := startTLSNode(t, url, "n1", files1)
	n2 := startTLSNode(t, url, "n2", files2)
	roots := ca.Pool()
	conn := dial(t, n1.n.GRPCAddr().String(), &tls.Config{RootCAs: roots})
	waitServing(t, conn)
	waitServing(t, dial(t, n2.n.GRPCAddr().String(), &tls.Config{RootCAs: roots}))
	awaitMembers(t, conn, 2)
	_, err := status1(conn, "n2")
	t.Logf("n1 → n2 with n1's certificate unknown to n2: %v", err)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("forwarded call with a certificate n2 does not trust: %v, want Unavailable", err)
	}
}

// awaitMembers waits for the node of conn to list n members.
func awaitMembers(t *testing.T, conn *grpc.ClientConn, n int) {
	t.Helper()
	await.For(t, 10*time.Second, fmt.Sprintf("%d members", n), func() (int, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := adminv1.NewAdminServiceClient(conn).ListNodes(ctx, &adminv1.ListNodesRequest{})
		return len(l.GetNodes()), err == nil && len(l.GetNodes()) == n
	})
}

// noLeaks checks, after every cleanup the test registers later (its nodes' stops, its
// connections' closes), that nothing the test started outlives it.
func noLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// TestTLSFlagsAreChecked: bad TLS files stop a node at start, naming the flag.
func TestTLSFlagsAreChecked(t *testing.T) {
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	files, _ := ca.Write(t, dir, "n", "localhost")
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not PEM"), 0o600)
	ok := []string{"--postgres-url", "postgres://u@h/db", "--kafka-brokers", "k:1"}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--tls-cert-file", files.Cert}, []string{"--tls-cert-file", "--tls-key-file", "together"}},
		{[]string{"--tls-cert-file", files.Cert, "--tls-key-file", garbage}, []string{"--tls-cert-file", "garbage.pem"}},
		{[]string{"--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--tls-client-ca-file", garbage}, []string{"--tls-client-ca-file", "no PEM certificate"}},
		{[]string{"--tls-client-ca-file", files.ClientCAs}, []string{"--tls-client-ca-file", "needs --tls-cert-file"}},
		{[]string{"--max-connections", "-1"}, []string{"--max-connections"}},
	}
	for _, c := range cases {
		_, err := parse(t, lease.RoleFileServer, append(c.args, ok...), nil)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v does not mention %q", c.args, err, w)
			}
		}
	}
	cfg, err := parse(t, lease.RoleFileServer, ok, map[string]string{"MINK_MAX_CONNECTIONS": "100",
		"MINK_TLS_CERT_FILE": files.Cert, "MINK_TLS_KEY_FILE": files.Key, "MINK_TLS_CLIENT_CA_FILE": files.ClientCAs})
	if err != nil || cfg.MaxConnections != 100 || cfg.TLSClientCAFile != files.ClientCAs {
		t.Errorf("env twins: %+v %v", cfg, err)
	}
	if cfg, _ := parse(t, lease.RoleWriter, ok, nil); cfg.MaxConnections != 4096 {
		t.Errorf("--max-connections default %d, want 4096", cfg.MaxConnections)
	}
}

// TestTLSCARotationWithoutRestart: the cluster's CA rotated from A to B as an operator
// does it (the bundle A+B, certificates of B, the bundle B) while n1 runs: a client
// certificate of B is accepted within the reload interval of the bundle naming it, one of
// A refused once A has left it; n1's new connections to peers verify against the bundle
// in force (a peer with a certificate of B is reached once B is in it, one of A no longer
// once A has left), while the connection made before keeps working; a broken bundle
// keeps the last good one.
func TestTLSCARotationWithoutRestart(t *testing.T) {
	_, url := pgtest.DB(t)
	noLeaks(t)
	a, b := tlsfilestest.NewCA(t, "ca a"), tlsfilestest.NewCA(t, "ca b")
	both := append(append([]byte(nil), a.PEM...), b.PEM...)
	files1, _ := a.Write(t, t.TempDir(), "n1", tlsfilestest.Loopback...)
	files2, _ := a.Write(t, t.TempDir(), "n2", tlsfilestest.Loopback...)
	tlsfilestest.WriteFile(t, files2.ClientCAs, both) // n2 trusts n1 throughout
	n1 := startTLSNode(t, url, "n1", files1)
	startTLSNode(t, url, "n2", files2)
	addr1 := n1.n.GRPCAddr().String()
	roots := x509.NewCertPool() // the client's: n1's certificate stays one of A
	roots.AddCert(a.Cert)
	roots.AddCert(b.Cert)
	conn := dial(t, addr1, &tls.Config{RootCAs: roots})
	waitServing(t, conn)
	forward := func(to string) error { _, err := status1(conn, to); return err }
	await.For(t, 10*time.Second, "n1 to forward GetStatus to n2", func() (error, bool) {
		err := forward("n2")
		return err, err == nil
	})

	// with is a call to n1 on a new connection, presenting is.
	with := func(is tlsfilestest.Issued) error {
		_, err := status1(dial(t, addr1, &tls.Config{RootCAs: roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &is.TLS, nil
		}}), "")
		return err
	}
	ofA, ofB := a.Issue(t, "ops a"), b.Issue(t, "ops b")
	if err := with(ofA); err != nil {
		t.Fatalf("a client certificate of A, the bundle A: %v", err)
	}
	if err := with(ofB); status.Code(err) != codes.Unavailable {
		t.Fatalf("a client certificate of B, the bundle A: %v, want Unavailable", err)
	}

	// Step 1: the bundle A+B. B's certificates are accepted, A's still.
	tlsfilestest.WriteFile(t, files1.ClientCAs, both)
	changed := time.Now()
	await.For(t, 10*time.Second, "n1 to accept a client certificate of B", func() (error, bool) {
		err := with(ofB)
		return err, err == nil
	})
	t.Logf("a client certificate of B accepted %v after the bundle changed", time.Since(changed).Round(time.Millisecond))
	if err := with(ofA); err != nil {
		t.Errorf("a client certificate of A, the bundle A+B: %v", err)
	}
	// Step 2: a node with a certificate of B; n1 dials it anew and verifies it with A+B.
	files3, _ := b.Write(t, t.TempDir(), "n3", tlsfilestest.Loopback...)
	tlsfilestest.WriteFile(t, files3.ClientCAs, both)
	startTLSNode(t, url, "n3", files3)
	await.For(t, 15*time.Second, "n1 to forward GetStatus to n3 (a certificate of B)", func() (error, bool) {
		err := forward("n3")
		return err, err == nil
	})

	// Step 3: the bundle B. A's certificates are refused: a client's, and a new peer's.
	tlsfilestest.WriteFile(t, files1.ClientCAs, b.PEM)
	changed = time.Now()
	await.For(t, 10*time.Second, "n1 to refuse a client certificate of A", func() (error, bool) {
		err := with(ofA)
		return err, status.Code(err) == codes.Unavailable
	})
	t.Logf("a client certificate of A refused %v after A left the bundle", time.Since(changed).Round(time.Millisecond))
	if err := with(ofB); err != nil {
		t.Errorf("a client certificate of B, the bundle B: %v", err)
	}
	if err := forward("n3"); err != nil {
		t.Errorf("n1 → n3 after A left n1's bundle: %v", err)
	}
	if err := forward("n2"); err != nil {
		t.Errorf("n1 → n2 on the connection made before A left n1's bundle: %v", err)
	}
	files4, _ := a.Write(t, t.TempDir(), "n4", tlsfilestest.Loopback...)
	tlsfilestest.WriteFile(t, files4.ClientCAs, both)
	n4 := startTLSNode(t, url, "n4", files4)
	waitServing(t, dial(t, n4.n.GRPCAddr().String(), &tls.Config{RootCAs: roots}))
	awaitMembers(t, conn, 4)
	err := forward("n4")
	t.Logf("n1 → n4 (a certificate of A) with the bundle B: %v", err)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("n1 → a new peer with a certificate of A, the bundle B: %v, want Unavailable", err)
	}

	// A broken bundle: logged, and B stays.
	tlsfilestest.WriteFile(t, files1.ClientCAs, []byte("not PEM"))
	await.For(t, 10*time.Second, "n1 to refuse the broken bundle", func() (bool, bool) {
		ok := n1.logs.has("TLS CA bundle not reloaded; the one in force stays")
		return ok, ok
	})
	if err := with(ofB); err != nil {
		t.Errorf("a client certificate of B after a broken bundle: %v", err)
	}
	if err := with(ofA); status.Code(err) != codes.Unavailable {
		t.Errorf("a client certificate of A after a broken bundle: %v, want Unavailable", err)
	}
}
