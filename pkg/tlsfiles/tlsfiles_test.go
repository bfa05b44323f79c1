package tlsfiles_test

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	for p.Certificate().Leaf.SerialNumber.Cmp(next.Leaf.SerialNumber) != 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the watch did not load the rotated pair")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
