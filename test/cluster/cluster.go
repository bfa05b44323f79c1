// Package cluster runs a Mink cluster of real processes for a test, in the seed's words:
// members of roles (indexer, writer, file server) joining one Postgres and one Kafka,
// taking leases, and the failures of the seed's table (of a node, of Postgres, of Kafka)
// injected into them.
//
// Design notes: docs/design/test-cluster.md.
package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/roleproc"
)

// The roles, as Start takes them.
const (
	Indexer    = roleproc.Indexer
	Writer     = roleproc.Writer
	FileServer = roleproc.FileServer
)

// Option configures New.
type Option func(*options)

type options struct {
	ttl             time.Duration
	shutdown        time.Duration
	privatePostgres bool
	persistentKafka bool
	proxies         bool
	auth            bool
	cacheBytes      string
}

// LeaseTTL is every node's --lease-ttl (default 2s).
func LeaseTTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// ShutdownTimeout is every node's --shutdown-timeout (default 5s).
func ShutdownTimeout(d time.Duration) Option { return func(o *options) { o.shutdown = d } }

// PrivatePostgres gives the cluster a Postgres server of its own, so a test can stop,
// kill and restart it (StopPostgres, KillPostgres, StartPostgres). Without it the cluster
// has a fresh database on the server the test binary shares (pgtest.DB).
func PrivatePostgres() Option { return func(o *options) { o.privatePostgres = true } }

// PersistentKafka keeps Kafka's data across StopKafka and StartKafka.
func PersistentKafka() Option { return func(o *options) { o.persistentKafka = true } }

// PostgresProxies puts a TCP proxy (toxiproxy, in process) between each node and
// Postgres, so a test can cut, delay, slow, reset or refuse one node's Postgres alone.
func PostgresProxies() Option { return func(o *options) { o.proxies = true } }

// WithAuth turns auth on: a fresh auth config (pkg/auth.Generate: an admin and a reader
// of default.*) that every node is started with; the cluster's admin clients call as the
// admin, and Auth gives the credentials a user's clients need.
func WithAuth() Option { return func(o *options) { o.auth = true } }

// CacheBytes is every file server's --cache-bytes (default 1GiB).
func CacheBytes(size string) Option { return func(o *options) { o.cacheBytes = size } }

// Cluster is one test's Postgres database, Kafka, and the nodes started on them.
type Cluster struct {
	T     testing.TB
	TTL   time.Duration
	DB    *pgxpool.Pool // the test's own connections: never through a proxy, never cut
	DBURL string        // the database, directly
	Kafka *kafkatest.Cluster
	// Auth is the auth config every node was given; nil without WithAuth.
	Auth *Auth

	opts   options
	logDir string
	pg     *pgtest.Cluster // nil on the shared server
	pgAddr string          // host:port of Postgres
	tox    *toxiproxy.ApiServer

	mu    sync.Mutex
	nodes map[string]*Node
	order []string // node ids in start order
}

// Auth is the cluster's auth config and its principals' credentials.
type Auth struct {
	Path          string // --auth-config of every node
	ClusterSecret string
	Admin, Reader auth.PrincipalConfig // Reader reads default.*
}

// New starts Postgres (or a database of its own on the shared server), Kafka (one
// broker) and, with PostgresProxies, the proxy server; everything is removed when the
// test ends, the nodes first.
func New(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	o := options{ttl: 2 * time.Second, shutdown: 5 * time.Second, cacheBytes: "1GiB"}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Cluster{T: t, TTL: o.ttl, opts: o, logDir: t.TempDir(), nodes: map[string]*Node{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.privatePostgres {
		c.pg = pgtest.Start(t)
		url, err := c.pg.CreateDB(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.DB, err = pgxpool.New(context.Background(), url); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.DB.Close)
		c.DBURL = url
		// A crash of Postgres (KillPostgres) must lose nothing it acknowledged, or an
		// epoch could go back: pgtest keeps commits synchronous; check it.
		var syncCommit string
		if err := c.DB.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&syncCommit); err != nil || syncCommit != "on" {
			t.Fatalf("synchronous_commit is %q (%v), want on", syncCommit, err)
		}
	} else {
		c.DB, c.DBURL = pgtest.DB(t)
	}
	cfg := c.DB.Config().ConnConfig
	c.pgAddr = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	// Migrated here too, so a test can write tables before any node has started.
	if err := pgschema.Migrate(ctx, c.DB); err != nil {
		t.Fatal(err)
	}
	kopts := []kafkatest.Option{kafkatest.Brokers(1)}
	if o.persistentKafka {
		kopts = append(kopts, kafkatest.Persistent())
	}
	c.Kafka = kafkatest.New(t, kopts...)
	if o.auth {
		c.Auth = newAuth(t)
	}
	if o.proxies {
		c.tox = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
		t.Cleanup(func() {
			// After the processes (their cleanups are registered later, so run first):
			// the proxies and every link they carry.
			for _, n := range c.Nodes("") {
				n.proxy.Stop()
			}
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
	})
	return c
}

func newAuth(t testing.TB) *Auth {
	t.Helper()
	f, err := auth.Generate([]string{"default.*"})
	if err != nil {
		t.Fatal(err)
	}
	a := &Auth{Path: filepath.Join(t.TempDir(), "auth.json"), ClusterSecret: f.ClusterSecret}
	for _, p := range f.Principals {
		switch p.Role {
		case auth.RoleAdmin:
			a.Admin = p
		case auth.RoleReader:
			a.Reader = p
		}
	}
	if err := auth.WriteFile(a.Path, f); err != nil {
		t.Fatal(err)
	}
	return a
}

// adminToken is what the cluster's admin clients call with; "" without auth.
func (c *Cluster) adminToken() string {
	if c.Auth == nil {
		return ""
	}
	return c.Auth.Admin.Secret
}

// dumpLogs shows the end of every process's output, for a failed test.
func (c *Cluster) dumpLogs() {
	for _, n := range c.Nodes("") {
		h := n.History()
		for i, p := range h {
			out := p.Output()
			if len(out) > 6000 {
				out = "..." + out[len(out)-6000:]
			}
			c.T.Logf("--- %s (%s), process %d of %d, pid %d, %s:\n%s", n.ID, n.Role, i+1, len(h), p.Pid(), p.ExitState(), out)
		}
	}
}

// Nodes returns the nodes of a role ("" for all), in start order.
func (c *Cluster) Nodes(role string) []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, id := range c.order {
		if n := c.nodes[id]; role == "" || n.Role == role {
			out = append(out, n)
		}
	}
	return out
}

// Node is the node with id; the test fails if there is none.
func (c *Cluster) Node(id string) *Node {
	c.T.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	c.mu.Unlock()
	if n == nil {
		c.T.Fatalf("no node %s", id)
	}
	return n
}

// Start makes node id of role and starts its first process with the cluster's flags and
// then flags (which may override them). It returns once the process has logged the
// addresses it listens on: it may not have reached Postgres yet.
func (c *Cluster) Start(role, id string, flags ...string) *Node {
	c.T.Helper()
	c.mu.Lock()
	_, dup := c.nodes[id]
	c.mu.Unlock()
	if dup {
		c.T.Fatalf("start %s: a node of that id exists (Restart it)", id)
	}
	n := &Node{c: c, ID: id, Role: role, flags: flags}
	if c.tox != nil {
		n.proxy = toxiproxy.NewProxy(c.tox, "pg-"+id, "127.0.0.1:0", c.pgAddr)
		if err := n.proxy.Start(); err != nil {
			c.T.Fatalf("proxy for %s: %v", id, err)
		}
	}
	if role == FileServer {
		n.cacheDir = c.T.TempDir() // kept across restarts, as a node's disk is
	}
	c.mu.Lock()
	c.nodes[id] = n
	c.order = append(c.order, id)
	c.mu.Unlock()
	n.spawn()
	return n
}

// Join starts node id and waits until it says it is a member acting under its leases.
func (c *Cluster) Join(role, id string, flags ...string) *Node {
	c.T.Helper()
	n := c.Start(role, id, flags...)
	n.WaitActing()
	return n
}

// Member waits until node id is a live member, as Postgres sees it (its row, with the
// address its current process advertises, has not expired), and returns it.
func (c *Cluster) Member(id string) *Node {
	c.T.Helper()
	n := c.Node(id)
	WaitFor(c.T, 20*time.Second, id+" to register", func() (string, bool) {
		want := n.Process().Started.AdvertiseAddr
		var addr string
		err := c.DB.QueryRow(context.Background(),
			`SELECT grpc_addr FROM mink_members WHERE node_id = $1 AND expires_at > now()`, id).Scan(&addr)
		if err != nil {
			return err.Error(), false
		}
		return addr, addr == want
	})
	return n
}

// postgresURL is how a node reaches the database: through its own proxy, if it has one.
func (c *Cluster) postgresURL(n *Node) string {
	if n.proxy == nil {
		return c.DBURL
	}
	u := strings.Replace(c.DBURL, c.pgAddr, n.proxy.Listen, 1)
	if u == c.DBURL {
		c.T.Fatalf("database URL %s does not name %s", c.DBURL, c.pgAddr)
	}
	return u
}

// --- Postgres and Kafka for everyone ---

func (c *Cluster) private(what string) *pgtest.Cluster {
	c.T.Helper()
	if c.pg == nil {
		c.T.Fatalf("%s needs a cluster with PrivatePostgres", what)
	}
	return c.pg
}

// StopPostgres shuts Postgres down (fast: open sessions are ended).
func (c *Cluster) StopPostgres() {
	c.T.Helper()
	if err := c.private("StopPostgres").Stop(); err != nil {
		c.T.Fatal(err)
	}
}

// KillPostgres ends Postgres with SIGKILL, as a crash of its machine would.
func (c *Cluster) KillPostgres() {
	c.T.Helper()
	if err := c.private("KillPostgres").Kill(); err != nil {
		c.T.Fatal(err)
	}
}

// StartPostgres starts a stopped or killed Postgres again, on the same port and data.
func (c *Cluster) StartPostgres() {
	c.T.Helper()
	if err := c.private("StartPostgres").Start(); err != nil {
		c.T.Fatal(err)
	}
}

// StopKafka shuts Kafka down: clients see refused connections.
func (c *Cluster) StopKafka() { c.Kafka.Stop() }

// StartKafka starts a stopped PersistentKafka again, on the same addresses and data.
func (c *Cluster) StartKafka() { c.T.Helper(); c.Kafka.Restart() }

// --- What Postgres says ---

// DBNow is the database's clock, the only one lease times are measured with.
func (c *Cluster) DBNow() time.Time {
	c.T.Helper()
	now, err := pg.Now(context.Background(), c.DB)
	if err != nil {
		c.T.Fatal(err)
	}
	return now
}

// Lease is one lease as Postgres holds it; Live when its holder's member row (of the
// incarnation that took it) has not expired at At, which is then its Expires.
type Lease struct {
	Kind      string // "partition" or "writer" (lease.Kind)
	Table     int64
	Partition int32
	Holder    string
	Epoch     int64
	Expires   time.Time
	Acquired  time.Time
	Live      bool
	At        time.Time
}

func (l Lease) String() string {
	h := l.Holder
	if !l.Live {
		h += "(expired)"
	}
	return fmt.Sprintf("%s/%d/%d:%s@%d", l.Kind, l.Table, l.Partition, h, l.Epoch)
}

// Leases reads every lease at one instant of the database clock.
func (c *Cluster) Leases(ctx context.Context) ([]Lease, error) {
	rows, err := c.DB.Query(ctx, `SELECT l.kind, l.table_id, l.partition, coalesce(l.holder, ''), l.epoch,
			coalesce(m.expires_at, 'epoch'::timestamptz), coalesce(l.acquired_at, 'epoch'::timestamptz),
			coalesce(m.expires_at > clock_timestamp(), false), clock_timestamp()
		FROM mink_leases l LEFT JOIN mink_members m ON m.node_id = l.holder AND m.incarnation = l.incarnation
		ORDER BY l.table_id, l.kind, l.partition`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		if err := rows.Scan(&l.Kind, &l.Table, &l.Partition, &l.Holder, &l.Epoch, &l.Expires, &l.Acquired, &l.Live, &l.At); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// MustLeases is Leases, failing the test on an error.
func (c *Cluster) MustLeases() []Lease {
	c.T.Helper()
	ls, err := c.Leases(context.Background())
	if err != nil {
		c.T.Fatal(err)
	}
	return ls
}

// Shares are who holds a table's leases at database time At: live partition leases
// per holder ("" for free or expired ones) and the writer lease's live holder.
type Shares struct {
	Partitions map[string]int
	Writer     string
	At         time.Time
}

func (s Shares) String() string {
	return fmt.Sprintf("partitions %v, writer %q", s.Partitions, s.Writer)
}

// Shares reads the shares of table.
func (c *Cluster) Shares(table int64) Shares {
	c.T.Helper()
	s := Shares{Partitions: map[string]int{}}
	for _, l := range c.MustLeases() {
		s.At = l.At
		if l.Table != table {
			continue
		}
		holder := l.Holder
		if !l.Live {
			holder = ""
		}
		if l.Kind == "writer" {
			s.Writer = holder
		} else {
			s.Partitions[holder]++
		}
	}
	return s
}

// PartitionLeases are a table's live partition leases held by holder, by partition.
func (c *Cluster) PartitionLeases(table int64, holder string) map[int32]Lease {
	c.T.Helper()
	out := map[int32]Lease{}
	for _, l := range c.MustLeases() {
		if l.Table == table && l.Kind == "partition" && l.Live && l.Holder == holder {
			out[l.Partition] = l
		}
	}
	return out
}

// --- Waiting ---

// WaitFor waits until cond holds (await.For) and returns its value; on timeout the last
// value is shown. Every wait of a scenario is on a condition, never a fixed sleep.
func WaitFor[T any](t testing.TB, timeout time.Duration, what string, cond func() (T, bool)) T {
	t.Helper()
	return await.For(t, timeout, what, cond)
}

// Until waits for the local clock to pass a point: how long an outage is held, a
// condition on time rather than a sleep of a guessed length.
func Until(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// history is a copy of a node's processes, oldest first.
func (n *Node) history() []*Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.procs)
}

// fileExists reports whether p exists.
func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
