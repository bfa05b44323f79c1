package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/test/cluster"
)

// The gRPC doors with auth on, driven with the real grpcurl (reflection only) against
// real role processes: issue 14's "grpcurl with and without -H 'authorization: Bearer …'".

const (
	authClusterSecretE2E = "e2e-cluster-secret-0123456789abcdef0123"
	authReaderSecretE2E  = "etl-e2e-secret-0123456789"
	authAdminSecretE2E   = "ops-e2e-secret-0123456789"
)

// authConfigFile writes an auth config: etl reads shop.*, ops is admin. With etlAdmin
// etl is an admin instead: the config of a node that has not been given the new one yet.
func authConfigFile(t *testing.T, etlAdmin bool) string {
	t.Helper()
	etl := map[string]any{"id": "etl", "secret": authReaderSecretE2E, "role": "reader", "tables": []string{"shop.*"}}
	if etlAdmin {
		etl = map[string]any{"id": "etl", "secret": authReaderSecretE2E, "role": "admin"}
	}
	b, err := json.Marshal(map[string]any{"cluster_secret": authClusterSecretE2E, "principals": []any{
		etl, map[string]any{"id": "ops", "secret": authAdminSecretE2E, "role": "admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// authGrpcurl calls method of node addr with body, as token's principal ("" sends no
// authorization metadata).
func authGrpcurl(t *testing.T, token, addr, method, body string) (out, code, msg string) {
	t.Helper()
	args := []string{"-plaintext"}
	if token != "" {
		args = append(args, "-H", "authorization: Bearer "+token)
	}
	if body != "" {
		args = append(args, "-d", body)
	}
	return runGrpcurl(t, append(args, addr, method)...)
}

// authState is what a refused call must leave as it was: tables, leases, the index and
// the members' draining flags.
func authState(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT id, namespace, name, topic, partitions, properties::text FROM mink_tables ORDER BY id`,
		`SELECT kind, table_id, partition, coalesce(holder, ''), epoch FROM mink_leases ORDER BY table_id, kind, partition`,
		`SELECT table_id, partition, coalesce(indexed_end, -1) FROM mink_partitions ORDER BY table_id, partition`,
		`SELECT count(*) FROM mink_ranges`,
		`SELECT count(*) FROM mink_data_files`,
		`SELECT node_id, draining FROM mink_members ORDER BY node_id`,
	} {
		rows, err := c.DB.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestAuthGRPCDoors: a cluster with auth on. Health and reflection stay open; without a
// token every admin call is Unauthenticated; a reader reads (only its tables) and cannot
// create, drop or drain, directly or through another node; the target of a forwarded call
// authorizes the original caller (a node whose config still calls the reader an admin
// forwards its drain, and the target refuses it); the file service refuses clients, an
// admin's token included; every refusal leaves the cluster as it was; the admin drains
// and drops through another node.
func TestAuthGRPCDoors(t *testing.T) {
	if grpcurl == "" {
		t.Skip("grpcurl not found in .tmp/bin or PATH: run 'make tools'")
	}
	const ttl = 3 * time.Second
	c := newCluster(t, ttl)
	cfg := authConfigFile(t, false)
	c.Start("indexer", "idx-a", "--auth-config", cfg)
	c.Start("writer", "wr-1", "--auth-config", cfg)
	fsArgs := func(cfg string) []string {
		return []string{"--auth-config", cfg, "--cache-bytes", "64MiB"}
	}
	c.Start("fileserver", "fs-1", fsArgs(cfg)...)
	c.Start("fileserver", "fs-stale", fsArgs(authConfigFile(t, true))...)
	fs, idx, stale := c.Member("fs-1").Addr(), c.Member("idx-a").Addr(), c.Member("fs-stale").Addr()
	reader, admin := authReaderSecretE2E, authAdminSecretE2E

	// Open doors: reflection lists every service, health answers, without a token.
	out, code, msg := authGrpcurl(t, "", fs, "list", "")
	for _, svc := range []string{"mink.admin.v1.AdminService", "mink.file.v1.FileService", "grpc.health.v1.Health"} {
		if code != "" || !strings.Contains(out, svc) {
			t.Errorf("list without a token: %q %s %s, want %s", out, code, msg, svc)
		}
	}
	if out, code, _ := authGrpcurl(t, "", idx, "grpc.health.v1.Health/Check", ""); code != "" || !strings.Contains(out, "SERVING") {
		t.Errorf("health without a token: %q %s", out, code)
	}
	waitFor(t, 20*time.Second, "every node to serve", func() (string, bool) {
		for _, a := range []string{fs, idx, stale, c.Member("wr-1").Addr()} {
			if out, code, _ := authGrpcurl(t, "", a, "grpc.health.v1.Health/Check", ""); code != "" || !strings.Contains(out, "SERVING") {
				return a, false
			}
		}
		return "", true
	})

	// The admin creates shop.orders through fs-1; default.hidden is outside etl's patterns.
	c.Kafka.CreateTopic("orders", 2, nil)
	if _, code, msg := authGrpcurl(t, admin, fs, "mink.admin.v1.AdminService/CreateTable",
		`{"namespace":"shop","name":"orders","format":"RECORD_FORMAT_RAW"}`); code != "" || msg != "" {
		t.Fatalf("admin's CreateTable: %s %s", code, msg)
	}
	hidden := addTable(c, "hidden", 1)
	var orders int64
	if err := c.DB.QueryRow(context.Background(), `SELECT id FROM mink_tables WHERE namespace = 'shop' AND name = 'orders'`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	for _, table := range []int64{orders, hidden} {
		waitFor(t, 20*time.Second, "idx-a and wr-1 to hold the leases", func() (cluster.Shares, bool) {
			s := c.Shares(table)
			return s, s.Partitions[""] == 0 && s.Partitions["idx-a"] > 0 && s.Writer == "wr-1"
		})
	}

	// The reader reads: status (auth on), nodes, leases, its one table, here and forwarded.
	for _, node := range []string{"", "idx-a"} {
		out, code, msg := authGrpcurl(t, reader, fs, "mink.admin.v1.AdminService/GetStatus", fmt.Sprintf(`{"node":%q}`, node))
		var st struct {
			NodeID      string `json:"nodeId"`
			AuthEnabled bool   `json:"authEnabled"`
		}
		if code != "" || json.Unmarshal([]byte(out), &st) != nil || !st.AuthEnabled {
			t.Errorf("reader's GetStatus(node=%q): %q %s %s", node, out, code, msg)
		}
		if _, code, msg := authGrpcurl(t, reader, fs, "mink.admin.v1.AdminService/ListNodes", fmt.Sprintf(`{"node":%q}`, node)); code != "" {
			t.Errorf("reader's ListNodes(node=%q): %s %s", node, code, msg)
		}
		out, code, msg = authGrpcurl(t, reader, fs, "mink.admin.v1.AdminService/ListTables", fmt.Sprintf(`{"node":%q}`, node))
		var lt struct {
			Tables []struct{ Namespace, Name string }
		}
		if code != "" || json.Unmarshal([]byte(out), &lt) != nil || len(lt.Tables) != 1 || lt.Tables[0].Name != "orders" {
			t.Errorf("reader's ListTables(node=%q): %q %s %s, want shop.orders only", node, out, code, msg)
		}
		if _, code, msg := authGrpcurl(t, reader, fs, "mink.admin.v1.AdminService/DescribeTable",
			fmt.Sprintf(`{"node":%q,"namespace":"shop","name":"orders"}`, node)); code != "" {
			t.Errorf("reader's DescribeTable(node=%q) of shop.orders: %s %s", node, code, msg)
		}
	}

	before := authState(t, c)
	for _, tc := range []struct {
		name, token, addr, method, body, code string
		want                                  []string
	}{
		{"no token", "", fs, "AdminService/GetStatus", `{}`, "Unauthenticated", []string{"authorization: Bearer"}},
		{"no token, forwarded", "", fs, "AdminService/ListNodes", `{"node":"idx-a"}`, "Unauthenticated", []string{"authorization: Bearer"}},
		{"no token drops", "", idx, "AdminService/DropTable", `{"namespace":"shop","name":"orders"}`, "Unauthenticated", []string{"DropTable"}},
		{"wrong secret", "not-anyones-secret-at-all", fs, "AdminService/GetStatus", `{}`, "Unauthenticated", []string{"bearer token"}},
		{"reader describes another table", reader, fs, "AdminService/DescribeTable", `{"name":"hidden"}`, "PermissionDenied", []string{`"etl"`, "default.hidden"}},
		{"reader describes another table, forwarded", reader, fs, "AdminService/DescribeTable", `{"node":"idx-a","name":"hidden"}`, "PermissionDenied", []string{`"etl"`, "default.hidden"}},
		{"reader creates", reader, fs, "AdminService/CreateTable", `{"namespace":"shop","name":"more","topic":"orders","format":"RECORD_FORMAT_RAW"}`, "PermissionDenied", []string{`"etl"`, "CreateTable", "role admin"}},
		{"reader drops", reader, fs, "AdminService/DropTable", `{"namespace":"shop","name":"orders"}`, "PermissionDenied", []string{`"etl"`, "DropTable", "role admin"}},
		{"reader drops, forwarded", reader, fs, "AdminService/DropTable", `{"node":"idx-a","namespace":"shop","name":"orders"}`, "PermissionDenied", []string{"DropTable", "role admin"}},
		{"reader alters", reader, fs, "AdminService/AlterTable", `{"namespace":"shop","name":"orders","setProperties":{"x":"y"}}`, "PermissionDenied", []string{"AlterTable"}},
		{"reader drains idx-a", reader, fs, "AdminService/DrainNode", `{"node":"idx-a"}`, "PermissionDenied", []string{`"etl"`, "DrainNode", "role admin"}},
		{"reader drains itself", reader, idx, "AdminService/DrainNode", `{"node":"idx-a"}`, "PermissionDenied", []string{"DrainNode"}},
		// fs-stale's config calls etl an admin: it forwards; the targets refuse.
		{"reader drains idx-a through a stale node", reader, stale, "AdminService/DrainNode", `{"node":"idx-a"}`, "PermissionDenied", []string{`"etl"`, "role reader", "DrainNode"}},
		{"reader drains wr-1 through a stale node", reader, stale, "AdminService/DrainNode", `{"node":"wr-1"}`, "PermissionDenied", []string{`"etl"`, "role reader", "DrainNode"}},
		{"reader drops through a stale node", reader, stale, "AdminService/DropTable", `{"node":"idx-a","name":"hidden"}`, "PermissionDenied", []string{`"etl"`, "role reader", "DropTable"}},
		// The file service is for cluster nodes, never clients.
		{"admin reads a file directly", admin, fs, "mink.file.v1.FileService/ReadFile", `{"key":"shop/orders/metadata/x.json"}`, "PermissionDenied", []string{"internal service: cluster nodes only"}},
		{"reader measures directly", reader, fs, "mink.file.v1.FileService/ReadFile",
			`{"key":"shop/orders/data/_kafka_partition=0/00000000000000000000-00000000000000000001","measure":{"maxBytes":"9223372036854775807","ttlMs":"9223372036854775807"}}`,
			"PermissionDenied", []string{"internal service: cluster nodes only"}},
		{"no token reads a file directly", "", fs, "mink.file.v1.FileService/ReadFile", `{"key":"shop/orders/metadata/x.json"}`, "Unauthenticated", []string{"cluster nodes only", "mink-peer"}},
	} {
		method := tc.method
		if !strings.HasPrefix(method, "mink.") {
			method = "mink.admin.v1." + method
		}
		_, code, msg := authGrpcurl(t, tc.token, tc.addr, method, tc.body)
		if code != tc.code {
			t.Errorf("%s: code %q (%s), want %s", tc.name, code, msg, tc.code)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q does not mention %s", tc.name, msg, w)
			}
		}
		for _, s := range []string{authReaderSecretE2E, authAdminSecretE2E, authClusterSecretE2E} {
			if strings.Contains(msg, s) {
				t.Errorf("%s: message %q quotes a secret", tc.name, msg)
			}
		}
	}
	if after := authState(t, c); after != before {
		t.Errorf("refused calls changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// The admin, through fs-1: idx-a's status, a drain of idx-a and its undrain, a drop.
	if out, code, msg := authGrpcurl(t, admin, fs, "mink.admin.v1.AdminService/GetStatus", `{"node":"idx-a"}`); code != "" || !strings.Contains(out, `"idx-a"`) {
		t.Errorf("admin's GetStatus of idx-a through fs-1: %q %s %s", out, code, msg)
	}
	out, code, msg = authGrpcurl(t, admin, fs, "mink.admin.v1.AdminService/DrainNode", `{"node":"idx-a"}`)
	if code != "" || !strings.Contains(out, `"draining": true`) {
		t.Fatalf("admin's DrainNode of idx-a through fs-1: %q %s %s", out, code, msg)
	}
	if _, code, msg := authGrpcurl(t, admin, fs, "mink.admin.v1.AdminService/UndrainNode", `{"node":"idx-a"}`); code != "" {
		t.Fatalf("admin's UndrainNode of idx-a through fs-1: %s %s", code, msg)
	}
	if _, code, msg := authGrpcurl(t, admin, fs, "mink.admin.v1.AdminService/DropTable", `{"node":"idx-a","name":"hidden"}`); code != "" {
		t.Fatalf("admin's DropTable through fs-1: %s %s", code, msg)
	}
	var left int
	if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM mink_tables`).Scan(&left); err != nil || left != 1 {
		t.Errorf("tables after the admin's drop: %d %v", left, err)
	}
}
