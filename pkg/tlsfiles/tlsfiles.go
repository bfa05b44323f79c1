// Package tlsfiles is the TLS material a node reads from files: its certificate and key,
// re-read when the files change (cert-manager and Kubernetes Secret volumes replace them
// in place), and the CA bundles it verifies others with.
package tlsfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
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
	lastErr string // the last failed reload's error, logged once
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
	p.lastErr = ""
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
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-tick.C:
		}
		changed, err := p.Reload()
		switch {
		case err != nil:
			p.mu.Lock()
			repeat := p.lastErr == err.Error()
			p.lastErr = err.Error()
			p.mu.Unlock()
			if !repeat {
				p.log.Error("TLS certificate not reloaded; the one in force stays", "error", err,
					"expires", p.Certificate().Leaf.NotAfter)
			}
		case changed:
			p.log.Info("TLS certificate reloaded", Describe(p.Certificate().Leaf)...)
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

// LoadCAs reads a PEM bundle of CA certificates; it must hold at least one.
func LoadCAs(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New(file + ": no PEM certificate in it")
	}
	return pool, nil
}
