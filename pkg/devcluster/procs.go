package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/roleproc"
)

// process is one running role.
type process struct {
	node Node
	*roleproc.Process
}

// startRole starts one role process with its output in logs/<node>.log. The previous
// run's log is kept as <node>.log.prev.
func startRole(c *Config, n Node, postgresURL string, brokers []string, reg registry.Config, authConfig string) (*process, error) {
	logPath := filepath.Join(c.Dir, "logs", n.ID+".log")
	os.Rename(logPath, logPath+".prev")
	f := roleFlags(c, n, postgresURL, brokers, reg, authConfig)
	p, err := roleproc.Start(roleproc.Spec{
		Name: n.ID, Path: filepath.Join(c.BinDir, roleproc.Binary(n.Role)),
		Args: f.Args(), Env: append(f.Env(), registrySecrets(reg)...), LogPath: logPath,
		// Its own process group: Ctrl-C in the terminal reaches only the launcher, which
		// stops the roles in order (they need Postgres to release their leases). A killed
		// launcher still takes its roles with it.
		Group: true, ParentDeath: syscall.SIGTERM,
	})
	if err != nil {
		return nil, fmt.Errorf("%w (make dev builds it; or run make build)", err)
	}
	return &process{node: n, Process: p}, nil
}

// roleFlags are a role's flags: where everything is, and with auth on the auth config
// (every role reads the same file, as every node of a real cluster does). The Postgres URL
// goes in the environment (Flags.Env), as the registry's secrets do.
func roleFlags(c *Config, n Node, postgresURL string, brokers []string, reg registry.Config, authConfig string) roleproc.Flags {
	f := roleproc.Flags{
		NodeID: n.ID, PostgresURL: postgresURL, KafkaBrokers: brokers, GRPCAddr: Addr(n.GRPCPort),
		LeaseTTL: c.LeaseTTL, ShutdownTimeout: c.ShutdownTimeout, LogLevel: c.LogLevel.String(),
		AuthConfig: authConfig, Extra: registryArgs(reg),
	}
	if n.MetricsPort != 0 {
		f.MetricsAddr = Addr(n.MetricsPort)
	}
	if n.ConsolePort != 0 {
		f.ConsoleAddr = Addr(n.ConsolePort)
	}
	if n.Role == roleproc.FileServer {
		f.CatalogAddr, f.S3Addr, f.CacheDir = Addr(n.CatalogPort), Addr(n.S3Port), filepath.Join(c.Dir, "cache", n.ID)
	}
	return f
}

// registryArgs are the --schema-registry-* flags of a role, but for the secrets and the
// URL, which may hold basic auth credentials.
func registryArgs(reg registry.Config) []string {
	var args []string
	for _, f := range []struct{ name, value string }{
		{"schema-registry-username", reg.Username}, {"schema-registry-ca-file", reg.CAFile},
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

// registrySecrets are the registry's URL (its user info may hold a password), password and
// token as the role's environment, where ps does not show them.
func registrySecrets(reg registry.Config) []string {
	var env []string
	if reg.URL != "" {
		env = append(env, flagenv.EnvName("schema-registry-url")+"="+reg.URL)
	}
	if reg.Password != "" {
		env = append(env, flagenv.EnvName("schema-registry-password")+"="+reg.Password.Reveal())
	}
	if reg.BearerToken != "" {
		env = append(env, flagenv.EnvName("schema-registry-bearer-token")+"="+reg.BearerToken.Reveal())
	}
	return env
}

// waitHealthy waits until every process answers SERVING on grpc.health.v1, failing early
// when one exits.
func waitHealthy(ctx context.Context, procs []*process, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, p := range procs {
		if err := p.WaitServing(ctx, Addr(p.node.GRPCPort)); err != nil {
			return err
		}
	}
	return nil
}
