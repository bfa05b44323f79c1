// Package tlsfilestest makes the certificates tests need, in the test, never committed: a
// CA, and certificates it signs for loopback servers and for clients, written to PEM
// files as cert-manager would.
package tlsfilestest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

var serial atomic.Int64

// CA is a certificate authority of one test.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	PEM  []byte // the CA certificate, PEM
}

// NewCA makes a self-signed CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"mink tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// Pool is a cert pool of the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issued is a certificate the CA signed, with its key, as PEM and as a tls.Certificate.
type Issued struct {
	CertPEM, KeyPEM []byte
	TLS             tls.Certificate
	Leaf            *x509.Certificate
}

// Issue signs a certificate for cn, usable by servers and clients alike (as a node's
// is): hosts are its DNS names and IP addresses; none makes a client-only certificate.
func (ca *CA) Issue(tb testing.TB, cn string, hosts ...string) Issued {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(90 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	out := Issued{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Leaf:    leaf,
	}
	if out.TLS, err = tls.X509KeyPair(out.CertPEM, out.KeyPEM); err != nil {
		tb.Fatal(err)
	}
	return out
}

// Loopback is the hosts of a server on this machine: localhost, 127.0.0.1 and ::1.
var Loopback = []string{"localhost", "127.0.0.1", "::1"}

// Files are where a node's TLS files are.
type Files struct {
	Dir                  string
	Cert, Key, ClientCAs string // tls.crt, tls.key, ca.crt
}

// Write writes a node's files into dir as a Kubernetes TLS Secret holds them: tls.crt
// and tls.key of an Issue for cn and hosts, and ca.crt of ca.
func (ca *CA) Write(tb testing.TB, dir, cn string, hosts ...string) (Files, Issued) {
	tb.Helper()
	f := Files{Dir: dir, Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"), ClientCAs: filepath.Join(dir, "ca.crt")}
	is := ca.Issue(tb, cn, hosts...)
	f.Replace(tb, is)
	WriteFile(tb, f.ClientCAs, ca.PEM)
	return f, is
}

// Replace puts a new pair in place of the old, each file replaced at once (written
// beside it, then renamed), as a rotation does.
func (f Files) Replace(tb testing.TB, is Issued) {
	tb.Helper()
	WriteFile(tb, f.Cert, is.CertPEM)
	WriteFile(tb, f.Key, is.KeyPEM)
}

// WriteFile writes b to path at once: a reader sees the old bytes or the new.
func WriteFile(tb testing.TB, path string, b []byte) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// Server is an HTTPS server of a test whose certificate rotates: each handshake gets
// the certificate in force, whatever the client's SNI (none for 127.0.0.1, so a client
// verifies the IP address).
type Server struct {
	*httptest.Server
	cert atomic.Pointer[tls.Certificate]
}

// NewServer serves h over TLS on 127.0.0.1 with cert until the test ends. Failed
// handshakes are not logged: the tests that rotate mean them.
func NewServer(tb testing.TB, h http.Handler, cert tls.Certificate) *Server {
	tb.Helper()
	s := &Server{Server: httptest.NewUnstartedServer(h)}
	s.cert.Store(&cert)
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{*s.cert.Load()}, NextProtos: []string{"http/1.1"}}, nil
	}}
	s.StartTLS()
	tb.Cleanup(s.Close)
	return s
}

// Rotate serves cert from now on and closes the connections open, which would keep the
// certificate of their handshake.
func (s *Server) Rotate(cert tls.Certificate) {
	s.cert.Store(&cert)
	s.CloseClientConnections()
}
