// Package roleproc runs Mink's role binaries (and the tools beside them) as real
// processes: build them once, start one with its flags and its log in a file, find the
// addresses it listens on from its own log, wait until it serves, send it the signals of
// the failures the seed names (SIGKILL: a crash, SIGSTOP/SIGCONT: a pause, SIGTERM: a
// clean leave), and stop it in order. make dev (pkg/devcluster) and the real-process
// test cluster (test/cluster) both start their roles through it, so a process is started,
// found ready and stopped by one set of rules.
package roleproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The roles, as their binaries are named after them: mink-<role>.
const (
	Indexer    = "indexer"
	Writer     = "writer"
	FileServer = "fileserver"
)

// Roles are every role, in the order a cluster usually starts them.
var Roles = []string{Indexer, Writer, FileServer}

// Binary is the released name of a role's binary.
func Binary(role string) string { return "mink-" + role }

// Spec says how to start one process.
type Spec struct {
	Name    string   // what messages call it: the node id
	Path    string   // the binary
	Args    []string // its flags
	Env     []string // extra KEY=value pairs on top of CleanEnv
	LogPath string   // stdout and stderr, appended; the folder is created
	// Group gives the process a process group of its own, so a signal to the terminal's
	// group reaches only its launcher, and Stop kills the whole group.
	Group bool
	// ParentDeath is the signal the process gets when its starter dies (0: none), so a
	// killed launcher or test binary leaves no role behind.
	ParentDeath syscall.Signal
}

// Process is one started process (running, paused or exited).
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once it has exited and been reaped
	err     error         // how it exited; read after done
	paused  atomic.Bool

	mu      sync.Mutex
	started *Started // from its log, once found
	scanned int64    // bytes of the log already looked through for the starting line
}

// Started is what a role logs once its listeners are bound: its "starting" line.
type Started struct {
	GRPCAddr      string `json:"grpc_addr"`
	AdvertiseAddr string `json:"advertise_addr"`
	MetricsAddr   string `json:"metrics_addr"`
	ConsoleAddr   string `json:"console_addr"` // "" when the console is off
}

// Start starts the process described by s. It does not wait for anything: see
// WaitStarted and WaitServing.
func Start(s Spec) (*Process, error) {
	if _, err := os.Stat(s.Path); err != nil {
		return nil, fmt.Errorf("%s: %w (make build builds it)", s.Path, err)
	}
	if err := os.MkdirAll(filepath.Dir(s.LogPath), 0o755); err != nil {
		return nil, err
	}
	// Private: a role's log is for its operator, not for every user of the machine.
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	// How far the log went before this process: its starting line is after that.
	from, _ := logf.Seek(0, io.SeekEnd)
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = append(CleanEnv(), s.Env...)
	// A file, not a pipe: a process whose starter died keeps logging (and releasing its
	// leases) instead of dying of SIGPIPE.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: s.Group, Pdeathsig: s.ParentDeath}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p := &Process{Name: s.Name, LogPath: s.LogPath, cmd: cmd, done: make(chan struct{}), scanned: from}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// CleanEnv is this process's environment without MINK_* variables: every setting of a
// process started here is a flag given to it, and a developer's MINK_* exports (meant
// for a launcher, minkctl or a test) must not change what runs behind its back.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINK_") {
			env = append(env, kv)
		}
	}
	return env
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// State is how the process exited; nil while it runs.
func (p *Process) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// Err is nil for a clean exit (and while it runs), else how it exited.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Paused reports whether the process is stopped by SIGSTOP (and not continued since).
func (p *Process) Paused() bool { return !p.Exited() && p.paused.Load() }

// Signal sends sig to the process, and remembers a pause (SIGSTOP) or a resume (SIGCONT).
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to %s (pid %d): %w", sig, p.Name, p.Pid(), err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused.Store(true)
	case syscall.SIGCONT:
		p.paused.Store(false)
	}
	return nil
}

// Wait waits up to timeout for the process to exit and returns how it did.
func (p *Process) Wait(timeout time.Duration) (*os.ProcessState, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.cmd.ProcessState, nil
	case <-t.C:
		return nil, fmt.Errorf("%s (pid %d) did not exit within %v", p.Name, p.Pid(), timeout)
	}
}

// Kill ends the process with SIGKILL (which ends a paused one too), and of its group
// when it has one, and waits for it.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	if p.cmd.SysProcAttr != nil && p.cmd.SysProcAttr.Setpgid {
		syscall.Kill(-p.Pid(), syscall.SIGKILL)
	} else {
		p.cmd.Process.Kill()
	}
	<-p.done
}

// Stop asks the process to stop in order (SIGTERM: health NOT_SERVING, leases released,
// member row gone, requests drained) and waits up to grace for it; then, or as soon as
// force is closed, it kills it. A clean exit is nil.
func (p *Process) Stop(grace time.Duration, force <-chan struct{}) error {
	if p.Exited() {
		return nil
	}
	if p.Paused() {
		p.Signal(syscall.SIGCONT) // a stopped process cannot act on SIGTERM
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	why := fmt.Sprintf("did not stop within %v of SIGTERM", grace)
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s: %w", p.Name, p.err)
		}
		return nil
	case <-t.C:
	case <-force:
		why = "was stopping"
	}
	p.Kill()
	return fmt.Errorf("%s %s: killed (see %s)", p.Name, why, p.LogPath)
}

// Output is everything the process (and earlier ones logging to the same file) wrote.
func (p *Process) Output() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Tail is the last n lines of the process's log, indented, for error messages.
func (p *Process) Tail(n int) string { return Tail(p.LogPath, n) }

// Tail is the last n lines of a file, indented.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// DescribeExit says how the process ended, with the end of its log.
func (p *Process) DescribeExit() string {
	how := "is running"
	if p.Exited() {
		how = "exited"
		if p.err != nil {
			how = p.err.Error()
		}
	}
	return fmt.Sprintf("%s (pid %d) %s; last lines of %s:\n%s", p.Name, p.Pid(), how, p.LogPath, p.Tail(15))
}

// WaitStarted waits until the process has logged its "starting" line (its gRPC and
// metrics listeners are bound, the role's own ones too) and returns what it says: the
// way to find a process started on port 0, without asking Postgres, which may be down.
func (p *Process) WaitStarted(ctx context.Context) (Started, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if s, ok := p.findStarted(); ok {
			return s, nil
		}
		select {
		case <-p.done:
			if s, ok := p.findStarted(); ok {
				return s, nil
			}
			return Started{}, fmt.Errorf("%s exited at start: %s", p.Name, p.DescribeExit())
		case <-ctx.Done():
			return Started{}, fmt.Errorf("%s did not log its addresses (%w): %s", p.Name, ctx.Err(), p.DescribeExit())
		case <-tick.C:
		}
	}
}

// findStarted looks through what the log gained since the last look for the starting
// line (whole lines only).
func (p *Process) findStarted() (Started, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started != nil {
		return *p.started, true
	}
	f, err := os.Open(p.LogPath)
	if err != nil {
		return Started{}, false
	}
	defer f.Close()
	if _, err := f.Seek(p.scanned, io.SeekStart); err != nil {
		return Started{}, false
	}
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil { // a partial line is read again next time
			return Started{}, false
		}
		p.scanned += int64(len(line))
		if !bytes.Contains(line, []byte(`"msg":"starting"`)) {
			continue
		}
		var s Started
		if json.Unmarshal(line, &s) == nil && s.GRPCAddr != "" {
			p.started = &s
			return s, true
		}
	}
}

// WaitServing waits until the gRPC server at addr (the process's) answers SERVING on
// grpc.health.v1: the node has registered as a member and takes its share of leases.
// dial are extra dial options (TLS); it fails early when the process exits.
func (p *Process) WaitServing(ctx context.Context, addr string, dial ...grpc.DialOption) error {
	if len(dial) == 0 {
		dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	var last string
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = resp.GetStatus().String()
		}
		select {
		case <-p.done:
			return errors.New(p.DescribeExit())
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s is not healthy at %s (last answer: %s); last lines of %s:\n%s",
					p.Name, addr, last, p.LogPath, p.Tail(15))
			}
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Build compiles main packages (import paths relative to the module root, such as
// "./services/indexer" or "./cmd/minkctl") into dir in one go command (shared work, in
// parallel), then gives the roles their released names (mink-<role>).
func Build(ctx context.Context, root, dir string, pkgs ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, GoBin(), append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	for _, pkg := range pkgs {
		if role, ok := strings.CutPrefix(pkg, "./services/"); ok {
			if err := os.Rename(filepath.Join(dir, role), filepath.Join(dir, Binary(role))); err != nil {
				return err
			}
		}
	}
	return nil
}

// RolePackages are the main packages of the three roles.
func RolePackages() []string {
	out := make([]string, len(Roles))
	for i, r := range Roles {
		out[i] = "./services/" + r
	}
	return out
}

// GoBin is the go command of the toolchain running this program, or "go".
func GoBin() string {
	//lint:ignore SA1019 the toolchain that built this (test) binary, on this machine: the one wanted
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

// ModuleRoot is the folder of the go.mod above the working folder.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if fileExists(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s: run from inside the repository", dir)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
