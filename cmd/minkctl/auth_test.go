package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/auth"
)

func noEnv(string) (string, bool) { return "", false }

// auth init writes a config every node accepts, prints no secret, keeps an existing file
// (so a one-shot may run it on every start) and replaces it only with --force.
func TestAuthInit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth.json")
	var out, errOut bytes.Buffer
	if code := run([]string{"auth", "init", "--out", path}, &out, &errOut, noEnv); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	raw, _ := os.ReadFile(path)
	f, err := auth.ParseFile(raw)
	if err != nil {
		t.Fatalf("the nodes would refuse it: %v\n%s", err, raw)
	}
	if len(f.Principals) != 2 || f.Principals[0].ID != "admin" || f.Principals[0].Role != auth.RoleAdmin ||
		f.Principals[1].ID != "reader" || f.Principals[1].Role != auth.RoleReader || strings.Join(f.Principals[1].Tables, ",") != "default.*" {
		t.Errorf("principals %+v", f.Principals)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	for _, s := range []string{f.ClusterSecret, f.Principals[0].Secret, f.Principals[1].Secret} {
		if strings.Contains(out.String(), s) {
			t.Errorf("auth init printed a secret: %s", out.String())
		}
	}

	// auth secret prints one secret, for MINK_TOKEN=$(minkctl auth secret): the admin's by
	// default, the file named by MINK_AUTH_CONFIG as on a node.
	env := func(k string) (string, bool) {
		if k == "MINK_AUTH_CONFIG" {
			return path, true
		}
		return "", false
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"auth", "secret"}, f.Principals[0].Secret + "\n"},
		{[]string{"auth", "secret", "--principal", "reader"}, f.Principals[1].Secret + "\n"},
	} {
		out.Reset()
		if code := run(tc.args, &out, &errOut, env); code != exitOK || out.String() != tc.want {
			t.Errorf("%v: exit %d, printed %q", tc.args, code, out.String())
		}
	}
	if code := run([]string{"auth", "secret", "--principal", "nobody"}, &out, &errOut, env); code != exitRPC {
		t.Errorf("auth secret of an unknown principal: exit %d", code)
	}
	if code := run([]string{"auth", "secret"}, &out, &errOut, noEnv); code != exitUsage {
		t.Errorf("auth secret without a file: exit %d", code)
	}

	out.Reset()
	if code := run([]string{"auth", "init", "--out", path}, &out, &errOut, noEnv); code != exitOK || !strings.Contains(out.String(), "kept") {
		t.Errorf("second run: exit %d, %q", code, out.String())
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, raw) {
		t.Error("second run changed the file")
	}
	if code := run([]string{"auth", "init", "--out", path, "--force", "--reader-tables", "default.*,sales.orders"}, &out, &errOut, noEnv); code != exitOK {
		t.Fatalf("--force: exit %d: %s", code, errOut.String())
	}
	forced, _ := os.ReadFile(path)
	g, err := auth.ParseFile(forced)
	if err != nil || g.ClusterSecret == f.ClusterSecret || g.Principals[1].Secret == f.Principals[1].Secret ||
		strings.Join(g.Principals[1].Tables, ",") != "default.*,sales.orders" {
		t.Errorf("--force: %v\n%s", err, forced)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"cluster_secret": "short"}`), 0o600)
	errOut.Reset()
	if code := run([]string{"auth", "init", "--out", bad}, &out, &errOut, noEnv); code != exitRPC || !strings.Contains(errOut.String(), "cluster_secret") {
		t.Errorf("a file the nodes refuse: exit %d, %q", code, errOut.String())
	}
	for _, args := range [][]string{{"auth", "init"}, {"auth", "rotate", "--out", path}, {"auth", "init", "--out", filepath.Join(dir, "x.json"), "--reader-tables", "nodot"}} {
		if code := run(args, &out, &errOut, noEnv); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// auth init --metrics-token-out writes a token the nodes' --metrics-token-file takes,
// readable by Prometheus (another user), prints it nowhere, and keeps it on later runs.
func TestAuthInitMetricsToken(t *testing.T) {
	dir := t.TempDir()
	path, tokPath := filepath.Join(dir, "auth.json"), filepath.Join(dir, "token")
	var out, errOut bytes.Buffer
	for run1 := range 2 {
		out.Reset()
		if code := run([]string{"auth", "init", "--out", path, "--metrics-token-out", tokPath}, &out, &errOut, noEnv); code != exitOK {
			t.Fatalf("run %d: exit %d: %s", run1, code, errOut.String())
		}
	}
	raw, _ := os.ReadFile(tokPath)
	tok := strings.TrimSpace(string(raw))
	if len(tok) < auth.MinStaticToken || strings.Contains(out.String(), tok) || !strings.Contains(out.String(), "kept") {
		t.Errorf("token of %d bytes; output %q", len(tok), out.String())
	}
	if st, _ := os.Stat(tokPath); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	if code := run([]string{"auth", "init", "--out", path, "--metrics-token-out", tokPath, "--force"}, &out, &errOut, noEnv); code != exitOK {
		t.Fatal(errOut.String())
	}
	if again, _ := os.ReadFile(tokPath); bytes.Equal(again, raw) {
		t.Error("--force kept the old metrics token")
	}
}
