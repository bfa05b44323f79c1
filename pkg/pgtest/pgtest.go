// Package pgtest starts private, throwaway PostgreSQL clusters for tests: initdb and
// pg_ctl from the local server binaries, a random port, a temporary folder. Tests own the
// cluster, so they can stop, kill and restart it to inject the failures the seed names.
//
// MINK_TEST_POSTGRES_URL points the shared helpers (DB, SharedURL) at an existing server
// instead; tests that must stop Postgres always start a private cluster.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/await"
)

// Cluster is one private PostgreSQL server.
type Cluster struct {
	Dir  string // data directory's parent; removed by Remove
	Port int
	bin  string
	cred *syscall.Credential
	mu   sync.Mutex
	cmd  *exec.Cmd // the running postgres, nil when stopped
	done chan struct{}
}

// BinDir finds the PostgreSQL server binaries: $MINK_PG_BIN, then the newest
// /usr/lib/postgresql/*/bin, then $PATH.
func BinDir() (string, error) {
	if d := os.Getenv("MINK_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgtest: PostgreSQL server binaries not found (apt-get install -y postgresql, or set MINK_PG_BIN)")
}

func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// New initialises a cluster in a fresh folder and starts it.
func New() (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mink-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, bin: bin}
	// initdb and postgres refuse to run as root: run them as the postgres user, in a
	// folder it can traverse.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root needs a 'postgres' OS user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	init := exec.Command(filepath.Join(bin, "initdb"), "-D", c.dataDir(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--no-locale")
	init.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := init.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, out)
	}
	if err := c.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }

// URL is the connection string of database db on this cluster.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Start starts the server (again), on the same port after the first start, and waits
// until it accepts connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return nil
	}
	for attempt := 0; ; attempt++ {
		if c.Port == 0 || attempt > 0 && c.fresh() {
			p, err := freePort()
			if err != nil {
				return err
			}
			c.Port = p
		}
		err := c.startLocked()
		if err == nil {
			return nil
		}
		// A fresh port can be taken between probing and binding; a restart keeps its port
		// because clients reconnect to it.
		if attempt >= 5 || !c.fresh() {
			return err
		}
	}
}

// fresh reports whether the server has never run, so its port may still change.
func (c *Cluster) fresh() bool {
	_, err := os.Stat(filepath.Join(c.Dir, "started"))
	return err != nil
}

func (c *Cluster) startLocked() error {
	// fsync=off only risks data on an OS crash; commits stay synchronous so a SIGKILL of
	// Postgres (Kill) loses nothing it acknowledged, as with a real server. Losing an
	// acknowledged lease change would turn an epoch back.
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.dataDir(),
		"-p", strconv.Itoa(c.Port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=", "-c", "fsync=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			break
		}
		select {
		case <-done:
			return fmt.Errorf("pgtest: postgres exited at start; log: %s", c.logTail())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("pgtest: postgres did not accept connections: %v; log: %s", err, c.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.cmd, c.done = cmd, done
	os.WriteFile(filepath.Join(c.Dir, "started"), nil, 0o644)
	return nil
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Stop shuts the server down fast (SIGINT: "fast" shutdown, open sessions are ended).
func (c *Cluster) Stop() error { return c.signal(syscall.SIGINT) }

// Kill ends the server with SIGKILL, as a crash would; the next Start recovers.
func (c *Cluster) Kill() error { return c.signal(syscall.SIGKILL) }

func (c *Cluster) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	var kids []int
	if sig == syscall.SIGKILL {
		// Postgres backends are session leaders (setsid), out of the postmaster's group:
		// kill each child too, as a crash of the machine would.
		kids = children(c.cmd.Process.Pid)
		for _, k := range kids {
			syscall.Kill(k, sig)
		}
	}
	c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
	// Until the last backend is gone it holds the shared memory, and a restart would be
	// refused.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		alive := false
		for _, k := range kids {
			alive = alive || running(k)
		}
		if !alive {
			break
		}
	}
	c.cmd = nil
	return nil
}

// Remove stops the server and deletes its files.
func (c *Cluster) Remove() {
	c.Stop()
	os.RemoveAll(c.Dir)
}

// CreateDB creates a fresh database with a random name and returns its URL.
func (c *Cluster) CreateDB(ctx context.Context) (string, error) {
	return createDB(ctx, c.URL("postgres"))
}

func createDB(ctx context.Context, adminURL string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var b [6]byte
	rand.Read(b[:])
	name := "mink_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return "", err
	}
	return replaceDB(adminURL, cfg.Database, name), nil
}

// replaceDB swaps the database name in a postgres:// URL.
func replaceDB(url, from, to string) string {
	q := ""
	if i := strings.IndexByte(url, '?'); i >= 0 {
		url, q = url[:i], url[i:]
	}
	if from != "" && strings.HasSuffix(url, "/"+from) {
		url = strings.TrimSuffix(url, from)
	} else if !strings.HasSuffix(url, "/") {
		url += "/"
	}
	return url + to + q
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		k, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(k); ok && st.ppid == pid {
			out = append(out, k)
		}
	}
	return out
}

type stat struct {
	state byte
	ppid  int
}

// procStat reads a process's state and parent from /proc/<pid>/stat.
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces, so read after its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return stat{state: f[0][0], ppid: ppid}, true
}

// running reports whether pid exists and is not a zombie (a zombie holds no memory).
func running(pid int) bool {
	st, ok := procStat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts a private cluster for one test and removes it when the test ends.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := New()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Remove)
	return c
}

var shared struct {
	once sync.Once
	url  string
	c    *Cluster
	err  error
}

// SharedURL returns the admin URL of a cluster shared by the tests of this process:
// MINK_TEST_POSTGRES_URL, or a private cluster started on first use. Call Shutdown from
// TestMain to remove the private one.
func SharedURL() (string, error) {
	shared.once.Do(func() {
		if u := os.Getenv("MINK_TEST_POSTGRES_URL"); u != "" {
			shared.url = u
			return
		}
		shared.c, shared.err = New()
		if shared.err == nil {
			shared.url = shared.c.URL("postgres")
		}
	})
	return shared.url, shared.err
}

// Shutdown removes the shared private cluster, if one was started.
func Shutdown() {
	if shared.c != nil {
		shared.c.Remove()
	}
}

// DB gives a test its own fresh database on the shared cluster, as a pool closed when the
// test ends; isolation without a server per test.
func DB(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	admin, err := SharedURL()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := createDB(ctx, admin)
	if err != nil {
		tb.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool, url
}

// WaitLockWaiter waits until a session of db's database waits for a lock: a test that
// holds a row lock knows another session has reached it.
func WaitLockWaiter(tb testing.TB, db *pgxpool.Pool) {
	tb.Helper()
	await.True(tb, 10*time.Second, "a session to wait for a lock", func() bool {
		var n int
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0
	})
}
