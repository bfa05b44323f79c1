package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Open starts the cluster kept in dir, initialising it on first use, on a fixed port: a
// long-lived local server (make dev) whose data survives restarts, unlike New's throwaway
// ones. Stop it with Stop, never Remove. A server left running on dir by a process that
// was killed is stopped first, so a crashed launcher never blocks the next start.
func Open(dir string, port int) (*Cluster, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("pgtest: port %d out of range", port)
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Port: port, bin: bin}
	if os.Geteuid() == 0 {
		if err := c.asPostgresUser(); err != nil {
			return nil, err
		}
	}
	if err := stopStale(c.dataDir()); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		// No PG_VERSION: never initialised, or initdb was interrupted; start afresh.
		if err := os.RemoveAll(c.dataDir()); err != nil {
			return nil, err
		}
		init := exec.Command(filepath.Join(bin, "initdb"), "-D", c.dataDir(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--no-locale")
		init.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		if out, err := init.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("pgtest: initdb %s: %v: %s", c.dataDir(), err, out)
		}
	} else if err != nil {
		return nil, err
	}
	// A taken port would only show as a line in postgres.log: say so directly.
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("pgtest: port %d is taken (another server, or another make dev?): %w", port, err)
	}
	l.Close()
	// startLocked rather than Start: Start may move a never-started cluster to a random
	// port, and this one's URL must stay the same from run to run.
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.startLocked(); err != nil {
		return nil, err
	}
	return c, nil
}

// asPostgresUser makes the server run as the postgres OS user (initdb and postgres refuse
// root), owning dir, and checks it can reach dir at all.
func (c *Cluster) asPostgresUser() error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("pgtest: running as root needs a 'postgres' OS user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	for d := filepath.Dir(c.Dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("pgtest: the postgres user cannot reach %s: %s is not searchable by others (chmod o+x it, or use an external server)", c.Dir, d)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return err
	}
	return os.Chown(c.Dir, uid, gid)
}

// stopStale stops a postmaster still running on dataDir (its launcher was killed) and
// waits for it to exit; postgres' own lock would otherwise refuse the new server.
func stopStale(dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return nil // no server, or none that left its pid
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line)))
	if err != nil || pid <= 0 {
		return nil
	}
	// The pid may have been reused since: only a postgres process is ours to stop.
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte("postgres")) {
		return nil
	}
	syscall.Kill(pid, syscall.SIGINT) // fast shutdown
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	return fmt.Errorf("pgtest: a stale postgres (pid %d) on %s did not stop within 30s; killed it, try again", pid, dataDir)
}

// Pid is the running server's process id, 0 when it is stopped.
func (c *Cluster) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}
