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
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
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
	root, err := repoRoot()
	if err != nil {
		return nil, err
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
		if err := buildRoles(ctx, root, e.BinDir); err != nil {
			return nil, err
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
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Start runs a role binary ("indexer", "writer", "fileserver") as node id against the
// database at dbURL, on loopback with free ports, with a lease TTL and extra flags.
func (e *Env) Start(role, id, dbURL string, ttl time.Duration, extra ...string) (*Proc, error) {
	args := append([]string{"--node-id", id, "--postgres-url", dbURL, "--kafka-brokers", strings.Join(e.Brokers, ","),
		"--grpc-addr", "127.0.0.1:0", "--lease-ttl", ttl.String(), "--shutdown-timeout", "5s", "--log-level", "warn"}, extra...)
	p := &Proc{ID: id, Role: role, log: filepath.Join(e.Work, "logs", id+".log"), done: make(chan struct{})}
	if err := os.MkdirAll(filepath.Dir(p.log), 0o755); err != nil {
		return nil, err
	}
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(filepath.Join(e.BinDir, "mink-"+role), args...)
	p.cmd.Env = cleanEnv()
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return nil, err
	}
	go func() {
		p.cmd.Wait()
		out.Close()
		close(p.done)
	}()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop asks the process to stop in order (SIGTERM: release leases, leave) and waits up
// to timeout before killing it.
func (p *Proc) Stop(timeout time.Duration) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
	}
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// LogTail is the end of the process's output, for error messages.
func (p *Proc) LogTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// Warnings are the last n WARN or ERROR lines of the process's JSON log, shortened.
func (p *Proc) Warnings(n int) []string {
	b, _ := os.ReadFile(p.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
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

// cleanEnv is this process's environment without MINK_* variables, so a developer's
// settings cannot change what a benchmark runs.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINK_") {
			env = append(env, kv)
		}
	}
	return env
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("bench: no go.mod above %s: run from inside the repository", dir)
		}
	}
}

// goBin is the go command of the toolchain running the harness, or "go".
func goBin() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// buildRoles compiles the three role binaries into dir under their released names.
func buildRoles(ctx context.Context, root, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goBin(), "build", "-o", dir+string(filepath.Separator),
		"./services/indexer", "./services/writer", "./services/fileserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench: go build: %v\n%s", err, out)
	}
	for _, role := range []string{"indexer", "writer", "fileserver"} {
		if err := os.Rename(filepath.Join(dir, role), filepath.Join(dir, "mink-"+role)); err != nil {
			return err
		}
	}
	return nil
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
