package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers the s3:// FileIO the tables' files are read through
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/test/cluster"
)

// regTTL is the lease TTL of the registry tests' nodes: short, so that they take their
// leases quickly, long enough for a loaded 2-core machine.
const regTTL = 1500 * time.Millisecond

// regProps make ranges and commits follow records within a fraction of a second.
func regProps(extra ...string) map[string]string {
	p := map[string]string{"mink.range.max-age": "200ms", "mink.commit.interval": "200ms"}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i]] = extra[i+1]
	}
	return p
}

// fakeRegistry is srfake's Schema Registry served over HTTP on 127.0.0.1, by an httptest
// server that can go away (down: connections are refused) and come back on the same
// address (up), as a registry restarting does. Producers register schemas over HTTP.
type fakeRegistry struct {
	t    *testing.T
	fake *srfake.Registry
	cl   *sr.Client

	mu   sync.Mutex
	addr string // host:port, kept across down and up
	url  string
	srv  *httptest.Server
}

func newFakeRegistry(t *testing.T) *fakeRegistry {
	r := &fakeRegistry{t: t, fake: srfake.NewRegistry()}
	r.up()
	t.Cleanup(r.down)
	cl, err := sr.NewClient(sr.URLs(r.url))
	if err != nil {
		t.Fatal(err)
	}
	r.cl = cl
	return r
}

// up serves the registry (again, on the same address).
func (r *fakeRegistry) up() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		return
	}
	addr := r.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		r.t.Fatalf("registry: listen on %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(r.fake.Handler())
	srv.Listener.Close()
	srv.Listener = lis
	srv.Start()
	r.srv, r.addr, r.url = srv, lis.Addr().String(), srv.URL
}

// down stops serving: every request is refused until up.
func (r *fakeRegistry) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// register registers a schema under subject as a producer does (POST over HTTP) and
// returns its id.
func (r *fakeRegistry) register(subject string, s sr.Schema) int {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ss, err := r.cl.CreateSchema(ctx, subject, s)
	if err != nil {
		r.t.Fatalf("register a schema under %q: %v", subject, err)
	}
	return ss.ID
}

// fail500 makes every request answer HTTP 500 until the returned func is called.
func (r *fakeRegistry) fail500() (restore func()) {
	var mu sync.Mutex
	on := true
	r.fake.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if !on {
			return false
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error_code":50001,"message":"the backing store is down"}`)
		return true
	})
	return func() {
		mu.Lock()
		on = false
		mu.Unlock()
		r.fake.ClearInterceptors()
	}
}

// regCluster is a cluster whose every role reaches one schema registry: an indexer, a
// writer and a file server by default, and a producer.
type regCluster struct {
	*cluster.Cluster
	reg     *fakeRegistry
	catalog string // the file server's REST catalog, http://host:port
	prod    *kgo.Client
}

// newRegCluster starts a registry, a broker and a database; all starts the indexer
// idx-1, the writer wr-1 and the file server fs-1 too.
func newRegCluster(t *testing.T, all bool) *regCluster {
	c := newCluster(t, regTTL)
	rc := &regCluster{Cluster: c, reg: newFakeRegistry(t)}
	if all {
		rc.startRole("indexer", "idx-1")
		rc.startRole("writer", "wr-1")
		rc.startFileServer("fs-1")
	}
	rc.prod = c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	return rc
}

func (rc *regCluster) startRole(role, id string, extra ...string) *cluster.Node {
	rc.T.Helper()
	return rc.Start(role, id, append([]string{"--schema-registry-url", rc.reg.url}, extra...)...)
}

// startFileServer starts a file server on free loopback ports with a fresh cache, and
// points rc.catalog at its catalog, read back from its status.
func (rc *regCluster) startFileServer(id string) *cluster.Node {
	rc.T.Helper()
	p := rc.startRole("fileserver", id, "--cache-bytes", "256MiB")
	rc.advertised(id)
	return p
}

// advertised points rc.catalog at file server id's catalog, read back from its status.
func (rc *regCluster) advertised(id string) {
	rc.T.Helper()
	addrs := cluster.WaitFor(rc.T, 20*time.Second, id+" to advertise its catalog", func() (map[string]string, bool) {
		st, err := rc.Member(id).Admin().GetStatus(context.Background(), &adminv1.GetStatusRequest{})
		if err != nil {
			return nil, false
		}
		return st.GetAddrs(), st.GetAddrs()["catalog"] != "" && st.GetAddrs()["s3"] != ""
	})
	rc.catalog = "http://" + addrs["catalog"]
}

// restart stops node id with SIGTERM (it releases its leases and leaves at once) and
// starts it again with the same flags (a file server: on new ports, with a fresh cache).
func (rc *regCluster) restart(role, id string) {
	rc.T.Helper()
	n := rc.Node(id)
	n.Signal(syscall.SIGTERM)
	if st := n.Wait(10 * time.Second); st.ExitCode() != 0 {
		rc.T.Fatalf("%s exited with %v after SIGTERM", id, st)
	}
	if role == "fileserver" {
		n.Restart("--cache-dir", rc.T.TempDir())
		rc.advertised(id)
	} else {
		n.Restart()
	}
}

// createTable creates a table through the admin API of the indexer.
func (rc *regCluster) createTable(req *adminv1.CreateTableRequest) *adminv1.Table {
	rc.T.Helper()
	resp, err := rc.Member("idx-1").Admin().CreateTable(context.Background(), req)
	if err != nil {
		rc.T.Fatalf("CreateTable %s: %v", req.GetName(), err)
	}
	return resp.GetTable()
}

func (rc *regCluster) describe(name string) *adminv1.DescribeTableResponse {
	rc.T.Helper()
	d, err := rc.Member("idx-1").Admin().DescribeTable(context.Background(), &adminv1.DescribeTableRequest{Name: name})
	if err != nil {
		rc.T.Fatalf("DescribeTable %s: %v", name, err)
	}
	return d
}

func (rc *regCluster) produce(recs ...*kgo.Record) []*kgo.Record {
	rc.T.Helper()
	return kafkatest.Produce(rc.T, rc.prod, recs...)
}

// regKey names a row: its Kafka partition and offset.
type regKey struct {
	p int32
	o int64
}

func (k regKey) String() string { return fmt.Sprintf("%d/%d", k.p, k.o) }

// regRows is what a table must hold: per record, the columns to compare (in the
// canonical form of cell). A row's _mink_error must be null unless given.
type regRows map[regKey]map[string]any

// add records what each produced record must read back as; vals[i] goes with recs[i].
func (e regRows) add(t *testing.T, recs []*kgo.Record, vals ...map[string]any) {
	t.Helper()
	if len(recs) != len(vals) {
		t.Fatalf("%d records, %d expected rows", len(recs), len(vals))
	}
	for i, r := range recs {
		e[regKey{r.Partition, r.Offset}] = vals[i]
	}
}

// ends are the Kafka end offsets of the records: where indexing and commits must get to.
func (e regRows) ends() map[int32]int64 {
	out := map[int32]int64{}
	for k := range e {
		out[k.p] = max(out[k.p], k.o+1)
	}
	return out
}

// regContains matches a string that contains every one of its parts.
type regContains []string

// regMatch says how got differs from want ("" when it does not).
func regMatch(want, got any) string {
	if c, ok := want.(regContains); ok {
		s, isString := got.(string)
		if !isString {
			return fmt.Sprintf("got %#v, want a string containing %q", got, []string(c))
		}
		for _, part := range c {
			if !strings.Contains(s, part) {
				return fmt.Sprintf("got %q, want it to contain %q", s, part)
			}
		}
		return ""
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Sprintf("got %#v, want %#v", got, want)
	}
	return ""
}

// regScan is a table read through the REST catalog with iceberg-go, as an engine reads it.
type regScan struct {
	tbl    *table.Table
	schema *arrow.Schema
	rows   map[regKey]map[string]any
	dups   []regKey
}

// regLoad loads a table through a REST catalog.
func regLoad(ctx context.Context, catURL, name string) (*table.Table, error) {
	cat, err := rest.NewCatalog(ctx, "mink", catURL)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	return cat.LoadTable(ctx, table.Identifier{"default", name})
}

// regScanTable reads every row of a table through the catalog at catURL.
func regScanTable(t *testing.T, catURL, name string) regScan {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tbl, err := regLoad(ctx, catURL, name)
	if err != nil {
		t.Fatalf("load %s through %s: %v", name, catURL, err)
	}
	s, err := regScanOf(ctx, tbl, tbl.Scan())
	if err != nil {
		t.Fatalf("scan %s: %v", name, err)
	}
	return s
}

// regScanOf reads every row scan reads of tbl.
func regScanOf(ctx context.Context, tbl *table.Table, scan *table.Scan) (regScan, error) {
	at, err := scan.ToArrowTable(ctx)
	if err != nil {
		return regScan{}, err
	}
	defer at.Release()
	s := regScan{tbl: tbl, schema: at.Schema(), rows: map[regKey]map[string]any{}}
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := range int(rec.NumRows()) {
			row := map[string]any{}
			for c := range int(rec.NumCols()) {
				row[rec.ColumnName(c)] = regCell(rec.Column(c), i)
			}
			p, ok1 := row[tableschema.ColumnKafkaPartition].(int64)
			o, ok2 := row[tableschema.ColumnKafkaOffset].(int64)
			if !ok1 || !ok2 {
				return s, fmt.Errorf("a row without its partition and offset: %v", row)
			}
			k := regKey{int32(p), o}
			if _, dup := s.rows[k]; dup {
				s.dups = append(s.dups, k)
			}
			s.rows[k] = row
		}
	}
	return s, tr.Err()
}

// check compares a scan with what the table must hold: every record exactly once, no
// other row, every expected column equal, and _mink_error null unless expected.
func (s regScan) check(t *testing.T, want regRows) {
	t.Helper()
	if len(s.dups) > 0 {
		t.Errorf("rows read more than once: %v", s.dups)
	}
	if len(s.rows) != len(want) {
		t.Errorf("%d rows read, %d records produced", len(s.rows), len(want))
	}
	keys := make([]regKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].p < keys[j].p || keys[i].p == keys[j].p && keys[i].o < keys[j].o
	})
	bad := 0
	for _, k := range keys {
		got, ok := s.rows[k]
		if !ok {
			t.Errorf("row %v: missing", k)
			bad++
			continue
		}
		cols := want[k]
		if _, given := cols[tableschema.ColumnMinkError]; !given {
			if e := got[tableschema.ColumnMinkError]; e != nil {
				t.Errorf("row %v: _mink_error %q", k, e)
				bad++
			}
		}
		names := make([]string, 0, len(cols))
		for c := range cols {
			names = append(names, c)
		}
		sort.Strings(names)
		for _, c := range names {
			g, present := got[c]
			if !present {
				t.Errorf("row %v: no column %q in the scan (it has %v)", k, c, s.schema)
				bad++
				continue
			}
			if d := regMatch(cols[c], g); d != "" {
				t.Errorf("row %v column %s: %s", k, c, d)
				bad++
			}
		}
		if bad > 20 {
			t.Fatalf("too many differences")
		}
	}
	for k := range s.rows {
		if _, ok := want[k]; !ok {
			t.Errorf("row %v was read but never produced: %v", k, s.rows[k])
		}
	}
}

// regCommitted is the per-partition end offset the table's committed snapshot covers, as a
// catalog load shows it: a live load's snapshot sits on the committed one it names.
func regCommitted(tbl *table.Table) (map[int32]int64, error) {
	snap := tbl.CurrentSnapshot()
	out := map[int32]int64{}
	if snap == nil {
		return out, nil
	}
	if snap.Summary != nil && snap.Summary.Properties["mink.live"] == "true" {
		base, ok := snap.Summary.Properties["mink.live.base-snapshot-id"]
		if !ok {
			return out, nil
		}
		id, err := strconv.ParseInt(base, 10, 64)
		if err != nil {
			return nil, err
		}
		if snap = tbl.Metadata().SnapshotByID(id); snap == nil {
			return nil, fmt.Errorf("the live load's base snapshot %d is not in the metadata", id)
		}
	}
	cov, err := icebergmeta.ParseCoverage(snap.Summary)
	if err != nil {
		return nil, err
	}
	for p, c := range cov {
		out[p] = c.End
	}
	return out, nil
}

// waitCommitted waits until the writer has committed every partition up to ends, as
// loads through the catalog show it.
func (rc *regCluster) waitCommitted(name string, ends map[int32]int64) {
	rc.T.Helper()
	waitFor(rc.T, 30*time.Second, fmt.Sprintf("%s to be committed up to %v", name, ends), func() (any, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tbl, err := regLoad(ctx, rc.catalog, name)
		if err != nil {
			return err, false
		}
		got, err := regCommitted(tbl)
		if err != nil {
			return err, false
		}
		for p, end := range ends {
			if got[p] < end {
				return got, false
			}
		}
		return got, true
	})
}

// regRecipe is one stored range: its offsets and the recipe its file is built with.
type regRecipe struct {
	start, end int64
	size       int64
	settings   parquetbuild.Settings
}

func (rc *regCluster) recipes(table int64, p int32) []regRecipe {
	rc.T.Helper()
	rs, err := ranges.List(context.Background(), rc.DB, table, p, -1)
	if err != nil {
		rc.T.Fatal(err)
	}
	out := make([]regRecipe, len(rs))
	for i, r := range rs {
		out[i] = regRecipe{start: r.Start, end: r.End, size: r.Size}
		if err := json.Unmarshal(r.Settings, &out[i].settings); err != nil {
			rc.T.Fatalf("range [%d, %d) settings %s: %v", r.Start, r.End, r.Settings, err)
		}
	}
	return out
}

// regRecipeAt is the recipe of the range holding offset o.
func regRecipeAt(rs []regRecipe, o int64) (regRecipe, bool) {
	for _, r := range rs {
		if r.start <= o && o < r.end {
			return r, true
		}
	}
	return regRecipe{}, false
}

// regCell is one Arrow value in a canonical form that tests can write out: nil, bool,
// int64 (every integer), float64 (every float), string (text, decimals as exact digits,
// timestamps as RFC 3339 in UTC with microseconds, dates, UUIDs), []byte, []any (a
// list), map[string]any (a struct by field name, or a map by its keys' text).
func regCell(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Decimal128:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.StringView:
		return a.Value(i)
	case *array.Binary:
		return append([]byte{}, a.Value(i)...)
	case *array.LargeBinary:
		return append([]byte{}, a.Value(i)...)
	case *array.BinaryView:
		return append([]byte{}, a.Value(i)...)
	case *extensions.UUIDArray:
		return a.Value(i).String()
	case *array.FixedSizeBinary:
		return append([]byte{}, a.Value(i)...)
	case *array.Date32:
		return a.Value(i).ToTime().Format(time.DateOnly)
	case *array.Timestamp:
		typ := a.DataType().(*arrow.TimestampType)
		return regTS(a.Value(i).ToTime(typ.Unit))
	case *array.Map:
		keys, items := a.Keys(), a.Items()
		start, end := a.ValueOffsets(i)
		m := map[string]any{}
		for k := start; k < end; k++ {
			m[fmt.Sprint(regCell(keys, int(k)))] = regCell(items, int(k))
		}
		return m
	case array.ListLike:
		vals := a.ListValues()
		start, end := a.ValueOffsets(i)
		list := make([]any, 0, end-start)
		for k := start; k < end; k++ {
			list = append(list, regCell(vals, int(k)))
		}
		return list
	case *array.Struct:
		typ := a.DataType().(*arrow.StructType)
		m := map[string]any{}
		for k := range a.NumField() {
			m[typ.Field(k).Name] = regCell(a.Field(k), i)
		}
		return m
	}
	return fmt.Sprintf("unexpected %s: %s", a.DataType(), a.ValueStr(i))
}

// regTS is the canonical text of an instant: RFC 3339 in UTC, microseconds.
func regTS(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// regDec is the exact text of a decimal with scale digits.
func regDec(r *big.Rat, scale int) string { return r.FloatString(scale) }

// regColumnType is the Iceberg type of a top-level column in a table's current schema.
func regColumnType(tbl *table.Table, name string) string {
	f, ok := tbl.Schema().FindFieldByName(name)
	if !ok {
		return "(none)"
	}
	return f.Type.String()
}

// regSchemaColumns are DescribeTable's columns by name, with their types.
func regSchemaColumns(tb *adminv1.Table) map[string]string {
	out := map[string]string{}
	for _, c := range tb.GetSchema() {
		out[c.GetName()] = c.GetType()
	}
	return out
}
