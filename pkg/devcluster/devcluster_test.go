package devcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Every demo event must decode against the demo table with no error: a demo whose rows
// all carry _mink_error would teach a newcomer the wrong thing.
func TestDemoEventsFitTheDemoTable(t *testing.T) {
	spec := tableschema.Spec{Format: tableschema.FormatJSON, Columns: DemoColumns}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	dec, err := rowcodec.NewDecoder(spec)
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, c := range DemoColumns {
		col[c.Name] = i
	}
	var row rowcodec.Row
	events := map[string]int{}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6789000, time.UTC)
	for id := int64(1); id <= 5000; id++ {
		e := NewEvent(id, ts)
		rec := e.Record("demo")
		if !dec.Decode(record.Record{Offset: id - 1, Key: rec.Key, Value: rec.Value}, &row) {
			t.Fatalf("event %d does not fit the demo table: %s\n%s", id, row.Values[len(row.Values)-1].Bytes, rec.Value)
		}
		if v := row.Values[col["id"]]; !v.Valid || v.Int != id {
			t.Fatalf("event %d decodes to id %+v", id, v)
		}
		if v := row.Values[col["ts"]]; v.Int != ts.UnixMicro() {
			t.Fatalf("event %d: ts %d, want %d", id, v.Int, ts.UnixMicro())
		}
		if v := row.Values[col["country"]]; !v.Valid || string(v.Bytes) != e.Geo.Country {
			t.Fatalf("event %d: country through geo.country = %+v", id, v)
		}
		if amount := row.Values[col["amount"]]; amount.Valid != (e.Amount != "") {
			t.Fatalf("event %d: amount %q decoded valid=%v", id, e.Amount, amount.Valid)
		}
		events[e.Event]++
	}
	// The mix is what the doc comment promises, roughly: mostly page views, some sales.
	if events["page_view"] < 3500 || events["add_to_cart"] < 400 || events["purchase"] < 100 {
		t.Errorf("event mix %v", events)
	}
}

// A row can be checked from its id alone: everything but the time is a function of it.
func TestNewEventIsAFunctionOfItsID(t *testing.T) {
	a, _ := json.Marshal(NewEvent(42, time.Unix(0, 0)))
	b, _ := json.Marshal(NewEvent(42, time.Unix(0, 0)))
	c, _ := json.Marshal(NewEvent(43, time.Unix(0, 0)))
	if !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Errorf("NewEvent(42) twice: %s and %s; NewEvent(43): %s", a, b, c)
	}
	if e := NewEvent(7, time.Now()); e.Record("demo").Topic != "demo" || string(e.Record("demo").Key) != e.User {
		t.Errorf("the record is keyed by user: %+v", e.Record("demo"))
	}
}

func TestNodesLayout(t *testing.T) {
	c := Defaults
	var got []string
	for _, n := range c.Nodes() {
		got = append(got, n.ID+"@"+Addr(n.GRPCPort), "console@"+Addr(n.ConsolePort))
		if n.Role == "fileserver" {
			got = append(got, Addr(n.CatalogPort), Addr(n.S3Port))
		}
	}
	want := "indexer-1@127.0.0.1:7070 console@127.0.0.1:7080 indexer-2@127.0.0.1:7071 console@127.0.0.1:7081 " +
		"writer-1@127.0.0.1:7072 console@127.0.0.1:7082 fileserver-1@127.0.0.1:7073 console@127.0.0.1:7083 127.0.0.1:8181 127.0.0.1:9000 " +
		"fileserver-2@127.0.0.1:7074 console@127.0.0.1:7084 127.0.0.1:8182 127.0.0.1:9001"
	if strings.Join(got, " ") != want {
		t.Errorf("nodes:\n%s\nwant:\n%s", strings.Join(got, " "), want)
	}
	if ps := c.ports(); len(ps) != 3+5+5+5+2+2 {
		t.Errorf("ports %v", ps)
	}
}

func TestFlagsAndValidate(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("minkdev", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if err := fs.Parse([]string{"--indexers", "0", "--demo-rate", "-1", "--commit-interval", "1ms", "--s3-port", "65535",
		"--demo-avro-topic", "demo", "--demo-avro-evolve-after", "-1", "--schema-registry-port", "0",
		"--schema-registry-url", "ftp://sr"}); err != nil {
		t.Fatal(err)
	}
	err := c.Validate()
	for _, want := range []string{"--indexers", "--demo-rate", "mink.commit.interval", "--s3-port",
		"--demo-avro-topic", "--demo-avro-evolve-after", "--schema-registry-port", "--schema-registry-url"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
}

// The roles get every registry setting, the secrets (and the URL, which may carry basic
// auth) through their environment only.
func TestRegistrySettingsOfTheRoles(t *testing.T) {
	reg := registry.Config{URL: "https://sr.example.com", Username: "u", Password: "pw-secret", CAFile: "/ca.pem", Timeout: 3 * time.Second}
	args, env := strings.Join(registryArgs(reg), " "), strings.Join(registrySecrets(reg), " ")
	if args != "--schema-registry-username u --schema-registry-ca-file /ca.pem --schema-registry-timeout 3s" ||
		env != "MINK_SCHEMA_REGISTRY_URL=https://sr.example.com MINK_SCHEMA_REGISTRY_PASSWORD=pw-secret" {
		t.Errorf("args %q, env %q", args, env)
	}
	tok := registry.Config{URL: "https://sr.example.com", BearerToken: "tok-secret"}
	if a := strings.Join(registryArgs(tok), " "); strings.Contains(a, "secret") || registrySecrets(tok)[1] != "MINK_SCHEMA_REGISTRY_BEARER_TOKEN=tok-secret" {
		t.Errorf("bearer token: args %q, env %q", a, registrySecrets(tok))
	}
	basic := registry.Config{URL: "https://u:pw-secret@sr.example.com:8081"}
	if a := strings.Join(registryArgs(basic), " "); strings.Contains(a, "pw-secret") {
		t.Errorf("a URL with basic auth on the command line: %q", a)
	}
	if shown := registry.ShownURL(basic.URL); shown != "https://sr.example.com:8081" {
		t.Errorf("the registry URL shows as %s", shown)
	}
}

// A role gets the Postgres URL through its environment, never on its command line.
func TestRolesGetThePostgresURLInTheirEnvironment(t *testing.T) {
	c := Defaults
	for _, n := range c.Nodes() {
		f := roleFlags(&c, n, "postgres://mink:pg-s3cret@db:5432/mink", []string{"k:9092"}, registry.Config{}, "")
		if args := strings.Join(f.Args(), " "); strings.Contains(args, "pg-s3cret") || strings.Contains(args, "postgres-url") {
			t.Errorf("%s: args %q", n.ID, args)
		}
		if env := f.Env(); !slices.Contains(env, "MINK_POSTGRES_URL=postgres://mink:pg-s3cret@db:5432/mink") {
			t.Errorf("%s: env %q", n.ID, env)
		}
	}
}

func TestBannerHasTheCommandsToTry(t *testing.T) {
	c := Defaults
	var out bytes.Buffer
	info := RunInfo{CatalogURL: c.CatalogURL(), S3URL: c.S3URL(), Table: "default.demo", Topic: "demo",
		PostgresURL: "postgres://postgres:secret@127.0.0.1:15432/mink", KafkaBrokers: []string{"127.0.0.1:9092"}, FirstEventID: 1, TableState: "created",
		SchemaRegistryURL: "http://127.0.0.1:8081", SchemaRegistryEmbedded: true,
		Avro: AvroInfo{Table: "default.demo_avro", Topic: "demo_avro", Subject: "demo_avro-value", Partitions: 4,
			TableState: "created", FirstEventID: 1, SchemaIDV1: 1, EvolveAfter: c.AvroEvolveAfter}}
	printBanner(&out, &c, info, 4, errors.New("connection refused"), nil)
	s := out.String()
	for _, want := range []string{
		"http://127.0.0.1:8181", "http://127.0.0.1:9000", "WARNING: not answering yet: connection refused",
		"export MINK_ADDR=127.0.0.1:7070 MINK_CATALOG=http://127.0.0.1:8181\n",
		"minkctl status\n", "minkctl table describe demo\n", "minkctl scan default.demo --limit 10\n",
		`-plaintext -emit-defaults -d '{"node":"fileserver-2"}' 127.0.0.1:7070 mink.admin.v1.AdminService/GetStatus`,
		"Schema Registry", "http://127.0.0.1:8081  (embedded; schemas kept in " + filepath.Join(c.Dir, RegistryFile) + ")",
		"topic demo_avro (4 partitions): Avro 20 orders/s, ids from 1, subject demo_avro-value",
		"minkctl table describe demo_avro\n", "minkctl scan default.demo_avro --limit 10   #",
		`-plaintext -emit-defaults -d '{"name":"demo_avro"}' 127.0.0.1:7070 mink.admin.v1.AdminService/DescribeTable`,
		"registry version 1 (registry id 1); version 2 adds the column coupon from order 1201 (in about 60s)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("banner lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "secret") {
		t.Errorf("banner shows the Postgres password:\n%s", s)
	}

	// Without a registry the Avro demo is off, and the banner says so instead of
	// suggesting commands that would fail.
	out.Reset()
	info.Avro = AvroInfo{Table: "default.demo_avro", Error: "connection refused"}
	info.SchemaRegistryEmbedded, info.SchemaRegistryURL = false, "https://sr.example.com"
	printBanner(&out, &c, info, 4, nil, nil)
	s = out.String()
	if !strings.Contains(s, "default.demo_avro  AVRO DEMO OFF: connection refused") || !strings.Contains(s, "https://sr.example.com  (external)") ||
		strings.Contains(s, "demo_avro --limit") {
		t.Errorf("banner with the Avro demo off:\n%s", s)
	}
}

// The private Postgres keeps its data across runs, on the same port, and a server left
// running by a killed launcher is stopped rather than blocking the next start.
func TestPostgresPersists(t *testing.T) {
	if _, err := pgtest.BinDir(); err != nil {
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", "minkdev-pg-") // not t.TempDir (0700): Postgres may run as another user
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	defer os.RemoveAll(dir)
	port := freePort(t)
	ctx := context.Background()
	exec := func(c *pgtest.Cluster, sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	pg, err := pgtest.Open(dir, port)
	if err != nil {
		t.Fatal(err)
	}
	exec(pg, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)")
	pg.Stop()

	pg, err = pgtest.Open(dir, port)
	if err != nil {
		t.Fatal(err)
	}
	exec(pg, "DO $$ BEGIN IF (SELECT n FROM kept) <> 42 THEN RAISE 'lost'; END IF; END $$")
	stale := pg.Pid()
	// A second Open while the first server runs: as after a killed launcher.
	pg2, err := pgtest.Open(dir, port)
	if err != nil {
		t.Fatal(err)
	}
	defer pg2.Stop()
	if pg2.Pid() == stale || syscall.Kill(stale, 0) == nil {
		t.Errorf("the stale server (pid %d) still runs; new pid %d", stale, pg2.Pid())
	}
	exec(pg2, "SELECT n FROM kept")
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A port another server holds is named with its flag, and the error says how to move the
// cluster (the README's second-cluster line, every flag with --help).
func TestTakenPortsNameTheirFlags(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	c := Defaults
	c.PostgresPort, c.KafkaPort, c.RegistryPort = freePort(t), freePort(t), taken
	c.GRPCPort, c.MetricsPort, c.CatalogPort, c.S3Port = freePort(t), 0, freePort(t), freePort(t)
	c.Indexers, c.Writers, c.FileServers = 1, 1, 1
	err = checkPorts(&c)
	// Other ports may be taken too meanwhile (by tests running beside this one, near the
	// free ports picked here): the taken one is named, and the move names its flag.
	for _, want := range []string{fmt.Sprintf("%d (--schema-registry-port)", taken), "DEV_FLAGS='--dir .tmp/dev2 --", " --schema-registry-port <port> ",
		"A second cluster beside the first", "DEV_FLAGS=--help"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkPorts: %v; want it to say %q", err, want)
		}
	}
}
