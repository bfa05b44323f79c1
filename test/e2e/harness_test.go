// Package e2e runs the role binaries and minkctl as real processes against a private
// Postgres: what an operator runs is what is tested. The binaries are built once per run.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

var (
	binDir  string // mink-indexer, mink-writer, mink-fileserver, minkctl
	grpcurl string // "" when absent
)

func TestMain(m *testing.M) {
	code := func() int {
		root, err := repoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		binDir, err = os.MkdirTemp("", "mink-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(binDir)
		start := time.Now()
		if err := build(root, binDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: built the binaries in %v\n", time.Since(start).Round(time.Millisecond))
		if p := filepath.Join(root, ".tmp", "bin", "grpcurl"); fileExists(p) {
			grpcurl = p
		} else if p, err := exec.LookPath("grpcurl"); err == nil {
			grpcurl = p
		}
		return m.Run()
	}()
	pgtest.Shutdown()
	os.Exit(code)
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if fileExists(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("e2e: no go.mod above %s", dir)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// build compiles the three roles and minkctl in one go command (shared work, parallel),
// then gives the roles their released names.
func build(root, dir string) error {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if !fileExists(gobin) {
		gobin = "go"
	}
	cmd := exec.Command(gobin, "build", "-o", dir+string(filepath.Separator),
		"./services/indexer", "./services/writer", "./services/fileserver", "./cmd/minkctl")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("e2e: go build: %v\n%s", err, out)
	}
	for _, role := range []string{"indexer", "writer", "fileserver"} {
		if err := os.Rename(filepath.Join(dir, role), filepath.Join(dir, "mink-"+role)); err != nil {
			return err
		}
	}
	return nil
}

// cleanEnv is this process's environment without MINK_* variables, so a developer's
// settings cannot change what a test runs.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINK_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is one running role process.
type proc struct {
	id    string
	cmd   *exec.Cmd
	out   *syncBuffer
	done  chan struct{}
	state *os.ProcessState
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s to %s: %v", sig, p.id, err)
	}
}

// wait waits for the process to exit and returns how.
func (p *proc) wait(t *testing.T, timeout time.Duration) *os.ProcessState {
	t.Helper()
	select {
	case <-p.done:
		return p.state
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.id, timeout)
		return nil
	}
}

// cluster is one test's database and the processes it starts on it.
type cluster struct {
	t     *testing.T
	db    *pgxpool.Pool
	url   string
	kafka *kafkatest.Cluster
	procs map[string]*proc
	conns map[string]*grpc.ClientConn
}

func newCluster(t *testing.T) *cluster {
	db, url := pgtest.DB(t)
	// Migrate here too, so the test can write tables before any node has started.
	if err := pgschema.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, db: db, url: url, kafka: kafkatest.New(t, kafkatest.Brokers(1)), procs: map[string]*proc{}, conns: map[string]*grpc.ClientConn{}}
	t.Cleanup(func() {
		for _, conn := range c.conns {
			conn.Close()
		}
	})
	return c
}

// start runs a role process on loopback with free ports; its address is read back from
// its member row, as another node would.
func (c *cluster) start(role, id string, ttl time.Duration, extra ...string) *proc {
	t := c.t
	t.Helper()
	args := append([]string{"--node-id", id, "--postgres-url", c.url, "--kafka-brokers", strings.Join(c.kafka.Addrs(), ","),
		"--grpc-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--lease-ttl", ttl.String(),
		"--shutdown-timeout", "5s"}, extra...)
	p := &proc{id: id, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, "mink-"+role), args...)
	p.cmd.Env = cleanEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			out := p.out.String()
			if len(out) > 6000 {
				out = "..." + out[len(out)-6000:]
			}
			t.Logf("--- %s (%s) output:\n%s", id, role, out)
		}
	})
	c.procs[id] = p
	return p
}

// addr waits until node id is a live member and returns its advertised gRPC address.
func (c *cluster) addr(id string) string {
	c.t.Helper()
	return waitFor(c.t, 20*time.Second, id+" to register", func() (string, bool) {
		var addr string
		err := c.db.QueryRow(context.Background(),
			`SELECT grpc_addr FROM mink_members WHERE node_id = $1 AND expires_at > now()`, id).Scan(&addr)
		return addr, err == nil
	})
}

// client is an admin client dialed to node id.
func (c *cluster) client(id string) adminv1.AdminServiceClient {
	c.t.Helper()
	conn := c.conns[id]
	if conn == nil {
		var err error
		conn, err = grpc.NewClient(c.addr(id), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.t.Fatal(err)
		}
		c.conns[id] = conn
	}
	return adminv1.NewAdminServiceClient(conn)
}

// addTable creates a topic and registers it as a table, with its index and lease rows.
func (c *cluster) addTable(name string, partitions int32) int64 {
	c.t.Helper()
	c.kafka.CreateTopic(name, partitions, nil)
	t, err := tables.Create(context.Background(), c.db, tables.Table{Name: name, Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, partitions)
	if err != nil {
		c.t.Fatal(err)
	}
	return t.ID
}

// dbNow is the database's clock, the only one lease times are measured with.
func (c *cluster) dbNow() time.Time {
	c.t.Helper()
	var now time.Time
	if err := c.db.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		c.t.Fatal(err)
	}
	return now
}

// shares is who holds a table's leases, as Postgres sees it at database time at: the
// partition leases per holder ("" for free) and the writer lease's holder.
type shares struct {
	partitions map[string]int
	writer     string
	at         time.Time
}

func (s shares) String() string {
	return fmt.Sprintf("partitions %v, writer %q", s.partitions, s.writer)
}

func (c *cluster) shares(table int64) shares {
	c.t.Helper()
	rows, err := c.db.Query(context.Background(), `SELECT kind,
			coalesce(CASE WHEN expires_at > clock_timestamp() THEN holder END, ''), clock_timestamp()
		FROM mink_lease_holders WHERE table_id = $1`, table)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	s := shares{partitions: map[string]int{}}
	for rows.Next() {
		var kind, holder string
		if err := rows.Scan(&kind, &holder, &s.at); err != nil {
			c.t.Fatal(err)
		}
		if kind == string(lease.KindWriter) {
			s.writer = holder
		} else {
			s.partitions[holder]++
		}
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return s
}

// waitFor polls cond until it holds and returns its value; on timeout the last value is
// shown. Every wait in these tests is on a condition, never a fixed sleep.
func waitFor[T any](t *testing.T, timeout time.Duration, what string, cond func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		v, ok := cond()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %v", timeout, what, v)
		}
		<-tick.C
	}
}
