package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/roleproc"
)

// Node is one member id and the processes run under it, oldest first: a restart keeps
// the id (and a file server's cache folder), as an operator's restart does.
type Node struct {
	ID   string
	Role string

	c        *Cluster
	flags    []string
	proxy    *toxiproxy.Proxy // nil without PostgresProxies
	cacheDir string           // a file server's
	isCut    bool             // a cut is in place (test goroutine only)

	mu    sync.Mutex
	procs []*Process
}

// Process is one process of a node (running, paused or exited).
type Process struct {
	*roleproc.Process
	Node    *Node
	Started roleproc.Started // the addresses it logged at start
	conn    *grpc.ClientConn
}

// ExitState says how the process ended, or "running".
func (p *Process) ExitState() string {
	if st := p.State(); st != nil {
		return st.String()
	}
	return "running"
}

// Addr is the process's gRPC address.
func (p *Process) Addr() string { return p.Started.GRPCAddr }

// Admin is an admin client of this process (as the cluster's admin with auth on).
func (p *Process) Admin() adminv1.AdminServiceClient { return adminv1.NewAdminServiceClient(p.conn) }

// Process is the node's current (latest) process.
func (n *Node) Process() *Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.procs) == 0 {
		return nil
	}
	return n.procs[len(n.procs)-1]
}

// History is every process the node has run, oldest first.
func (n *Node) History() []*Process { return n.history() }

// Addr is the gRPC address of the node's current process.
func (n *Node) Addr() string { return n.Process().Addr() }

// Admin is an admin client of the node's current process.
func (n *Node) Admin() adminv1.AdminServiceClient { return n.Process().Admin() }

// CacheDir is a file server's cache folder (kept across its restarts).
func (n *Node) CacheDir() string { return n.cacheDir }

// Running reports whether the current process is alive (paused or not).
func (n *Node) Running() bool {
	p := n.Process()
	return p != nil && !p.Exited()
}

// Paused reports whether the current process is paused.
func (n *Node) Paused() bool {
	p := n.Process()
	return p != nil && p.Paused()
}

// args are the flags of the node's next process: the command line and the secrets' env.
func (n *Node) args(extra []string) (args, env []string) {
	c := n.c
	f := roleproc.Flags{
		NodeID: n.ID, PostgresURL: c.postgresURL(n), KafkaBrokers: c.Kafka.Addrs(),
		GRPCAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", LeaseTTL: c.TTL, ShutdownTimeout: c.opts.shutdown,
		Extra: append(slices.Clone(n.flags), extra...),
	}
	if c.Auth != nil {
		f.AuthConfig = c.Auth.Path
	}
	if n.Role == FileServer {
		f.CatalogAddr, f.S3Addr, f.CacheDir, f.CacheBytes = "127.0.0.1:0", "127.0.0.1:0", n.cacheDir, c.opts.cacheBytes
		// Warming off: the scenarios choose what is cached (a file nobody read must stay
		// uncached for the outage checks); flags given later win.
		f.Extra = append([]string{"--warm-interval", "0"}, f.Extra...)
	}
	return f.Args(), f.Env()
}

// spawn starts a new process of the node and waits until it has logged its addresses.
func (n *Node) spawn(extra ...string) *Process {
	t := n.c.T
	t.Helper()
	n.mu.Lock()
	seq := len(n.procs) + 1
	n.mu.Unlock()
	args, env := n.args(extra)
	rp, err := roleproc.Start(roleproc.Spec{
		Name: n.ID, Path: Bin(roleproc.Binary(n.Role)), Args: args, Env: env,
		LogPath: filepath.Join(n.c.logDir, n.ID+"."+strconv.Itoa(seq)+".log"),
		// A test binary that dies (a timeout's panic) takes its processes with it.
		ParentDeath: syscall.SIGKILL,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{Process: rp, Node: n}
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	t.Cleanup(func() {
		p.Kill() // SIGKILL ends a paused process too
		if p.conn != nil {
			p.conn.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if p.Started, err = rp.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if tok := n.c.adminToken(); tok != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(tok)))
	}
	if p.conn, err = grpc.NewClient(p.Addr(), opts...); err != nil {
		t.Fatal(err)
	}
	return p
}

// bearer is a static bearer token as gRPC call credentials (on plaintext loopback).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// Restart starts a new process of the node once the current one has exited, with the
// node's flags and then extra, for this process only.
func (n *Node) Restart(extra ...string) *Process {
	n.c.T.Helper()
	if n.Running() {
		n.c.T.Fatalf("restart %s: process %d still runs", n.ID, n.Process().Pid())
	}
	return n.spawn(extra...)
}

// Replace starts a new process under the node's id while the current one is paused, as
// a supervisor that gave up on a hung process would; it returns the old one.
func (n *Node) Replace() *Process {
	n.c.T.Helper()
	old := n.Process()
	if old == nil || !old.Paused() {
		n.c.T.Fatalf("replace %s: the current process is not paused", n.ID)
	}
	n.spawn()
	return old
}

// Signal sends sig to the node's current process.
func (n *Node) Signal(sig syscall.Signal) {
	n.c.T.Helper()
	p := n.Process()
	if p == nil || p.Exited() {
		n.c.T.Fatalf("signal %v to %s: no running process", sig, n.ID)
	}
	if err := p.Signal(sig); err != nil {
		n.c.T.Fatal(err)
	}
}

// Kill ends the node's process with SIGKILL, as a crash would, and waits for it.
func (n *Node) Kill() {
	n.c.T.Helper()
	n.Signal(syscall.SIGKILL)
	n.Wait(10 * time.Second)
}

// Pause stops the node's process with SIGSTOP: it holds its connections and does nothing.
func (n *Node) Pause() { n.c.T.Helper(); n.Signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (n *Node) Resume() { n.c.T.Helper(); n.Signal(syscall.SIGCONT) }

// Leave stops the node cleanly (SIGTERM; a paused process is continued first): it
// releases its leases and leaves the members at once. It waits for the exit and returns
// how it went.
func (n *Node) Leave() *os.ProcessState {
	n.c.T.Helper()
	if n.Paused() {
		n.Resume()
	}
	n.Signal(syscall.SIGTERM)
	return n.Wait(20 * time.Second)
}

// Wait waits for the node's current process to exit and returns how it did.
func (n *Node) Wait(timeout time.Duration) *os.ProcessState {
	n.c.T.Helper()
	st, err := n.Process().Wait(timeout)
	if err != nil {
		n.c.T.Fatal(err)
	}
	return st
}

// Status asks the node itself (no Postgres needed) for its status.
func (n *Node) Status() (*adminv1.GetStatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return n.Admin().GetStatus(ctx, &adminv1.GetStatusRequest{})
}

// WaitActing waits until the node says it is a member acting under its leases.
func (n *Node) WaitActing() {
	n.c.T.Helper()
	WaitFor(n.c.T, 20*time.Second, n.ID+" to register", func() (string, bool) {
		st, err := n.Status()
		if err != nil {
			return err.Error(), false
		}
		return st.GetLastError(), st.GetActing()
	})
}

// Endpoints are a file server's catalog URL and S3 endpoint, from its own status.
func (n *Node) Endpoints() (catalogURL, s3URL string, err error) {
	st, err := n.Status()
	if err != nil {
		return "", "", err
	}
	cat, s3 := st.GetAddrs()["catalog"], st.GetAddrs()["s3"]
	if cat == "" || s3 == "" {
		return "", "", fmt.Errorf("%s advertises no catalog or S3 address: %v", n.ID, st.GetAddrs())
	}
	if !strings.Contains(s3, "://") {
		s3 = "http://" + s3
	}
	return "http://" + cat, s3, nil
}

// --- Postgres faults of this node alone, on its proxy ---

func (n *Node) needProxy(what string) {
	n.c.T.Helper()
	if n.proxy == nil {
		n.c.T.Fatalf("%s of %s needs a cluster with PostgresProxies", what, n.ID)
	}
}

func (n *Node) toxic(name, typ, stream string, attrs map[string]any) {
	n.c.T.Helper()
	n.needProxy(name)
	body, _ := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs})
	if _, err := n.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		n.c.T.Fatalf("toxic %s on %s: %v", name, n.ID, err)
	}
}

// CutPostgres partitions the node from Postgres: every byte either way is dropped, on
// open connections and new ones alike (a silent network, the hard case: nothing fails
// fast).
func (n *Node) CutPostgres() {
	n.c.T.Helper()
	n.toxic("cut-up", "timeout", "upstream", map[string]any{"timeout": 0})
	n.toxic("cut-down", "timeout", "downstream", map[string]any{"timeout": 0})
	n.isCut = true
}

// DelayPostgres adds latency to every byte from Postgres to the node.
func (n *Node) DelayPostgres(d time.Duration) {
	n.c.T.Helper()
	n.toxic("delay", "latency", "downstream", map[string]any{"latency": d.Milliseconds(), "jitter": d.Milliseconds() / 4})
}

// SlowPostgres limits the node's bandwidth from Postgres.
func (n *Node) SlowPostgres(kbPerSec int) {
	n.c.T.Helper()
	n.toxic("slow", "bandwidth", "downstream", map[string]any{"rate": kbPerSec})
}

// ResetPostgres closes every open connection of the node to Postgres at once; new ones
// work. (Not toxiproxy's reset_peer toxic: once it has closed a link, the stub in front
// of it blocks forever on a send, a goroutine that never ends.)
func (n *Node) ResetPostgres() {
	n.c.T.Helper()
	n.needProxy("ResetPostgres")
	n.proxy.Stop()
	if err := n.proxy.Start(); err != nil {
		n.c.T.Fatalf("reopen the proxy of %s: %v", n.ID, err)
	}
}

// RefusePostgres closes the node's proxy: its connections to Postgres are refused at once.
func (n *Node) RefusePostgres() {
	n.c.T.Helper()
	n.needProxy("RefusePostgres")
	n.proxy.Stop()
}

// HealPostgres removes every Postgres fault of the node. After a cut the connections
// that went silent are closed too, as a real partition leaves them dead; closing them
// first also keeps clear of a toxiproxy bug (removing a timeout toxic from a live link
// leaves the stub in front of it blocked forever).
func (n *Node) HealPostgres() {
	n.c.T.Helper()
	n.needProxy("HealPostgres")
	if n.isCut {
		n.proxy.Stop()
		n.isCut = false
	}
	n.proxy.Toxics.ResetToxics(context.Background())
	if !n.proxy.Enabled {
		if err := n.proxy.Start(); err != nil { // the same port: Listen holds the bound address
			n.c.T.Fatalf("reopen the proxy of %s: %v", n.ID, err)
		}
	}
}
