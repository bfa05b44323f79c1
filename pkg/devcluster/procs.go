package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/registry"
)

// process is one running role.
type process struct {
	node    Node
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when it has exited and been reaped
	err     error         // how it exited; read after done
}

// startRole starts one role process with its output in logs/<node>.log. The previous
// run's log is kept as <node>.log.prev.
func startRole(c *Config, n Node, postgresURL string, brokers []string, reg registry.Config, authConfig string) (*process, error) {
	bin := filepath.Join(c.BinDir, "mink-"+n.Role)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (make dev builds it; or run make build)", bin, err)
	}
	args := roleArgs(c, n, postgresURL, brokers, reg, authConfig)
	logPath := filepath.Join(c.Dir, "logs", n.ID+".log")
	os.Rename(logPath, logPath+".prev")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(roleEnv(), registrySecrets(reg)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: Ctrl-C in the terminal reaches only the launcher, which stops
	// the roles in order (they need Postgres to release their leases). Pdeathsig: a killed
	// launcher still takes its roles with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", n.ID, err)
	}
	p := &process{node: n, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// roleArgs are a role's flags: where everything is, and with auth on the auth config
// (every role reads the same file, as every node of a real cluster does).
func roleArgs(c *Config, n Node, postgresURL string, brokers []string, reg registry.Config, authConfig string) []string {
	args := []string{
		"--node-id", n.ID, "--postgres-url", postgresURL, "--kafka-brokers", strings.Join(brokers, ","),
		"--grpc-addr", Addr(n.GRPCPort), "--lease-ttl", c.LeaseTTL.String(),
		"--shutdown-timeout", c.ShutdownTimeout.String(), "--log-level", c.LogLevel.String(),
	}
	if n.MetricsPort != 0 {
		args = append(args, "--metrics-addr", Addr(n.MetricsPort))
	}
	args = append(args, registryArgs(reg)...)
	if authConfig != "" {
		args = append(args, "--auth-config", authConfig)
	}
	if n.Role == "fileserver" {
		args = append(args, "--catalog-addr", Addr(n.CatalogPort), "--s3-addr", Addr(n.S3Port),
			"--cache-dir", filepath.Join(c.Dir, "cache", n.ID))
	}
	return args
}

// roleEnv is the launcher's environment without MINK_* variables: every setting of a role
// is a flag given here (but for the registry's secrets: registrySecrets), and a
// developer's MINK_* exports meant for the launcher (or for minkctl) must not change the
// roles behind its back.
func roleEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINK_") {
			env = append(env, kv)
		}
	}
	return env
}

// registryArgs are the --schema-registry-* flags of a role, but for the secrets.
func registryArgs(reg registry.Config) []string {
	var args []string
	for _, f := range []struct{ name, value string }{
		{"schema-registry-url", reg.URL}, {"schema-registry-username", reg.Username}, {"schema-registry-ca-file", reg.CAFile},
	} {
		if f.value != "" {
			args = append(args, "--"+f.name, f.value)
		}
	}
	if reg.URL != "" && reg.Timeout != 0 {
		args = append(args, "--schema-registry-timeout", reg.Timeout.String())
	}
	return args
}

// registrySecrets are the registry's password and token as the role's environment, where
// ps does not show them.
func registrySecrets(reg registry.Config) []string {
	var env []string
	if reg.Password != "" {
		env = append(env, flagenv.EnvName("schema-registry-password")+"="+reg.Password)
	}
	if reg.BearerToken != "" {
		env = append(env, flagenv.EnvName("schema-registry-bearer-token")+"="+reg.BearerToken)
	}
	return env
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to grace for a clean exit (leases released, member row
// gone), then kills the process group. force cuts the wait short.
func (p *process) stop(grace time.Duration, force <-chan struct{}) error {
	if p.exited() {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	why := fmt.Sprintf("did not stop within %v of SIGTERM", grace)
	select {
	case <-p.done:
		return p.exitError()
	case <-t.C:
	case <-force:
		why = "was stopping"
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s %s: killed (see %s)", p.node.ID, why, p.logPath)
}

// exitError is nil for a clean exit.
func (p *process) exitError() error {
	if p.err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", p.node.ID, p.err)
}

// describeExit says how a process ended, with the end of its log.
func (p *process) describeExit() string {
	how := "exited"
	if p.err != nil {
		how = p.err.Error()
	}
	return fmt.Sprintf("%s (%s, pid %d) %s; last lines of %s:\n%s", p.node.ID, p.node.Role, p.cmd.Process.Pid, how, p.logPath, tail(p.logPath, 15))
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
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

// waitHealthy waits until every process answers SERVING on grpc.health.v1, failing early
// when one exits.
func waitHealthy(ctx context.Context, procs []*process, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, p := range procs {
		if err := waitServing(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func waitServing(ctx context.Context, p *process) error {
	conn, err := grpc.NewClient(Addr(p.node.GRPCPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
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
			return errors.New(p.describeExit())
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s is not healthy at %s (last answer: %s); last lines of %s:\n%s",
					p.node.ID, Addr(p.node.GRPCPort), last, p.logPath, tail(p.logPath, 15))
			}
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
