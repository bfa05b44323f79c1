// Package devcluster runs a whole Mink cluster on one machine for `make dev`: a private
// PostgreSQL, an embedded Kafka-protocol broker (kfake) and an embedded Schema Registry
// (srfake) whose data survive restarts, the three roles as separate processes, and two
// demo topics with a steady stream of records each, registered as tables: JSON events,
// and Avro orders whose schema gains a field while it runs. Auth is on, from an auth config
// it generates once and keeps (auth.go); the banner and ConnectFile hand the credentials
// to minkctl, grpcurl and the engines (connect.go). cmd/minkdev is its command
// line; the end-to-end test drives the same code through that command, so what a
// newcomer runs is what is tested.
package devcluster

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/tables"
)

// Config is the launcher's configuration. Ports are fixed, not random, so the printed
// commands and the URLs engines are configured with stay the same from run to run.
type Config struct {
	Dir    string // state and logs: postgres/, kafka/, registry/, cache/<node>/, logs/
	BinDir string // where mink-indexer, mink-writer, mink-fileserver and minkctl are

	PostgresURL  flagenv.Secret // an existing database; empty: a private server under Dir/postgres
	PostgresPort int            // the private server's port
	KafkaBrokers flagenv.List   // existing brokers; empty: kfake under Dir/kafka
	KafkaPort    int            // kfake's port
	// Registry is an existing Schema Registry (--schema-registry-*, as every role takes
	// them); an empty URL: the embedded registry, on RegistryPort, schemas in RegistryFile.
	Registry     registry.Config
	RegistryPort int

	Indexers, Writers, FileServers int

	// Auth turns auth on: the roles get --auth-config Dir/AuthFile (generated on the first
	// run, kept after), the launcher calls the admin API as the admin, and the banner and
	// ConnectFile give the credentials. Off (--auth=false): anyone may do anything.
	Auth bool

	GRPCPort    int // the first node's gRPC port; the others follow it
	MetricsPort int // the first node's /metrics port, the others follow; 0: off
	ConsolePort int // the first node's console port, the others follow; 0: off
	CatalogPort int // the first file server's Iceberg REST port; the others follow
	S3Port      int // the first file server's S3 port; the others follow

	LeaseTTL        time.Duration
	ShutdownTimeout time.Duration // each role's --shutdown-timeout
	ReadyTimeout    time.Duration // how long the roles may take to report SERVING
	LogLevel        slog.Level    // the roles' log level

	Topic      string  // the demo topic
	Table      string  // the demo table, in namespace "default"
	Partitions int     // the demo topic's partitions, when it is created
	Rate       float64 // demo records per second on each demo topic; 0: produce none
	Events     int64   // demo records to produce on each demo topic in this run; 0: no end
	AvroTopic  string  // the Avro demo topic; its values' subject is <topic>-value
	AvroTable  string  // the Avro demo table, in namespace "default"
	// AvroEvolveAfter is the last Avro demo id written with schema version 1: the next
	// registers version 2 (adding AvroNewField) and every later one is written with it.
	// 0: never.
	AvroEvolveAfter int64
	// Table properties of the demo table when it is created: how soon a record is a row.
	RangeMaxAge    time.Duration
	CommitInterval time.Duration
}

// Defaults. 7070 is the first node so that minkctl's default --addr reaches it; 8181,
// 9000 and 8081 are the catalog, S3 and Schema Registry conventions; Postgres avoids
// 5432, where a system server usually listens. The Avro demo evolves after about a
// minute at the default rate.
var Defaults = Config{
	Dir: filepath.Join(".tmp", "dev"), BinDir: filepath.Join(".tmp", "bin"),
	PostgresPort: 15432, KafkaPort: 9092, RegistryPort: 8081,
	Indexers: 2, Writers: 1, FileServers: 2, Auth: true,
	GRPCPort: 7070, MetricsPort: 9464, ConsolePort: 7080, CatalogPort: 8181, S3Port: 9000,
	LeaseTTL: 10 * time.Second, ShutdownTimeout: 10 * time.Second, ReadyTimeout: 60 * time.Second,
	LogLevel: slog.LevelInfo,
	Topic:    "demo", Table: "demo", Partitions: 4, Rate: 20,
	AvroTopic: "demo_avro", AvroTable: "demo_avro", AvroEvolveAfter: 1200,
	RangeMaxAge: 5 * time.Second, CommitInterval: 2 * time.Second,
}

// RegisterFlags adds the launcher's flags to fs with Defaults' values; each has a MINK_*
// twin, so MINK_POSTGRES_URL, MINK_KAFKA_BROKERS and MINK_SCHEMA_REGISTRY_URL point the
// cluster elsewhere.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := Defaults
	fs.StringVar(&c.Dir, "dir", d.Dir, "folder of the cluster's data and logs (kept across runs)")
	fs.StringVar(&c.BinDir, "bin-dir", d.BinDir, "folder of the built binaries (make build)")
	fs.Var(&c.PostgresURL, "postgres-url", "use this database instead of a private PostgreSQL under --dir; it may hold a password, so give it as MINK_POSTGRES_URL (a command line is visible to every local user): the roles get it through their environment, and it is shown and written down without its password")
	fs.IntVar(&c.PostgresPort, "postgres-port", d.PostgresPort, "port of the private PostgreSQL")
	fs.Var(&c.KafkaBrokers, "kafka-brokers", "use these Kafka brokers (host:port,...) instead of the embedded broker")
	fs.IntVar(&c.KafkaPort, "kafka-port", d.KafkaPort, "port of the embedded Kafka broker")
	c.Registry.RegisterFlags(fs) // --schema-registry-url and its credentials, given to every role
	fs.Lookup("schema-registry-url").Usage = "use this Schema Registry (http(s)://[user:pass@]host:8081) instead of the embedded one"
	fs.IntVar(&c.RegistryPort, "schema-registry-port", d.RegistryPort, "port of the embedded Schema Registry (when --schema-registry-url is empty)")
	fs.IntVar(&c.Indexers, "indexers", d.Indexers, "indexer processes")
	fs.IntVar(&c.Writers, "writers", d.Writers, "writer processes")
	fs.IntVar(&c.FileServers, "file-servers", d.FileServers, "file-server processes")
	fs.BoolVar(&c.Auth, "auth", d.Auth, "auth on: every role checks credentials, from "+AuthFile+" under --dir (generated on the first run, kept after); --auth=false: anyone may do anything (debugging)")
	fs.IntVar(&c.GRPCPort, "grpc-port", d.GRPCPort, "gRPC port of the first node; each next node takes the next port")
	fs.IntVar(&c.MetricsPort, "metrics-port", d.MetricsPort, "/metrics port of the first node, the next ones follow (0: off)")
	fs.IntVar(&c.ConsolePort, "console-port", d.ConsolePort, "browser console port of the first node, the next ones follow (0: off)")
	fs.IntVar(&c.CatalogPort, "catalog-port", d.CatalogPort, "Iceberg REST catalog port of the first file server; the next ones follow")
	fs.IntVar(&c.S3Port, "s3-port", d.S3Port, "S3 port of the first file server; the next ones follow")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", d.LeaseTTL, "the roles' --lease-ttl")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "the roles' --shutdown-timeout")
	fs.DurationVar(&c.ReadyTimeout, "ready-timeout", d.ReadyTimeout, "how long the roles may take to become healthy")
	fs.TextVar(&c.LogLevel, "log-level", d.LogLevel, "the roles' log level: debug, info, warn or error")
	fs.StringVar(&c.Topic, "demo-topic", d.Topic, "demo topic")
	fs.StringVar(&c.Table, "demo-table", d.Table, "demo table (namespace default)")
	fs.IntVar(&c.Partitions, "demo-partitions", d.Partitions, "partitions of the demo topic when it is created")
	fs.Float64Var(&c.Rate, "demo-rate", d.Rate, "demo records per second on each demo topic (0: none)")
	fs.Int64Var(&c.Events, "demo-events", d.Events, "stop producing after this many demo records on each demo topic in this run (0: never)")
	fs.StringVar(&c.AvroTopic, "demo-avro-topic", d.AvroTopic, "Avro demo topic (its values' subject is <topic>-value)")
	fs.StringVar(&c.AvroTable, "demo-avro-table", d.AvroTable, "Avro demo table (namespace default)")
	fs.Int64Var(&c.AvroEvolveAfter, "demo-avro-evolve-after", d.AvroEvolveAfter,
		"Avro demo ids above this are written with schema version 2, which adds the field "+AvroNewField+" (0: never)")
	fs.DurationVar(&c.RangeMaxAge, "range-max-age", d.RangeMaxAge, "demo table property "+tables.PropRangeMaxAge+" (set when the table is created)")
	fs.DurationVar(&c.CommitInterval, "commit-interval", d.CommitInterval, "demo table property "+tables.PropCommitInterval+" (set when the table is created)")
}

// Validate reports every bad value, naming its flag.
func (c *Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) { errs = append(errs, flagenv.Errorf(name, format, args...)) }
	if c.Dir == "" {
		bad("dir", "required")
	}
	if c.BinDir == "" {
		bad("bin-dir", "required")
	}
	for name, n := range map[string]int{"indexers": c.Indexers, "writers": c.Writers, "file-servers": c.FileServers} {
		if n < 1 || n > 16 {
			bad(name, "%d is out of range (1 to 16)", n)
		}
	}
	n := c.Indexers + c.Writers + c.FileServers
	ports := []struct {
		name  string
		port  int
		count int
	}{
		{"postgres-port", c.PostgresPort, 1}, {"kafka-port", c.KafkaPort, 1}, {"schema-registry-port", c.RegistryPort, 1}, {"grpc-port", c.GRPCPort, n},
		{"metrics-port", c.MetricsPort, n}, {"console-port", c.ConsolePort, n}, {"catalog-port", c.CatalogPort, c.FileServers}, {"s3-port", c.S3Port, c.FileServers},
	}
	for _, p := range ports {
		if (p.name == "metrics-port" || p.name == "console-port") && p.port == 0 {
			continue
		}
		if p.port < 1 || p.port+p.count-1 > 65535 {
			bad(p.name, "%d is out of range", p.port)
		}
	}
	if c.LeaseTTL < 300*time.Millisecond {
		bad("lease-ttl", "%v is too short (300ms at least)", c.LeaseTTL)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "must be positive")
	}
	if c.ReadyTimeout <= 0 {
		bad("ready-timeout", "must be positive")
	}
	if c.Topic == "" {
		bad("demo-topic", "required")
	}
	if c.Table == "" {
		bad("demo-table", "required")
	}
	switch {
	case c.AvroTopic == "":
		bad("demo-avro-topic", "required")
	case c.AvroTopic == c.Topic:
		bad("demo-avro-topic", "%q is the JSON demo's topic (--demo-topic) too", c.AvroTopic)
	}
	switch {
	case c.AvroTable == "":
		bad("demo-avro-table", "required")
	case c.AvroTable == c.Table:
		bad("demo-avro-table", "%q is the JSON demo's table (--demo-table) too", c.AvroTable)
	}
	if c.AvroEvolveAfter < 0 {
		bad("demo-avro-evolve-after", "must not be negative (0: never)")
	}
	if err := c.Registry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Partitions < 1 || c.Partitions > 1000 {
		bad("demo-partitions", "%d is out of range (1 to 1000)", c.Partitions)
	}
	if c.Rate < 0 || c.Rate > 1e6 {
		bad("demo-rate", "%v is out of range (0 to 1000000)", c.Rate)
	}
	if c.Events < 0 {
		bad("demo-events", "must not be negative")
	}
	if _, err := tables.ParseProps(c.tableProperties()); err != nil {
		errs = append(errs, fmt.Errorf("--range-max-age/--commit-interval: %w", err))
	}
	return errors.Join(errs...)
}

func (c *Config) tableProperties() map[string]string {
	return map[string]string{
		tables.PropRangeMaxAge:    c.RangeMaxAge.String(),
		tables.PropCommitInterval: c.CommitInterval.String(),
	}
}

// stopGrace is how long a role may take to stop cleanly after SIGTERM before it is
// killed: release its leases (a round takes at most lease_ttl/3 to notice), then drain
// requests for --shutdown-timeout.
func (c *Config) stopGrace() time.Duration { return c.ShutdownTimeout + c.LeaseTTL + 5*time.Second }

// Node is one role process of the cluster.
type Node struct {
	ID          string `json:"id"`   // indexer-1, writer-1, fileserver-2, ...
	Role        string `json:"role"` // indexer, writer, fileserver
	GRPCPort    int    `json:"grpc_port"`
	MetricsPort int    `json:"metrics_port,omitempty"` // 0: off
	ConsolePort int    `json:"console_port,omitempty"` // 0: off
	CatalogPort int    `json:"catalog_port,omitempty"` // file servers only
	S3Port      int    `json:"s3_port,omitempty"`      // file servers only
}

// Addr is a loopback host:port; every listener of the cluster is on loopback only.
func Addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// Nodes lists the role processes with their ports: indexers first, so the first node (the
// one minkctl dials by default) is an indexer, then writers, then file servers.
func (c *Config) Nodes() []Node {
	var nodes []Node
	add := func(role string, count int) {
		for i := 1; i <= count; i++ {
			n := Node{ID: role + "-" + strconv.Itoa(i), Role: role, GRPCPort: c.GRPCPort + len(nodes)}
			if c.MetricsPort != 0 {
				n.MetricsPort = c.MetricsPort + len(nodes)
			}
			if c.ConsolePort != 0 {
				n.ConsolePort = c.ConsolePort + len(nodes)
			}
			if role == "fileserver" {
				n.CatalogPort, n.S3Port = c.CatalogPort+i-1, c.S3Port+i-1
			}
			nodes = append(nodes, n)
		}
	}
	add("indexer", c.Indexers)
	add("writer", c.Writers)
	add("fileserver", c.FileServers)
	return nodes
}

// ConsoleURL is the first node's console; "" when it is off.
func (c *Config) ConsoleURL() string {
	if c.ConsolePort == 0 {
		return ""
	}
	return "http://" + Addr(c.ConsolePort) + "/"
}

// CatalogURL is the first file server's Iceberg REST catalog.
func (c *Config) CatalogURL() string { return "http://" + Addr(c.CatalogPort) }

// S3URL is the first file server's S3 endpoint.
func (c *Config) S3URL() string { return "http://" + Addr(c.S3Port) }
