// Command minkctl administers a Mink cluster over mink.admin.v1.AdminService: it dials any
// node (--addr) and names the node that must answer (--node), which the dialed node
// forwards to.
//
// Every flag has a MINK_* environment twin (MINK_ADDR for --addr). Output is aligned
// columns, or protojson with -o json.
//
// Synopsis: docs/admin.md#synopsis.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/tlsfiles"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)) }

const usage = `usage: minkctl [--addr HOST:PORT] [--node NAME] [-o table|json] [--token TOKEN]
               [--tls] [--tls-ca-file FILE] [--tls-server-name NAME] COMMAND [ARGS]

commands:
  status [--cluster]     status of the dialed node, or of --node; --cluster: every node
                         and every table's per-partition lag at a glance
  nodes                  live members of the cluster
  leases [--table ID]    leases (of one table)
  drain NODE             NODE releases its leases and takes none until undrained
  undrain NODE           NODE takes its share of leases again
  table create NAME --topic TOPIC [--format json|raw|avro|protobuf|json_schema]
                         [--column NAME:TYPE[:required][:JSON_PATH]]...   (json: the columns; none: inferred)
                         [--value-subject SUBJECT] [--message PKG.MESSAGE] [--value-schema-mode prefix|latest]
                         [--key-format avro|protobuf|json_schema [--key-subject SUBJECT]
                          [--key-message PKG.MESSAGE] [--key-schema-mode prefix|latest]]
                         [--mode append|upsert] [--property KEY=VALUE]...   (or --spec FILE|-: a CreateTableRequest in JSON)
                         registry formats take their columns from the subject (default TOPIC-value)
  table alter NAME       [--add NAME:TYPE[:required][:JSON_PATH]] [--widen NAME:TYPE] [--optional NAME]
                         [--rename OLD:NEW] (json tables; repeatable, applied in order)
                         [--set KEY=VALUE] [--unset KEY] (properties; repeatable); all or nothing
  table drop NAME
  table reset NAME       start a table over from its topic as Kafka has it now (after the topic was
                         deleted and created again: table describe's TOPIC STATE)
  table list [--namespace NS]
  table describe NAME
  topic create NAME [--partitions N] [--replication-factor R]
                         create a Kafka topic (the dialed node's brokers make it), to make a table of
  topic list             Kafka's topics, and the tables made of each
  scan NAMESPACE.TABLE [--limit N] [--from end|start] [--columns a,b] [--catalog URL]
                         read rows through the Iceberg REST catalog and S3, as any engine does: the
                         newest N by Kafka timestamp (--from end, the default) or the oldest; the
                         catalog is --catalog, or the one the node at --addr names
  health                 the dialed node's grpc.health.v1 status (needs no credentials); exit 0 if SERVING
  auth init --out FILE [--reader-tables P,...] [--force]
                         write a new auth config (a node's --auth-config): a random cluster secret,
                         principals admin and reader (tables default.*); an existing valid FILE is kept
  auth secret --auth-config FILE [--principal ID]
                         print a principal's secret (default: the first admin's), e.g. for MINK_TOKEN
NAME is "name" (namespace "default") or "namespace.name".

flags (each also read from MINK_<FLAG>, e.g. MINK_ADDR):
`

// exit codes
const (
	exitOK    = 0
	exitRPC   = 1 // the call failed; the message says why
	exitUsage = 2
)

type cli struct {
	addr    string
	node    string
	output  string
	timeout time.Duration

	// How the node (and scan's catalog) is reached: a bearer token, and TLS.
	token         flagenv.Secret
	tls           bool
	tlsCAFile     string
	tlsServerName string

	stdout io.Writer
	stderr io.Writer
	client adminv1.AdminServiceClient
	src    flagenv.Sources // the flags set from MINK_* variables
	given  map[string]bool // the flags set on the command line
	cmd    string          // the command run: "status", "table create", ...
	trace  connTrace       // how reaching --addr went
}

// globalFlags are accepted before or after the command.
func (c *cli) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "localhost:7070", "gRPC address of the node to dial")
	fs.StringVar(&c.node, "node", "", "node that must answer (forwarded by the dialed node); default: the dialed node")
	fs.StringVar(&c.output, "o", "table", "output: table or json")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "deadline of each call")
	fs.Var(&c.token, "token", "bearer token sent with every call (authorization: Bearer), and to the catalog by scan")
	fs.BoolVar(&c.tls, "tls", false, "dial over TLS, verifying the node's certificate against the system's roots (or --tls-ca-file)")
	fs.StringVar(&c.tlsCAFile, "tls-ca-file", "", "PEM CA bundle the node's certificate (and scan's catalog's and S3's) is verified with; implies --tls")
	fs.StringVar(&c.tlsServerName, "tls-server-name", "", "name the node's certificate must carry, when --addr reaches it by another (default: the host of --addr); implies --tls")
}

// dialOptions are how minkctl reaches --addr: plaintext, or TLS when a --tls flag is
// set, and the token on every call.
func (c *cli) dialOptions() ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	cfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		cfg.ServerName = c.tlsServerName // empty: the host of --addr
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(tracedCreds{creds, &c.trace}), grpc.WithContextDialer(c.trace.dial)}
	if c.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(c.token.Reveal())))
	}
	return opts, nil
}

// tlsConfig is the client TLS config of the --tls flags; nil when none is set.
func (c *cli) tlsConfig() (*tls.Config, error) {
	if !c.tls && c.tlsCAFile == "" && c.tlsServerName == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.tlsCAFile != "" {
		pool, err := tlsfiles.LoadCAs(c.tlsCAFile)
		if err != nil {
			return nil, usageError{"--tls-ca-file: " + err.Error()}
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// checkToken trims --token and refuses what cannot be a header value, without
// repeating it (it is a secret).
func (c *cli) checkToken() error {
	c.token = flagenv.Secret(strings.TrimSpace(c.token.Reveal()))
	for _, r := range c.token.Reveal() {
		if r <= ' ' || r > '~' {
			return usageError{"--token: not a bearer token (it has spaces, control or non-ASCII characters)"}
		}
	}
	return nil
}

// bearerToken sends "authorization: Bearer <token>" with every call. It is sent over
// plaintext too (a node without TLS on a private network), as grpcurl -H does.
type bearerToken string

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return false }

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	c := &cli{stdout: stdout, stderr: stderr}
	err := c.dispatch(args, lookup)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "minkctl: %s\n(minkctl --help for usage)\n", ue.msg)
		return exitUsage
	}
	fmt.Fprintf(stderr, "minkctl: %s\n", c.explain(err))
	return exitRPC
}

func (c *cli) dispatch(args []string, lookup func(string) (string, bool)) error {
	cmd, err := findCommand(args)
	if err != nil {
		return err
	}
	sub := commands[cmd]
	c.cmd = cmd
	switch {
	case cmd == "help":
		fs := flag.NewFlagSet("minkctl", flag.ContinueOnError)
		c.globalFlags(fs)
		fs.SetOutput(c.stdout)
		fmt.Fprint(c.stdout, usage)
		fs.PrintDefaults()
		return flag.ErrHelp
	case cmd == "":
		return usageError{"no command"}
	case cmd == "table":
		return usageError{"table: want create, alter, drop, list or describe"}
	case cmd == "topic":
		return usageError{"topic: want create or list"}
	case sub.run == nil:
		return usageError{fmt.Sprintf("unknown command %q", cmd)}
	}
	fs := flag.NewFlagSet("minkctl "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.globalFlags(fs)
	var cmdFlags any
	if sub.flags != nil {
		cmdFlags = sub.flags(fs)
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(c.stdout, strings.Join(strings.Fields("usage: minkctl "+cmd+" "+sub.argsHelp+" [flags]"), " "))
		fs.SetOutput(c.stdout)
		fs.PrintDefaults()
		return err
	}
	if err != nil {
		return err
	}
	pos = pos[len(strings.Fields(cmd)):]
	c.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.given[f.Name] = true })
	src, err := flagenv.SetFromEnv(fs, lookup)
	if err != nil {
		return usageError{err.Error()}
	}
	c.src = src
	if c.output != "table" && c.output != "json" {
		return usageError{fmt.Sprintf("-o: want table or json, got %q", c.output)}
	}
	if len(pos) != sub.args {
		return usageError{fmt.Sprintf("%s: want %d argument(s) (%s), got %d", cmd, sub.args, dash(sub.argsHelp), len(pos))}
	}
	if err := c.checkToken(); err != nil {
		return err
	}
	dialOpts, err := c.dialOptions()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(c.addr, dialOpts...)
	if err != nil {
		return usageError{fmt.Sprintf("--addr %q: %v", c.addr, err)}
	}
	defer conn.Close()
	c.client = adminv1.NewAdminServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	return sub.run(c, ctx, pos, cmdFlags)
}

// findCommand finds the command words ("status", "table create") past the global flags
// that may stand before them; the command's own flags can only be parsed once it is known.
func findCommand(args []string) (string, error) {
	globals := flag.NewFlagSet("", flag.ContinueOnError)
	(&cli{}).globalFlags(globals)
	var words []string
	for i := 0; i < len(args) && len(words) < 2; i++ {
		a := args[i]
		if len(words) == 1 && words[0] != "table" && words[0] != "topic" {
			break
		}
		if a == "--" {
			words = append(words, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			words = append(words, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "h" || name == "help" {
			return "help", nil
		}
		if len(words) > 0 {
			continue // a subcommand's flag between "table" and its verb; parsed later
		}
		f := globals.Lookup(name)
		if f == nil {
			return "", usageError{fmt.Sprintf("flag %s before the command is not a global flag", a)}
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			continue // --tls takes no value
		}
		if !hasValue {
			i++ // every other global flag takes a value
		}
	}
	if len(words) > 2 {
		words = words[:2]
	}
	return strings.Join(words, " "), nil
}

// parseInterleaved parses flags wherever they stand among the positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil // everything after "--" is positional
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

type command struct {
	args     int
	argsHelp string
	flags    func(fs *flag.FlagSet) any
	run      func(c *cli, ctx context.Context, args []string, flags any) error
}

var commands = map[string]command{
	"status":         {flags: statusFlags, run: (*cli).status},
	"nodes":          {run: (*cli).nodes},
	"leases":         {flags: leasesFlags, run: (*cli).leases},
	"drain":          {args: 1, argsHelp: "NODE", run: (*cli).drain},
	"undrain":        {args: 1, argsHelp: "NODE", run: (*cli).undrain},
	"table create":   {args: 1, argsHelp: "NAME", flags: createFlags, run: (*cli).tableCreate},
	"table alter":    {args: 1, argsHelp: "NAME", flags: alterFlags, run: (*cli).tableAlter},
	"table drop":     {args: 1, argsHelp: "NAME", run: (*cli).tableDrop},
	"table reset":    {args: 1, argsHelp: "NAME", run: (*cli).tableReset},
	"table list":     {flags: listFlags, run: (*cli).tableList},
	"table describe": {args: 1, argsHelp: "NAME", run: (*cli).tableDescribe},
	"topic create":   {args: 1, argsHelp: "NAME", flags: topicCreateFlags, run: (*cli).topicCreate},
	"topic list":     {run: (*cli).topicList},
	"scan":           {args: 1, argsHelp: "NAMESPACE.TABLE", flags: scanFlags, run: (*cli).scan},
	"health":         {run: (*cli).health},
	"auth":           {args: 1, argsHelp: "init|secret", flags: authFlags, run: (*cli).auth},
}

func (c *cli) status(ctx context.Context, _ []string, f any) error {
	if *f.(*bool) {
		return c.overview(ctx)
	}
	resp, err := c.client.GetStatus(ctx, &adminv1.GetStatusRequest{Node: c.node})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { printStatus(w, resp) })
}

func (c *cli) nodes(ctx context.Context, _ []string, _ any) error {
	resp, err := c.client.ListNodes(ctx, &adminv1.ListNodesRequest{Node: c.node})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { printNodes(w, resp.GetNodes()) })
}

func leasesFlags(fs *flag.FlagSet) any {
	return fs.Int64("table", 0, "only this table's leases (table id)")
}

func (c *cli) leases(ctx context.Context, _ []string, f any) error {
	resp, err := c.client.ListLeases(ctx, &adminv1.ListLeasesRequest{Node: c.node, TableId: *f.(*int64)})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { printLeases(w, resp.GetLeases(), true) })
}

// target is the node a drain or undrain is for: the argument, which --node may repeat.
func (c *cli) target(arg string) (string, error) {
	if c.node != "" && c.node != arg {
		return "", usageError{fmt.Sprintf("--node %q differs from the node to drain %q", c.node, arg)}
	}
	return arg, nil
}

func (c *cli) drain(ctx context.Context, args []string, _ any) error {
	node, err := c.target(args[0])
	if err != nil {
		return err
	}
	resp, err := c.client.DrainNode(ctx, &adminv1.DrainNodeRequest{Node: node})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) {
		if len(resp.GetLeases()) == 0 {
			fmt.Fprintf(w, "%s is draining and holds no lease\n", resp.GetNodeId())
			return
		}
		fmt.Fprintf(w, "%s is draining; still holding %d lease(s):\n", resp.GetNodeId(), len(resp.GetLeases()))
		printLeases(w, resp.GetLeases(), false)
	})
}

func (c *cli) undrain(ctx context.Context, args []string, _ any) error {
	node, err := c.target(args[0])
	if err != nil {
		return err
	}
	resp, err := c.client.UndrainNode(ctx, &adminv1.UndrainNodeRequest{Node: node})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { fmt.Fprintf(w, "%s is taking its share of leases again\n", resp.GetNodeId()) })
}
