package node

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/minkhq/mink/pkg/admin"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/httplimit"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tlsfiles"
)

// Config is one role process's configuration. Every field with a flag has an environment
// twin (flagenv): --lease-ttl and MINK_LEASE_TTL.
type Config struct {
	Role    lease.Role // set by the role's main before RegisterFlags
	Version string     // set by the role's main
	// RoleConfig holds the role's own flags (nil: it has none); set by the role's main
	// before RegisterFlags, and read by the role's Setup.
	RoleConfig RoleConfig

	NodeID string
	// PostgresURL is the cluster's database (a secret: it usually holds a password), or
	// PostgresURLFile names a file holding it; DatabaseURL reads whichever is set.
	PostgresURL     flagenv.Secret
	PostgresURLFile string
	KafkaBrokers    flagenv.List
	GRPCAddr        string
	AdvertiseAddr   string
	LeaseTTL        time.Duration
	MetricsAddr     string
	// ConsoleAddr is where the browser console is served (pkg/console); empty: off.
	ConsoleAddr string
	// MetricsToken or MetricsTokenFile is the bearer token /metrics asks for (none: it
	// is open, as before there was one).
	MetricsToken     flagenv.Secret
	MetricsTokenFile string
	ShutdownTimeout  time.Duration
	LogLevel         slog.Level

	// Registry is how every role reaches the Schema Registry of Avro, Protobuf and JSON
	// Schema tables (--schema-registry-*).
	Registry registry.Config

	// AuthConfig is the cluster's auth config file (pkg/auth), the same on every node;
	// empty: auth is off, and the node says so loudly.
	AuthConfig string
	// TLS of every listener (gRPC, catalog, S3, metrics) and of node-to-node calls:
	// the node's certificate and key (reloaded when the files change) and the CA that
	// signs peers' and clients' certificates.
	TLSCertFile     string
	TLSKeyFile      string
	TLSClientCAFile string
	// MaxConnections caps the open connections of each listener (gRPC, metrics,
	// console, catalog, S3); more wait until one closes. 0: the default, 4096.
	MaxConnections int

	// Not flags: set by code.
	Logger  *slog.Logger                // nil: JSON on stderr at LogLevel
	Tables  admin.Tables                // table administration; nil: the default over Postgres and Kafka
	Workers map[lease.Kind]lease.Worker `json:"-"` // the role's work under each kind of lease it holds
	// Setup builds the role's own work once Run has made what it needs (nil: none).
	// Code, not config: a JSON dump of the config leaves it and Workers out.
	Setup func(Deps) (Parts, error) `json:"-"`
}

// Deps are what Run makes and a role's work may use.
type Deps struct {
	Config        Config // validated, with defaults resolved
	NodeID        string
	AdvertiseAddr string
	DB            *pgxpool.Pool
	Kafka         *kafkasrc.Client
	Registry      *registry.Client // nil when no --schema-registry-url is set
	Auth          *auth.Authority  // nil when auth is off (no --auth-config)
	// TLS is the server TLS config of the role's own listeners (the file server's
	// catalog and S3); nil without --tls-cert-file.
	TLS    *tls.Config
	Codecs *tablecodec.Codecs // decoders of every table's files (schema versions, registry schemas)
	Meter  metric.Meter
	Logger *slog.Logger // carries "role" and "node": a role adds neither again

	// The node's telemetry providers, for roles that instrument HTTP servers or clients.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// DialOptions carry telemetry to node-to-node calls, so a forwarded request is one
	// trace across both nodes.
	DialOptions []grpc.DialOption
}

// Parts are what a role adds to its node.
type Parts struct {
	Workers  map[lease.Kind]lease.Worker
	Register func(*grpc.Server)            // extra gRPC services
	Actors   []func(context.Context) error // loops and listeners; each ends when its ctx ends
	Addrs    map[string]string             // advertised addresses for the member row ("catalog", "s3")
	Figures  func() map[string]string      // role figures for GetStatus
	// MaxPartitions caps the partition leases the node takes (0: no cap); its member
	// row tells every node, so the shares leave room for it.
	MaxPartitions int
}

// RoleConfig is the configuration a role owns: its flags, registered beside the node's
// and checked with them, so pkg/node knows no role's flags.
type RoleConfig interface {
	RegisterFlags(fs *flag.FlagSet)
	// Validate reports each bad value naming its flag (flagenv.Errorf).
	Validate() error
}

// DefaultGRPCAddr is where a node serves gRPC unless told otherwise.
const DefaultGRPCAddr = ":7070"

// RegisterFlags adds the node's flags and its RoleConfig's to fs, with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.NodeID, "node-id", "", "this node's id, unique in the cluster (default <hostname>-<grpc port>)")
	fs.Var(&c.PostgresURL, "postgres-url", "Postgres connection URL of the cluster's database, postgres://user:password@host:5432/db (this or --postgres-url-file is required); it holds a password, so give it as MINK_POSTGRES_URL or in the file: a command line is visible to every local user")
	fs.StringVar(&c.PostgresURLFile, "postgres-url-file", "", "file holding the Postgres connection URL instead of --postgres-url (one line; private to its owner, mode 0600 or 0400, or the node refuses it)")
	fs.Var(&c.KafkaBrokers, "kafka-brokers", "comma-separated Kafka bootstrap brokers, host:port (required)")
	fs.StringVar(&c.GRPCAddr, "grpc-addr", DefaultGRPCAddr, "address to serve gRPC (admin, health, reflection) on")
	fs.StringVar(&c.AdvertiseAddr, "advertise-addr", "", "gRPC address other nodes reach this one at (default <hostname>:<grpc port>, or --grpc-addr when it names a host)")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", lease.DefaultTTL, "lease_ttl: a crashed node's leases are taken after this; rounds run every lease_ttl/3")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "address to serve Prometheus /metrics on (empty: off)")
	fs.StringVar(&c.ConsoleAddr, "console-addr", "", "address to serve the operator console (a web page over the admin API, behind the same credentials) on; empty: off")
	fs.Var(&c.MetricsToken, "metrics-token", "bearer token /metrics asks for (Prometheus: authorization.credentials); empty: /metrics is open to anyone who reaches it")
	fs.StringVar(&c.MetricsTokenFile, "metrics-token-file", "", "file holding the bearer token /metrics asks for, re-read when it changes (Prometheus: authorization.credentials_file); instead of --metrics-token")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may run on after a stop signal")
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	c.Registry.RegisterFlags(fs)
	fs.StringVar(&c.AuthConfig, "auth-config", "", "the cluster's auth config file (JSON: cluster_secret, principals); empty: auth off, anyone may do anything")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "PEM certificate of this node for every listener and for calls to other nodes (reloaded when it changes)")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&c.TLSClientCAFile, "tls-client-ca-file", "", "PEM CA bundle that signs other nodes' (and clients') certificates: peers are verified with it, and a client certificate must be signed by it (clients need none); reloaded when it changes, as the key pair is; empty: the system's roots verify peers")
	fs.IntVar(&c.MaxConnections, "max-connections", httplimit.DefaultMaxConnections, "most open connections of each listener (gRPC, metrics, console, catalog, S3); more wait until one closes")
	if c.RoleConfig != nil {
		c.RoleConfig.RegisterFlags(fs)
	}
}

// Parse registers c's flags on fs, fills them from args and then from the environment
// (lookup; os.LookupEnv in Main), and validates c. The error names each bad flag, and
// the variable when one set it; flag.ErrHelp asks for the usage.
func (c *Config) Parse(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) (flagenv.Sources, error) {
	c.RegisterFlags(fs)
	src, err := flagenv.ParseEnv(fs, args, lookup)
	if err == nil {
		err = c.Validate()
	}
	return src, src.Explain(err)
}

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// Validate checks every value and reports each bad one naming its flag.
func (c *Config) Validate() error {
	var errs []error
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, flagenv.Errorf(flagName, format, args...))
	}
	if _, err := lease.ParseRole(string(c.Role)); err != nil {
		errs = append(errs, fmt.Errorf("node: %w", err))
	}
	if c.NodeID != "" && !nodeIDPattern.MatchString(c.NodeID) {
		bad("node-id", "%q is not a node id (letters, digits, '.', '_', ':', '-'; at most 128)", c.NodeID)
	}
	if _, err := c.DatabaseURL(); err != nil {
		errs = append(errs, err)
	}
	if len(c.KafkaBrokers) == 0 {
		bad("kafka-brokers", "required (host:port,host:port)")
	}
	for _, b := range c.KafkaBrokers {
		if err := CheckAddr(b, false); err != nil {
			bad("kafka-brokers", "%q: %v", b, err)
		}
	}
	if err := CheckAddr(c.GRPCAddr, true); err != nil {
		bad("grpc-addr", "%q: %v", c.GRPCAddr, err)
	}
	if c.AdvertiseAddr != "" {
		if err := CheckAddr(c.AdvertiseAddr, false); err != nil {
			bad("advertise-addr", "%q: %v", c.AdvertiseAddr, err)
		}
	}
	if c.LeaseTTL < 300*time.Millisecond || c.LeaseTTL > time.Hour {
		bad("lease-ttl", "%v is out of range (300ms to 1h)", c.LeaseTTL)
	}
	if c.MetricsAddr != "" {
		if err := CheckAddr(c.MetricsAddr, true); err != nil {
			bad("metrics-addr", "%q: %v", c.MetricsAddr, err)
		}
	}
	if c.ConsoleAddr != "" {
		if err := CheckAddr(c.ConsoleAddr, true); err != nil {
			bad("console-addr", "%q: %v", c.ConsoleAddr, err)
		}
	}
	switch {
	case c.MetricsToken != "" && c.MetricsTokenFile != "":
		bad("metrics-token", "--metrics-token and --metrics-token-file exclude each other")
	case (c.MetricsToken != "" || c.MetricsTokenFile != "") && c.MetricsAddr == "":
		bad("metrics-token", "a metrics token needs --metrics-addr")
	case c.MetricsToken != "" && len(c.MetricsToken.Reveal()) < auth.MinStaticToken:
		bad("metrics-token", "must be at least %d bytes (openssl rand -hex 32)", auth.MinStaticToken)
	case c.MetricsTokenFile != "":
		if _, err := readTokenFile(c.MetricsTokenFile); err != nil {
			bad("metrics-token-file", "%v", err)
		}
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "%v must be positive", c.ShutdownTimeout)
	}
	if err := c.Registry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.AuthConfig != "" {
		if _, err := auth.LoadFile(c.AuthConfig); err != nil {
			bad("auth-config", "%v", err)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("tls-cert-file", "--tls-cert-file and --tls-key-file go together")
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		bad("tls-client-ca-file", "needs --tls-cert-file and --tls-key-file")
	}
	if c.TLSCertFile != "" && c.TLSKeyFile != "" {
		if _, err := tlsfiles.LoadKeyPair(c.TLSCertFile, c.TLSKeyFile, nil); err != nil {
			bad("tls-cert-file", "%v", err)
		}
	}
	if c.TLSClientCAFile != "" {
		if _, err := tlsfiles.LoadCAs(c.TLSClientCAFile); err != nil {
			bad("tls-client-ca-file", "%v", err)
		}
	}
	if c.MaxConnections < 0 || c.MaxConnections > 1<<20 {
		bad("max-connections", "%d is out of range (1 to 1048576; 0: the default)", c.MaxConnections)
	}
	if c.RoleConfig != nil {
		if err := c.RoleConfig.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DatabaseURL is the Postgres URL, from --postgres-url or read from --postgres-url-file,
// checked: an error names the flag, and never quotes the password.
func (c *Config) DatabaseURL() (flagenv.Secret, error) {
	u := c.PostgresURL
	flagName := "postgres-url"
	switch {
	case c.PostgresURLFile != "" && u != "":
		return "", flagenv.Errorf("postgres-url-file", "conflicts with --postgres-url; give the URL one way")
	case c.PostgresURLFile != "":
		flagName = "postgres-url-file"
		v, err := flagenv.ReadSecretFile(c.PostgresURLFile)
		if err != nil {
			return "", flagenv.Errorf(flagName, "%v", err)
		}
		u = flagenv.Secret(v)
	case u == "":
		return "", flagenv.Errorf(flagName, "required (postgres://user:password@host:5432/db), or --postgres-url-file")
	}
	if _, err := pgxpool.ParseConfig(u.Reveal()); err != nil {
		return "", flagenv.Errorf(flagName, "%s is not a Postgres URL: %s", flagenv.RedactURL(u.Reveal()), parseCause(err, u.Reveal()))
	}
	return u, nil
}

// parseCause is why pgx could not parse raw, without raw: pgx quotes the string it was
// given, masking the password only as well as it can parse it.
func parseCause(err error, raw string) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
		if i := strings.LastIndex(rest, "`: "); i >= 0 {
			msg = rest[i+len("`: "):]
		} else {
			msg = "cannot parse it"
		}
	}
	return scrubPassword(msg, raw)
}

// scrubPassword masks in msg every form of raw's password that could stand there.
func scrubPassword(msg, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return msg
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" {
		return msg
	}
	for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
		msg = strings.ReplaceAll(msg, form, "xxxxx")
	}
	return msg
}

// CheckAddr checks a host:port; a listen address may omit the host and use port 0.
func CheckAddr(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 || (!listen && p == 0) {
		return fmt.Errorf("bad port %q", port)
	}
	if !listen && host == "" {
		return errors.New("want host:port with a host")
	}
	return nil
}
