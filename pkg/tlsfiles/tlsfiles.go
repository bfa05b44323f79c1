// Package tlsfiles is the TLS material a node reads from files: its certificate and key,
// re-read when the files change (cert-manager and Kubernetes Secret volumes replace them
// in place), and the CA bundles it verifies others with.
package tlsfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// KeyPair is a certificate and its private key read from two PEM files. Its
// GetCertificate and GetClientCertificate hand every new TLS connection the pair read
// last; Reload re-reads the files, and keeps the pair in force when the new files do not
// make a valid pair (a half-written rotation, a key that does not match).
type KeyPair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	certPEM []byte // the bytes cert was made of, to tell a change
	keyPEM  []byte
}

// LoadKeyPair reads certFile and keyFile; they must make a valid pair now.
func LoadKeyPair(certFile, keyFile string, log *slog.Logger) (*KeyPair, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &KeyPair{certFile: certFile, keyFile: keyFile, log: log}
	certPEM, keyPEM, cert, err := read(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	p.cert, p.certPEM, p.keyPEM = cert, certPEM, keyPEM
	return p, nil
}

// read reads and parses a pair, with its leaf certificate.
func read(certFile, keyFile string) (certPEM, keyPEM []byte, _ *tls.Certificate, _ error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err = os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
	}
	// X509KeyPair fills Leaf since Go 1.23; parse it when it did not.
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", certFile, err)
		}
	}
	return certPEM, keyPEM, &cert, nil
}

// Certificate is the pair in force.
func (p *KeyPair) Certificate() *tls.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cert
}

// GetCertificate is tls.Config.GetCertificate: the pair in force, for a server.
func (p *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate: the pair in force, which a
// node presents when it calls another.
func (p *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// Reload re-reads the files. It reports whether a new pair is in force; with an error
// the one before stays.
func (p *KeyPair) Reload() (changed bool, err error) {
	certPEM, keyPEM, cert, err := read(p.certFile, p.keyFile)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		return false, err
	}
	if bytes.Equal(certPEM, p.certPEM) && bytes.Equal(keyPEM, p.keyPEM) {
		return false, nil
	}
	p.cert, p.certPEM, p.keyPEM = cert, certPEM, keyPEM
	return true, nil
}

// Watch reloads the pair every interval and on SIGHUP until ctx ends, logging each new
// pair, and each new failure once (the pair in force stays until the files make a
// valid one again).
func (p *KeyPair) Watch(ctx context.Context, interval time.Duration) {
	watch(ctx, interval, p.Reload, func(err error) {
		p.log.Error("TLS certificate not reloaded; the one in force stays", "error", err,
			"expires", p.Certificate().Leaf.NotAfter)
	}, func() {
		p.log.Info("TLS certificate reloaded", Describe(p.Certificate().Leaf)...)
	})
}

// watch calls reload every interval and on SIGHUP until ctx ends: reloaded after each
// change, failed after each failure unlike the one before (a file that stays broken is
// logged once, not every second).
func watch(ctx context.Context, interval time.Duration, reload func() (bool, error), failed func(error), reloaded func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-tick.C:
		}
		changed, err := reload()
		if err != nil {
			if err.Error() != lastErr {
				failed(err)
			}
			lastErr = err.Error()
			continue
		}
		lastErr = ""
		if changed {
			reloaded()
		}
	}
}

// Describe is a certificate's log attributes: subject, serial, names and expiry.
func Describe(c *x509.Certificate) []any {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return []any{"subject", c.Subject.String(), "serial", c.SerialNumber.Text(16), "names", names, "expires", c.NotAfter}
}

// LoadCAs reads a PEM bundle of CA certificates; it must hold at least one, and every
// certificate in it must parse.
func LoadCAs(file string) (*x509.CertPool, error) {
	_, pool, _, err := readCAs(file)
	return pool, err
}

// readCAs reads and parses a CA bundle. A certificate that does not parse fails the
// whole bundle (x509.CertPool.AppendCertsFromPEM would skip it): a bundle cut short
// mid-rotation must not quietly drop the CA that verifies half the cluster.
func readCAs(file string) (_ []byte, _ *x509.CertPool, subjects []string, _ error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, nil, err
	}
	pool := x509.NewCertPool()
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			if bytes.Contains(rest, []byte("-----BEGIN")) {
				return nil, nil, nil, fmt.Errorf("%s: a PEM block that does not end (a truncated file?)", file)
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: certificate %d: %w", file, len(subjects)+1, err)
		}
		pool.AddCert(c)
		subjects = append(subjects, c.Subject.String())
	}
	if len(subjects) == 0 {
		return nil, nil, nil, errors.New(file + ": no PEM certificate in it")
	}
	return b, pool, subjects, nil
}

// CABundle is a CA bundle read from a PEM file and re-read when it changes, so that an
// operator rotates the cluster's CA (add the new CA to the bundle, roll the
// certificates, remove the old CA) without restarting a node. Reload keeps the bundle in
// force when the new file is not a valid one.
type CABundle struct {
	file string
	log  *slog.Logger

	mu       sync.Mutex
	pool     *x509.CertPool
	pem      []byte // the bytes pool was made of, to tell a change
	subjects []string
}

// LoadCABundle reads file; it must be a valid bundle now (as LoadCAs checks).
func LoadCABundle(file string, log *slog.Logger) (*CABundle, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, pool, subjects, err := readCAs(file)
	if err != nil {
		return nil, err
	}
	return &CABundle{file: file, log: log, pool: pool, pem: b, subjects: subjects}, nil
}

// Pool is the bundle in force. It is never modified: a reload makes a new one.
func (c *CABundle) Pool() *x509.CertPool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pool
}

// Reload re-reads the file. It reports whether a new bundle is in force; with an error
// the one before stays.
func (c *CABundle) Reload() (changed bool, err error) {
	b, pool, subjects, err := readCAs(c.file)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || bytes.Equal(b, c.pem) {
		return false, err
	}
	c.pool, c.pem, c.subjects = pool, b, subjects
	return true, nil
}

// Watch reloads the bundle every interval and on SIGHUP until ctx ends, logging each new
// bundle, and each new failure once.
func (c *CABundle) Watch(ctx context.Context, interval time.Duration) {
	watch(ctx, interval, c.Reload, func(err error) {
		c.log.Error("TLS CA bundle not reloaded; the one in force stays", "error", err, "ca_file", c.file)
	}, func() {
		c.log.Info("TLS CA bundle reloaded", "ca_file", c.file, "cas", c.Subjects())
	})
}

// Subjects are the subjects of the bundle in force's CAs, for logs.
func (c *CABundle) Subjects() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subjects
}

// VerifyClientCertificate is tls.Config.VerifyConnection for a server that asks for
// client certificates (tls.RequestClientCert) and verifies one that is given against the
// bundle in force: a server's tls.Config.ClientCAs is fixed once a listener has it (and
// GetConfigForClient cannot rebuild a config without losing what net/http and gRPC set
// in their copies, ALPN). It verifies as crypto/tls does for tls.VerifyClientCertIfGiven:
// the leaf chains to the bundle through the intermediates the client sent, at the
// current time, for client authentication. The chains are not in
// tls.ConnectionState.VerifiedChains (nothing of Mink reads them).
func (c *CABundle) VerifyClientCertificate(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return nil
	}
	opts := x509.VerifyOptions{
		Roots:         c.Pool(),
		CurrentTime:   time.Now(),
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, ic := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(ic)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
	}
	return nil
}

// Transport is base (cloned) verifying servers against the bundle in force: an HTTP
// client's RootCAs are fixed once its transport has them, so a reload that brings a new
// bundle makes a new transport for the requests after it (and closes the old one's idle
// connections). Verification stays crypto/tls's own, host names and IP addresses
// included. A connection made before a reload keeps the bundle it was verified with.
func (c *CABundle) Transport(base *http.Transport) *Transport {
	return &Transport{cas: c, base: base.Clone()}
}

// Transport is an http.RoundTripper of CABundle.Transport.
type Transport struct {
	cas  *CABundle
	base *http.Transport

	mu   sync.Mutex
	pool *x509.CertPool // the bundle tr verifies with
	tr   *http.Transport
}

// current is the transport of the bundle in force, made anew after a reload.
func (t *Transport) current() *http.Transport {
	pool := t.cas.Pool()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tr != nil && t.pool == pool {
		return t.tr
	}
	tr := t.base.Clone()
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.TLSClientConfig.RootCAs = pool
	if t.tr != nil {
		t.tr.CloseIdleConnections()
	}
	t.tr, t.pool = tr, pool
	return tr
}

// RoundTrip is http.RoundTripper's.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.current().RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of the transport in force
// (http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	tr := t.tr
	t.mu.Unlock()
	if tr != nil {
		tr.CloseIdleConnections()
	}
}
