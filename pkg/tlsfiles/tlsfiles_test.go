package tlsfiles_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/tlsfiles"
	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
)

func TestKeyPairReloadsAndKeepsTheLastGoodPair(t *testing.T) {
	ca := tlsfilestest.NewCA(t, "ca")
	files, first := ca.Write(t, t.TempDir(), "node-1", tlsfilestest.Loopback...)
	p, err := tlsfiles.LoadKeyPair(files.Cert, files.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		c, err := p.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber.String()
	}
	if got := serial(); got != first.Leaf.SerialNumber.String() {
		t.Fatalf("serial %s, want %s", got, first.Leaf.SerialNumber)
	}
	if changed, err := p.Reload(); changed || err != nil {
		t.Errorf("reload of unchanged files: changed %v, %v", changed, err)
	}

	second := ca.Issue(t, "node-1", tlsfilestest.Loopback...)
	files.Replace(t, second)
	if changed, err := p.Reload(); !changed || err != nil {
		t.Fatalf("reload after rotation: changed %v, %v", changed, err)
	}
	if got := serial(); got != second.Leaf.SerialNumber.String() {
		t.Errorf("after rotation serial %s, want %s", got, second.Leaf.SerialNumber)
	}
	cc, _ := p.GetClientCertificate(&tls.CertificateRequestInfo{})
	if cc.Leaf.SerialNumber.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Errorf("client certificate is not the rotated one")
	}

	// Half a rotation: the new certificate with the old key. The pair in force stays.
	third := ca.Issue(t, "node-1", tlsfilestest.Loopback...)
	tlsfilestest.WriteFile(t, files.Cert, third.CertPEM)
	if changed, err := p.Reload(); changed || err == nil || !strings.Contains(err.Error(), "tls.key") {
		t.Errorf("reload of a mismatched pair: changed %v, %v", changed, err)
	}
	// A broken file and a missing one: the same.
	tlsfilestest.WriteFile(t, files.Key, []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n"))
	if _, err := p.Reload(); err == nil {
		t.Error("reload of a broken key: no error")
	}
	os.Remove(files.Key)
	if _, err := p.Reload(); err == nil {
		t.Error("reload of a missing key: no error")
	}
	if got := serial(); got != second.Leaf.SerialNumber.String() {
		t.Errorf("after failed reloads serial %s, want the last good %s", got, second.Leaf.SerialNumber)
	}
	// The rest of the rotation lands.
	tlsfilestest.WriteFile(t, files.Key, third.KeyPEM)
	if changed, err := p.Reload(); !changed || err != nil {
		t.Fatalf("reload of the completed rotation: changed %v, %v", changed, err)
	}
	if got := serial(); got != third.Leaf.SerialNumber.String() {
		t.Errorf("serial %s, want %s", got, third.Leaf.SerialNumber)
	}
}

func TestWatchPicksUpARotation(t *testing.T) {
	ca := tlsfilestest.NewCA(t, "ca")
	files, _ := ca.Write(t, t.TempDir(), "node-1", "localhost")
	p, err := tlsfiles.LoadKeyPair(files.Cert, files.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.Watch(ctx, 20*time.Millisecond) })
	defer func() { cancel(); wg.Wait() }()

	next := ca.Issue(t, "node-1", "localhost")
	files.Replace(t, next)
	start := time.Now()
	await.True(t, 5*time.Second, "the watch to load the rotated pair", func() bool {
		return p.Certificate().Leaf.SerialNumber.Cmp(next.Leaf.SerialNumber) == 0
	})
	t.Logf("rotation seen after %v", time.Since(start).Round(time.Millisecond))
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	files, _ := ca.Write(t, dir, "n", "localhost")
	if _, err := tlsfiles.LoadKeyPair(files.Cert, filepath.Join(dir, "nope.key"), nil); err == nil || !strings.Contains(err.Error(), "nope.key") {
		t.Errorf("missing key: %v", err)
	}
	if _, err := tlsfiles.LoadKeyPair(files.ClientCAs, files.Key, nil); err == nil || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("a key that is not the certificate's: %v", err)
	}
	if _, err := tlsfiles.LoadCAs(files.ClientCAs); err != nil {
		t.Errorf("CA bundle: %v", err)
	}
	if _, err := tlsfiles.LoadCAs(files.Key); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a key as the CA bundle: %v", err)
	}
}

// verifies reports whether pool verifies is as a client certificate.
func verifies(pool *x509.CertPool, is tlsfilestest.Issued) bool {
	_, err := is.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

func TestCABundleReloadsAndKeepsTheLastGoodBundle(t *testing.T) {
	a, b := tlsfilestest.NewCA(t, "ca a"), tlsfilestest.NewCA(t, "ca b")
	files, _ := a.Write(t, t.TempDir(), "n", "localhost")
	ofA, ofB := a.Issue(t, "client a"), b.Issue(t, "client b")
	cas, err := tlsfiles.LoadCABundle(files.ClientCAs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !verifies(cas.Pool(), ofA) || verifies(cas.Pool(), ofB) {
		t.Fatal("the bundle of A does not verify A's certificate alone")
	}
	if changed, err := cas.Reload(); changed || err != nil {
		t.Errorf("reload of an unchanged file: changed %v, %v", changed, err)
	}
	// A rotation's steps: A and B, then B alone.
	tlsfilestest.WriteFile(t, files.ClientCAs, append(append([]byte(nil), a.PEM...), b.PEM...))
	if changed, err := cas.Reload(); !changed || err != nil {
		t.Fatalf("reload of A+B: changed %v, %v", changed, err)
	}
	if !verifies(cas.Pool(), ofA) || !verifies(cas.Pool(), ofB) {
		t.Error("the bundle of A and B does not verify both")
	}
	tlsfilestest.WriteFile(t, files.ClientCAs, b.PEM)
	if changed, err := cas.Reload(); !changed || err != nil {
		t.Fatalf("reload of B: changed %v, %v", changed, err)
	}
	if verifies(cas.Pool(), ofA) || !verifies(cas.Pool(), ofB) {
		t.Error("the bundle of B verifies A's certificate, or not B's")
	}

	// Broken bundles: each is refused, naming what is wrong, and B stays.
	corrupt := []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
	for name, c := range map[string]struct {
		pem  []byte
		want string
	}{
		"no PEM":                          {[]byte("not PEM"), "no PEM certificate"},
		"a key only":                      {ofB.KeyPEM, "no PEM certificate"},
		"A, then B cut short":             {append(append([]byte(nil), a.PEM...), b.PEM[:len(b.PEM)/2]...), "does not end"},
		"A, then a certificate not X.509": {append(append([]byte(nil), a.PEM...), corrupt...), "certificate 2"},
	} {
		tlsfilestest.WriteFile(t, files.ClientCAs, c.pem)
		changed, err := cas.Reload()
		t.Logf("%s: %v", name, err)
		if changed || err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "ca.crt") {
			t.Errorf("%s: changed %v, %v; want an error naming ca.crt and %q", name, changed, err, c.want)
		}
	}
	os.Remove(files.ClientCAs)
	if _, err := cas.Reload(); err == nil {
		t.Error("reload of a missing file: no error")
	}
	if verifies(cas.Pool(), ofA) || !verifies(cas.Pool(), ofB) {
		t.Error("after failed reloads the bundle is not the last good one (B)")
	}
}

// handshake connects to a TLS server at addr that trusts roots, presenting cert (nil:
// none), and reads what the server writes after its handshake: the server's refusal of
// the certificate is the error (in TLS 1.3 the client's own handshake ends first).
func handshake(addr string, roots *x509.CertPool, cert *tls.Certificate) error {
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost",
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert == nil {
				return &tls.Certificate{}, nil
			}
			return cert, nil
		}})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadFull(c, make([]byte, 2))
	return err
}

// TestCABundleVerifiesClientsAgainstTheBundleInForce: real handshakes with a server whose
// VerifyConnection is the bundle's, watched: a client certificate of B is refused while
// the file holds A, accepted within the reload interval once the file holds B, when A's
// is refused; a broken file keeps B, and a client without a certificate is served
// throughout.
func TestCABundleVerifiesClientsAgainstTheBundleInForce(t *testing.T) {
	a, b := tlsfilestest.NewCA(t, "ca a"), tlsfilestest.NewCA(t, "ca b")
	files, server := a.Write(t, t.TempDir(), "server", tlsfilestest.Loopback...)
	var logs strings.Builder
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	cas, err := tlsfiles.LoadCABundle(files.ClientCAs, log)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{server.TLS},
		ClientAuth: tls.RequestClientCert, VerifyConnection: cas.VerifyClientCertificate})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); lis.Close(); wg.Wait() }()
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					c.Write([]byte("ok"))
				}
			})
		}
	})
	interval := 20 * time.Millisecond
	wg.Go(func() { cas.Watch(ctx, interval) })

	addr, roots := lis.Addr().String(), a.Pool()
	ofA, ofB := a.Issue(t, "client a"), b.Issue(t, "client b")
	if err := handshake(addr, roots, nil); err != nil {
		t.Fatalf("no client certificate: %v", err)
	}
	if err := handshake(addr, roots, &ofA.TLS); err != nil {
		t.Fatalf("a certificate of A with the bundle of A: %v", err)
	}
	if err := handshake(addr, roots, &ofB.TLS); err == nil {
		t.Fatal("a certificate of B with the bundle of A: accepted")
	}

	tlsfilestest.WriteFile(t, files.ClientCAs, b.PEM)
	start := time.Now()
	await.For(t, 5*time.Second, "a certificate of B to be accepted after the bundle became B", func() (error, bool) {
		err := handshake(addr, roots, &ofB.TLS)
		return err, err == nil
	})
	t.Logf("B accepted %v after the file changed (interval %v)", time.Since(start).Round(time.Millisecond), interval)
	err = handshake(addr, roots, &ofA.TLS)
	t.Logf("a certificate of A with the bundle of B: %v", err)
	if err == nil {
		t.Error("a certificate of A, no longer in the bundle: accepted")
	}

	tlsfilestest.WriteFile(t, files.ClientCAs, []byte("not PEM"))
	await.True(t, 5*time.Second, "the broken bundle to be logged", func() bool {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Contains(logs.String(), "TLS CA bundle not reloaded; the one in force stays")
	})
	if err := handshake(addr, roots, &ofB.TLS); err != nil {
		t.Errorf("a certificate of B after a broken bundle: %v", err)
	}
	if err := handshake(addr, roots, &ofA.TLS); err == nil {
		t.Error("a certificate of A after a broken bundle: accepted")
	}
	if err := handshake(addr, roots, nil); err != nil {
		t.Errorf("no client certificate after the rotation: %v", err)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "TLS CA bundle reloaded") {
		t.Errorf("the reload to B was not logged:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
