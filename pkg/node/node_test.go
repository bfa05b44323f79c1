package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
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
	"github.com/minkhq/mink/pkg/lease/leasetest"
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

	table := leasetest.Table(t, db, "events", 4)
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
		return startNode(t, cfg)
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

// startNode makes a node of cfg, its log discarded, and runs it until cancel; done gets
// what Run returned.
func startNode(t *testing.T, cfg node.Config) (n *node.Node, cancel context.CancelFunc, done chan error) {
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

// The Postgres URL is a secret: wherever a config or its errors are printed, the password
// is not, however it is written (equal to the user name, percent-encoded, with '@' or
// ':'); a file holding it must be private to its owner.
func TestPostgresURLIsASecret(t *testing.T) {
	base := []string{"--kafka-brokers", "k:9092"}
	for _, c := range []struct {
		url    string
		hidden []string
	}{
		{"postgres://mink:pg%40s3cr%3At@127.0.0.1:5432/mink", []string{"pg%40s3cr", "pg@s3cr", "s3cr:t", "s3cr%3At"}},
		{"postgres://mink:pg@s3cr:t@127.0.0.1:5432/mink", []string{"pg@s3cr", "s3cr:t"}},
		{"postgres://mink:pg@s3cr:t@127.0.0.1:notaport/mink", []string{"pg@s3cr", "s3cr:t", "s3cr"}},
		{"postgres://mink:pg%zzs3cr@127.0.0.1:5432/mink", []string{"pg%zz", "s3cr"}},
		{"postgres://mink@127.0.0.1:5432/mink?password=s3cr3t&sslmode=bogus", []string{"s3cr3t"}},
	} {
		for _, env := range []bool{false, true} {
			args, vars := append([]string{"--postgres-url", c.url}, base...), map[string]string(nil)
			if env {
				args, vars = base, map[string]string{"MINK_POSTGRES_URL": c.url}
			}
			cfg, err := parse(t, lease.RoleWriter, args, vars)
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			var defaults strings.Builder
			fs.SetOutput(&defaults)
			probe := node.Config{Role: lease.RoleWriter, PostgresURL: cfg.PostgresURL}
			probe.RegisterFlags(fs)
			fs.PrintDefaults()
			js, jsErr := json.Marshal(cfg)
			if jsErr != nil {
				t.Fatalf("the config as JSON: %v", jsErr)
			}
			var logged strings.Builder
			slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "config", cfg, "url", cfg.PostgresURL)
			shown := fmt.Sprintf("%v | %+v | %#v | %s | %s | %s | %s", err, cfg, cfg, js, logged.String(), defaults.String(), fs.Lookup("postgres-url").Value)
			for _, h := range c.hidden {
				if strings.Contains(shown, h) {
					t.Errorf("%s (env %v): %q shows in %s", c.url, env, h, shown)
				}
			}
			if err != nil && !strings.Contains(err.Error(), "--postgres-url") || env && err != nil && !strings.Contains(err.Error(), "MINK_POSTGRES_URL") {
				t.Errorf("%s (env %v): the error does not name the flag and its source: %v", c.url, env, err)
			}
		}
	}

	dir := t.TempDir()
	file := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("postgres://mink:f1le-s3cret@127.0.0.1:5432/mink\n"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	private := file("private", 0o600)
	cfg, err := parse(t, lease.RoleWriter, append([]string{"--postgres-url-file", private}, base...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := cfg.DatabaseURL(); err != nil || u.Reveal() != "postgres://mink:f1le-s3cret@127.0.0.1:5432/mink" {
		t.Errorf("--postgres-url-file: %v", err)
	}
	open := file("open", 0o644)
	_, err = parse(t, lease.RoleWriter, base, map[string]string{"MINK_POSTGRES_URL_FILE": open})
	nodetest.Refused(t, err, "--postgres-url-file", "MINK_POSTGRES_URL_FILE", "0644", "chmod 600 "+open)
	if err != nil && strings.Contains(err.Error(), "f1le-s3cret") {
		t.Errorf("the error shows the secret: %v", err)
	}
	_, err = parse(t, lease.RoleWriter, append([]string{"--postgres-url-file", private, "--postgres-url", "postgres://u@h/db"}, base...), nil)
	nodetest.Refused(t, err, "--postgres-url-file", "conflicts with --postgres-url")
	_, err = parse(t, lease.RoleWriter, append([]string{"--postgres-url-file", filepath.Join(dir, "none")}, base...), nil)
	nodetest.Refused(t, err, "--postgres-url-file", "no such file")
}

// A node run with a password in its Postgres URL logs where its database is, without
// the password.
func TestRunLogsNoPostgresPassword(t *testing.T) {
	_, url := pgtest.DB(t)
	// The test cluster trusts every local connection: any password connects.
	const pw = "run-p@ss:w0rd/x"
	withPW := strings.Replace(url, "postgres://postgres@", "postgres://postgres:"+neturl.QueryEscape(pw)+"@", 1)
	if withPW == url {
		t.Fatalf("unexpected test URL %s", url)
	}
	cfg, err := parse(t, lease.RoleWriter, []string{"--node-id", "pw1", "--grpc-addr", "127.0.0.1:0", "--kafka-brokers", "127.0.0.1:9", "--lease-ttl", "1500ms"},
		map[string]string{"MINK_POSTGRES_URL": withPW})
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "node.log")
	logf, err := os.Create(logPath) // an *os.File takes concurrent writes
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cfg.Logger = slog.New(slog.NewJSONHandler(logf, nil))
	_, _, stop := runNode(t, cfg)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	b, _ := os.ReadFile(logPath)
	logged := string(b)
	if !strings.Contains(logged, `"postgres":"postgres://postgres:xxxxx@127.0.0.1:`) {
		t.Errorf("the starting line does not say where the database is, password masked:\n%s", logged)
	}
	for _, h := range []string{pw, neturl.QueryEscape(pw), "p@ss", "w0rd"} {
		if strings.Contains(logged, h) {
			t.Errorf("the log shows %q:\n%s", h, logged)
		}
	}
}

// runNode runs a node of cfg in process until it serves, and returns it with a gRPC
// connection to it (closed when the test ends) and stop, which ends Run and returns its
// error.
func runNode(t *testing.T, cfg node.Config) (*node.Node, *grpc.ClientConn, func() error) {
	t.Helper()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	conn, err := grpc.NewClient(n.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	waitServing(t, conn)
	return n, conn, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			return errors.New("Run did not return within 20s")
		}
	}
}

// The lease rounds do not wait behind the role's statements: with every connection of
// the node's pool taken by its workers (an indexer starting thousands of partitions
// queues as many statements at once), the node still renews its membership and keeps
// its leases under the same epochs (issue 32).
func TestLeaseRoundsHaveConnectionsOfTheirOwn(t *testing.T) {
	db, url := pgtest.DB(t)
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "2")
	u.RawQuery = q.Encode()
	const ttl = 1500 * time.Millisecond
	cfg, err := parse(t, lease.RoleIndexer, []string{"--node-id", "n1", "--postgres-url", u.String(), "--kafka-brokers", "127.0.0.1:9",
		"--grpc-addr", "127.0.0.1:0", "--lease-ttl", ttl.String()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	var holding atomic.Int32
	cfg.Setup = func(d node.Deps) (node.Parts, error) {
		return node.Parts{Workers: map[lease.Kind]lease.Worker{lease.KindPartition: func(ctx context.Context, _ lease.Lease) {
			// Each worker takes a connection and keeps it: the pool's two are soon
			// taken, and the other workers wait for one.
			c, err := d.DB.Acquire(ctx)
			if err != nil {
				return
			}
			defer c.Release()
			holding.Add(1)
			defer holding.Add(-1)
			<-ctx.Done()
		}}}, nil
	}
	_, _, stop := runNode(t, cfg) // serving: the schema is in place
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	table := leasetest.Table(t, db, "events", 4)
	epochs := func() (held int, sum int64) {
		if err := db.QueryRow(context.Background(), `SELECT count(*), coalesce(sum(epoch), 0) FROM mink_lease_holders
			WHERE table_id = $1 AND kind = 'partition' AND holder = 'n1'`, table).Scan(&held, &sum); err != nil {
			t.Fatal(err)
		}
		return held, sum
	}
	var before int64
	await.True(t, 15*time.Second, "n1 to hold the 4 partition leases, two of its workers the pool's 2 connections", func() bool {
		held, sum := epochs()
		before = sum
		return held == 4 && holding.Load() == 2
	})
	// For several lease_ttl, the pool stays full: n1 stays a member holding the same
	// leases, none lost and taken again under a new epoch.
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if held, sum := epochs(); held != 4 || sum != before {
			t.Fatalf("with its pool full n1 holds %d partition leases (epochs summing to %d, were %d): its lease rounds waited for the role's connections", held, sum, before)
		}
	}
}
