package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

// minkctl runs the built CLI and returns its stdout, stderr and exit code.
func minkctl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "minkctl"), args...)
	cmd.Env = cleanEnv(env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestMinkctl: every command against running nodes, in both output formats.
func TestMinkctl(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	c := newCluster(t)
	c.start("indexer", "idx-a", ttl)
	c.start("writer", "wr-1", ttl)
	a := c.addr("idx-a")
	c.addr("wr-1")
	table := c.addTable("clicks", 2)
	waitFor(t, 20*time.Second, "idx-a to hold both partitions and wr-1 the writer lease", func() (shares, bool) {
		s := c.shares(table)
		return s, s.partitions["idx-a"] == 2 && s.writer == "wr-1"
	})

	ok := func(env []string, args ...string) string {
		t.Helper()
		out, errOut, code := minkctl(t, env, args...)
		if code != 0 {
			t.Fatalf("minkctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}

	// The cluster at a glance: every node (asked through idx-a) and every table's lag.
	out := ok(nil, "--addr", a, "status", "--cluster")
	for _, w := range []string{"idx-a", "wr-1", "partition_leases=2", "writer_leases=1", "default.clicks", "TOTAL", "HIGH WATERMARK"} {
		if !strings.Contains(out, w) {
			t.Errorf("status --cluster does not show %q:\n%s", w, out)
		}
	}
	jsonLines := strings.Split(strings.TrimSpace(ok(nil, "--addr", a, "-o", "json", "status", "--cluster")), "\n")
	if len(jsonLines) != 3 { // two nodes, one table
		t.Errorf("status --cluster -o json: %d lines, want 3:\n%s", len(jsonLines), strings.Join(jsonLines, "\n"))
	}

	out = ok(nil, "--addr", a, "status")
	for _, w := range []string{"NODE", "idx-a", "indexer", "partition_leases=2", "default.clicks"} {
		if !strings.Contains(out, w) {
			t.Errorf("status does not show %q:\n%s", w, out)
		}
	}

	// --node after the command, -o json: wr-1's own status, forwarded by idx-a.
	var st adminv1.GetStatusResponse
	if err := protojson.Unmarshal([]byte(ok(nil, "status", "--addr", a, "--node", "wr-1", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.GetNodeId() != "wr-1" || len(st.GetLeases()) != 1 {
		t.Errorf("status of wr-1 through idx-a: %v", &st)
	}

	// MINK_ADDR instead of --addr.
	out = ok([]string{"MINK_ADDR=" + a}, "nodes")
	if !strings.Contains(out, "idx-a") || !strings.Contains(out, "wr-1") || !strings.Contains(out, "DRAINING") {
		t.Errorf("nodes:\n%s", out)
	}
	var leases adminv1.ListLeasesResponse
	if err := protojson.Unmarshal([]byte(ok(nil, "--addr", a, "-o", "json", "leases")), &leases); err != nil {
		t.Fatal(err)
	}
	if len(leases.GetLeases()) != 3 {
		t.Errorf("leases -o json: %v", &leases)
	}
	out = ok(nil, "--addr", a, "leases", "--table", "1")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 || !strings.Contains(lines[0], "HOLDER") {
		t.Errorf("leases --table 1:\n%s", out)
	}

	// Drain idx-a through wr-1; its partitions are free when drain returns.
	out = ok([]string{"MINK_ADDR=" + c.addr("wr-1")}, "drain", "idx-a")
	if !strings.Contains(out, "idx-a is draining and holds no lease") {
		t.Errorf("drain: %s", out)
	}
	if s := c.shares(table); s.partitions["idx-a"] != 0 {
		t.Errorf("after drain: %v", s)
	}
	ok(nil, "--addr", a, "undrain", "idx-a")
	waitFor(t, 10*time.Second, "idx-a to take its partitions back", func() (shares, bool) {
		s := c.shares(table)
		return s, s.partitions["idx-a"] == 2
	})

	fails := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--addr", a, "table", "create", "nosuchtopic", "--column", "id:long:required"}, 1, "does not exist"},
		{[]string{"--addr", a, "table", "describe", "nosuchtable"}, 1, "NotFound"},
		{[]string{"--addr", a, "leases", "--table", "-1"}, 1, "table_id"},
		{[]string{"--addr", a, "status", "--node", "nope"}, 1, "NotFound"},
		{[]string{"--addr", a, "drain"}, 2, "NODE"},
		{[]string{"--addr", a, "frobnicate"}, 2, "unknown command"},
		{[]string{"--addr", a, "-o", "yaml", "status"}, 2, "-o"},
		{[]string{"--addr", a, "table", "create", "events", "--column", "id"}, 2, "--column"},
	}
	for _, f := range fails {
		_, errOut, code := minkctl(t, nil, f.args...)
		if code != f.code || !strings.Contains(errOut, f.want) {
			t.Errorf("minkctl %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(f.args, " "), code, errOut, f.code, f.want)
		}
	}
}

// TestFlagValidation: a bad value stops a role at start, naming the flag, and the
// variable when it came from the environment. No Postgres is needed to get there.
func TestFlagValidation(t *testing.T) {
	good := []string{"--postgres-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "127.0.0.1:9"}
	cases := []struct {
		bin  string
		args []string
		env  []string
		want []string
	}{
		{"mink-indexer", append([]string{"--lease-ttl", "10ms"}, good...), nil, []string{"--lease-ttl", "10ms"}},
		{"mink-writer", append([]string{"--lease-ttl", "soon"}, good...), nil, []string{"lease-ttl", "soon"}},
		{"mink-fileserver", good, []string{"MINK_LEASE_TTL=soon"}, []string{"--lease-ttl", "MINK_LEASE_TTL"}},
		{"mink-indexer", []string{"--postgres-url", "postgres://u@h:port/db", "--kafka-brokers", "k:9"}, nil, []string{"--postgres-url"}},
		{"mink-writer", []string{"--kafka-brokers", "k:9"}, []string{"MINK_POSTGRES_URL=::nonsense"}, []string{"--postgres-url", "MINK_POSTGRES_URL"}},
		{"mink-indexer", append([]string{"--max-partitions", "-2"}, good...), nil, []string{"--max-partitions"}},
		{"mink-fileserver", good, []string{"MINK_CACHE_BYTES=lots"}, []string{"--cache-bytes", "MINK_CACHE_BYTES"}},
		{"mink-writer", []string{"--postgres-url", "postgres://u@h/db"}, nil, []string{"--kafka-brokers"}},
	}
	for _, tc := range cases {
		cmd := exec.Command(filepath.Join(binDir, tc.bin), tc.args...)
		cmd.Env = cleanEnv(tc.env...)
		out, err := cmd.CombinedOutput()
		ee, isExit := err.(*exec.ExitError)
		if !isExit || ee.ExitCode() != 2 {
			t.Errorf("%s %v %v: %v, want exit 2; output %s", tc.bin, tc.env, tc.args, err, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s %v %v: %q does not mention %s", tc.bin, tc.env, tc.args, out, w)
			}
		}
	}
	out, err := exec.Command(filepath.Join(binDir, "mink-fileserver"), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-cache-bytes") || !strings.Contains(string(out), "MINK_") {
		t.Errorf("--help: %v %s", err, out)
	}
}
