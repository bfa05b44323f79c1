package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/test/cluster"
)

// TestClusterSharesLeasesAndForwards: the three roles register; two indexers split a
// 6-partition table 3/3 by the seed's rules, the writer holds the writer lease, the file
// server holds none; grpcurl (reflection, no proto files) reaches any node through any
// other; SIGTERM of an indexer frees its leases at once and the other indexer takes them
// long before they could have expired.
func TestClusterSharesLeasesAndForwards(t *testing.T) {
	const ttl = 3 * time.Second
	c := newCluster(t, ttl)
	ia := c.Start("indexer", "idx-a")
	c.Start("indexer", "idx-b")
	c.Start("writer", "wr-1")
	c.Start("fileserver", "fs-1")
	for _, id := range []string{"idx-a", "idx-b", "wr-1", "fs-1"} {
		c.Member(id).Addr()
	}
	table := addTable(c, "events", 6)

	s := waitFor(t, 20*time.Second, "indexers to hold 3 partitions each and wr-1 the writer lease", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-a"] == 3 && s.Partitions["idx-b"] == 3 && s.Writer == "wr-1"
	})
	t.Logf("shares: %v", s)

	// Every node's own status, asked of the file server, which forwards.
	fs := c.Member("fs-1").Admin()
	ctx := context.Background()
	want := map[string][2]int{"idx-a": {3, 0}, "idx-b": {3, 0}, "wr-1": {0, 1}, "fs-1": {0, 0}} // partition, writer
	for id, w := range want {
		st, err := fs.GetStatus(ctx, &adminv1.GetStatusRequest{Node: id})
		if err != nil {
			t.Fatalf("GetStatus(%s) via fs-1: %v", id, err)
		}
		var got [2]int
		for _, l := range st.GetLeases() {
			if l.GetKind() == adminv1.LeaseKind_LEASE_KIND_WRITER {
				got[1]++
			} else {
				got[0]++
			}
		}
		if st.GetNodeId() != id || got != w || !st.GetActing() {
			t.Errorf("status of %s: node %q, leases (partition, writer) %v, want %v; acting %v",
				id, st.GetNodeId(), got, w, st.GetActing())
		}
	}
	leases, err := c.Member("idx-a").Admin().ListLeases(ctx, &adminv1.ListLeasesRequest{TableId: table})
	if err != nil || len(leases.GetLeases()) != 7 {
		t.Fatalf("ListLeases: %v %v", leases, err)
	}

	t.Run("grpcurl", func(t *testing.T) { grpcurlChecks(t, c) })
	t.Run("metrics", func(t *testing.T) { metricsCheck(t, c, "idx-a") })

	// SIGTERM: idx-a releases its leases and leaves at once; idx-b takes them in its next
	// round, before any of them could have expired (all measured on the database clock).
	var t0, firstExpiry time.Time
	if err := c.DB.QueryRow(ctx, `SELECT clock_timestamp(), min(expires_at) FROM mink_lease_holders
		WHERE holder = 'idx-a' AND expires_at > clock_timestamp()`).Scan(&t0, &firstExpiry); err != nil {
		t.Fatal(err)
	}
	ia.Signal(syscall.SIGTERM)
	freed := waitFor(t, 10*time.Second, "idx-a's leases to be freed", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-a"] == 0
	})
	taken := waitFor(t, 10*time.Second, "idx-b to hold all 6 partitions", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-b"] == 6
	})
	t.Logf("SIGTERM: freed after %v, taken by idx-b after %v (lease_ttl %v; first expiry was %v away)",
		freed.At.Sub(t0).Round(time.Millisecond), taken.At.Sub(t0).Round(time.Millisecond), ttl,
		firstExpiry.Sub(t0).Round(time.Millisecond))
	if d := freed.At.Sub(t0); d > ttl/2 {
		t.Errorf("SIGTERM freed the leases after %v, not at once", d)
	}
	if !taken.At.Before(firstExpiry) {
		t.Errorf("idx-b took the leases at %v, not before they would have expired (%v)", taken.At, firstExpiry)
	}
	if st := ia.Wait(10 * time.Second); st.ExitCode() != 0 {
		t.Errorf("idx-a exited with %v after SIGTERM", st)
	}
	var rows int
	if err := c.DB.QueryRow(ctx, `SELECT count(*) FROM mink_members WHERE node_id = 'idx-a'`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("idx-a's member row is still there (%d, %v)", rows, err)
	}
}

// TestCrashFreesLeasesOnlyAfterTTL: SIGKILL of an indexer and of the writer holding the
// writer lease. Their leases stay theirs until lease_ttl after their last renewal (checked
// a moment before, through ListLeases on a live node), and only then go to live nodes.
func TestCrashFreesLeasesOnlyAfterTTL(t *testing.T) {
	const ttl = 2 * time.Second
	c := newCluster(t, ttl)
	nodes := map[string]*cluster.Node{}
	for _, n := range [][2]string{{"indexer", "idx-a"}, {"indexer", "idx-b"}, {"writer", "wr-1"}, {"writer", "wr-2"}} {
		nodes[n[1]] = c.Start(n[0], n[1])
		c.Member(n[1]).Addr()
	}
	table := addTable(c, "crash", 4)
	s := waitFor(t, 20*time.Second, "indexers to hold 2 partitions each and a writer the writer lease", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-a"] == 2 && s.Partitions["idx-b"] == 2 && s.Writer != ""
	})
	writer, otherWriter := s.Writer, map[string]string{"wr-1": "wr-2", "wr-2": "wr-1"}[s.Writer]
	victims := []string{"idx-a", writer}
	for _, v := range victims {
		nodes[v].Signal(syscall.SIGKILL)
	}
	for _, v := range victims {
		nodes[v].Wait(10 * time.Second)
	}
	ctx := context.Background()

	// The dead nodes' leases, with the expiry their last renewal set.
	type dead struct {
		kind      string
		partition int32
		holder    string
		expires   time.Time
	}
	var deads []dead
	rows, err := c.DB.Query(ctx, `SELECT kind, partition, holder, expires_at FROM mink_lease_holders
		WHERE table_id = $1 AND holder = ANY($2) AND expires_at > clock_timestamp()`, table, victims)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d dead
		if err := rows.Scan(&d.kind, &d.partition, &d.holder, &d.expires); err != nil {
			t.Fatal(err)
		}
		deads = append(deads, d)
	}
	rows.Close()
	if len(deads) != 3 {
		t.Fatalf("the killed nodes hold %d leases, want 3 (2 partitions and the writer lease)", len(deads))
	}
	firstExpiry := deads[0].expires
	for _, d := range deads {
		if d.expires.Before(firstExpiry) {
			firstExpiry = d.expires
		}
	}

	// A moment before the first expiry, the leases are still the dead nodes'.
	margin := ttl / 3
	waitFor(t, 2*ttl, "the database clock to near the first expiry", func() (time.Time, bool) {
		now := c.DBNow()
		return now, !now.Before(firstExpiry.Add(-margin))
	})
	ls, err := c.Member("idx-b").Admin().ListLeases(ctx, &adminv1.ListLeasesRequest{TableId: table})
	if err != nil {
		t.Fatal(err)
	}
	if now := c.DBNow(); !now.Before(firstExpiry) {
		t.Fatalf("checked too late: database time %v is past the first expiry %v", now, firstExpiry)
	}
	for _, d := range deads {
		for _, l := range ls.GetLeases() {
			if l.GetPartition() == d.partition && strings.EqualFold("LEASE_KIND_"+d.kind, l.GetKind().String()) && l.GetHolder() != d.holder {
				t.Errorf("%s lease %d is held by %q before lease_ttl passed, want the dead %s", d.kind, d.partition, l.GetHolder(), d.holder)
			}
		}
	}

	// After lease_ttl the live nodes take them, each no earlier than its expiry.
	s = waitFor(t, 3*ttl, "idx-b to hold all 4 partitions and "+otherWriter+" the writer lease", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-b"] == 4 && s.Writer == otherWriter
	})
	for _, d := range deads {
		var holder string
		var acquired time.Time
		if err := c.DB.QueryRow(ctx, `SELECT holder, acquired_at FROM mink_leases WHERE table_id = $1 AND kind = $2 AND partition = $3`,
			table, d.kind, d.partition).Scan(&holder, &acquired); err != nil {
			t.Fatal(err)
		}
		if acquired.Before(d.expires) {
			t.Errorf("%s lease %d taken by %s at %v, before it expired at %v", d.kind, d.partition, holder, acquired, d.expires)
		}
		t.Logf("%s lease %d: %s's expired at %v, taken by %s %v later", d.kind, d.partition, d.holder,
			d.expires.Format("15:04:05.000"), holder, acquired.Sub(d.expires).Round(time.Millisecond))
	}
}

// TestSecondSignalExitsAtOnce: after a first SIGTERM the node leaves the cluster and waits
// for in-flight requests (here one forwarded to a node that never answers); a second
// SIGTERM ends the process at once.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	c := newCluster(t, 2*time.Second)
	p := c.Start("fileserver", "fs-1", "--shutdown-timeout", "60s")
	client := c.Member("fs-1").Admin()
	// A live member whose address accepts connections and never says a word.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	var accepted atomic.Int64
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			conn, err := hole.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
			accepted.Add(1)
		}
	}()
	ctx := context.Background()
	if _, err := c.DB.Exec(ctx, `INSERT INTO mink_members (node_id, incarnation, roles, grpc_addr, started_at, renewed_at, expires_at)
		VALUES ('hole', gen_random_uuid(), '{writer}', $1, now(), now(), now() + interval '1h')`, hole.Addr().String()); err != nil {
		t.Fatal(err)
	}
	callDone := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		_, err := client.GetStatus(cctx, &adminv1.GetStatusRequest{Node: "hole"})
		callDone <- err
	}()
	waitFor(t, 10*time.Second, "fs-1 to forward the request to the silent node", func() (int64, bool) {
		return accepted.Load(), accepted.Load() > 0
	})

	p.Signal(syscall.SIGTERM)
	waitFor(t, 10*time.Second, "fs-1 to leave the cluster", func() (int, bool) {
		var n int
		c.DB.QueryRow(ctx, `SELECT count(*) FROM mink_members WHERE node_id = 'fs-1'`).Scan(&n)
		return n, n == 0
	})
	select {
	case <-p.Process().Done():
		t.Fatalf("fs-1 exited (%v) with a request in flight and --shutdown-timeout 60s", p.Process().ExitState())
	default:
	}
	second := time.Now()
	p.Signal(syscall.SIGTERM)
	st := p.Wait(5 * time.Second)
	t.Logf("exited %v after the second SIGTERM with %v", time.Since(second).Round(time.Millisecond), st)
	if st.ExitCode() != 1 || !strings.Contains(p.Process().Output(), "second stop signal") {
		t.Errorf("after a second SIGTERM: %v", st)
	}
	if err := <-callDone; err == nil {
		t.Error("the in-flight request succeeded")
	}
}

// grpcurlChecks drives the cluster with the real grpcurl, through server reflection only.
func grpcurlChecks(t *testing.T, c *cluster.Cluster) {
	if grpcurl == "" {
		t.Skip("grpcurl not found in .tmp/bin or PATH: run 'make tools'")
	}
	a := c.Member("idx-a").Addr()
	out, code, msg := runGrpcurl(t, "-plaintext", a, "list")
	if code != "" || !strings.Contains(out, "mink.admin.v1.AdminService") || !strings.Contains(out, "grpc.health.v1.Health") {
		t.Errorf("list: %q %s %s", out, code, msg)
	}
	out, code, _ = runGrpcurl(t, "-plaintext", a, "grpc.health.v1.Health/Check")
	if code != "" || !strings.Contains(out, "SERVING") {
		t.Errorf("health: %q %s", out, code)
	}

	// idx-b's status, asked of idx-a.
	out, code, msg = runGrpcurl(t, "-plaintext", "-d", `{"node":"idx-b"}`, a, "mink.admin.v1.AdminService/GetStatus")
	var st struct {
		NodeID string `json:"nodeId"`
		Roles  []string
		Leases []json.RawMessage
	}
	if code != "" || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("GetStatus idx-b via idx-a: %q %s %s", out, code, msg)
	}
	if st.NodeID != "idx-b" || len(st.Roles) != 1 || st.Roles[0] != "ROLE_INDEXER" || len(st.Leases) != 3 {
		t.Errorf("GetStatus idx-b via idx-a answered %+v", st)
	}

	cases := []struct {
		name, method, body, code string
		want                     []string
	}{
		{"negative table id", "ListLeases", `{"tableId":-1}`, "InvalidArgument", []string{"table_id"}},
		{"negative table id, forwarded", "ListLeases", `{"node":"wr-1","tableId":-1}`, "InvalidArgument", []string{"table_id"}},
		{"drain without node", "DrainNode", `{}`, "InvalidArgument", []string{"node"}},
		{"unknown node", "GetStatus", `{"node":"nope"}`, "NotFound", []string{`"nope"`}},
		{"unknown field", "GetStatus", `{"nod":"x"}`, "", nil}, // rejected by grpcurl itself
		{"unknown topic", "CreateTable", `{"name":"t","topic":"nope","format":"RECORD_FORMAT_RAW"}`, "InvalidArgument", []string{"topic", `"nope"`}},
		{"bad column type", "CreateTable", `{"name":"t","format":"RECORD_FORMAT_JSON","columns":[{"name":"id","type":"lon"}]}`, "InvalidArgument", []string{"columns[0]"}},
		{"no format", "CreateTable", `{"name":"t"}`, "InvalidArgument", []string{"format"}},
		{"describe unknown table", "DescribeTable", `{"name":"nope"}`, "NotFound", []string{"nope"}},
	}
	for _, tc := range cases {
		_, code, msg := runGrpcurl(t, "-plaintext", "-d", tc.body, a, "mink.admin.v1.AdminService/"+tc.method)
		if tc.code == "" {
			if code == "" && msg == "" {
				t.Errorf("%s: accepted", tc.name)
			}
			continue
		}
		if code != tc.code {
			t.Errorf("%s: code %q (%s), want %s", tc.name, code, msg, tc.code)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q does not mention %s", tc.name, msg, w)
			}
		}
	}
}

// runGrpcurl returns grpcurl's output, or the gRPC code and message of its error (or, for
// an error of grpcurl's own, "" and its output).
func runGrpcurl(t *testing.T, args ...string) (out, code, msg string) {
	t.Helper()
	cmd := exec.Command(grpcurl, append([]string{"-max-time", "10"}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		return stdout.String(), "", ""
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "Code: "); ok {
			code = v
		} else if v, ok := strings.CutPrefix(line, "Message: "); ok {
			msg = v
		}
	}
	if code == "" {
		msg = stderr.String()
	}
	return stdout.String(), code, msg
}

// metricsCheck scrapes a node's /metrics, whose address it advertises in its member row.
func metricsCheck(t *testing.T, c *cluster.Cluster, id string) {
	nodes, err := c.Member(id).Admin().ListNodes(context.Background(), &adminv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	for _, n := range nodes.GetNodes() {
		if n.GetNodeId() == id {
			addr = n.GetAddrs()["metrics"]
		}
	}
	if addr == "" {
		t.Fatalf("%s advertises no metrics address", id)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, m := range []string{`mink_lease_rounds_total{`, `mink_lease_statements_total`, `mink_lease_held{kind="partition"`, `mink_lease_changes_total{change="acquired"`, `rpc_server_`} {
		if !strings.Contains(string(body), m) {
			t.Errorf("%s /metrics has no %s", id, m)
		}
	}
	// idx-a has forwarded nothing; fs-1 forwarded the status requests above.
	nodes, err = c.Member("fs-1").Admin().ListNodes(context.Background(), &adminv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.GetNodes() {
		if n.GetNodeId() != "fs-1" {
			continue
		}
		resp, err := http.Get("http://" + n.GetAddrs()["metrics"] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `mink_admin_forwarded_total{`) || !strings.Contains(string(body), `target="wr-1"`) {
			t.Errorf("fs-1 /metrics does not count its forwarded requests")
		}
	}
}
