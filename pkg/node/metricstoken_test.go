package node_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node/nodetest"
	"github.com/minkhq/mink/pkg/pgtest"
)

// TestMetricsToken: with --metrics-token-file, /metrics answers 401 without a token or
// with a wrong one (a reader's secret included), 200 with the file's; a new token written
// to the file applies without a restart and the old one stops; as Prometheus sends it
// (Authorization: Bearer). The flags are checked at start.
func TestMetricsToken(t *testing.T) {
	_, url := pgtest.DB(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	file := filepath.Join(t.TempDir(), "token")
	const first, second = "metrics-token-0123456789abcdef", "metrics-token-rotated-0123456789"
	if err := os.WriteFile(file, []byte(first+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--node-id", "m1", "--postgres-url", url, "--kafka-brokers", "127.0.0.1:9", "--grpc-addr", "127.0.0.1:0",
		"--lease-ttl", "1500ms"}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"short token", append([]string{"--metrics-addr", "127.0.0.1:0", "--metrics-token", "CHANGE-ME"}, base...), nil, []string{"--metrics-token", "16 bytes"}},
		{"short token from env", append([]string{"--metrics-addr", "127.0.0.1:0"}, base...), map[string]string{"MINK_METRICS_TOKEN": "CHANGE-ME"}, []string{"--metrics-token", "MINK_METRICS_TOKEN"}},
		{"both", append([]string{"--metrics-addr", "127.0.0.1:0", "--metrics-token", first, "--metrics-token-file", file}, base...), nil, []string{"exclude each other"}},
		{"no metrics listener", append([]string{"--metrics-token", first}, base...), nil, []string{"needs --metrics-addr"}},
		{"no such file", append([]string{"--metrics-addr", "127.0.0.1:0", "--metrics-token-file", file + ".nope"}, base...), nil, []string{"--metrics-token-file", "no such file"}},
	} {
		_, err := parse(t, lease.RoleIndexer, c.args, c.env)
		nodetest.Refused(t, err, c.want...)
		if err != nil && strings.Contains(err.Error(), "CHANGE-ME") {
			t.Errorf("%s: the error quotes the token: %v", c.name, err)
		}
	}
	if _, err := parse(t, lease.RoleIndexer, append([]string{"--metrics-addr", "127.0.0.1:0"}, base...), map[string]string{"MINK_METRICS_TOKEN": first}); err != nil {
		t.Errorf("MINK_METRICS_TOKEN: %v", err)
	}

	cfg, err := parse(t, lease.RoleIndexer, append([]string{"--metrics-addr", "127.0.0.1:0", "--metrics-token-file", file}, base...), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, cancel, done := startNode(t, cfg)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	scrape := func(auth string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+n.MetricsAddr().String()+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate") + " " + string(b)
	}
	await.For(t, 10*time.Second, "/metrics to answer", func() (int, bool) { code, _ := scrape(""); return code, code != 0 })
	for what, h := range map[string]string{
		"no token": "", "a wrong token": "Bearer " + second, "the token as basic": "Basic " + first, "the token's start": "Bearer " + first[:16],
	} {
		if code, body := scrape(h); code != 401 || !strings.HasPrefix(body, "Bearer ") || strings.Contains(body, "mink_") {
			t.Errorf("/metrics with %s: %d %.200s", what, code, body)
		}
	}
	if code, body := scrape("Bearer " + first); code != 200 || !strings.Contains(body, "mink_lease_rounds_total") {
		t.Errorf("/metrics with the token: %d %.200s", code, body)
	}
	if code, _ := scrape("bearer " + first); code != 200 {
		t.Errorf("/metrics with the scheme in lower case: %d", code)
	}

	// Rotation: the file's new token applies within a second or so; the old one stops.
	if err := os.WriteFile(file, []byte(second), 0o600); err != nil {
		t.Fatal(err)
	}
	await.For(t, 10*time.Second, "the new token to open /metrics", func() (int, bool) { code, _ := scrape("Bearer " + second); return code, code == 200 })
	if code, _ := scrape("Bearer " + first); code != 401 {
		t.Errorf("/metrics with the old token after the rotation: %d", code)
	}
	// A file that breaks never opens the door.
	if err := os.WriteFile(file, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	await.For(t, 10*time.Second, "a broken token file to close /metrics", func() (int, bool) { code, _ := scrape("Bearer short"); return code, code == 503 })
}
