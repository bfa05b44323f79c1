package fileserver_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the S3 FileIO, as engines load it
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/httplimit"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/services/fileserver/internal/fileserver"
)

// Each test has its own database, Kafka and nodes, so tests run in parallel, but those
// that set the environment, stop their Postgres, measure timeouts or check for leaked
// goroutines while they run.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	if code == 0 {
		// Nothing any test started may outlive it: servers, builds, connections.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left running:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// problemsDDL is the file-problems table this package writes to (migration proposed to
// the lead as 0004_file_problems.sql); tests create it until the migration lands.
const problemsDDL = `CREATE TABLE IF NOT EXISTS mink_file_problems (
    key          text PRIMARY KEY,
    table_id     bigint NOT NULL REFERENCES mink_tables (id) ON DELETE CASCADE,
    reason       text NOT NULL,
    detail       text NOT NULL,
    reported_by  text NOT NULL,
    first_seen   timestamptz NOT NULL DEFAULT now(),
    last_seen    timestamptz NOT NULL DEFAULT now(),
    reports      bigint NOT NULL DEFAULT 1
)`

// env is one test's cluster: Postgres, Kafka, a table with committed metadata, and file
// servers.
type env struct {
	t       testing.TB
	ctx     context.Context
	db      *pgxpool.Pool
	pg      *pgtest.Cluster // nil on the shared cluster
	kafka   *kafkatest.Cluster
	kc      *kafkasrc.Client
	table   tables.Table
	files   []dataFile // the committed data files
	rows    []row      // what was produced, in (partition, offset) order
	metaKey string     // current metadata file
	spans   *tracetest.SpanRecorder
	tp      *sdktrace.TracerProvider
	nodes   []*node
}

type dataFile struct {
	key        string
	partition  int32
	start, end int64
	bytes      []byte
}

type row struct {
	partition int32
	offset    int64
	id        int64
	msg       string
}

type envOptions struct {
	privatePostgres bool // a cluster of the test's own, so it can be stopped
	persistentKafka bool // so the broker can be stopped and restarted
	compacted       bool // the topic is compacted
}

var spec = tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
	{Name: "id", Type: "long"}, {Name: "msg", Type: "string"}}}

const (
	ns         = "default"
	tableName  = "orders"
	partitions = 2
	perPart    = 40
)

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx}
	if o.privatePostgres {
		e.pg = pgtest.Start(t)
		url, err := e.pg.CreateDB(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.ConnectTimeout = 2 * time.Second
		if e.db, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.db.Close)
	} else {
		e.db, _ = pgtest.DB(t)
	}
	if err := pgschema.Migrate(ctx, e.db); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(ctx, problemsDDL); err != nil {
		t.Fatal(err)
	}

	kopts := []kafkatest.Option{kafkatest.Brokers(1)}
	if o.persistentKafka {
		kopts = append(kopts, kafkatest.Persistent())
	}
	e.kafka = kafkatest.New(t, kopts...)
	topicCfg := map[string]string(nil)
	if o.compacted {
		topicCfg = map[string]string{"cleanup.policy": "compact"}
	}
	e.kafka.CreateTopic(tableName, partitions, topicCfg)
	var err error
	if e.kc, err = kafkasrc.New(e.kafka.Addrs(), kafkasrc.WithTimeout(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.kc.Close)

	e.spans = tracetest.NewSpanRecorder()
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() { e.tp.Shutdown(context.Background()) })

	e.produce(o.compacted)
	e.commit()
	return e
}

// produce writes perPart records to each partition. With compacted, keys repeat, so
// compaction later removes records.
func (e *env) produce(compacted bool) {
	cl := e.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for p := range int32(partitions) {
		var recs []*kgo.Record
		for i := range perPart {
			id := int64(p)*1000 + int64(i)
			key := fmt.Appendf(nil, "u-%d", id)
			if compacted && i%9 != 0 {
				// Five keys rewritten over and over; every 9th record (the first
				// included, so kfake keeps the log start at 0) has its own and survives.
				key = fmt.Appendf(nil, "k-%d", i%5)
			}
			recs = append(recs, &kgo.Record{Topic: tableName, Partition: p, Key: key,
				Value:     fmt.Appendf(nil, `{"id": %d, "msg": "message %d"}`, id, id),
				Timestamp: ts.Add(time.Duration(i) * time.Millisecond)})
		}
		var produced []*kgo.Record
		if compacted {
			// One batch per record: compaction never touches a partition's last batch.
			for _, r := range recs {
				produced = append(produced, kafkatest.Produce(e.t, cl, r)...)
			}
		} else {
			produced = kafkatest.Produce(e.t, cl, recs...)
		}
		for _, r := range produced {
			var v struct {
				ID  int64  `json:"id"`
				Msg string `json:"msg"`
			}
			json.Unmarshal(r.Value, &v)
			e.rows = append(e.rows, row{r.Partition, r.Offset, v.ID, v.Msg})
		}
	}
	sortRows(e.rows)
}

// commit plays indexer and writer: builds each range's file once to measure it, records
// it in mink_data_files, and commits metadata made by icebergmeta (the writer's own
// package) into mink_meta_files and mink_table_meta.
func (e *env) commit() {
	t, ctx := e.t, e.ctx
	tbl, err := tables.Create(ctx, e.db, tables.Table{Namespace: ns, Name: tableName, Topic: tableName, Spec: spec}, partitions)
	if err != nil {
		t.Fatal(err)
	}
	e.table = tbl
	settings := parquetbuild.DefaultSettings()
	settings.RowGroupRows = 8 // several row groups, so engines read ranges
	settingsJSON, _ := json.Marshal(settings)
	var add []icebergmeta.DataFile
	cov := map[int32]icebergmeta.Coverage{}
	for p := range int32(partitions) {
		for _, r := range [][2]int64{{0, 15}, {15, 27}, {27, perPart}} {
			var buf bytes.Buffer
			fs, err := rangefile.BuildOffsets(ctx, e.kc, tablecodec.New(e.db, nil), tbl, settings, p, r[0], r[1], &buf)
			if err != nil {
				t.Fatal(err)
			}
			key := layout.DataKey(ns, tableName, p, r[0], r[1], fs.SHA256)
			stats, _ := json.Marshal(fs.Columns)
			if _, err := e.db.Exec(ctx, `INSERT INTO mink_data_files
				(table_id, key, partition, start_offset, end_offset, record_count, file_size, sha256, settings, stats)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
				tbl.ID, key, p, r[0], r[1], fs.RowCount, fs.Size, fs.SHA256, settingsJSON, stats); err != nil {
				t.Fatal(err)
			}
			add = append(add, icebergmeta.DataFile{Key: key, Partition: p, Start: r[0], End: r[1], Records: fs.RowCount,
				Size: fs.Size, SHA256: fs.SHA256, Settings: settingsJSON, Stats: stats})
			e.files = append(e.files, dataFile{key: key, partition: p, start: r[0], end: r[1], bytes: buf.Bytes()})
		}
		cov[p] = icebergmeta.Coverage{Start: 0, End: perPart}
	}
	schema, err := spec.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	it := icebergmeta.Table{Namespace: ns, Name: tableName, Schema: schema, Properties: tbl.Properties}
	first, err := icebergmeta.Create(it)
	if err != nil {
		t.Fatal(err)
	}
	e.storeMeta(first)
	store := icebergmeta.StoreFunc(func(ctx context.Context, key string) ([]byte, error) {
		var b []byte
		err := e.db.QueryRow(ctx, `SELECT content FROM mink_meta_files WHERE key = $1`, key).Scan(&b)
		return b, err
	})
	res, err := icebergmeta.Commit(ctx, icebergmeta.NewReader(store), it,
		icebergmeta.Base{Version: 1, Key: first.Key, Metadata: first.Metadata},
		icebergmeta.Change{Operation: table.OpAppend, Add: add, Coverage: cov, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	e.storeMeta(res)
	if _, err := e.db.Exec(ctx, `INSERT INTO mink_table_meta (table_id, metadata_key, version, snapshot_id)
		VALUES ($1, $2, $3, $4)`, tbl.ID, res.Key, res.Version, res.Snapshot.SnapshotID); err != nil {
		t.Fatal(err)
	}
	e.metaKey = res.Key
}

func (e *env) storeMeta(res *icebergmeta.Result) {
	for _, f := range res.Files {
		if _, err := e.db.Exec(e.ctx, `INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, $2, $3)`,
			e.table.ID, f.Key, f.Content); err != nil {
			e.t.Fatal(err)
		}
	}
}

// node is one file server in process, as pkg/node runs it: a member registered by a
// real lease manager, a gRPC server with the otelgrpc handler and apierr's interceptors,
// and the Server.
type node struct {
	id       string
	srv      *fileserver.Server
	metrics  *sdkmetric.ManualReader
	cacheDir string
	grpcAddr string
	gs       *grpc.Server
	stopRun  func() error // stops the Server alone: its member row and gRPC server stay
	stop     func() error // stops the node; returns Run's error
	catalog  string       // http://host:port
	s3       string
}

type nodeOptions struct {
	cacheDir   string
	cacheBytes int64
	auth       *auth.Authority // nil: auth off
	s3Endpoint string          // the S3 URL table loads name; "": the node's own
	// TLS (tls_test.go): tls serves the catalog, S3 and gRPC; peerTLS is what forwarded
	// reads dial other nodes with. limits bound the HTTP servers.
	tls, peerTLS *tls.Config
	limits       httplimit.Limits
	planBatch    int // file scan tasks per planning answer (0: the default)
	warm         time.Duration
}

func (e *env) startNode(id string, o nodeOptions) *node {
	t := e.t
	t.Helper()
	if o.cacheDir == "" {
		o.cacheDir = t.TempDir()
	}
	if o.cacheBytes == 0 {
		o.cacheBytes = 1 << 30
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("test_node", id)
	srv, err := fileserver.New(fileserver.Options{
		NodeID: id, DB: e.db, Kafka: e.kc, CatalogAddr: "127.0.0.1:0", S3Addr: "127.0.0.1:0",
		Auth: o.auth, S3Endpoint: o.s3Endpoint, CacheDir: o.cacheDir, CacheBytes: o.cacheBytes, ShutdownTimeout: 2 * time.Second,
		MemberRefresh: 100 * time.Millisecond, LookupTimeout: 2 * time.Second, ProblemTTL: time.Minute,
		WarmInterval:  cmp.Or(o.warm, -1), // off unless a test warms: the others count builds and misses of reads
		MeterProvider: mp, TracerProvider: e.tp, Propagator: prop, Logger: log,
		TLS: o.tls, HTTPLimits: o.limits, DialOptions: tlsDialOptions(o.peerTLS, e.tp, mp, prop), PlanBatchFiles: o.planBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(append(tlsServerOptions(o.tls),
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(e.tp), otelgrpc.WithMeterProvider(mp), otelgrpc.WithPropagators(prop))),
		grpc.ChainUnaryInterceptor(apierr.UnaryServerInterceptor(nil)),
		grpc.ChainStreamInterceptor(apierr.StreamServerInterceptor(nil)),
		grpc.WriteBufferSize(512<<10), // as pkg/node's
	)...)
	srv.RegisterGRPC(gs)
	mgr, err := lease.NewManager(e.db, lease.Config{NodeID: id, Roles: []lease.Role{lease.RoleFileServer},
		GRPCAddr: lis.Addr().String(), Addrs: srv.Addrs(), TTL: 6 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runCtx, cancelRun := context.WithCancel(ctx)
	grpcDone, mgrDone, runDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() { defer close(grpcDone); gs.Serve(lis) }()
	go func() { defer close(mgrDone); mgr.Run(ctx) }()
	go func() { runDone <- srv.Run(runCtx) }()
	var stopped bool
	var runErr error
	var runOnce sync.Once
	waitRun := func() error {
		runOnce.Do(func() { runErr = <-runDone })
		return runErr
	}
	n := &node{id: id, srv: srv, metrics: reader, cacheDir: o.cacheDir, grpcAddr: lis.Addr().String(), gs: gs,
		catalog: tlsScheme(o.tls) + srv.CatalogAddr().String(), s3: srv.S3Endpoint()}
	n.stopRun = func() error { cancelRun(); return waitRun() }
	n.stop = func() error {
		if stopped {
			return runErr
		}
		stopped = true
		cancel()
		err := waitRun()
		gs.Stop()
		<-grpcDone
		<-mgrDone
		return err
	}
	t.Cleanup(func() {
		if err := n.stop(); err != nil {
			t.Errorf("node %s: Run: %v", id, err)
		}
	})
	e.nodes = append(e.nodes, n)
	return n
}

// startNodes starts n file servers and waits until each sees all of them.
func (e *env) startNodes(count int) []*node {
	var out []*node
	for i := range count {
		out = append(out, e.startNode(fmt.Sprintf("fs-%c", 'a'+i), nodeOptions{}))
	}
	e.waitMembers(out)
	return out
}

// waitMembers waits until every node sees exactly nodes as the file servers, at their
// addresses, so owners agree.
func (e *env) waitMembers(nodes []*node) {
	e.t.Helper()
	want := map[string]string{}
	for _, n := range nodes {
		want[n.id] = n.grpcAddr
	}
	leasetest.Eventually(e.t, 10*time.Second, "every node to see the file servers", func() bool {
		for _, n := range nodes {
			if !maps.Equal(n.srv.Members(), want) {
				return false
			}
		}
		return true
	})
}

// owner returns the node that owns key, and another node.
func (e *env) owner(key string) (own, other *node) {
	for _, n := range e.nodes {
		if _, self := n.srv.Owner(key); self {
			own = n
		} else if other == nil {
			other = n
		}
	}
	if own == nil {
		e.t.Fatalf("no node owns %s", key)
	}
	return own, other
}

// fileOwnedBy returns a data file owned by n.
func (e *env) fileOwnedBy(n *node, except ...string) dataFile {
	e.t.Helper()
	for _, f := range e.files {
		if own, _ := e.owner(f.key); own == n && !slices.Contains(except, f.key) {
			return f
		}
	}
	e.t.Fatalf("node %s owns none of the data files", n.id)
	return dataFile{}
}

// catalogClient is iceberg-go's REST catalog over node n.
func (e *env) catalogClient(n *node) *rest.Catalog {
	e.t.Helper()
	cat, err := rest.NewCatalog(e.ctx, "mink", n.catalog)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cat.Close() })
	return cat
}

// scan loads the table through n's catalog and reads every row with iceberg-go.
func (e *env) scan(n *node) ([]row, error) {
	cat, err := rest.NewCatalog(e.ctx, "mink", n.catalog)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(e.ctx, table.Identifier{ns, tableName})
	if err != nil {
		return nil, err
	}
	at, err := tbl.Scan().ToArrowTable(e.ctx)
	if err != nil {
		return nil, err
	}
	defer at.Release()
	return rowsOf(e.t, at), nil
}

func rowsOf(t testing.TB, at arrow.Table) []row {
	t.Helper()
	col := func(name string) int {
		idx := at.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("no column %s in %v", name, at.Schema())
		}
		return idx[0]
	}
	pi, oi, ii, mi := col(tableschema.ColumnKafkaPartition), col(tableschema.ColumnKafkaOffset), col("id"), col("msg")
	tr := array.NewTableReader(at, 64)
	defer tr.Release()
	var out []row
	for tr.Next() {
		rec := tr.RecordBatch()
		ps := rec.Column(pi).(*array.Int32)
		os := rec.Column(oi).(*array.Int64)
		ids := rec.Column(ii).(*array.Int64)
		msgs := rec.Column(mi).(*array.String)
		for i := range int(rec.NumRows()) {
			out = append(out, row{ps.Value(i), os.Value(i), ids.Value(i), msgs.Value(i)})
		}
	}
	sortRows(out)
	return out
}

func sortRows(rs []row) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].partition != rs[j].partition {
			return rs[i].partition < rs[j].partition
		}
		return rs[i].offset < rs[j].offset
	})
}

// get sends an S3 request to n and returns the response with its body read.
func get(t testing.TB, method, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, body
}

func objectURL(n *node, key string) string { return n.s3 + "/" + layout.Bucket + "/" + key }

// s3Error parses an S3 XML error body.
func s3Error(t testing.TB, body []byte) apierr.S3Error {
	t.Helper()
	var e apierr.S3Error
	if err := xml.Unmarshal(body, &e); err != nil {
		t.Fatalf("not an S3 error body: %v: %q", err, body)
	}
	return e
}

// icebergError parses an Iceberg error envelope.
func icebergError(t testing.TB, body []byte) apierr.IcebergErrorModel {
	t.Helper()
	var e apierr.IcebergErrorResponse
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == 0 {
		t.Fatalf("not an Iceberg error envelope: %v: %q", err, body)
	}
	return e.Error
}

// counter sums an int64 counter of n's metrics, over the attributes matching attrs.
func counter(t testing.TB, n *node, name string, attrs map[string]string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := n.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s is %T, not an int64 sum", name, m.Data)
			}
		dp:
			for _, d := range sum.DataPoints {
				for k, v := range attrs {
					if got, ok := d.Attributes.Value(attribute.Key(k)); !ok || got.AsString() != v {
						continue dp
					}
				}
				total += d.Value
			}
		}
	}
	return total
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
