package node_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
	"github.com/minkhq/mink/pkg/node/nodetest"
	"github.com/minkhq/mink/pkg/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

// parse builds a Config of role, without a role's own flags, from a command line and an
// environment, as a main does. (The roles' flags are tested in services/<role>/config.)
func parse(t *testing.T, role lease.Role, args []string, env map[string]string) (node.Config, error) {
	t.Helper()
	return nodetest.Parse(role, nil, args, env)
}

func TestConfigNamesTheBadFlag(t *testing.T) {
	ok := []string{"--postgres-url", "postgres://u@127.0.0.1:5432/db", "--kafka-brokers", "k1:9092,k2:9092"}
	cases := []struct {
		name string
		role lease.Role
		args []string
		env  map[string]string
		want []string // all in the error
	}{
		{"ttl too short", lease.RoleIndexer, append([]string{"--lease-ttl", "10ms"}, ok...), nil, []string{"--lease-ttl", "10ms"}},
		{"ttl not a duration", lease.RoleWriter, append([]string{"--lease-ttl", "soon"}, ok...), nil, []string{"-lease-ttl", "soon"}},
		{"ttl from env", lease.RoleWriter, ok, map[string]string{"MINK_LEASE_TTL": "soon"}, []string{"--lease-ttl", "MINK_LEASE_TTL", "soon"}},
		{"short ttl from env", lease.RoleWriter, ok, map[string]string{"MINK_LEASE_TTL": "1ms"}, []string{"--lease-ttl", "MINK_LEASE_TTL", "1ms"}},
		{"bad postgres url", lease.RoleIndexer, []string{"--postgres-url", "postgres://u@host:notaport/db", "--kafka-brokers", "k:9092"}, nil, []string{"--postgres-url"}},
		{"no postgres url", lease.RoleIndexer, []string{"--kafka-brokers", "k:9092"}, nil, []string{"--postgres-url", "required"}},
		{"postgres url from env", lease.RoleIndexer, []string{"--kafka-brokers", "k:9092"}, map[string]string{"MINK_POSTGRES_URL": "mysql://x"}, []string{"--postgres-url", "MINK_POSTGRES_URL"}},
		{"no kafka", lease.RoleIndexer, []string{"--postgres-url", "postgres://u@h/db"}, nil, []string{"--kafka-brokers", "required"}},
		{"bad broker", lease.RoleIndexer, []string{"--postgres-url", "postgres://u@h/db", "--kafka-brokers", "k1:9092,k2"}, nil, []string{"--kafka-brokers", `"k2"`}},
		{"bad node id", lease.RoleIndexer, append([]string{"--node-id", "a b"}, ok...), nil, []string{"--node-id"}},
		{"bad grpc addr", lease.RoleIndexer, append([]string{"--grpc-addr", "7070"}, ok...), nil, []string{"--grpc-addr"}},
		{"advertise without port", lease.RoleIndexer, append([]string{"--advertise-addr", "host"}, ok...), nil, []string{"--advertise-addr"}},
		{"indexer flag on a writer", lease.RoleWriter, append([]string{"--max-partitions", "3"}, ok...), nil, []string{"max-partitions"}},
		{"bad log level", lease.RoleFileServer, append([]string{"--log-level", "loud"}, ok...), nil, []string{"-log-level"}},
		{"bad console addr", lease.RoleIndexer, append([]string{"--console-addr", "7080"}, ok...), nil, []string{"--console-addr", `"7080"`}},
		{"console addr from env", lease.RoleIndexer, ok, map[string]string{"MINK_CONSOLE_ADDR": "host"}, []string{"--console-addr", "MINK_CONSOLE_ADDR"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(t, c.role, c.args, c.env)
			nodetest.Refused(t, err, c.want...)
		})
	}

	t.Run("defaults and env twins", func(t *testing.T) {
		cfg, err := parse(t, lease.RoleFileServer, []string{"--lease-ttl", "2s"},
			map[string]string{"MINK_POSTGRES_URL": "postgres://u@h/db", "MINK_KAFKA_BROKERS": "a:1, b:2", "MINK_LEASE_TTL": "9s"})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.LeaseTTL != 2*time.Second { // the command line wins over the environment
			t.Errorf("lease ttl %v, want 2s", cfg.LeaseTTL)
		}
		if len(cfg.KafkaBrokers) != 2 || cfg.KafkaBrokers[1] != "b:2" {
			t.Errorf("brokers %q", cfg.KafkaBrokers)
		}
		if cfg.GRPCAddr != ":7070" || cfg.ConsoleAddr != "" {
			t.Errorf("defaults: %+v (the console is off unless asked for)", cfg)
		}
	})
}

// TestRunLifecycle runs one node in process: it registers, goes SERVING, takes leases,
// exports metrics, drains, and on cancel leaves the cluster and stops every goroutine.
func TestRunLifecycle(t *testing.T) {
	db, url := pgtest.DB(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	cfg, err := parse(t, lease.RoleIndexer, []string{"--node-id", "n1", "--postgres-url", url, "--kafka-brokers", "127.0.0.1:9",
		"--grpc-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--lease-ttl", "1500ms"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()

	conn, err := grpc.NewClient(n.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitServing(t, conn)
	admin := adminv1.NewAdminServiceClient(conn)

	table := addTable(t, db, "events", 4)
	st := await.For(t, 10*time.Second, "n1 to hold the 4 partition leases", func() (*adminv1.GetStatusResponse, bool) {
		st, err := admin.GetStatus(ctx, &adminv1.GetStatusRequest{})
		return st, err == nil && countKind(st.GetLeases(), adminv1.LeaseKind_LEASE_KIND_PARTITION) == 4
	})
	if st.GetNodeId() != "n1" || !st.GetActing() || st.GetRoles()[0] != adminv1.Role_ROLE_INDEXER || st.GetFigures()["partition_leases"] != "4" {
		t.Errorf("status: %v", st)
	}
	if st.GetGrpcAddr() != n.GRPCAddr().String() || st.GetAddrs()["metrics"] != n.MetricsAddr().String() {
		t.Errorf("addresses: %v", st)
	}

	// Metrics, scraped as Prometheus would; no keep-alive so no client goroutine lingers.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + n.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"mink_lease_rounds_total", "mink_lease_statements_total", `mink_lease_rows_total{direction="written"`, `mink_lease_held{kind="partition"`, "mink_node_acting", "rpc_server_"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics has no %s", m)
		}
	}
	// n1 holds every partition and no node has the writer role: one lease of the table
	// is free, its writer's.
	for _, want := range []string{`mink_lease_free\{kind="partition",[^}]*table="default.events"\} 0\n`,
		`mink_lease_free\{kind="writer",[^}]*table="default.events"\} 1\n`} {
		if !regexp.MustCompile(want).Match(body) {
			t.Errorf("/metrics does not match %s", want)
		}
	}

	// Drain: every lease released before the call returns; undrain takes them back.
	dr, err := admin.DrainNode(ctx, &adminv1.DrainNodeRequest{Node: "n1"})
	if err != nil || !dr.GetDraining() || len(dr.GetLeases()) != 0 {
		t.Fatalf("drain: %v %v", dr, err)
	}
	if held := heldBy(t, db, table, "n1"); held != 0 {
		t.Errorf("after drain n1 holds %d leases in Postgres", held)
	}
	if _, err := admin.UndrainNode(ctx, &adminv1.UndrainNodeRequest{Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	await.For(t, 10*time.Second, "n1 to take its leases back", func() (int, bool) {
		h := heldBy(t, db, table, "n1")
		return h, h == 4
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	conn.Close()
	var members int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM mink_members`).Scan(&members); err != nil || members != 0 {
		t.Errorf("member rows after stop: %d %v", members, err)
	}
	if held := heldBy(t, db, table, "n1"); held != 0 {
		t.Errorf("after stop n1 holds %d leases", held)
	}
}

// TestRunReplaced: a second process with the same node id takes the member row over; the
// first one's Run fails with lease.ErrReplaced and stops cleanly.
func TestRunReplaced(t *testing.T) {
	_, url := pgtest.DB(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	start := func() (*node.Node, context.CancelFunc, chan error) {
		cfg, err := parse(t, lease.RoleWriter, []string{"--node-id", "same", "--postgres-url", url, "--kafka-brokers", "127.0.0.1:9",
			"--grpc-addr", "127.0.0.1:0", "--lease-ttl", "900ms"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return runNode(t, cfg)
	}
	n1, cancel1, done1 := start()
	defer cancel1()
	conn, err := grpc.NewClient(n1.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	waitServing(t, conn)
	conn.Close()
	_, cancel2, done2 := start()
	select {
	case err := <-done1:
		if err == nil || !strings.Contains(err.Error(), lease.ErrReplaced.Error()) {
			t.Errorf("first Run: %v, want %v", err, lease.ErrReplaced)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced node did not stop")
	}
	cancel2()
	if err := <-done2; err != nil {
		t.Errorf("second Run: %v", err)
	}
}

// runNode makes a node of cfg, its log discarded, and runs it until cancel; done gets
// what Run returned.
func runNode(t *testing.T, cfg node.Config) (n *node.Node, cancel context.CancelFunc, done chan error) {
	t.Helper()
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	return n, cancel, done
}

func TestNewNamesTakenPort(t *testing.T) {
	cfg, err := parse(t, lease.RoleWriter, []string{"--postgres-url", "postgres://u@h/db", "--kafka-brokers", "k:1", "--grpc-addr", "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Run(canceled()) // closes the listener
	cfg.GRPCAddr = n.GRPCAddr().String()
	if _, err := node.New(cfg); err == nil || !strings.Contains(err.Error(), "--grpc-addr") {
		t.Errorf("second bind of %s: %v", cfg.GRPCAddr, err)
	}
	// The console's port, taken, is named too.
	cfg.GRPCAddr, cfg.ConsoleAddr = "127.0.0.1:0", cfg.GRPCAddr
	if _, err := node.New(cfg); err == nil || !strings.Contains(err.Error(), "--console-addr") {
		t.Errorf("console on the taken %s: %v", cfg.ConsoleAddr, err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// --- helpers ---

func waitServing(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := w.Recv()
		if err != nil {
			t.Fatalf("health watch: %v", err)
		}
		if r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
	}
}

func addTable(t *testing.T, db *pgxpool.Pool, name string, partitions int32) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	if err := db.QueryRow(ctx, `INSERT INTO mink_tables (namespace, name, topic, partitions) VALUES ('default', $1, $1, 0) RETURNING id`, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := lease.AddScopes(ctx, db, id, partitions); err != nil {
		t.Fatal(err)
	}
	return id
}

func heldBy(t *testing.T, db *pgxpool.Pool, table int64, holder string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM mink_lease_holders WHERE table_id = $1 AND holder = $2`, table, holder).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func countKind(ls []*adminv1.Lease, k adminv1.LeaseKind) int {
	n := 0
	for _, l := range ls {
		if l.GetKind() == k {
			n++
		}
	}
	return n
}
