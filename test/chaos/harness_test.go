// Package chaos injects the failures of the seed's failure table into a cluster of real
// role processes and checks the stated effect and its bound, then that the table view is
// still exact. Faults are injected, never waited for:
//
//   - processes: SIGKILL, SIGSTOP/SIGCONT, SIGTERM, restart with the same node id;
//   - Postgres: stopped, killed and restarted for everyone (pgtest), or cut, delayed,
//     slowed, reset or refused for one node alone through that node's own TCP proxy
//     (toxiproxy, in-process): each node reaches Postgres only through its proxy;
//   - Kafka: stopped and restarted for everyone (kfake, persistent). A TCP proxy per node
//     cannot cut Kafka for one node: a Kafka client only bootstraps through the address it
//     is given and then connects to the address the broker advertises, which bypasses
//     the proxy. "Kafka is unreachable" is therefore modelled, as in the seed's failure
//     row, for the whole cluster.
//
// After each scenario the checker (checker_test.go) settles the cluster and compares the
// index, and once the writer and the file server are wired into their role mains, every
// table as iceberg-go reads it through the REST catalog, with what Kafka holds.
package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
)

var (
	binDir string // mink-indexer, mink-writer, mink-fileserver
	// withCatalog: the writer and the file server are wired into their role mains
	// (node.Config.Setup), so tables have snapshots and the checker scans them through
	// the REST catalog. Found from the sources; MINK_CHAOS_CATALOG=1 or 0 forces it.
	withCatalog bool
	catalogWhy  string
)

func TestMain(m *testing.M) {
	code := func() int {
		root, err := repoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// toxiproxy's toxics log through zerolog's global logger: keep them quiet.
		zerolog.SetGlobalLevel(zerolog.Disabled)
		withCatalog, catalogWhy = detectCatalog(root)
		fmt.Fprintf(os.Stderr, "chaos: catalog checks %s\n", catalogWhy)
		binDir, err = os.MkdirTemp("", "mink-chaos-bin-")
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
		fmt.Fprintf(os.Stderr, "chaos: built the binaries in %v\n", time.Since(start).Round(time.Millisecond))
		before := goleak.IgnoreCurrent() // what runs before any test
		code := m.Run()
		if code == 0 {
			// Nothing a test started may outlive it: processes are reaped by their
			// cleanups, goroutines (proxies, Kafka clients, pools) are checked here.
			http.DefaultClient.CloseIdleConnections()
			if err := goleak.Find(before,
				// HTTP keep-alive connections of iceberg-go's S3 and REST clients
				// close on their own idle timeout.
				goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
				goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
				// toxiproxy v2.5.0: a toxic's stub can block forever sending into the
				// next stub when a toxic is removed (a timeout toxic's Cleanup closes
				// its stub and RemoveToxic returns without rewiring the one before) or
				// when the far end of a link closes while data is in flight. The stuck
				// stub holds nothing else; the proxies' accept loops and links are still
				// checked.
				goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
				goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*LatencyToxic).Pipe"),
				goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*BandwidthToxic).Pipe"),
			); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: goroutines left behind: %v\n", err)
				code = 1
			}
		}
		return code
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
			return "", fmt.Errorf("chaos: no go.mod above %s", dir)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// detectCatalog reports whether the writer's and the file server's mains build their
// role's work: until they do, tables have no snapshot and there is no catalog to scan.
func detectCatalog(root string) (bool, string) {
	switch os.Getenv("MINK_CHAOS_CATALOG") {
	case "1", "on", "true":
		return true, "on (MINK_CHAOS_CATALOG)"
	case "0", "off", "false":
		return false, "off (MINK_CHAOS_CATALOG)"
	}
	var missing []string
	for _, role := range []string{"writer", "fileserver"} {
		b, _ := os.ReadFile(filepath.Join(root, "services", role, "main.go"))
		if !bytes.Contains(b, []byte("Setup:")) && !bytes.Contains(b, []byte(".Setup =")) {
			missing = append(missing, "services/"+role+"/main.go")
		}
	}
	if len(missing) > 0 {
		return false, "skipped: " + strings.Join(missing, " and ") + " do not set node.Config.Setup yet (the writer and file server are not wired)"
	}
	return true, "on: the writer and the file server are wired into their role mains"
}

// needCatalog skips what needs snapshots and the catalog while they do not exist.
func needCatalog(t *testing.T) {
	t.Helper()
	if !withCatalog {
		t.Skip("catalog checks " + catalogWhy)
	}
}

func build(root, dir string) error {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if !fileExists(gobin) {
		gobin = "go"
	}
	cmd := exec.Command(gobin, "build", "-o", dir+string(filepath.Separator),
		"./services/indexer", "./services/writer", "./services/fileserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: go build: %v\n%s", err, out)
	}
	for _, role := range []string{"indexer", "writer", "fileserver"} {
		if err := os.Rename(filepath.Join(dir, role), filepath.Join(dir, "mink-"+role)); err != nil {
			return err
		}
	}
	return nil
}

// cleanEnv is this process's environment without MINK_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINK_") {
			env = append(env, kv)
		}
	}
	return env
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

// ---------------------------------------------------------------------------------
// The cluster

type clusterOptions struct {
	ttl        time.Duration // --lease-ttl of every node (default 2s)
	persistent bool          // Kafka keeps its data across Stop/Restart
}

// cluster is one test's Postgres, Kafka, proxies and role processes.
type cluster struct {
	t      *testing.T
	ttl    time.Duration
	pg     *pgtest.Cluster
	pgAddr string
	dbURL  string        // the test's database, directly (not through a proxy)
	db     *pgxpool.Pool // the test's own connections, never cut
	kafka  *kafkatest.Cluster
	kc     *kafkasrc.Client // the checker's reader
	tox    *toxiproxy.ApiServer

	mu    sync.Mutex
	nodes map[string]*node
	order []string // node ids in start order
}

func newCluster(t *testing.T, o clusterOptions) *cluster {
	t.Helper()
	if o.ttl == 0 {
		o.ttl = 2 * time.Second
	}
	pg := pgtest.Start(t) // private: scenarios stop, kill and restart it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := pg.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	// A crash of Postgres (Kill) must lose nothing it acknowledged, or an epoch could go
	// back: pgtest keeps commits synchronous; check it.
	var syncCommit string
	if err := db.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&syncCommit); err != nil || syncCommit != "on" {
		t.Fatalf("synchronous_commit is %q (%v), want on", syncCommit, err)
	}
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	kopts := []kafkatest.Option{kafkatest.Brokers(1)}
	if o.persistent {
		kopts = append(kopts, kafkatest.Persistent())
	}
	c := &cluster{t: t, ttl: o.ttl, pg: pg, pgAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.Port)),
		dbURL: url, db: db, kafka: kafkatest.New(t, kopts...), nodes: map[string]*node{}}
	c.kc, err = kafkasrc.New(c.kafka.Addrs(), kafkasrc.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kc.Close)
	logger := zerolog.Nop()
	c.tox = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), logger)
	t.Cleanup(func() {
		// Processes first (their cleanups ran already: registered later), then the
		// proxies and every link they carry.
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			n.proxy.Stop()
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
	})
	return c
}

// dumpLogs shows the end of every process's output.
func (c *cluster) dumpLogs() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.order {
		n := c.nodes[id]
		for i, p := range n.history() {
			out := p.out.String()
			if len(out) > 5000 {
				out = "..." + out[len(out)-5000:]
			}
			c.t.Logf("--- %s (%s), process %d of %d, pid %d, %s:\n%s", id, n.role, i+1, len(n.history()), p.pid(), p.exitState(), out)
		}
	}
}

// ---------------------------------------------------------------------------------
// Nodes and their processes

// node is one node id: its Postgres proxy, and the processes run under it (restarts
// keep the id, as an operator's restart does).
type node struct {
	c     *cluster
	id    string
	role  string
	extra []string
	proxy *toxiproxy.Proxy
	dir   string // the file server's cache folder, kept across restarts
	isCut bool   // a cut is in place (test goroutine only)

	mu    sync.Mutex
	procs []*proc
}

// proc is one running (or exited) process of a node.
type proc struct {
	n        *node
	cmd      *exec.Cmd
	out      *syncBuffer
	done     chan struct{}
	state    *os.ProcessState
	grpcAddr string
	conn     *grpc.ClientConn
	paused   atomic.Bool
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) exitState() string {
	if !p.exited() {
		return "running"
	}
	return p.state.String()
}

// addNode makes a node (its proxy to Postgres), starts its first process and waits
// until it has registered.
func (c *cluster) addNode(role, id string, extra ...string) *node {
	c.t.Helper()
	n := c.newNode(role, id, extra...)
	n.waitRegistered()
	return n
}

// newNode makes a node and starts its first process, without waiting for Postgres.
func (c *cluster) newNode(role, id string, extra ...string) *node {
	c.t.Helper()
	n := &node{c: c, id: id, role: role, extra: extra}
	n.proxy = toxiproxy.NewProxy(c.tox, "pg-"+id, "127.0.0.1:0", c.pgAddr)
	if err := n.proxy.Start(); err != nil {
		c.t.Fatalf("proxy for %s: %v", id, err)
	}
	if role == "fileserver" {
		n.dir = c.t.TempDir()
	}
	c.mu.Lock()
	c.nodes[id] = n
	c.order = append(c.order, id)
	c.mu.Unlock()
	n.start()
	return n
}

// waitRegistered waits until the node is a member acting under its leases.
func (n *node) waitRegistered() {
	n.c.t.Helper()
	waitFor(n.c.t, 20*time.Second, n.id+" to register", func() (string, bool) {
		st, err := n.status()
		if err != nil {
			return err.Error(), false
		}
		return st.GetLastError(), st.GetActing()
	})
}

// nodesOf returns the nodes with a role ("" for all), in start order.
func (c *cluster) nodesOf(role string) []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node
	for _, id := range c.order {
		if n := c.nodes[id]; role == "" || n.role == role {
			out = append(out, n)
		}
	}
	return out
}

// postgresURL is the node's way to the test database: through its own proxy.
func (n *node) postgresURL() string {
	u := strings.Replace(n.c.dbURL, n.c.pgAddr, n.proxy.Listen, 1)
	if u == n.c.dbURL {
		n.c.t.Fatalf("database URL %s does not name %s", n.c.dbURL, n.c.pgAddr)
	}
	return u
}

// start runs a new process of the node and waits until it serves gRPC. Its address is
// read from its own log, not from Postgres, so a node can be reached while Postgres is
// down.
func (n *node) start() *proc {
	n.c.t.Helper()
	if p := n.current(); p != nil && !p.exited() {
		n.c.t.Fatalf("start %s: process %d still runs", n.id, p.pid())
	}
	return n.spawn()
}

// replace starts a new process with the node's id while the current one is paused, as a
// supervisor that gave up on a hung process would; it returns the old one.
func (n *node) replace() *proc {
	n.c.t.Helper()
	old := n.current()
	if old == nil || old.exited() || !old.paused.Load() {
		n.c.t.Fatalf("replace %s: the current process is not paused", n.id)
	}
	n.spawn()
	return old
}

func (n *node) spawn() *proc {
	t := n.c.t
	t.Helper()
	args := []string{"--node-id", n.id, "--postgres-url", n.postgresURL(),
		"--kafka-brokers", strings.Join(n.c.kafka.Addrs(), ","),
		"--grpc-addr", "127.0.0.1:0", "--lease-ttl", n.c.ttl.String(), "--shutdown-timeout", "3s"}
	if n.role == "fileserver" {
		args = append(args, "--catalog-addr", "127.0.0.1:0", "--s3-addr", "127.0.0.1:0",
			"--cache-dir", n.dir, "--cache-bytes", "1GiB")
	}
	args = append(args, n.extra...)
	p := &proc{n: n, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, "mink-"+n.role), args...)
	p.cmd.Env = cleanEnv()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			p.out.Write(line)
			p.out.Write([]byte{'\n'})
			if !sent && bytes.Contains(line, []byte(`"msg":"starting"`)) {
				var l struct {
					GRPCAddr string `json:"grpc_addr"`
				}
				if json.Unmarshal(line, &l) == nil && l.GRPCAddr != "" {
					addr <- l.GRPCAddr
					sent = true
				}
			}
		}
		io.Copy(p.out, pr) // a line too long to scan: keep reading, never block the process
		pr.Close()
	}()
	go func() {
		p.cmd.Wait()
		<-copied
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill() // SIGKILL ends a stopped process too
			<-p.done
		}
		if p.conn != nil {
			p.conn.Close()
		}
	})
	select {
	case a := <-addr:
		p.grpcAddr = a
	case <-p.done:
		t.Fatalf("%s exited at start (%v):\n%s", n.id, p.state, p.out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not log its gRPC address within 30s:\n%s", n.id, p.out.String())
	}
	p.conn, err = grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (n *node) current() *proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.procs) == 0 {
		return nil
	}
	return n.procs[len(n.procs)-1]
}

func (n *node) history() []*proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.procs)
}

// running reports whether the node's current process is alive (paused or not).
func (n *node) running() bool {
	p := n.current()
	return p != nil && !p.exited()
}

func (n *node) signal(sig syscall.Signal) {
	n.c.t.Helper()
	p := n.current()
	if p == nil || p.exited() {
		n.c.t.Fatalf("signal %v to %s: no running process", sig, n.id)
	}
	p.signal(n.c.t, sig)
}

// signal sends sig to this process (which may be an earlier process of its node).
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s (pid %d): %v", sig, p.n.id, p.pid(), err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused.Store(true)
	case syscall.SIGCONT:
		p.paused.Store(false)
	}
}

// kill ends the process as a crash would, and waits for it.
func (n *node) kill() {
	n.c.t.Helper()
	n.signal(syscall.SIGKILL)
	n.wait(10 * time.Second)
}

// term stops the process cleanly (it leaves the cluster) and waits for it.
func (n *node) term() {
	n.c.t.Helper()
	p := n.current()
	if p.paused.Load() {
		n.signal(syscall.SIGCONT)
	}
	n.signal(syscall.SIGTERM)
	n.wait(20 * time.Second)
}

func (n *node) pause()  { n.c.t.Helper(); n.signal(syscall.SIGSTOP) }
func (n *node) resume() { n.c.t.Helper(); n.signal(syscall.SIGCONT) }

func (n *node) paused() bool {
	p := n.current()
	return p != nil && !p.exited() && p.paused.Load()
}

func (n *node) wait(timeout time.Duration) *os.ProcessState {
	n.c.t.Helper()
	p := n.current()
	select {
	case <-p.done:
		return p.state
	case <-time.After(timeout):
		n.c.t.Fatalf("%s did not exit within %v", n.id, timeout)
		return nil
	}
}

// admin is an admin client of the node's current process.
func (n *node) admin() adminv1.AdminServiceClient {
	return adminv1.NewAdminServiceClient(n.current().conn)
}

// status asks the node itself (no Postgres needed) for its status.
func (n *node) status() (*adminv1.GetStatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return n.admin().GetStatus(ctx, &adminv1.GetStatusRequest{})
}

// --- Postgres faults of this node alone, on its proxy ---

func (n *node) toxic(name, typ, stream string, attrs map[string]any) {
	n.c.t.Helper()
	body, _ := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs})
	if _, err := n.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		n.c.t.Fatalf("toxic %s on %s: %v", name, n.id, err)
	}
}

// cut partitions the node from Postgres: every byte either way is dropped, on open
// connections and new ones alike (a silent network, the hard case: nothing fails fast).
func (n *node) cut() {
	n.toxic("cut-up", "timeout", "upstream", map[string]any{"timeout": 0})
	n.toxic("cut-down", "timeout", "downstream", map[string]any{"timeout": 0})
	n.isCut = true
}

// delay adds latency to every byte from Postgres to the node.
func (n *node) delay(d time.Duration) {
	n.toxic("delay", "latency", "downstream", map[string]any{"latency": d.Milliseconds(), "jitter": d.Milliseconds() / 4})
}

// slow limits the node's bandwidth from Postgres.
func (n *node) slow(kbPerSec int) {
	n.toxic("slow", "bandwidth", "downstream", map[string]any{"rate": kbPerSec})
}

// reset closes every open connection of the node to Postgres at once; new ones work.
// (Not toxiproxy's reset_peer toxic: once it has closed a link, the stub in front of it
// blocks forever on a send, a goroutine that never ends.)
func (n *node) reset() {
	n.c.t.Helper()
	n.proxy.Stop()
	if err := n.proxy.Start(); err != nil {
		n.c.t.Fatalf("reopen the proxy of %s: %v", n.id, err)
	}
}

// refuse closes the node's proxy: connections to Postgres are refused at once.
func (n *node) refuse() { n.proxy.Stop() }

// heal removes every Postgres fault of the node. After a cut the connections that went
// silent are closed too, as a real partition leaves them dead; closing them first also
// keeps clear of a toxiproxy bug (removing a timeout toxic from a live link leaves the
// stub in front of it blocked forever).
func (n *node) heal() {
	n.c.t.Helper()
	if n.isCut {
		n.proxy.Stop()
		n.isCut = false
	}
	n.proxy.Toxics.ResetToxics(context.Background())
	if !n.proxy.Enabled {
		if err := n.proxy.Start(); err != nil { // the same port: Listen holds the bound address
			n.c.t.Fatalf("reopen the proxy of %s: %v", n.id, err)
		}
	}
}

// ---------------------------------------------------------------------------------
// Tables and records

// createTable makes a topic and a JSON table over it through the admin API of node via,
// with short range and commit intervals so tests see ranges and snapshots quickly.
func (c *cluster) createTable(via *node, name string, partitions int32) int64 {
	c.t.Helper()
	c.kafka.CreateTopic(name, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := via.admin().CreateTable(ctx, &adminv1.CreateTableRequest{Name: name, Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		Columns:    []*adminv1.Column{{Name: "id", Type: "long", Required: true}, {Name: "item", Type: "string"}},
		Properties: map[string]string{"mink.range.max-age": "300ms", "mink.commit.interval": "500ms"}})
	if err != nil {
		c.t.Fatalf("create table %s: %v", name, err)
	}
	if got := resp.GetTable().GetPartitions(); got != partitions {
		c.t.Fatalf("table %s has %d partitions, topic %d", name, got, partitions)
	}
	return resp.GetTable().GetId()
}

// producer writes records to every partition of some topics until stopped; while Kafka
// is down its writes fail and it keeps trying. Kafka itself is the truth the checker
// compares with, so a write whose outcome is unknown is harmless.
type producer struct {
	stop   chan struct{}
	done   chan struct{}
	sent   atomic.Int64 // acknowledged records
	failed atomic.Int64 // produce calls that failed
	paused atomic.Bool
}

func (c *cluster) produce(every time.Duration, topics map[string]int32) *producer {
	cl := c.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(3*time.Second),
		kgo.ProduceRequestTimeout(2*time.Second))
	pr := &producer{stop: make(chan struct{}), done: make(chan struct{})}
	names := make([]string, 0, len(topics))
	for name := range topics {
		names = append(names, name)
	}
	slices.Sort(names)
	go func() {
		defer close(pr.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-pr.stop:
				return
			case <-tick.C:
			}
			if pr.paused.Load() {
				continue
			}
			var recs []*kgo.Record
			for _, name := range names {
				for p := int32(0); p < topics[name]; p++ {
					recs = append(recs, &kgo.Record{Topic: name, Partition: p, Key: []byte(strconv.Itoa(n)),
						Value: fmt.Appendf(nil, `{"id":%d,"item":"thing %d"}`, n, n)})
					n++
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			res := cl.ProduceSync(ctx, recs...)
			cancel()
			for _, r := range res {
				if r.Err == nil {
					pr.sent.Add(1)
				}
			}
			if res.FirstErr() != nil {
				pr.failed.Add(1)
			}
		}
	}()
	c.t.Cleanup(pr.halt)
	return pr
}

// halt stops the producer and waits for it; it may be called again.
func (pr *producer) halt() {
	select {
	case <-pr.stop:
	default:
		close(pr.stop)
	}
	<-pr.done
}

// ---------------------------------------------------------------------------------
// What Postgres says

// dbNow is the database's clock, the only one lease times are measured with.
func (c *cluster) dbNow() time.Time {
	c.t.Helper()
	var now time.Time
	if err := c.db.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		c.t.Fatal(err)
	}
	return now
}

// leaseRow is one lease as Postgres holds it; live when its holder's member row (of the
// incarnation that took it) has not expired at at, which is then its expiry.
type leaseRow struct {
	kind      string
	table     int64
	partition int32
	holder    string
	epoch     int64
	expires   time.Time
	acquired  time.Time
	live      bool
	at        time.Time
}

func (l leaseRow) String() string {
	h := l.holder
	if !l.live {
		h += "(expired)"
	}
	return fmt.Sprintf("%s/%d/%d:%s@%d", l.kind, l.table, l.partition, h, l.epoch)
}

// leases reads every lease row at one instant of the database clock.
func (c *cluster) leases(ctx context.Context) ([]leaseRow, error) {
	rows, err := c.db.Query(ctx, `SELECT l.kind, l.table_id, l.partition, coalesce(l.holder, ''), l.epoch,
			coalesce(m.expires_at, 'epoch'::timestamptz), coalesce(l.acquired_at, 'epoch'::timestamptz),
			coalesce(m.expires_at > clock_timestamp(), false), clock_timestamp()
		FROM mink_leases l LEFT JOIN mink_members m ON m.node_id = l.holder AND m.incarnation = l.incarnation
		ORDER BY l.table_id, l.kind, l.partition`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []leaseRow
	for rows.Next() {
		var l leaseRow
		if err := rows.Scan(&l.kind, &l.table, &l.partition, &l.holder, &l.epoch, &l.expires, &l.acquired, &l.live, &l.at); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

func (c *cluster) mustLeases() []leaseRow {
	c.t.Helper()
	ls, err := c.leases(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return ls
}

// shares counts the live partition leases of a table by holder, and names its writer.
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
	s := shares{partitions: map[string]int{}}
	for _, l := range c.mustLeases() {
		s.at = l.at
		if l.table != table {
			continue
		}
		holder := l.holder
		if !l.live {
			holder = ""
		}
		if l.kind == string(lease.KindWriter) {
			s.writer = holder
		} else {
			s.partitions[holder]++
		}
	}
	return s
}

// rangeRow is one stored range.
type rangeRow struct {
	partition  int32
	start, end int64
	epoch      int64
	records    int64
	errors     int64
	created    time.Time
}

func (c *cluster) ranges(table int64) []rangeRow {
	c.t.Helper()
	rows, err := c.db.Query(context.Background(), `SELECT partition, start_offset, end_offset, epoch, record_count,
			decode_errors, created_at FROM mink_ranges WHERE table_id = $1 ORDER BY partition, start_offset`, table)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	var out []rangeRow
	for rows.Next() {
		var r rangeRow
		if err := rows.Scan(&r.partition, &r.start, &r.end, &r.epoch, &r.records, &r.errors, &r.created); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// rangesPerPartition counts a table's ranges by partition.
func (c *cluster) rangesPerPartition(table int64) map[int32]int {
	out := map[int32]int{}
	for _, r := range c.ranges(table) {
		out[r.partition]++
	}
	return out
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

// until waits for the local clock to pass a point: how long an outage is held, a
// condition on time rather than a sleep of a guessed length.
func until(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}
