package roleproc

import (
	"strings"
	"time"

	"github.com/minkhq/mink/pkg/flagenv"
)

// Flags are the flags a role is started with on this machine: where Postgres and Kafka
// are, where it listens, and for a file server its catalog, S3 and cache. Empty values are
// left out (the role's defaults apply); Extra goes last, so it can override. Args are the
// flags that are no secret, for the command line; Env the ones that are, for the
// environment, where ps does not show them to other users.
type Flags struct {
	NodeID          string
	PostgresURL     string // a secret (it may hold a password): in Env, never in Args
	KafkaBrokers    []string
	GRPCAddr        string // "127.0.0.1:0": a free port, found with WaitStarted
	MetricsAddr     string
	ConsoleAddr     string // --console-addr: the browser console; "" leaves it off
	LeaseTTL        time.Duration
	ShutdownTimeout time.Duration
	LogLevel        string
	AuthConfig      string // --auth-config: the cluster's auth file; "" runs without auth

	// The file server's.
	CatalogAddr string
	S3Addr      string
	CacheDir    string
	CacheBytes  string

	Extra []string
}

// Args are the flags as a command line.
func (f Flags) Args() []string {
	var args []string
	add := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name, value)
		}
	}
	dur := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	add("node-id", f.NodeID)
	add("kafka-brokers", strings.Join(f.KafkaBrokers, ","))
	add("grpc-addr", f.GRPCAddr)
	add("metrics-addr", f.MetricsAddr)
	add("console-addr", f.ConsoleAddr)
	add("lease-ttl", dur(f.LeaseTTL))
	add("shutdown-timeout", dur(f.ShutdownTimeout))
	add("log-level", f.LogLevel)
	add("auth-config", f.AuthConfig)
	add("catalog-addr", f.CatalogAddr)
	add("s3-addr", f.S3Addr)
	add("cache-dir", f.CacheDir)
	add("cache-bytes", f.CacheBytes)
	return append(args, f.Extra...)
}

// Env are the secret flags as environment twins (KEY=value): MINK_POSTGRES_URL.
func (f Flags) Env() []string {
	if f.PostgresURL == "" {
		return nil
	}
	return []string{flagenv.EnvName("postgres-url") + "=" + f.PostgresURL}
}
