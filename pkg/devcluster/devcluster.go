package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/registry"
)

// Database is the private server's database the cluster uses.
const Database = "mink"

// RunFile names the file, under Config.Dir, that describes the running cluster (pids,
// ports, URLs) while it is up: for scripts and for the end-to-end test.
const RunFile = "run.json"

// RunInfo is RunFile's content.
type RunInfo struct {
	LauncherPid  int       `json:"launcher_pid"`
	PostgresURL  string    `json:"postgres_url"`           // without its password (flagenv.RedactURL)
	PostgresPid  int       `json:"postgres_pid,omitempty"` // 0 with an external server
	KafkaBrokers []string  `json:"kafka_brokers"`
	CatalogURL   string    `json:"catalog_url"`
	S3URL        string    `json:"s3_url"`
	Table        string    `json:"table"`
	TableState   string    `json:"table_state,omitempty"` // "created", or "registered in an earlier run"
	TableError   string    `json:"table_error,omitempty"` // why the demo table could not be registered
	Topic        string    `json:"topic"`
	FirstEventID int64     `json:"first_event_id,omitempty"` // the id this run's demo events start at
	Processes    []RunProc `json:"processes"`
	Ports        []int     `json:"ports"` // every port the cluster listens on

	// AuthConfig is the auth config every role was given (AuthFile under the folder);
	// empty with --auth=false. The secrets are in it, never in this file.
	AuthConfig  string `json:"auth_config,omitempty"`
	ConnectFile string `json:"connect_file"` // the snippets of ConnectFile

	SchemaRegistryURL      string   `json:"schema_registry_url"` // without credentials
	SchemaRegistryEmbedded bool     `json:"schema_registry_embedded,omitempty"`
	Avro                   AvroInfo `json:"avro"`
}

// AvroInfo is the Avro demo: its topic, subject and table, and the schema ids it writes.
type AvroInfo struct {
	Table        string `json:"table"`
	Topic        string `json:"topic"`
	Subject      string `json:"subject"`
	Partitions   int    `json:"partitions,omitempty"`
	TableState   string `json:"table_state,omitempty"` // as RunInfo.TableState
	Error        string `json:"error,omitempty"`       // why the Avro demo is off: its schema or table could not be set up
	FirstEventID int64  `json:"first_event_id,omitempty"`
	// The registry ids of schema versions 1 and 2 when the run started (0: not registered
	// yet); ids above EvolveAfter are written with version 2.
	SchemaIDV1  int   `json:"schema_id_v1,omitempty"`
	SchemaIDV2  int   `json:"schema_id_v2,omitempty"`
	EvolveAfter int64 `json:"evolve_after,omitempty"`
}

// RunProc is one role process.
type RunProc struct {
	Node
	Pid int    `json:"pid"`
	Log string `json:"log"`
}

// Run starts the cluster, prints to out where everything is and what to try, and runs it
// until ctx ends or a role exits, then stops everything in order: the demo producers, the
// roles (SIGTERM, waited for, so they release their leases), then the Schema Registry,
// Kafka and Postgres.
// Closing force makes that stop kill the roles instead of waiting for them.
func Run(ctx context.Context, c Config, out io.Writer, force <-chan struct{}) (err error) {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return err
	}
	if c.BinDir, err = filepath.Abs(c.BinDir); err != nil {
		return err
	}
	// The folder stays open to others: the private Postgres may run as another user (the
	// postgres user when the launcher is root) and must reach its data under it. The
	// caches hold table data: private.
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{c.Dir, 0o755}, {filepath.Join(c.Dir, "logs"), 0o755}, {filepath.Join(c.Dir, "cache"), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil { // one made by an older version keeps its mode
			return err
		}
	}
	unlock, err := lockDir(c.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	logPath := filepath.Join(c.Dir, "logs", "minkdev.log")
	os.Rename(logPath, logPath+".prev")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	log := slog.New(slog.NewJSONHandler(logf, nil))
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "minkdev: "+format+"\n", args...)
		log.Info(fmt.Sprintf(format, args...))
	}
	if err := checkPorts(&c); err != nil {
		return err
	}

	var st stopper
	defer func() { err = errors.Join(err, st.run(say)) }()
	info := RunInfo{LauncherPid: os.Getpid(), CatalogURL: c.CatalogURL(), S3URL: c.S3URL(),
		Table: "default." + c.Table, Topic: c.Topic, Ports: c.ports(), ConnectFile: filepath.Join(c.Dir, ConnectFile),
		Avro: AvroInfo{Table: "default." + c.AvroTable, Topic: c.AvroTopic, Subject: c.AvroSubject(), EvolveAfter: c.AvroEvolveAfter}}

	// Auth: the config every role reads, and the credentials the launcher calls with.
	var da *DevAuth
	if c.Auth {
		if da, err = ensureAuth(c.Dir); err != nil {
			return err
		}
		info.AuthConfig = da.Path
		how := "kept from an earlier run"
		if da.Created {
			how = "generated now, kept for the next runs"
		}
		say("auth: on; the cluster secret and the principals' secrets are in %s (%s)", rel(da.Path), how)
	} else {
		say("auth: OFF (--auth=false): anyone who reaches the cluster's ports may read every table, create and drop tables and drain nodes")
	}

	// Postgres. Its URL may hold a password: the roles get it through their environment,
	// and the terminal, the log and RunFile show it without.
	dbURL := c.PostgresURL.Reveal()
	if dbURL == "" {
		pg, err := pgtest.Open(filepath.Join(c.Dir, "postgres"), c.PostgresPort)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		st.push("postgres", pg.Stop)
		link := filepath.Join(c.Dir, "logs", "postgres.log")
		os.Remove(link)
		os.Symlink(filepath.Join("..", "postgres", "postgres.log"), link)
		if err := ensureDatabase(ctx, pg.URL("postgres"), Database); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		dbURL, info.PostgresPid = pg.URL(Database), pg.Pid()
		info.PostgresURL = flagenv.RedactURL(dbURL)
		say("postgres: %s (data in %s)", info.PostgresURL, rel(filepath.Join(c.Dir, "postgres")))
	} else {
		info.PostgresURL = flagenv.RedactURL(dbURL)
		say("postgres: %s (external)", info.PostgresURL)
	}

	// Kafka.
	info.KafkaBrokers = c.KafkaBrokers
	if len(info.KafkaBrokers) == 0 {
		klog, err := os.OpenFile(filepath.Join(c.Dir, "logs", "kafka.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		st.push("", klog.Close) // after the broker's last words
		// Topics are made on first produce, one partition each, as a default Kafka
		// (auto.create.topics.enable, num.partitions) makes them: kcat -P to a new topic
		// works. Mink's own clients never ask for it, so reading never makes one.
		kf, err := kfake.NewCluster(kfake.Ports(c.KafkaPort), kfake.DataDir(filepath.Join(c.Dir, "kafka")),
			kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1),
			kfake.WithLogger(kfake.BasicLogger(klog, kfake.LogLevelWarn)))
		if err != nil {
			return fmt.Errorf("kafka: embedded broker on port %d: %w", c.KafkaPort, err)
		}
		st.push("kafka", func() error { kf.Close(); return nil })
		info.KafkaBrokers = kf.ListenAddrs()
		say("kafka: %s (embedded broker, data in %s; it creates a topic on its first produce)", strings.Join(info.KafkaBrokers, ","), rel(filepath.Join(c.Dir, "kafka")))
	} else {
		say("kafka: %s (external)", strings.Join(info.KafkaBrokers, ","))
	}

	// The Schema Registry.
	reg := c.Registry
	if reg.URL == "" {
		er, err := startRegistry(c.Dir, c.RegistryPort, log)
		if err != nil {
			return fmt.Errorf("schema registry: %w", err)
		}
		st.push("schema registry", er.Close)
		reg = registry.Config{URL: er.URL()}
		info.SchemaRegistryEmbedded = true
		say("schema registry: %s (embedded, %d schemas kept in %s)", er.URL(), er.n, rel(er.path))
	} else {
		say("schema registry: %s (external)", registry.ShownURL(reg.URL))
	}
	info.SchemaRegistryURL = registry.ShownURL(reg.URL)

	// The roles.
	var procs []*process
	st.push("roles", func() error { return stopAll(procs, c.stopGrace(), force, say) })
	for _, n := range c.Nodes() {
		p, err := startRole(&c, n, dbURL, info.KafkaBrokers, reg, info.AuthConfig)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		info.Processes = append(info.Processes, RunProc{Node: n, Pid: p.Pid(), Log: p.LogPath})
	}
	say("started %d roles; waiting until they are healthy", len(procs))
	if err := waitHealthy(ctx, procs, c.ReadyTimeout); err != nil {
		return fmt.Errorf("waiting for the roles: %w", err)
	}

	// The demo topics and tables.
	kcl, err := kgo.NewClient(kgo.SeedBrokers(info.KafkaBrokers...), kgo.ProducerLinger(20*time.Millisecond))
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	st.push("", func() error { kcl.Close(); return nil })
	adm := kadm.NewClient(kcl)
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	partitions, err := ensureTopic(kctx, adm, c.Topic, c.Partitions)
	if err == nil {
		info.Avro.Partitions, err = ensureTopic(kctx, adm, c.AvroTopic, c.Partitions)
	}
	cancel()
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	tableState, tableErr := createTable(ctx, procs[0], c.DemoTableRequest(), da.adminToken())
	info.TableState = tableState
	if tableErr != nil {
		info.TableError = tableErr.Error()
		say("WARNING: table %s is not registered: %v", info.Table, tableErr)
	}
	// The Avro demo needs the registry: when it cannot be set up, the rest still runs.
	var orders *avroDemo
	srcl, err := srClient(reg)
	if err == nil {
		orders = newAvroDemo(srcl, c.AvroSubject(), c.AvroEvolveAfter, log, say)
		err = orders.prepare(ctx)
	}
	if err == nil {
		info.Avro.SchemaIDV1, info.Avro.SchemaIDV2 = orders.SchemaIDs()
		info.Avro.TableState, err = createTable(ctx, procs[0], c.AvroTableRequest(), da.adminToken())
	}
	if err != nil {
		orders = nil
		info.Avro.Error = err.Error()
		say("WARNING: the Avro demo (%s) is off: %v", info.Avro.Table, err)
	}

	// The demo streams.
	if c.Rate > 0 {
		events := &producer{cl: kcl, topic: c.Topic, rate: c.Rate, limit: c.Events, log: log,
			record: func(_ context.Context, id int64) (*kgo.Record, error) {
				return NewEvent(id, time.Now()).Record(c.Topic), nil
			}}
		if info.FirstEventID, err = startProducer(ctx, &st, say, info.KafkaBrokers, adm, events, eventID, "events"); err != nil {
			return err
		}
		if orders != nil {
			p := &producer{cl: kcl, topic: c.AvroTopic, rate: c.Rate, limit: c.Events, log: log,
				record: func(ctx context.Context, id int64) (*kgo.Record, error) { return orders.record(ctx, c.AvroTopic, id) }}
			if info.Avro.FirstEventID, err = startProducer(ctx, &st, say, info.KafkaBrokers, adm, p, orders.orderID, "orders"); err != nil {
				return err
			}
		}
	}

	catalogErr := probeCatalog(ctx, c.CatalogURL(), da.readerToken())
	if err := writeConnect(info.ConnectFile, &c, info, da); err != nil {
		return err
	}
	if err := writeRunInfo(c.Dir, info); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(c.Dir, RunFile))
	printBanner(out, &c, info, partitions, catalogErr, da)

	exited := make(chan *process, len(procs))
	for _, p := range procs {
		go func() { <-p.Done(); exited <- p }()
	}
	select {
	case <-ctx.Done():
		say("stopping")
		return nil
	case p := <-exited:
		return fmt.Errorf("a role stopped on its own, so the cluster stops too: %s", p.DescribeExit())
	}
}

// startProducer starts p after the topic's last id, and pushes its stop onto st. It
// returns the first id it produces.
func startProducer(ctx context.Context, st *stopper, say func(string, ...any), brokers []string, adm *kadm.Client,
	p *producer, idOf func([]byte) int64, what string) (int64, error) {
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	last, err := lastID(kctx, brokers, adm, p.topic, idOf)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("kafka: %w", err)
	}
	pctx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { p.run(pctx, last+1) })
	st.push("", func() error {
		stopProducing()
		wg.Wait()
		say("demo: %d %s produced to %s in this run (ids from %d)", p.produced.Load(), what, p.topic, last+1)
		if n := p.failed.Load(); n > 0 {
			return fmt.Errorf("demo: %d %s failed to produce to %s; the first: %v", n, what, p.topic, *p.firstErr.Load())
		}
		return nil
	})
	return last + 1, nil
}

// lockDir keeps two launchers off one folder; the lock goes with the process, so a killed
// launcher leaves none behind.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "minkdev.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another minkdev is running on %s", dir)
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}

// ports are every port the cluster listens on.
func (c *Config) ports() []int {
	var ps []int
	for _, p := range c.portsByFlag() {
		ps = append(ps, p.port)
	}
	return ps
}

// flagPort is a port and the flag that sets it (its node's, for the nodes after the first).
type flagPort struct {
	flag string
	port int
}

func (c *Config) portsByFlag() []flagPort {
	var ps []flagPort
	if c.PostgresURL == "" {
		ps = append(ps, flagPort{"postgres-port", c.PostgresPort})
	}
	if len(c.KafkaBrokers) == 0 {
		ps = append(ps, flagPort{"kafka-port", c.KafkaPort})
	}
	if c.Registry.URL == "" {
		ps = append(ps, flagPort{"schema-registry-port", c.RegistryPort})
	}
	for _, n := range c.Nodes() {
		for _, p := range []flagPort{{"grpc-port", n.GRPCPort}, {"metrics-port", n.MetricsPort}, {"console-port", n.ConsolePort}, {"catalog-port", n.CatalogPort}, {"s3-port", n.S3Port}} {
			if p.port != 0 {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// checkPorts fails up front, naming every taken port and its flag, rather than leaving a
// role to die with the reason buried in its log.
func checkPorts(c *Config) error {
	var taken, flags []string
	for _, p := range c.portsByFlag() {
		if p.port == c.PostgresPort && c.PostgresURL == "" {
			continue // pgtest.Open first stops a server a killed launcher left running on it
		}
		l, err := net.Listen("tcp", Addr(p.port))
		if err != nil {
			taken = append(taken, fmt.Sprintf("%d (--%s)", p.port, p.flag))
			if !slices.Contains(flags, p.flag) {
				flags = append(flags, p.flag)
			}
			continue
		}
		l.Close()
	}
	if len(taken) > 0 {
		return fmt.Errorf("ports already in use on 127.0.0.1: %s. Another make dev, or another server? Move this cluster: "+
			"make dev DEV_FLAGS='--dir .tmp/dev2 --%s <port> ...' (README, \"A second cluster beside the first\"; "+
			"make dev DEV_FLAGS=--help lists every flag)", strings.Join(taken, ", "), strings.Join(flags, " <port> --"))
	}
	return nil
}

// ensureDatabase creates db on the server of adminURL unless it exists.
func ensureDatabase(ctx context.Context, adminURL, db string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize())
	return err
}

// createTable registers the demo table through the first node, as a user would (with
// token, the admin's secret, as "authorization: Bearer" metadata, when auth is on). An
// existing table is kept as it is: re-runs reuse it.
func createTable(ctx context.Context, p *process, req *adminv1.CreateTableRequest, token string) (string, error) {
	conn, err := grpc.NewClient(Addr(p.node.GRPCPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	cl := adminv1.NewAdminServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	for {
		_, err := cl.CreateTable(ctx, req)
		switch status.Code(err) {
		case codes.OK:
			return "created", nil
		case codes.AlreadyExists:
			return "registered in an earlier run", nil
		case codes.Unavailable: // Postgres or Kafka still settling: try again
			select {
			case <-ctx.Done():
				return "", err
			case <-time.After(250 * time.Millisecond):
				continue
			}
		}
		return "", err
	}
}

// probeCatalog checks that the first file server answers the Iceberg REST config call
// (as a principal, with token, when auth is on).
func probeCatalog(ctx context.Context, url, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/config", nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/v1/config: %s", url, resp.Status)
	}
	return nil
}

func writeRunInfo(dir string, info RunInfo) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, RunFile+".tmp")
	os.Remove(tmp) // WriteFile keeps the mode of a file left behind
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, RunFile)) // readers never see half a file
}

// ReadRunInfo reads the running cluster's RunFile from dir.
func ReadRunInfo(dir string) (RunInfo, error) {
	var info RunInfo
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(b, &info)
}

// stopAll stops the roles in parallel: each needs only Postgres to release its leases.
func stopAll(procs []*process, grace time.Duration, force <-chan struct{}, say func(string, ...any)) error {
	if len(procs) == 0 {
		return nil
	}
	say("stopping %d roles (SIGTERM; they release their leases)", len(procs))
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.Stop(grace, force) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopper runs cleanups in the reverse order of their push.
type stopper struct {
	steps []stopStep
}

type stopStep struct {
	name string // said when done; "" says nothing
	fn   func() error
}

func (s *stopper) push(name string, fn func() error) { s.steps = append(s.steps, stopStep{name, fn}) }

func (s *stopper) run(say func(string, ...any)) error {
	var errs []error
	for i := len(s.steps) - 1; i >= 0; i-- {
		st := s.steps[i]
		if err := st.fn(); err != nil {
			errs = append(errs, err) // said once, by the caller
		} else if st.name != "" {
			say("%s stopped", st.name)
		}
	}
	return errors.Join(errs...)
}

// rel shows a path relative to the working folder when it is inside it.
func rel(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	r, err := filepath.Rel(wd, p)
	if err != nil || strings.HasPrefix(r, "..") {
		return p
	}
	return r
}
