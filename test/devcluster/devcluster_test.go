// Package devcluster_test runs `make dev`'s launcher (cmd/minkdev) as a real process, with
// short durations and its own ports and folder, and checks what a newcomer is promised:
// the cluster comes up with its embedded Schema Registry and auth on (a generated auth
// config, the credentials and engine snippets printed), both demo streams (JSON events
// and Avro orders) become tables that `minkctl scan` reads as the reader with every
// record exactly once, a call without credentials is refused at every door, the Avro
// table gains a column when the demo registers schema version 2 (older rows null in it),
// Ctrl-C leaves nothing behind, and a second run picks up the same data, auth config and
// the registry's schemas under the same ids included.
package devcluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// FileIO, as engines read the files
	"github.com/apache/iceberg-go/table"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/devcluster"
	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/roleproc"
	"github.com/minkhq/mink/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m, "./cmd/minkdev", "./cmd/minkctl") }

// Durations short enough for a test, long enough for a loaded machine.
const (
	readyTimeout = 45 * time.Second // minkdev: initdb, start, health, topic, table
	kafkaTimeout = 20 * time.Second // the demo events are all in Kafka
	scanTimeout  = 45 * time.Second // every record is a row in the table
	stopTimeout  = 40 * time.Second // Ctrl-C to exit
	catalogGrace = 10 * time.Second // a healthy file server's catalog refusing connections
)

func TestMakeDev(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole cluster twice")
	}
	if _, err := pgtest.BinDir(); err != nil {
		t.Fatalf("the launcher starts a private PostgreSQL: %v (make test installs it)", err)
	}
	// Not t.TempDir: its folders are private (0700), and Postgres runs as the postgres
	// user when the test runs as root.
	dir, err := os.MkdirTemp("", "minkdev-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil { // as /proc shows it
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	base := freePortBlock(t, 17)
	registryURL := "http://" + devcluster.Addr(base+11)
	// Avro orders above evolveAfter are written with schema version 2 (one more field).
	const evolveAfter = 100
	args := []string{
		"--dir", dir, "--bin-dir", cluster.BinDir(),
		"--postgres-port", strconv.Itoa(base), "--kafka-port", strconv.Itoa(base + 1),
		"--grpc-port", strconv.Itoa(base + 2), "--catalog-port", strconv.Itoa(base + 7), "--s3-port", strconv.Itoa(base + 9),
		"--schema-registry-port", strconv.Itoa(base + 11), "--demo-avro-evolve-after", strconv.Itoa(evolveAfter),
		"--metrics-port", "0", "--console-port", strconv.Itoa(base + 12), "--lease-ttl", "2s", "--shutdown-timeout", "5s", "--ready-timeout", "30s",
		"--demo-rate", "500", "--range-max-age", "1s", "--commit-interval", "1s",
	}

	// First run: a fresh cluster, 300 records on each demo topic.
	const first, second = 300, 120
	m := startMinkdev(t, append(args, "--demo-events", strconv.Itoa(first)))
	info := m.waitReady(t)
	if info.TableError != "" {
		t.Fatalf("step: register the demo table through the admin API: %s", info.TableError)
	}
	if info.TableState != "created" || info.FirstEventID != 1 {
		t.Errorf("first run: table %q, first event id %d; want created, 1", info.TableState, info.FirstEventID)
	}
	if info.Avro.Error != "" {
		t.Fatalf("step: set up the Avro demo (schema, table): %s", info.Avro.Error)
	}
	if !info.SchemaRegistryEmbedded || info.SchemaRegistryURL != registryURL {
		t.Errorf("first run: schema registry %q (embedded %v), want the embedded one at %s", info.SchemaRegistryURL, info.SchemaRegistryEmbedded, registryURL)
	}
	if info.Avro.TableState != "created" || info.Avro.FirstEventID != 1 || info.Avro.SchemaIDV1 == 0 || info.Avro.SchemaIDV2 != 0 {
		t.Errorf("first run: Avro demo %+v; want the table created, ids from 1, schema version 1 only", info.Avro)
	}
	creds := checkAuthConfig(t, dir, info, true)
	m.checkBanner(t, info, creds)
	checkDoors(t, info, creds)
	// The leftover check after the stop must be able to see this run's processes at all.
	if seen := procsUnder(dir); len(seen) < len(info.Processes)+1 {
		t.Fatalf("procsUnder sees %d processes of the running cluster, want at least the roles and Postgres:\n%s",
			len(seen), strings.Join(seen, "\n"))
	}
	reg, err := sr.NewClient(sr.URLs(info.SchemaRegistryURL))
	if err != nil {
		t.Fatal(err)
	}
	want := waitProduced(t, info, info.Topic, first, jsonID)
	m.waitScan(t, info, creds.reader.viaEnv(), info.Table, "id", want, nil)
	checkEngineRead(t, info, creds, info.Table)
	orders := newAvroReader(t, reg, info.Avro.Subject)
	wantOrders := waitProduced(t, info, info.Avro.Topic, first, orders.id)
	ids := orders.checkEvolution(t, evolveAfter, first)
	m.waitScan(t, info, creds.reader.viaFlag(), info.Avro.Table, "id,coupon", wantOrders, checkCoupon(evolveAfter))
	checkEvolved(t, info, creds.reader)
	m.stop(t)
	checkNothingLeft(t, dir, info)
	if _, err := os.Stat(filepath.Join(dir, devcluster.RegistryFile)); err != nil {
		t.Errorf("step: stop: the registry's schemas are not kept: %v", err)
	}

	// Second run on the same folder: the data is kept, the tables reused, the ids go on,
	// and the registry answers with the same schemas under the same ids.
	m = startMinkdev(t, append(args, "--demo-events", strconv.Itoa(second)))
	info = m.waitReady(t)
	if again := checkAuthConfig(t, dir, info, false); again.raw != creds.raw {
		t.Errorf("second run: step: auth: %s changed; a second run must keep the secrets engines were given", devcluster.AuthFile)
	}
	m.checkBanner(t, info, creds)
	if !strings.Contains(m.Output(), devcluster.AuthFile+" (kept from an earlier run)") {
		t.Errorf("second run: step: banner: it does not say the auth config was kept")
	}
	if info.TableError != "" {
		t.Fatalf("second run: step: register the demo table: %s", info.TableError)
	}
	if info.TableState != "registered in an earlier run" || info.FirstEventID != first+1 {
		t.Errorf("second run: table %q, first event id %d; want it registered in an earlier run and ids from %d",
			info.TableState, info.FirstEventID, first+1)
	}
	if info.Avro.Error != "" {
		t.Fatalf("second run: step: set up the Avro demo: %s", info.Avro.Error)
	}
	if info.Avro.TableState != "registered in an earlier run" || info.Avro.FirstEventID != first+1 ||
		info.Avro.SchemaIDV1 != ids[1] || info.Avro.SchemaIDV2 != ids[2] {
		t.Errorf("second run: Avro demo %+v; want the table registered in an earlier run, ids from %d, schema ids %d and %d",
			info.Avro, first+1, ids[1], ids[2])
	}
	if again := newAvroReader(t, reg, info.Avro.Subject).versions(t); len(again) != 2 || again[1] != ids[1] || again[2] != ids[2] {
		t.Errorf("second run: the registry holds versions %v of %s, want exactly %v from the first run", again, info.Avro.Subject, ids)
	}
	want = waitProduced(t, info, info.Topic, first+second, jsonID)
	m.waitScan(t, info, creds.reader.viaEnv(), info.Table, "id", want, nil)
	orders = newAvroReader(t, reg, info.Avro.Subject) // a fresh cache: every id is asked of the restarted registry
	wantOrders = waitProduced(t, info, info.Avro.Topic, first+second, orders.id)
	orders.checkEvolution(t, evolveAfter, first+second)
	m.waitScan(t, info, creds.reader.viaFlag(), info.Avro.Table, "id,coupon", wantOrders, checkCoupon(evolveAfter))
	checkEvolved(t, info, creds.reader)
	m.stop(t)
	checkNothingLeft(t, dir, info)
}

// checkBanner checks that the banner shows the registry, how to query the Avro table,
// and the credentials of the auth config (and no other secret), and that the snippets
// file it names gives every engine the reader's.
func (m *minkdev) checkBanner(t *testing.T, info devcluster.RunInfo, creds credentials) {
	t.Helper()
	out := m.Output()
	r, a := creds.reader.secret, creds.admin.secret
	for _, want := range []string{
		"Schema Registry", info.SchemaRegistryURL, "subject " + info.Avro.Subject,
		"table describe demo_avro\n", "scan default.demo_avro --limit 10   #",
		`-emit-defaults -H "authorization: Bearer $MINK_TOKEN" -d '{"name":"demo_avro"}' ` + devcluster.Addr(info.Processes[0].GRPCPort) + " mink.admin.v1.AdminService/DescribeTable",
		"export MINK_ADDR=" + devcluster.Addr(info.Processes[0].GRPCPort) + " MINK_CATALOG=" + info.CatalogURL + " MINK_TOKEN=" + a + " ",
		"scan default.demo --limit 10 --token " + r + " ",
		"credential=reader:" + r + ";", info.ConnectFile,
		"http://" + devcluster.Addr(info.Processes[0].ConsolePort) + "/  in a browser (every node serves one",
		"console " + devcluster.Addr(info.Processes[len(info.Processes)-1].ConsolePort),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("step: banner: it lacks %q", want)
		}
	}
	if strings.Contains(out, creds.cluster) {
		t.Errorf("step: banner: it shows the cluster secret")
	}
	if info.ConnectFile != filepath.Join(m.dir, devcluster.ConnectFile) {
		t.Errorf("step: banner: snippets in %q, want %s under the folder", info.ConnectFile, devcluster.ConnectFile)
	}
	b, err := os.ReadFile(info.ConnectFile)
	if err != nil {
		t.Fatalf("step: banner: %v", err)
	}
	if st, _ := os.Stat(info.ConnectFile); st.Mode().Perm() != 0o600 {
		t.Errorf("step: banner: %s has mode %v; it holds secrets: want 0600", info.ConnectFile, st.Mode().Perm())
	}
	for _, want := range []string{
		" MINK_TOKEN=" + a + " ",                                                                 // minkctl
		"-H 'authorization: Bearer " + a + "'",                                                   // grpcurl
		"spark.sql.catalog.mink.credential=reader:" + r + " ",                                    // Spark
		"spark.sql.catalog.mink.header.X-Iceberg-Access-Delegation=vended-credentials",           // Spark's S3
		"iceberg.rest-catalog.oauth2.credential=reader:" + r + "\n",                              // Trino
		"iceberg.rest-catalog.vended-credentials-enabled=true\n",                                 // Trino's S3
		"CLIENT_ID 'reader', CLIENT_SECRET '" + r + "'",                                          // DuckDB
		`credential="reader:` + r + `"`,                                                          // PyIceberg
		`rest.WithCredential("reader:` + r + `")`,                                                // iceberg-go
		"OAUTH2_SERVER_URI '" + info.CatalogURL + "/v1/oauth/tokens'",                            // the token endpoint
		"ENDPOINT '" + info.CatalogURL + "'", "spark.sql.catalog.mink.s3.endpoint=" + info.S3URL, // this run's ports
		"Open http://" + devcluster.Addr(info.Processes[0].ConsolePort) + "/ in a browser", // the console
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("step: banner: %s lacks %q", devcluster.ConnectFile, want)
		}
	}
	if strings.Contains(string(b), creds.cluster) {
		t.Errorf("step: banner: %s holds the cluster secret", devcluster.ConnectFile)
	}
	// The console the banner names answers: its page, and a sign-in it asks for.
	console := "http://" + devcluster.Addr(info.Processes[0].ConsolePort) + "/"
	for path, want := range map[string]int{"": http.StatusOK, "api/session": http.StatusUnauthorized} {
		resp, err := http.Get(console + path)
		if err != nil {
			t.Errorf("step: banner: the console at %s: %v", console, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != want || resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("step: banner: GET %s%s: %s (CSP %q), want %d", console, path, resp.Status, resp.Header.Get("Content-Security-Policy"), want)
		}
	}
}

// principal is one credential of the auth config, and the ways minkctl takes it.
type principal struct{ id, secret string }

// viaEnv is minkctl's MINK_TOKEN; viaFlag its --token.
func (p principal) viaEnv() tokenArg  { return tokenArg{env: []string{"MINK_TOKEN=" + p.secret}} }
func (p principal) viaFlag() tokenArg { return tokenArg{args: []string{"--token", p.secret}} }

type tokenArg struct{ env, args []string }

type credentials struct {
	raw           string // the whole file
	cluster       string
	admin, reader principal
}

// checkAuthConfig checks the auth config the launcher generated (first) or kept: under
// the folder, readable by its owner only, one every role accepts, with an admin and a
// reader of default.*, and named by the run file as what every role was given.
func checkAuthConfig(t *testing.T, dir string, info devcluster.RunInfo, first bool) credentials {
	t.Helper()
	path := filepath.Join(dir, devcluster.AuthFile)
	if info.AuthConfig != path {
		t.Fatalf("step: auth: the roles were given %q, want %s (auth is on by default)", info.AuthConfig, path)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("step: auth: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("step: auth: %s has mode %v; want 0600", path, st.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	f, err := auth.ParseFile(raw)
	if err != nil {
		t.Fatalf("step: auth: the roles would refuse %s: %v", path, err)
	}
	c := credentials{raw: string(raw), cluster: f.ClusterSecret}
	for _, p := range f.Principals {
		switch {
		case p.ID == devcluster.AdminID && p.Role == auth.RoleAdmin:
			c.admin = principal{p.ID, p.Secret}
		case p.ID == devcluster.ReaderID && p.Role == auth.RoleReader && slices.Equal(p.Tables, []string{devcluster.ReaderTables}):
			c.reader = principal{p.ID, p.Secret}
		}
	}
	if c.admin.secret == "" || c.reader.secret == "" {
		t.Fatalf("step: auth: %s lacks the principals admin (role admin) and reader (role reader, tables default.*): %+v", path, f.Principals)
	}
	for _, p := range info.Processes {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.Pid), "cmdline"))
		if !bytes.Contains(b, []byte("\x00--auth-config\x00"+path+"\x00")) {
			t.Errorf("step: auth: %s was not started with --auth-config %s: %q", p.ID, path, b)
		}
	}
	return c
}

// checkDoors checks that every door refuses a caller without credentials, and that the
// reader may read but not administer: the admin API (Unauthenticated, PermissionDenied)
// and the catalog (401). This waits on the doors' enforcement (pkg/auth's callers).
func checkDoors(t *testing.T, info devcluster.RunInfo, c credentials) {
	t.Helper()
	conn, err := grpc.NewClient(devcluster.Addr(info.Processes[0].GRPCPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := adminv1.NewAdminServiceClient(conn)
	as := func(token string) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		return ctx
	}
	for _, tc := range []struct {
		who   string
		token string
		call  func(context.Context) error
		want  codes.Code
	}{
		{"no credentials: ListNodes", "", func(ctx context.Context) error { _, err := cl.ListNodes(ctx, &adminv1.ListNodesRequest{}); return err }, codes.Unauthenticated},
		// Calls that change nothing should a door let them in: the checks that follow
		// run on the same cluster.
		{"no credentials: UndrainNode", "", func(ctx context.Context) error {
			_, err := cl.UndrainNode(ctx, &adminv1.UndrainNodeRequest{Node: info.Processes[0].ID})
			return err
		}, codes.Unauthenticated},
		{"a wrong secret: ListNodes", c.reader.secret + "x", func(ctx context.Context) error { _, err := cl.ListNodes(ctx, &adminv1.ListNodesRequest{}); return err }, codes.Unauthenticated},
		{"the reader: ListNodes", c.reader.secret, func(ctx context.Context) error { _, err := cl.ListNodes(ctx, &adminv1.ListNodesRequest{}); return err }, codes.OK},
		{"the reader: CreateTable", c.reader.secret, func(ctx context.Context) error { // of a table that exists
			_, err := cl.CreateTable(ctx, &adminv1.CreateTableRequest{Namespace: "default", Name: strings.TrimPrefix(info.Table, "default."),
				Topic: info.Topic, Format: adminv1.RecordFormat_RECORD_FORMAT_RAW})
			return err
		}, codes.PermissionDenied},
		{"the admin: ListNodes", c.admin.secret, func(ctx context.Context) error { _, err := cl.ListNodes(ctx, &adminv1.ListNodesRequest{}); return err }, codes.OK},
	} {
		if err := tc.call(as(tc.token)); status.Code(err) != tc.want {
			t.Errorf("step: doors: admin API, %s: %v; want %s", tc.who, err, tc.want)
		}
	}

	get := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, info.CatalogURL+"/v1/namespaces", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("step: doors: catalog: %v", err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := get(""); code != http.StatusUnauthorized {
		t.Errorf("step: doors: catalog GET /v1/namespaces without credentials: %d %s; want 401", code, body)
	}
	if code, body := get(c.reader.secret); code != http.StatusOK {
		t.Errorf("step: doors: catalog GET /v1/namespaces as the reader: %d %s; want 200", code, body)
	}
	// Health stays open, for probes and container health checks: minkctl health needs no
	// token (docker-compose.yaml's and the images' health checks run it).
	for _, p := range info.Processes {
		cmd := exec.Command(cluster.Bin("minkctl"), "health", "--addr", devcluster.Addr(p.GRPCPort))
		cmd.Env = roleproc.CleanEnv()
		if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "SERVING" {
			t.Errorf("step: doors: minkctl health of %s without credentials: %v: %s", p.ID, err, out)
		}
	}
	// minkctl scan without a token is refused.
	cmd := exec.Command(cluster.Bin("minkctl"), "scan", info.Table, "--catalog", info.CatalogURL, "--limit", "1")
	cmd.Env = roleproc.CleanEnv()
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("step: doors: minkctl scan without a token read the table:\n%s", out)
	}
}

// checkEngineRead reads a table as an engine following the snippets does: iceberg-go with
// the reader's OAuth2 client credentials (POST /v1/oauth/tokens) and the S3 credentials the
// catalog vends with the table load (iceberg-go asks for them by default).
func checkEngineRead(t *testing.T, info devcluster.RunInfo, c credentials, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scanTimeout)
	defer cancel()
	cat, err := rest.NewCatalog(ctx, "mink", info.CatalogURL, rest.WithCredential(c.reader.id+":"+c.reader.secret))
	if err != nil {
		t.Errorf("step: engine: the catalog with credential=reader:<secret>: %v", err)
		return
	}
	ns, tbl, _ := strings.Cut(name, ".")
	tb, err := cat.LoadTable(ctx, table.Identifier{ns, tbl})
	if err != nil {
		t.Errorf("step: engine: load %s as the reader: %v", name, err)
		return
	}
	arrowTable, err := tb.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Errorf("step: engine: read %s over S3 with the vended credentials: %v", name, err)
		return
	}
	defer arrowTable.Release()
	if arrowTable.NumRows() == 0 {
		t.Errorf("step: engine: %s read as the reader has no rows", name)
	}
}

// avroReader decodes the Avro demo's records with the schemas the registry has under
// their ids, as any consumer would.
type avroReader struct {
	reg      *sr.Client
	subject  string
	schemas  map[int]avro.Schema
	schemaOf map[int64]int // order id: the schema id it was written with
}

func newAvroReader(t *testing.T, reg *sr.Client, subject string) *avroReader {
	return &avroReader{reg: reg, subject: subject, schemas: map[int]avro.Schema{}, schemaOf: map[int64]int{}}
}

func (a *avroReader) id(value []byte) (int64, error) {
	var serde sr.Serde
	sid, rest, err := serde.DecodeID(value)
	if err != nil {
		return 0, err
	}
	s, ok := a.schemas[sid]
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := a.reg.SchemaByID(ctx, sid)
		if err != nil {
			return 0, fmt.Errorf("schema id %d from the registry: %w", sid, err)
		}
		if s, err = avro.Parse(got.Schema); err != nil {
			return 0, err
		}
		a.schemas[sid] = s
	}
	var o struct {
		ID int64 `avro:"id"`
	}
	if err := avro.Unmarshal(s, rest, &o); err != nil {
		return 0, fmt.Errorf("schema id %d: %w", sid, err)
	}
	a.schemaOf[o.ID] = sid
	return o.ID, nil
}

// versions are the subject's versions and their ids, as the registry answers now.
func (a *avroReader) versions(t *testing.T) map[int]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ss, err := a.reg.Schemas(ctx, a.subject)
	if err != nil {
		t.Fatalf("step: ask the registry for %s: %v", a.subject, err)
	}
	out := map[int]int{}
	for _, s := range ss {
		out[s.Version] = s.ID
	}
	return out
}

// checkEvolution checks that orders up to evolveAfter were written with version 1 and
// the later ones with version 2, and returns the ids of both versions.
func (a *avroReader) checkEvolution(t *testing.T, evolveAfter, total int64) map[int]int {
	t.Helper()
	ids := a.versions(t)
	if len(ids) != 2 || ids[1] == 0 || ids[2] == 0 || ids[1] == ids[2] {
		t.Fatalf("step: evolve: the registry holds versions %v of %s, want 1 and 2", ids, a.subject)
	}
	for id := int64(1); id <= total; id++ {
		want := ids[1]
		if id > evolveAfter {
			want = ids[2]
		}
		if got := a.schemaOf[id]; got != want {
			t.Fatalf("step: evolve: order %d was written with schema id %d, want %d (versions %v)", id, got, want, ids)
		}
	}
	return ids
}

// checkCoupon checks the column version 2 added: null in every row written before it,
// the order's coupon in every row after.
func checkCoupon(evolveAfter int64) func(row) error {
	return func(r row) error {
		want := devcluster.NewOrder(*r.ID, time.Time{}).Coupon
		if *r.ID <= evolveAfter {
			want = nil
		}
		if (r.Coupon == nil) != (want == nil) || (want != nil && *r.Coupon != *want) {
			return fmt.Errorf("row of order %d has coupon %v, want %v", *r.ID, show(r.Coupon), show(want))
		}
		return nil
	}
}

func show(s *string) string {
	if s == nil {
		return "null"
	}
	return strconv.Quote(*s)
}

// checkEvolved checks with `minkctl table describe` (as the reader: a read call) that the
// Avro table's schema went from version 0 to 1, adding the column, and that the writer
// committed it.
func checkEvolved(t *testing.T, info devcluster.RunInfo, reader principal) {
	t.Helper()
	addr := devcluster.Addr(info.Processes[0].GRPCPort)
	cmd := exec.Command(cluster.Bin("minkctl"), "--addr", addr, "-o", "json", "table", "describe", info.Avro.Table)
	cmd.Env = append(roleproc.CleanEnv(), reader.viaEnv().env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("step: evolve: minkctl table describe: %v: %s", err, out)
	}
	var d adminv1.DescribeTableResponse
	if err := protojson.Unmarshal(out, &d); err != nil {
		t.Fatalf("step: evolve: minkctl table describe printed %s: %v", out, err)
	}
	tbl := d.GetTable()
	var cols []string
	for _, c := range tbl.GetSchema() {
		cols = append(cols, c.GetName())
	}
	if tbl.GetFormat() != adminv1.RecordFormat_RECORD_FORMAT_AVRO || tbl.GetValue().GetSubject() != info.Avro.Subject ||
		tbl.GetSchemaVersion() != 1 || !slices.Contains(cols, "coupon") {
		t.Errorf("step: evolve: table %s is %s, subject %q, schema version %d, columns %v; want avro, %s, version 1 with coupon",
			info.Avro.Table, tbl.GetFormat(), tbl.GetValue().GetSubject(), tbl.GetSchemaVersion(), cols, info.Avro.Subject)
	}
}

// freePortBlock finds n consecutive free loopback ports below the ephemeral range, so no
// outgoing connection takes one between the probe and the launcher's bind.
func freePortBlock(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := 20000 + rand.IntN(12000)
		if portsFree(base, n) {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports found", n)
	return 0
}

func portsFree(base, n int) bool {
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// minkdev is one run of the launcher.
type minkdev struct {
	dir        string
	externalPG bool // run with --postgres-url: no private Postgres to stop
	*roleproc.Process
}

func startMinkdev(t *testing.T, args []string) *minkdev {
	t.Helper()
	return startMinkdevEnv(t, args, nil)
}

// startMinkdevEnv is startMinkdev with env (KEY=value) added to the launcher's environment.
func startMinkdevEnv(t *testing.T, args, env []string) *minkdev {
	t.Helper()
	m := &minkdev{}
	for i, a := range args {
		if a == "--dir" {
			m.dir = args[i+1]
		}
	}
	var err error
	m.Process, err = roleproc.Start(roleproc.Spec{Name: "minkdev", Path: cluster.Bin("minkdev"), Args: args, Env: env,
		LogPath: filepath.Join(t.TempDir(), "minkdev.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("minkdev output:\n%s", m.Output())
			m.logTails(t)
		}
		m.kill(t)
	})
	return m
}

// waitReady waits for the launcher's run file, which it writes once the roles are
// healthy, the table is registered and the demo stream has started.
func (m *minkdev) waitReady(t *testing.T) devcluster.RunInfo {
	t.Helper()
	return await.Every(t, readyTimeout, 100*time.Millisecond, "step: start the cluster: the run file", func() (devcluster.RunInfo, bool) {
		info, err := devcluster.ReadRunInfo(m.dir)
		if err == nil && info.LauncherPid == m.Pid() {
			return info, true
		}
		if m.Exited() {
			t.Fatalf("step: start the cluster: minkdev exited (%v) before it was ready", m.Err())
		}
		return info, false
	})
}

// stop is Ctrl-C: one SIGINT, then a clean exit.
func (m *minkdev) stop(t *testing.T) {
	t.Helper()
	if err := m.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(stopTimeout):
		t.Fatalf("step: stop: minkdev did not exit within %v of SIGINT", stopTimeout)
	}
	if m.Err() != nil {
		t.Fatalf("step: stop: minkdev exited with %v", m.Err())
	}
	for _, want := range []string{"roles stopped", "schema registry stopped", "kafka stopped", "postgres stopped"} {
		if want == "postgres stopped" && m.externalPG {
			continue
		}
		if !strings.Contains(m.Output(), want) {
			t.Errorf("step: stop: minkdev did not say %q", want)
		}
	}
}

// kill is the cleanup of a failed test: nothing may outlive it, Postgres included.
func (m *minkdev) kill(t *testing.T) {
	if m.Exited() {
		return
	}
	m.Signal(syscall.SIGINT)
	select {
	case <-m.Done():
		return
	case <-time.After(stopTimeout):
	}
	info, _ := devcluster.ReadRunInfo(m.dir)
	m.Kill()
	for _, p := range info.Processes {
		syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
	if info.PostgresPid > 0 {
		syscall.Kill(info.PostgresPid, syscall.SIGQUIT) // immediate shutdown: takes its backends along
	}
	t.Errorf("minkdev did not stop on SIGINT: killed it and its processes")
}

func (m *minkdev) logTails(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(m.dir, "logs", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		t.Logf("last lines of %s:\n%s", l, strings.Join(lines, "\n"))
	}
}

type position struct {
	partition int32
	offset    int64
}

func jsonID(value []byte) (int64, error) {
	var e struct{ ID int64 }
	err := json.Unmarshal(value, &e)
	return e.ID, err
}

// waitProduced waits until the topic holds total records, then reads them all back: the
// record at each (partition, offset) and the id idOf finds in it.
func waitProduced(t *testing.T, info devcluster.RunInfo, topic string, total int, idOf func([]byte) (int64, error)) map[position]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(info.KafkaBrokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		var sum int64
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		}
		if sum == int64(total) {
			break
		}
		if sum > int64(total) {
			t.Fatalf("step: produce: topic %s holds %d records, want %d", topic, sum, total)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("step: produce: topic %s holds %d records after %v, want %d (err %v)", topic, sum, kafkaTimeout, total, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	want := map[position]int64{}
	ids := map[int64]bool{}
	for len(want) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("step: read topic %s back: %d of %d records read", topic, len(want), total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			id, err := idOf(r.Value)
			if err != nil {
				t.Fatalf("step: read topic %s back: record %d/%d: %v", topic, r.Partition, r.Offset, err)
			}
			if ids[id] {
				t.Fatalf("step: produce: id %d was produced to %s twice", id, topic)
			}
			ids[id] = true
			want[position{r.Partition, r.Offset}] = id
		})
	}
	for id := int64(1); id <= int64(total); id++ {
		if !ids[id] {
			t.Fatalf("step: produce: id %d is not in topic %s (ids must run 1..%d across runs)", id, topic, total)
		}
	}
	return want
}

// waitScan runs `minkctl scan` until the table holds exactly the records of want: every
// (partition, offset) once with its id, and each row as check (if set) wants it. A
// duplicate, a row Kafka never had or a failed check fails at once (no snapshot may ever
// show one); missing rows, and columns the table has yet to gain, are waited for.
func (m *minkdev) waitScan(t *testing.T, info devcluster.RunInfo, token tokenArg, table, columns string, want map[position]int64, check func(row) error) {
	t.Helper()
	var refusedSince time.Time // the catalog refuses connections since
	last, ok := await.Within(scanTimeout, time.Second, func() (string, bool) {
		rows, err := scan(info, token, table, columns)
		switch {
		case err == nil || !strings.Contains(err.Error(), "is unreachable"):
			refusedSince = time.Time{}
		case refusedSince.IsZero():
			refusedSince = time.Now()
		case time.Since(refusedSince) > catalogGrace:
			// The file servers are healthy, so a closed catalog port is no slow start.
			t.Fatalf("step: scan: the file servers are healthy but their Iceberg REST catalog (%s) has refused connections for %v: %v",
				info.CatalogURL, catalogGrace, err)
		}
		last := ""
		if err == nil {
			seen := map[position]bool{}
			for _, r := range rows {
				p := position{r.Partition, r.Offset}
				id, ok := want[p]
				switch {
				case seen[p]:
					t.Fatalf("step: scan: record %d/%d is two rows", p.partition, p.offset)
				case !ok:
					t.Fatalf("step: scan: row %+v is no record in Kafka", r)
				case r.ID == nil || *r.ID != id:
					t.Fatalf("step: scan %s: row %d/%d has id %v, Kafka has %d", table, p.partition, p.offset, r.ID, id)
				}
				if check != nil {
					if err := check(r); err != nil {
						t.Fatalf("step: scan %s: %v", table, err)
					}
				}
				seen[p] = true
			}
			if len(seen) == len(want) {
				return "", true
			}
			last = fmt.Sprintf("%d of %d records are rows", len(seen), len(want))
		} else {
			last = err.Error()
		}
		if m.Exited() {
			t.Fatalf("step: scan: minkdev exited (%v); last scan: %s", m.Err(), last)
		}
		return last, false
	})
	if !ok {
		t.Fatalf("step: scan %s: not every record is a row within %v; last scan: %s\n%s",
			table, scanTimeout, last, describe(info, token, table))
	}
}

type row struct {
	ID        *int64  `json:"id"`
	Coupon    *string `json:"coupon"` // the Avro demo's
	Partition int32   `json:"_kafka_partition"`
	Offset    int64   `json:"_kafka_offset"`
}

// scan reads the columns of a whole demo table through the catalog and S3, as a user
// would, with minkctl's credential (MINK_TOKEN or --token) as token says.
func scan(info devcluster.RunInfo, token tokenArg, table, columns string) ([]row, error) {
	cmd := exec.Command(cluster.Bin("minkctl"), append([]string{"scan", table, "--catalog", info.CatalogURL,
		"--columns", columns + ",_kafka_partition,_kafka_offset", "--limit", "0", "-o", "json"}, token.args...)...)
	cmd.Env = append(roleproc.CleanEnv(), token.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("minkctl scan: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var rows []row
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("minkctl scan printed %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// describe is `minkctl table describe`: how far indexing got, for a failure message.
func describe(info devcluster.RunInfo, token tokenArg, table string) string {
	addr := devcluster.Addr(info.Processes[0].GRPCPort)
	cmd := exec.Command(cluster.Bin("minkctl"), append([]string{"--addr", addr, "table", "describe", table}, token.args...)...)
	cmd.Env = append(roleproc.CleanEnv(), token.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("minkctl table describe: %v: %s", err, out)
	}
	return "minkctl table describe:\n" + string(out)
}

// checkNothingLeft checks that no process of the run lives on (the roles, Postgres and
// its backends: each leads its own process group) and that every port is free again.
func checkNothingLeft(t *testing.T, dir string, info devcluster.RunInfo) {
	t.Helper()
	groups := map[string]int{"postgres": info.PostgresPid}
	for _, p := range info.Processes {
		groups[p.ID] = p.Pid
	}
	for name, pid := range groups {
		if pid <= 0 {
			t.Errorf("no pid recorded for %s", name)
			continue
		}
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("step: stop: %s (process group %d) is still alive after minkdev exited (kill: %v)", name, pid, err)
		}
	}
	// Postgres backends lead their own sessions, outside the postmaster's group: find
	// them, and anything else of this run, by what ties them to its folder.
	for _, p := range procsUnder(dir) {
		t.Errorf("step: stop: process %s is still alive after minkdev exited", p)
	}
	for _, p := range info.Ports {
		if !portsFree(p, 1) {
			t.Errorf("step: stop: port %d is still taken after minkdev exited", p)
		}
	}
}

// procsUnder lists the live processes whose working folder is in dir (Postgres and its
// backends run in their data folder) or whose command line names it (the roles' flags).
func procsUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
			continue // a zombie holds nothing; its parent has yet to reap it
		}
		if strings.HasPrefix(cwd, dir+"/") || cwd == dir || bytes.Contains(cmdline, []byte(dir+"/")) {
			out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// TestMakeDevKeepsThePostgresPasswordPrivate runs the launcher against a Postgres of its
// own (MINK_POSTGRES_URL, as the README says) whose URL holds a password with '@', ':'
// and '/', percent-encoded, and looks for the password, in every form it could take,
// where another user of the machine could see it: no process's command line (what ps
// shows), no file under the folder (the run file, the logs, the caches), nothing the
// launcher prints; the run file and the caches are private to their owner.
func TestMakeDevKeepsThePostgresPasswordPrivate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole cluster")
	}
	pg := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	dbURL, err := pg.CreateDB(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	// The test server trusts local connections, so any password connects; what matters is
	// where it travels.
	const password = "pw-Qx7@dev:s3cr/et"
	forms := []string{password, neturl.QueryEscape(password), neturl.PathEscape(password), "Qx7@dev", "dev:s3cr", "s3cr/et", "s3cr%2Fet"}
	withPW := strings.Replace(dbURL, "postgres://postgres@", "postgres://postgres:"+neturl.QueryEscape(password)+"@", 1)
	if withPW == dbURL {
		t.Fatalf("unexpected test URL %s", dbURL)
	}
	dir, err := os.MkdirTemp("", "minkdev-pw-")
	if err != nil {
		t.Fatal(err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	base := freePortBlock(t, 12)
	args := []string{
		"--dir", dir, "--bin-dir", cluster.BinDir(), "--kafka-port", strconv.Itoa(base + 1),
		"--grpc-port", strconv.Itoa(base + 2), "--catalog-port", strconv.Itoa(base + 7), "--s3-port", strconv.Itoa(base + 9),
		"--schema-registry-port", strconv.Itoa(base + 11), "--metrics-port", "0", "--lease-ttl", "2s", "--shutdown-timeout", "5s",
		"--ready-timeout", "30s", "--demo-rate", "200", "--demo-events", "100", "--range-max-age", "1s", "--commit-interval", "1s",
	}
	m := startMinkdevEnv(t, args, []string{"MINK_POSTGRES_URL=" + withPW})
	m.externalPG = true
	info := m.waitReady(t)
	if info.TableError != "" {
		t.Fatalf("the roles did not work with the URL: %s", info.TableError)
	}
	if want := flagenv.RedactURL(withPW); info.PostgresURL != want || !strings.Contains(info.PostgresURL, ":xxxxx@") {
		t.Errorf("run file: postgres_url %q, want %q", info.PostgresURL, want)
	}
	// Something served from a cache, so the caches hold files.
	creds := checkAuthConfig(t, dir, info, true)
	want := waitProduced(t, info, info.Topic, 100, jsonID)
	m.waitScan(t, info, creds.reader.viaEnv(), info.Table, "id", want, nil)

	shows := func(b []byte) string {
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				return f
			}
		}
		return ""
	}
	// Every process's command line, as ps shows it to any user.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if f := shows(cmdline); f != "" {
			t.Errorf("process %s shows %q on its command line: %q", e.Name(), f, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
	for _, p := range info.Processes {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(p.Pid))); err != nil {
			t.Errorf("role %s (pid %d) is not running: %v", p.ID, p.Pid, err)
		}
	}
	checkFiles := func(when string) {
		t.Helper()
		filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Type()&os.ModeSymlink != 0 {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(dir, path)
			if d.IsDir() {
				if (rel == "cache" || strings.HasPrefix(rel, "cache/")) && fi.Mode().Perm()&0o077 != 0 {
					t.Errorf("%s: folder %s has mode %04o: the caches are private", when, rel, fi.Mode().Perm())
				}
				return nil
			}
			if strings.HasPrefix(rel, "cache/") && fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: cache file %s has mode %04o: want 0600", when, rel, fi.Mode().Perm())
			}
			if b, err := os.ReadFile(path); err == nil {
				if f := shows(b); f != "" {
					t.Errorf("%s: %s (mode %04o) holds %q", when, rel, fi.Mode().Perm(), f)
				}
			}
			return nil
		})
	}
	checkFiles("running")
	if st, err := os.Stat(filepath.Join(dir, devcluster.RunFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("run file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	cached, _ := filepath.Glob(filepath.Join(dir, "cache", "*", "*"))
	if len(cached) == 0 {
		t.Errorf("no file in the caches after a scan: the privacy of cache files was not seen")
	}
	m.stop(t)
	checkFiles("stopped")
	if f := shows([]byte(m.Output())); f != "" {
		t.Errorf("the launcher printed %q:\n%s", f, m.Output())
	}
	if !strings.Contains(m.Output(), "postgres: "+info.PostgresURL+" (external)") {
		t.Errorf("the launcher does not say which database it uses, password masked:\n%s", m.Output())
	}
}
