package deploytest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
	fsconfig "github.com/minkhq/mink/services/fileserver/config"
	ixconfig "github.com/minkhq/mink/services/indexer/config"
)

// program is one binary the deployment files run: a role or minkctl.
type program struct {
	target string     // Dockerfile target and short name: indexer, writer, fileserver, minkctl
	binary string     // mink-indexer, ..., minkctl
	pkg    string     // its main package, from the repository root
	role   lease.Role // empty for minkctl
	// config is the role's own flags as its main hands them to pkg/node (nil: none).
	config func() node.RoleConfig
}

var programs = []program{
	{"indexer", "mink-indexer", "services/indexer", lease.RoleIndexer, func() node.RoleConfig { return &ixconfig.Config{} }},
	{"writer", "mink-writer", "services/writer", lease.RoleWriter, nil},
	{"fileserver", "mink-fileserver", "services/fileserver", lease.RoleFileServer, func() node.RoleConfig { return &fsconfig.Config{} }},
	{"minkctl", "minkctl", "cmd/minkctl", "", nil},
}

// nodeConfig is the empty config of a role's node, its own flags included, as its main
// builds it before the flags are parsed.
func (p program) nodeConfig() node.Config {
	cfg := node.Config{Role: p.role}
	if p.config != nil {
		cfg.RoleConfig = p.config()
	}
	return cfg
}

// fileServer is the file server's own part of cfg (zero for other roles).
func fileServer(cfg node.Config) *fsconfig.Config {
	if fc, ok := cfg.RoleConfig.(*fsconfig.Config); ok {
		return fc
	}
	return &fsconfig.Config{}
}

func programByTarget(target string) (program, bool) {
	for _, p := range programs {
		if p.target == target {
			return p, true
		}
	}
	return program{}, false
}

// programByImage maps an image reference (minkhq/mink-indexer:dev, ghcr.io/x/minkctl) to
// the program it runs, by the last path element without its tag.
func programByImage(image string) (program, bool) {
	name := image
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.IndexAny(name, ":@"); i >= 0 {
		name = name[:i]
	}
	for _, p := range programs {
		if p.binary == name {
			return p, true
		}
	}
	return program{}, false
}

// repoRoot is the repository root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found from %s: %v", root, err)
	}
	return root
}

// envNames are the MINK_* variables a program reads: the environment twins of its flags.
// A role's flags are what node.Config registers for it (its RoleConfig's included) plus
// any its main package adds;
// minkctl's are found in its sources.
func envNames(t *testing.T, root string, p program) map[string]string {
	t.Helper()
	names := map[string]string{} // MINK_X -> flag name
	if p.role != "" {
		fs := flag.NewFlagSet(p.binary, flag.ContinueOnError)
		cfg := p.nodeConfig()
		cfg.RegisterFlags(fs)
		fs.VisitAll(func(f *flag.Flag) { names[flagenv.EnvName(f.Name)] = f.Name })
	}
	found, err := flagNamesInDir(filepath.Join(root, p.pkg))
	if err != nil {
		t.Fatalf("%s: reading flags: %v", p.pkg, err)
	}
	for _, f := range found {
		names[flagenv.EnvName(f)] = f
	}
	if len(names) == 0 {
		t.Fatalf("%s: found no flags", p.pkg)
	}
	return names
}

// flagArg is, for each flag.FlagSet method, the index of its name argument.
var flagArg = map[string]int{
	"Bool": 0, "BoolVar": 1, "BoolFunc": 0, "Duration": 0, "DurationVar": 1, "Float64": 0,
	"Float64Var": 1, "Func": 0, "Int": 0, "IntVar": 1, "Int64": 0, "Int64Var": 1, "String": 0,
	"StringVar": 1, "TextVar": 1, "Uint": 0, "UintVar": 1, "Uint64": 0, "Uint64Var": 1, "Var": 1,
}

var flagName = regexp.MustCompile(`^[a-z][a-z0-9.-]*$`)

// flagNamesInDir finds the flags the non-test Go files of one directory register, by their
// calls of flag.FlagSet methods with a literal name (fs.StringVar(&x, "addr", ...)).
func flagNamesInDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			i, ok := flagArg[sel.Sel.Name]
			if !ok || i >= len(call.Args) {
				return true
			}
			lit, ok := call.Args[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && flagName.MatchString(s) {
				names = append(names, s)
			}
			return true
		})
	}
	return names, nil
}

// fileFlags are the flags that name a file the node reads at start: a deployment must
// mount each one it sets into the container.
var fileFlags = []string{"auth-config", "tls-cert-file", "tls-key-file", "tls-client-ca-file", "schema-registry-ca-file", "metrics-token-file", "postgres-url-file"}

// secretFlags are a role's flags whose values are secrets (flagenv.Secret): a deployment
// gives each through the environment (from a Kubernetes Secret), never on a command line,
// where every user of the machine sees it.
func secretFlags(p program) []string {
	if p.role == "" {
		return nil
	}
	fs := flag.NewFlagSet(p.binary, flag.ContinueOnError)
	cfg := p.nodeConfig()
	cfg.RegisterFlags(fs)
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if _, secret := f.Value.(interface{ Reveal() string }); secret {
			out = append(out, f.Name)
		}
	})
	return out
}

// checkNoSecretArgs fails on a command line (a container's args or command) that gives
// one of p's secret flags.
func checkNoSecretArgs(t *testing.T, where string, p program, cmdline []string) {
	t.Helper()
	for _, f := range secretFlags(p) {
		for _, a := range cmdline {
			if a == "-"+f || a == "--"+f || strings.HasPrefix(a, "-"+f+"=") || strings.HasPrefix(a, "--"+f+"=") ||
				strings.Contains(a, " --"+f+" ") || strings.Contains(a, " --"+f+"=") {
				t.Errorf("%s: the command line gives --%s: a secret on a command line is visible to every user of the machine; set %s from a Secret",
					where, f, flagenv.EnvName(f))
			}
		}
	}
}

// checkEnv checks one program's environment as a deployment file sets it: every MINK_*
// variable is a flag's twin, and for a role, auth is on (MINK_AUTH_CONFIG), every file a
// variable names is one the deployment mounts (files: its path in the container → a local
// file with what the deployment puts there), and the values parse and pass
// Config.Validate with postgres-url and kafka-brokers set. It returns the role's config
// (zero for minkctl). where names the file and the object ("docker-compose.yaml:
// services.mink-indexer").
func checkEnv(t *testing.T, root, where string, p program, env map[string]string, files map[string]string) (node.Config, bool) {
	t.Helper()
	known := envNames(t, root, p)
	ok := true
	for _, k := range sortedKeys(env) {
		if !strings.HasPrefix(k, flagenv.Prefix) {
			continue
		}
		if _, found := known[k]; !found {
			t.Errorf("%s: environment %s: %s has no flag --%s (its MINK_* variables: %s)",
				where, k, p.binary, flagFromEnv(k), strings.Join(sortedKeys(known), ", "))
			ok = false
		}
	}
	if p.role == "" {
		return node.Config{}, ok
	}
	if env[flagenv.EnvName("postgres-url")] == "" && env[flagenv.EnvName("postgres-url-file")] == "" {
		t.Errorf("%s: environment: %s (or %s) is required by %s (--postgres-url) and is not set",
			where, flagenv.EnvName("postgres-url"), flagenv.EnvName("postgres-url-file"), p.binary)
		ok = false
	}
	if env[flagenv.EnvName("kafka-brokers")] == "" {
		t.Errorf("%s: environment: %s is required by %s (--kafka-brokers) and is not set",
			where, flagenv.EnvName("kafka-brokers"), p.binary)
		ok = false
	}
	if env[flagenv.EnvName("auth-config")] == "" {
		t.Errorf("%s: environment: %s is not set, so the node runs with auth off (anyone may do anything); auth is on in every deployment file",
			where, flagenv.EnvName("auth-config"))
		ok = false
	}
	if env[flagenv.EnvName("metrics-addr")] != "" && env[flagenv.EnvName("metrics-token")] == "" && env[flagenv.EnvName("metrics-token-file")] == "" {
		t.Errorf("%s: environment: %s is set without %s or %s, so /metrics, which names every table, is open to anyone who reaches it",
			where, flagenv.EnvName("metrics-addr"), flagenv.EnvName("metrics-token-file"), flagenv.EnvName("metrics-token"))
		ok = false
	}
	local := map[string]string{}
	for k, v := range env {
		local[k] = v
	}
	for _, f := range fileFlags {
		k := flagenv.EnvName(f)
		path := env[k]
		if path == "" {
			continue
		}
		if stand, found := files[path]; found {
			local[k] = stand
			continue
		}
		t.Errorf("%s: environment %s: %s is no file the deployment mounts into the container (%s reads it at start)", where, k, path, p.binary)
		ok = false
		delete(local, k)
	}
	fs := flag.NewFlagSet(p.binary, flag.ContinueOnError)
	cfg := p.nodeConfig()
	cfg.RegisterFlags(fs)
	src, err := flagenv.SetFromEnv(fs, func(k string) (string, bool) { v, found := local[k]; return v, found })
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Errorf("%s: environment: %s rejects it: %v", where, p.binary, src.Explain(err))
		return cfg, false
	}
	for _, f := range fileFlags { // the config names the files as the container has them
		if v := env[flagenv.EnvName(f)]; v != "" {
			fs.Set(f, v)
		}
	}
	return cfg, ok
}

// writeAuthConfig writes f to a temporary file, as a deployment's auth config stand-in.
func writeAuthConfig(t *testing.T, f *auth.File) string {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// sampleAuthConfig is what `minkctl auth init` writes: a cluster secret and the principals
// admin and reader (default.*), every secret random hex.
func sampleAuthConfig(t *testing.T) *auth.File {
	t.Helper()
	secret := func(n int) string {
		b := make([]byte, n)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	f := &auth.File{ClusterSecret: secret(32), Principals: []auth.PrincipalConfig{
		{ID: "admin", Secret: secret(24), Role: auth.RoleAdmin},
		{ID: "reader", Secret: secret(24), Role: auth.RoleReader, Tables: []string{"default.*"}},
	}}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f
}

func flagFromEnv(env string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, flagenv.Prefix), "_", "-"))
}

// minGrace is how long a node needs between SIGTERM and SIGKILL to stop cleanly: a preStop
// delay, then leaving the cluster (releasing every lease at once, bounded by lease-ttl/3),
// then draining requests for --shutdown-timeout, with a margin for the rest.
func minGrace(cfg node.Config, preStop time.Duration) time.Duration {
	return preStop + cfg.LeaseTTL/3 + cfg.ShutdownTimeout + 5*time.Second
}

// listenPorts are the ports a role's node listens on, by name (grpc, metrics, catalog, s3).
func listenPorts(cfg node.Config) map[string]int {
	out := map[string]int{}
	add := func(name, addr string) {
		if addr == "" {
			return
		}
		if _, p, err := net.SplitHostPort(addr); err == nil {
			if n, err := strconv.Atoi(p); err == nil && n > 0 {
				out[name] = n
			}
		}
	}
	add("grpc", cfg.GRPCAddr)
	add("metrics", cfg.MetricsAddr)
	if cfg.Role == lease.RoleFileServer {
		add("catalog", fileServer(cfg).CatalogAddr)
		add("s3", fileServer(cfg).S3Addr)
	}
	return out
}

func portList(ports map[string]int) string {
	var s []string
	for _, k := range sortedKeys(ports) {
		s = append(s, fmt.Sprintf("%s %d", k, ports[k]))
	}
	return strings.Join(s, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// cacheParent is the folder the default --cache-dir lies in: <temp dir>/mink-cache/<node id>
// inside a container, where the temp dir is /tmp.
const cacheParent = "/tmp/mink-cache"

// under reports whether path is dir or lies inside it.
func under(path, dir string) bool {
	path, dir = filepath.Clean(path), filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// parseSize reads a byte count written as a Kubernetes quantity (20Gi, 500M) or as flagenv
// writes one (18GiB).
func parseSize(s string) (int64, error) {
	var b flagenv.Bytes
	if err := b.Set(s); err == nil {
		return int64(b), nil
	}
	units := []struct {
		suffix string
		n      int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("size %q: %w", s, err)
			}
			return v * u.n, nil
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// The secret checks know the secrets: the Postgres URL and the registry's credentials.
func TestSecretFlagDiscovery(t *testing.T) {
	for _, p := range programs {
		if p.role == "" {
			continue
		}
		got := secretFlags(p)
		for _, want := range []string{"postgres-url", "schema-registry-password", "schema-registry-bearer-token"} {
			if !slices.Contains(got, want) {
				t.Errorf("%s: secret flags %v lack --%s", p.binary, got, want)
			}
		}
	}
}

func TestFlagDiscovery(t *testing.T) {
	// The checks below are only as good as the flags they know of: a role knows its
	// common flags, its own, and minkctl its global ones.
	root := repoRoot(t)
	for _, p := range programs {
		names := envNames(t, root, p)
		want := []string{"MINK_ADDR"}
		if p.role != "" {
			want = []string{"MINK_NODE_ID", "MINK_POSTGRES_URL", "MINK_KAFKA_BROKERS", "MINK_GRPC_ADDR", "MINK_LEASE_TTL"}
		}
		if p.role == lease.RoleFileServer {
			want = append(want, "MINK_CACHE_DIR", "MINK_CATALOG_ADDR", "MINK_S3_ADDR")
		}
		for _, w := range want {
			if _, ok := names[w]; !ok {
				t.Errorf("%s: flag discovery misses %s (found %s)", p.pkg, w, strings.Join(sortedKeys(names), ", "))
			}
		}
	}
}
