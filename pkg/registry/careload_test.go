package registry_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
)

// TestCAFileReloads: a running client's --schema-registry-ca-file is rotated from CA A
// to CA B while the registry's certificate moves from A to B: calls fail while the file
// still holds A, succeed once it holds B (no new client), and a broken file keeps B.
func TestCAFileReloads(t *testing.T) {
	a, b := tlsfilestest.NewCA(t, "registry ca a"), tlsfilestest.NewCA(t, "registry ca b")
	ofA, ofB := a.Issue(t, "registry", tlsfilestest.Loopback...), b.Issue(t, "registry", tlsfilestest.Loopback...)
	reg := srfake.NewRegistry()
	seed(reg)
	srv := tlsfilestest.NewServer(t, reg.Handler(), ofA.TLS)

	caFile := writePEM(t, a.Cert)
	logs := &messages{seen: make(chan string, 64)}
	c, err := registry.New(registry.Config{URL: srv.URL, CAFile: caFile}, registry.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { c.WatchCA(ctx, 10*time.Millisecond) })

	latest := func() error {
		_, err := c.Latest(t.Context(), "orders-value") // Latest always asks the registry
		return err
	}
	if err := latest(); err != nil {
		t.Fatalf("A's certificate with the file of A: %v", err)
	}
	srv.Rotate(ofB.TLS) // the registry rotates first
	err = latest()
	wantKind(t, err, apierr.Unavailable, "is unreachable", "is --schema-registry-ca-file the CA that signed its certificate?")

	tlsfilestest.WriteFile(t, caFile, b.PEM)
	logs.wait(t, "TLS CA bundle reloaded")
	if err := latest(); err != nil {
		t.Fatalf("B's certificate once the file holds B: %v", err)
	}
	srv.Rotate(ofA.TLS) // B replaced A: A's certificate no longer verifies
	err = latest()
	wantKind(t, err, apierr.Unavailable, "is unreachable")
	srv.Rotate(ofB.TLS)

	tlsfilestest.WriteFile(t, caFile, []byte("not PEM"))
	logs.wait(t, "TLS CA bundle not reloaded; the one in force stays")
	srv.CloseClientConnections() // a new handshake, with the bundle in force
	if err := latest(); err != nil {
		t.Fatalf("B's certificate after a broken file: %v", err)
	}
}

// messages is a slog.Handler that hands each message to the test.
type messages struct{ seen chan string }

func (m *messages) Enabled(context.Context, slog.Level) bool { return true }
func (m *messages) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m *messages) WithGroup(string) slog.Handler            { return m }
func (m *messages) Handle(_ context.Context, r slog.Record) error {
	select {
	case m.seen <- r.Message:
	default:
	}
	return nil
}

// wait waits for msg to be logged.
func (m *messages) wait(t *testing.T, msg string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-m.seen:
			if strings.Contains(got, msg) {
				return
			}
		case <-timeout:
			t.Fatalf("%q was not logged within 10s", msg)
		}
	}
}
