package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
)

// authSeen records the authorization metadata of every call a server got.
type authSeen struct {
	mu   sync.Mutex
	seen []string
}

func (a *authSeen) add(v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, v)
}

func (a *authSeen) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return "(no call)"
	}
	return a.seen[len(a.seen)-1]
}

// startTLSFake serves f over TLS with a certificate for names, recording each call's
// authorization header, and returns its address.
func startTLSFake(t *testing.T, f *fakeAdmin, cert tls.Certificate, seen *authSeen) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			seen.add(strings.Join(md.Get("authorization"), ","))
			return h(ctx, req)
		}))
	adminv1.RegisterAdminServiceServer(gs, f)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// TestDialTLSAndToken: --tls-ca-file, --tls, --tls-server-name and --token (and their
// MINK_* twins) as a node that serves TLS sees them; every refusal names its cause.
func TestDialTLSAndToken(t *testing.T) {
	ca := tlsfilestest.NewCA(t, "cluster ca")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	tlsfilestest.WriteFile(t, caFile, ca.PEM)
	var seen authSeen
	addr := startTLSFake(t, &fakeAdmin{table: jsonTable()}, ca.Issue(t, "node", tlsfilestest.Loopback...).TLS, &seen)
	// A node whose certificate names it only by a DNS name it is not dialed by.
	named := startTLSFake(t, &fakeAdmin{table: jsonTable()}, ca.Issue(t, "node", "mink.internal").TLS, &seen)

	minkctl := func(env map[string]string, args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		return stdout.String(), stderr.String(), code
	}

	out, errOut, code := minkctl(nil, "--addr", addr, "--tls-ca-file", caFile, "--token", "tok-123", "table", "list")
	if code != 0 || !strings.Contains(out, "events") {
		t.Fatalf("table list over TLS: exit %d: %s%s", code, out, errOut)
	}
	if got := seen.last(); got != "Bearer tok-123" {
		t.Errorf("authorization %q, want Bearer tok-123", got)
	}
	// The twins, and --tls (a flag without a value) before the command.
	_, errOut, code = minkctl(map[string]string{"MINK_TLS_CA_FILE": caFile, "MINK_TOKEN": " tok-456\n", "MINK_ADDR": addr}, "--tls", "table", "list")
	if code != 0 || seen.last() != "Bearer tok-456" {
		t.Errorf("MINK_TLS_CA_FILE, MINK_TOKEN: exit %d %s; authorization %q", code, errOut, seen.last())
	}
	// No token: no authorization header.
	if _, errOut, code = minkctl(nil, "--addr", addr, "--tls-ca-file", caFile, "table", "list"); code != 0 || seen.last() != "" {
		t.Errorf("without --token: exit %d %s; authorization %q", code, errOut, seen.last())
	}
	// --tls-server-name: the name the certificate carries, when the address is not it.
	if _, errOut, code = minkctl(nil, "--addr", named, "--tls-ca-file", caFile, "--tls-server-name", "mink.internal", "table", "list"); code != 0 {
		t.Errorf("--tls-server-name mink.internal: exit %d %s", code, errOut)
	}

	calls := len(seen.seen)
	fails := []struct {
		env  map[string]string
		args []string
		code int
		want []string
	}{
		{nil, []string{"--addr", addr, "table", "list"}, exitRPC, []string{"Unavailable"}},                                                          // plaintext to TLS
		{nil, []string{"--addr", addr, "--tls", "table", "list"}, exitRPC, []string{"Unavailable", "certificate"}},                                  // the system roots do not know the CA
		{nil, []string{"--addr", named, "--tls-ca-file", caFile, "table", "list"}, exitRPC, []string{"Unavailable", "certificate"}},                 // the name does not match
		{nil, []string{"--addr", addr, "--tls-ca-file", filepath.Join(dir, "nope.crt"), "table", "list"}, exitUsage, []string{"--tls-ca-file"}},     // no such file
		{map[string]string{"MINK_TLS": "maybe"}, []string{"--addr", addr, "table", "list"}, exitUsage, []string{"--tls", "MINK_TLS"}},               // a bad twin
		{nil, []string{"--addr", addr, "--tls-ca-file", caFile, "--token", "two words", "table", "list"}, exitUsage, []string{"--token", "spaces"}}, // not a header value
	}
	for _, f := range fails {
		_, errOut, code := minkctl(f.env, f.args...)
		if code != f.code {
			t.Errorf("minkctl %v %s: exit %d (%s), want %d", f.env, strings.Join(f.args, " "), code, errOut, f.code)
		}
		for _, w := range f.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("minkctl %v %s: %q does not mention %q", f.env, strings.Join(f.args, " "), errOut, w)
			}
		}
		if strings.Contains(errOut, "two words") {
			t.Errorf("the token is in the error: %q", errOut)
		}
	}
	if len(seen.seen) != calls {
		t.Errorf("%d refused commands reached the server", len(seen.seen)-calls)
	}
}

// TestScanTLSAndToken: scan sends --token to the REST catalog and verifies it with
// --tls-ca-file; without the CA it is refused.
func TestScanTLSAndToken(t *testing.T) {
	ctx := context.Background()
	hc, dir := localCatalog(t)
	tbl, err := hc.CreateTable(ctx, []string{"default", "empty"}, iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true}))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	if err != nil {
		t.Fatal(err)
	}
	var seen authSeen
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Header.Get("Authorization"))
		w.Write([]byte(`{"defaults":{},"overrides":{}}`))
	})
	mux.HandleFunc("GET /v1/namespaces/default/tables/empty", func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Header.Get("Authorization"))
		json.NewEncoder(w).Encode(map[string]any{"metadata-location": tbl.MetadataLocation(), "metadata": json.RawMessage(meta), "config": map[string]string{}})
	})
	srv := httptest.NewUnstartedServer(mux)
	ca := tlsfilestest.NewCA(t, "ca")
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "catalog", tlsfilestest.Loopback...).TLS}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(dir, "ca.crt")
	tlsfilestest.WriteFile(t, caFile, ca.PEM)

	var stdout, stderr bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	if code := run([]string{"scan", "default.empty", "--catalog", srv.URL, "--tls-ca-file", caFile, "--token", "cat-tok"}, &stdout, &stderr, noEnv); code != 0 {
		t.Fatalf("scan over https: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "(0 rows)") {
		t.Errorf("scan: %q", stdout.String())
	}
	seen.mu.Lock()
	for _, h := range seen.seen {
		if h != "Bearer cat-tok" {
			t.Errorf("the catalog got authorization %q, want Bearer cat-tok", h)
		}
	}
	if len(seen.seen) < 2 {
		t.Errorf("the catalog got %d requests", len(seen.seen))
	}
	seen.mu.Unlock()
	stderr.Reset()
	if code := run([]string{"scan", "default.empty", "--catalog", srv.URL}, &stdout, &stderr, noEnv); code != exitRPC || !strings.Contains(stderr.String(), "certificate") {
		t.Errorf("scan without the CA: exit %d: %s", code, stderr.String())
	}
}
