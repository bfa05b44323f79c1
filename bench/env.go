package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/roleproc"
)

// Env is what every measurement shares: Postgres, Kafka, the role binaries and a work
// folder for process logs and profiles.
type Env struct {
	Log     *slog.Logger
	Root    string // repository root (go.mod)
	Work    string // logs, profiles, built binaries
	BinDir  string // mink-indexer, mink-writer, mink-fileserver
	PGAdmin string // URL of the postgres database of the cluster
	Brokers []string

	pg    *pgtest.Cluster  // nil when PGAdmin was given
	kfake *kfake.Cluster   // nil when brokers were given
	reg   *srfake.Registry // the schema registry of items 9 and 10, started when first asked for

	mu    sync.Mutex
	procs []*Proc
}

// EnvConfig says what to start and what to reuse.
type EnvConfig struct {
	PostgresURL  string   // admin URL of an existing server; "" starts a private cluster
	KafkaBrokers []string // an existing Kafka; nil starts kfake in this process
	BinDir       string   // prebuilt role binaries; "" builds them into Work
	Work         string   // "" makes a temporary folder
	Log          *slog.Logger
}

// NewEnv starts (or connects to) Postgres and Kafka and builds the role binaries.
func NewEnv(ctx context.Context, cfg EnvConfig) (*Env, error) {
	e := &Env{Log: cfg.Log, Work: cfg.Work, PGAdmin: cfg.PostgresURL, Brokers: cfg.KafkaBrokers, BinDir: cfg.BinDir}
	if e.Log == nil {
		e.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	root, err := roleproc.ModuleRoot()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	e.Root = root
	if e.Work == "" {
		if e.Work, err = os.MkdirTemp("", "minkbench-"); err != nil {
			return nil, err
		}
	} else {
		// Absolute: the role processes are given paths under it (--cache-dir).
		if e.Work, err = filepath.Abs(e.Work); err != nil {
			return nil, err
		}
		// What an earlier run left (file-server caches above all) must not be reused.
		for _, d := range []string{"cache", "logs", "local-files", "profiles"} {
			if err := os.RemoveAll(filepath.Join(e.Work, d)); err != nil {
				return nil, err
			}
		}
		if err := os.MkdirAll(e.Work, 0o755); err != nil {
			return nil, err
		}
	}
	if e.BinDir == "" {
		e.BinDir = filepath.Join(e.Work, "bin")
		start := time.Now()
		if err := roleproc.Build(ctx, root, e.BinDir, roleproc.RolePackages()...); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.Log.Info("built the role binaries", "in", time.Since(start).Round(time.Millisecond), "dir", e.BinDir)
	}
	if e.PGAdmin == "" {
		if e.pg, err = pgtest.New(); err != nil {
			return nil, err
		}
		e.PGAdmin = e.pg.URL("postgres")
	}
	if len(e.Brokers) == 0 {
		if e.kfake, err = kfake.NewCluster(kfake.NumBrokers(1)); err != nil {
			e.Close()
			return nil, fmt.Errorf("bench: start kfake: %w", err)
		}
		e.Brokers = e.kfake.ListenAddrs()
	}
	return e, nil
}

// KafkaDesc says which Kafka the run used.
func (e *Env) KafkaDesc() string {
	if e.kfake != nil {
		return "franz-go kfake, 1 broker, in the harness process"
	}
	return "external brokers " + strings.Join(e.Brokers, ",")
}

// PostgresDesc says which Postgres the run used.
func (e *Env) PostgresDesc(ctx context.Context) string {
	where := "private pgtest cluster (fsync off)"
	if e.pg == nil {
		where = "given server"
	}
	pool, err := pgxpool.New(ctx, e.PGAdmin)
	if err != nil {
		return where
	}
	defer pool.Close()
	var v string
	if err := pool.QueryRow(ctx, `SHOW server_version`).Scan(&v); err != nil {
		return where
	}
	return "PostgreSQL " + v + ", " + where
}

// Close stops every process still running, Kafka and Postgres.
func (e *Env) Close() {
	e.mu.Lock()
	procs := e.procs
	e.procs = nil
	e.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
	if e.reg != nil {
		e.reg.Close()
	}
	if e.kfake != nil {
		e.kfake.Close()
	}
	if e.pg != nil {
		e.pg.Remove()
	}
}

// NewDB creates a fresh, migrated database and returns a pool on it and its URL.
func (e *Env) NewDB(ctx context.Context) (*pgxpool.Pool, string, error) {
	url, err := createDB(ctx, e.PGAdmin)
	if err != nil {
		return nil, "", fmt.Errorf("bench: create database: %w", err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, "", err
	}
	if err := pgschema.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, "", err
	}
	return pool, url, nil
}

// createDB makes a database with a fresh name next to the admin URL's.
func createDB(ctx context.Context, admin string) (string, error) {
	pool, err := pgxpool.New(ctx, admin)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	name := fmt.Sprintf("minkbench_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	cfg := pool.Config().ConnConfig
	url := admin
	q := ""
	if i := strings.IndexByte(url, '?'); i >= 0 {
		url, q = url[:i], url[i:]
	}
	if cfg.Database != "" && strings.HasSuffix(url, "/"+cfg.Database) {
		url = strings.TrimSuffix(url, cfg.Database)
	} else if !strings.HasSuffix(url, "/") {
		url += "/"
	}
	return url + name + q, nil
}

// SchemaRegistry returns the schema registry the Schema Registry tables' producers,
// baselines and indexer processes use: franz-go's srfake, an in-memory
// Confluent-compatible registry serving HTTP on loopback in this process, started on
// first use.
func (e *Env) SchemaRegistry() *srfake.Registry {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reg == nil {
		e.reg = srfake.New()
	}
	return e.reg
}

// Kafka returns a Mink Kafka client (kafkasrc) for reads.
func (e *Env) Kafka() (*kafkasrc.Client, error) { return kafkasrc.New(e.Brokers) }

// KgoClient returns a franz-go client with opts.
func (e *Env) KgoClient(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.Brokers...), kgo.DisableClientMetrics()}, opts...)...)
}

// CreateTopic creates a topic with partitions partitions.
func (e *Env) CreateTopic(ctx context.Context, topic string, partitions int32) error {
	cl, err := e.KgoClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("bench: create topic %s: %w", topic, err)
	}
	return nil
}

// Proc is one running role process.
type Proc struct {
	ID   string
	Role string
	*roleproc.Process
}

// Start runs a role binary ("indexer", "writer", "fileserver") as node id against the
// database at dbURL, on loopback with free ports, with a lease TTL and extra flags.
func (e *Env) Start(role, id, dbURL string, ttl time.Duration, extra ...string) (*Proc, error) {
	f := roleproc.Flags{NodeID: id, PostgresURL: dbURL, KafkaBrokers: e.Brokers, GRPCAddr: "127.0.0.1:0",
		LeaseTTL: ttl, ShutdownTimeout: 5 * time.Second, LogLevel: "warn", Extra: extra}
	rp, err := roleproc.Start(roleproc.Spec{Name: id, Path: filepath.Join(e.BinDir, roleproc.Binary(role)), Args: f.Args(), Env: f.Env(),
		LogPath: filepath.Join(e.Work, "logs", id+".log")})
	if err != nil {
		return nil, err
	}
	p := &Proc{ID: id, Role: role, Process: rp}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p, nil
}

// Stop asks the process to stop in order (SIGTERM: release leases, leave) and waits up
// to timeout before killing it.
func (p *Proc) Stop(timeout time.Duration) { p.Process.Stop(timeout, nil) }

// LogTail is the end of the process's output, for error messages.
func (p *Proc) LogTail() string {
	out := p.Output()
	if len(out) > 3000 {
		out = out[len(out)-3000:]
	}
	return out
}

// Warnings are the last n WARN or ERROR lines of the process's JSON log, shortened.
func (p *Proc) Warnings(n int) []string {
	var out []string
	for _, l := range strings.Split(p.Output(), "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			if r := []rune(l); len(r) > 240 {
				l = string(r[:240]) + "…"
			}
			out = append(out, l)
		}
	}
	return out[max(0, len(out)-n):]
}

// StopAll stops processes in parallel.
func StopAll(ps []*Proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { p.Stop(10 * time.Second) })
	}
	wg.Wait()
}

// WaitMembers waits until every id is a live member of the cluster in db.
func WaitMembers(ctx context.Context, db *pgxpool.Pool, timeout time.Duration, ps ...*Proc) error {
	return waitFor(ctx, timeout, "nodes to register", func() (bool, error) {
		for _, p := range ps {
			if p.Exited() {
				return false, fmt.Errorf("%s exited: %s", p.ID, p.LogTail())
			}
			var n int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM mink_members WHERE node_id = $1 AND expires_at > now()`, p.ID).Scan(&n); err != nil {
				return false, err
			}
			if n == 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitFor polls cond every 10ms until it holds, fails or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	return waitEvery(ctx, 10*time.Millisecond, timeout, what, cond)
}

// waitEvery is waitFor polling every interval.
func waitEvery(ctx context.Context, interval, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// freeAddr returns a loopback address with a port free at the time of asking.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// lineValue returns the value after key in a "key: value" file such as /proc/cpuinfo.
func lineValue(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

var errSkipped = errors.New("skipped")

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
