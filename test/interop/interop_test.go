// Package interop reads a real Mink cluster with clients nobody here wrote, as a user
// would with auth on: kafkajs produces JSON records; iceberg-js and plain fetch talk to
// the REST catalog (OAuth2 client credentials); icebird reads the whole table, and an
// upsert table through its position delete files (upsert_test.go); hyparquet
// reads every data file with ranged S3 GETs; @aws-sdk/client-s3 GETs, HEADs, ranges,
// conditionals and listings; DuckDB read_parquet reads the data files fetched through
// S3; and github.com/aws/aws-sdk-go-v2's S3 client does the same from Go. Every row each
// reader returns is compared with what Kafka holds.
//
// The Node clients are in js/ (package.json, with a committed package-lock.json that
// `npm ci` installs: make test-interop does it, and so does this test when node_modules
// is missing or older than the lock file). Without node or npm the test is skipped.
package interop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// FileIO, as engines read the files
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/roleproc"
	"github.com/minkhq/mink/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }

const (
	tableName  = "default.events"
	topic      = "events"
	partitions = 3
	records    = 240
)

// columns is the table: every common column type, a nested JSON path, nulls.
var columns = []*adminv1.Column{
	{Name: "id", Type: "long", Required: true}, {Name: "name", Type: "string"}, {Name: "price", Type: "double"},
	{Name: "active", Type: "boolean"}, {Name: "qty", Type: "int"}, {Name: "city", Type: "string", JsonPath: "geo.city"},
	{Name: "ts", Type: "timestamptz"},
}

func TestInterop(t *testing.T) {
	js := nodeProject(t)
	c := cluster.New(t, cluster.WithAuth(), cluster.LeaseTTL(2*time.Second))
	c.Join(cluster.Indexer, "idx-1")
	c.Join(cluster.Writer, "wr-1")
	fs := c.Join(cluster.FileServer, "fs-1")
	c.Join(cluster.FileServer, "fs-2") // reads of the files fs-2 owns are forwarded to it
	catalogURL, s3URL, err := fs.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	c.Kafka.CreateTopic(topic, partitions, nil)
	c.Kafka.CreateTopic("other", 1, nil)
	ctx := context.Background()
	props := map[string]string{"mink.range.max-age": "300ms", "mink.commit.interval": "500ms"}
	if _, err := fs.Admin().CreateTable(ctx, &adminv1.CreateTableRequest{Namespace: "default", Name: "events", Topic: topic,
		Format: adminv1.RecordFormat_RECORD_FORMAT_JSON, Columns: columns, Properties: props}); err != nil {
		t.Fatalf("create %s: %v", tableName, err)
	}
	if _, err := fs.Admin().CreateTable(ctx, &adminv1.CreateTableRequest{Namespace: "default", Name: "other", Topic: "other",
		Format: adminv1.RecordFormat_RECORD_FORMAT_RAW}); err != nil {
		t.Fatalf("create default.other: %v", err)
	}
	createUpsert(t, c, fs)

	// kafkajs produces; Kafka, read back with franz-go, is the truth every reader meets.
	produced := produce(t, js, c)
	want := truth(t, c, produced)
	// The upsert table's rounds commit while the append table does.
	upsertWant := produceUpsert(t, c, catalogURL)

	// iceberg-go (the reference reader here) waits for the commits and names the files.
	files := waitCommitted(t, catalogURL, c.Auth, len(want))

	in := input{Table: tableName, Tables: []string{"events", "keyed", "other"}, UpsertTable: upsertTable, CatalogURL: catalogURL, S3URL: s3URL,
		ReaderID: c.Auth.Reader.ID, ReaderSecret: c.Auth.Reader.Secret, DataFiles: files}
	res := runReader(t, js, in)

	t.Run("iceberg-js", func(t *testing.T) { checkIcebergJS(t, res.section(t, "icebergjs"), files) })
	t.Run("rest", func(t *testing.T) { res.section(t, "rest").checks(t) })
	for _, name := range []string{"icebird", "hyparquet", "duckdb"} {
		t.Run(name, func(t *testing.T) { compareRows(t, res.section(t, name).Rows, want) })
	}
	t.Run("icebird-upsert", func(t *testing.T) { checkUpsertRead(t, res.section(t, "icebirdUpsert").upsert(t), upsertWant) })
	t.Run("aws-sdk-js-s3", func(t *testing.T) { res.section(t, "s3").checks(t) })
	t.Run("aws-sdk-go-v2-s3", func(t *testing.T) { checkGoS3(t, s3URL, c.Auth, files) })
}

// nodeProject is the js/ folder with its packages installed by npm ci, or a skip when
// node or npm is absent.
func nodeProject(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the interop suite runs the Node clients (Node 20+)", tool)
		}
	}
	dir, err := filepath.Abs("js")
	if err != nil {
		t.Fatal(err)
	}
	if err := npmCI(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// npmCI installs the locked packages unless node_modules already holds this lock file's
// install (a stamp written after a successful npm ci).
func npmCI(dir string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("js/package-lock.json: %w (it is committed; npm install writes it)", err)
	}
	sum := sha256.Sum256(lock)
	stamp := filepath.Join(dir, "node_modules", ".mink-npm-ci")
	if b, err := os.ReadFile(stamp); err == nil && string(b) == hex.EncodeToString(sum[:]) {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return os.WriteFile(stamp, []byte(hex.EncodeToString(sum[:])), 0o644)
}

// node runs a script of js/ with env and returns its stdout; a failure shows stderr.
func node(t *testing.T, dir, script string, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(roleproc.CleanEnv(), append(env, "KAFKAJS_NO_PARTITIONER_WARNING=1")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("node %s said:\n%s", script, stderr.String())
	}
	return out
}

// position names a row: its Kafka partition and offset.
type position struct {
	p int32
	o int64
}

// row is a row as every reader reports it (js/read.mjs canonical): 64-bit numbers and
// microseconds as decimal strings.
type row struct {
	P      int32    `json:"p"`
	O      string   `json:"o"`
	ID     *string  `json:"id"`
	Name   *string  `json:"name"`
	Price  *float64 `json:"price"`
	Active *bool    `json:"active"`
	Qty    *float64 `json:"qty"`
	City   *string  `json:"city"`
	TS     *string  `json:"ts"`
}

func (r row) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// producedRecord is a line of js/produce.mjs.
type producedRecord struct {
	Partition int32  `json:"partition"`
	Offset    string `json:"offset"`
	Key       string `json:"key"`
	Value     string `json:"value"`
}

func produce(t *testing.T, js string, c *cluster.Cluster) []producedRecord {
	t.Helper()
	out := node(t, js, "produce.mjs", "INTEROP_BROKERS="+strings.Join(c.Kafka.Addrs(), ","), "INTEROP_TOPIC="+topic,
		"INTEROP_PARTITIONS="+strconv.Itoa(partitions), "INTEROP_COUNT="+strconv.Itoa(records))
	var recs []producedRecord
	for line := range bytes.SplitSeq(bytes.TrimSpace(out), []byte("\n")) {
		var r producedRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("produce.mjs printed %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != records {
		t.Fatalf("kafkajs acknowledged %d records, want %d", len(recs), records)
	}
	return recs
}

// truth reads the topic back and checks that it holds exactly what kafkajs said it
// wrote, where it said; it returns the row each record must be.
func truth(t *testing.T, c *cluster.Cluster, produced []producedRecord) map[position]row {
	t.Helper()
	said := map[position]producedRecord{}
	for _, r := range produced {
		o, err := strconv.ParseInt(r.Offset, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		said[position{r.Partition, o}] = r
	}
	cl := c.Kafka.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := map[position]row{}
	for len(want) < len(said) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s back: %d of %d records", topic, len(want), len(said))
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos := position{r.Partition, r.Offset}
			s, ok := said[pos]
			if !ok || s.Key != string(r.Key) || s.Value != string(r.Value) {
				t.Fatalf("Kafka holds %q=%q at %d/%d; kafkajs said %+v", r.Key, r.Value, r.Partition, r.Offset, s)
			}
			want[pos] = rowOf(t, pos, r.Value)
		})
	}
	return want
}

// rowOf is the row a produced JSON value must read as.
func rowOf(t *testing.T, pos position, value []byte) row {
	t.Helper()
	var v struct {
		ID     int64    `json:"id"`
		Name   *string  `json:"name"`
		Price  *float64 `json:"price"`
		Active *bool    `json:"active"`
		Qty    *float64 `json:"qty"`
		Geo    struct {
			City *string `json:"city"`
		} `json:"geo"`
		TS string `json:"ts"`
	}
	if err := json.Unmarshal(value, &v); err != nil {
		t.Fatal(err)
	}
	ts, err := time.Parse(time.RFC3339Nano, v.TS)
	if err != nil {
		t.Fatal(err)
	}
	id, micros := strconv.FormatInt(v.ID, 10), strconv.FormatInt(ts.UnixMicro(), 10)
	return row{P: pos.p, O: strconv.FormatInt(pos.o, 10), ID: &id, Name: v.Name, Price: v.Price, Active: v.Active,
		Qty: v.Qty, City: v.Geo.City, TS: &micros}
}

// compareRows checks that got holds every record of want exactly once, each value equal.
func compareRows(t *testing.T, got []row, want map[position]row) {
	t.Helper()
	seen := map[position]bool{}
	bad := 0
	for _, r := range got {
		o, err := strconv.ParseInt(r.O, 10, 64)
		if err != nil {
			t.Fatalf("row %v: offset %q", r, r.O)
		}
		pos := position{r.P, o}
		w, ok := want[pos]
		switch {
		case seen[pos]:
			t.Errorf("record %d/%d is two rows", pos.p, pos.o)
		case !ok:
			t.Errorf("row %v is no record in Kafka", r)
		case r.String() != w.String():
			if bad++; bad <= 5 {
				t.Errorf("record %d/%d:\n got  %v\n want %v", pos.p, pos.o, r, w)
			}
		}
		seen[pos] = true
	}
	if bad > 5 {
		t.Errorf("... and %d more rows differ", bad-5)
	}
	if len(seen) != len(want) {
		t.Errorf("%d of %d records are rows", len(seen), len(want))
	}
}

// dataFile is one data file of the current snapshot, as the manifests describe it.
type dataFile struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Records int64  `json:"records"`
}

// waitCommitted waits until the table, loaded through the catalog as the reader and
// scanned with iceberg-go, holds n rows, and returns its data files.
func waitCommitted(t *testing.T, catalogURL string, a *cluster.Auth, n int) []dataFile {
	t.Helper()
	ns, name, _ := strings.Cut(tableName, ".")
	var files []dataFile
	cluster.WaitFor(t, 60*time.Second, fmt.Sprintf("%s to hold %d rows", tableName, n), func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		tbl, err := loadTable(ctx, catalogURL, a, ns, name)
		if err != nil {
			return err.Error(), false
		}
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return "plan: " + err.Error(), false
		}
		files = files[:0]
		var rows int64
		for _, task := range tasks {
			f := task.File
			files = append(files, dataFile{Path: f.FilePath(), Size: f.FileSizeBytes(), Records: f.Count()})
			rows += f.Count()
		}
		return fmt.Sprintf("%d rows in %d files", rows, len(files)), rows == int64(n)
	})
	return files
}

// loadTable loads ns.name through the catalog as the reader, as engines do.
func loadTable(ctx context.Context, catalogURL string, a *cluster.Auth, ns, name string) (*table.Table, error) {
	cat, err := rest.NewCatalog(ctx, "mink", catalogURL, rest.WithCredential(a.Reader.ID+":"+a.Reader.Secret))
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{ns, name})
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	return tbl, nil
}

// input is what js/read.mjs reads (INTEROP_INPUT).
type input struct {
	Table        string     `json:"table"`
	Tables       []string   `json:"tables"` // every table of the namespace
	UpsertTable  string     `json:"upsertTable"`
	CatalogURL   string     `json:"catalogURL"`
	S3URL        string     `json:"s3URL"`
	ReaderID     string     `json:"readerID"`
	ReaderSecret string     `json:"readerSecret"`
	DataFiles    []dataFile `json:"dataFiles"`
}

// result is what js/read.mjs printed: a section per client.
type result map[string]json.RawMessage

type section struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	Rows   []row  `json:"rows"`
	Checks []struct {
		Name   string          `json:"name"`
		OK     bool            `json:"ok"`
		Detail json.RawMessage `json:"detail"`
	} `json:"checks"`
	raw json.RawMessage
}

func runReader(t *testing.T, js string, in input) result {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := node(t, js, "read.mjs", "INTEROP_INPUT="+path)
	var res result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("read.mjs printed %q: %v", out, err)
	}
	return res
}

// section is one client's result; a client that failed fails the test here.
func (r result) section(t *testing.T, name string) section {
	t.Helper()
	var s section
	raw, ok := r[name]
	if !ok {
		t.Fatalf("read.mjs has no section %q", name)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("section %s: %v", name, err)
	}
	s.raw = raw
	if !s.OK {
		t.Fatalf("%s failed: %s", name, s.Error)
	}
	return s
}

// checks fails for every expectation the script found unmet.
func (s section) checks(t *testing.T) {
	t.Helper()
	if len(s.Checks) == 0 {
		t.Fatal("the script made no checks")
	}
	for _, c := range s.Checks {
		if !c.OK {
			t.Errorf("%s: %s", c.Name, c.Detail)
		} else {
			t.Logf("ok: %s", c.Name)
		}
	}
}

// checkIcebergJS compares what iceberg-js saw of the catalog with the table.
func checkIcebergJS(t *testing.T, s section, files []dataFile) {
	var v struct {
		Namespaces          [][]string `json:"namespaces"`
		Tables              []string   `json:"tables"`
		NSExists, NSMissing bool
		Exists, Missing     bool
		FormatVersion       int    `json:"formatVersion"`
		Location            string `json:"location"`
		Fields              []struct {
			ID       int    `json:"id"`
			Name     string `json:"name"`
			Type     string `json:"type"`
			Required bool   `json:"required"`
		} `json:"fields"`
		CurrentSnapshotID string   `json:"currentSnapshotId"`
		SnapshotIDs       []string `json:"snapshotIds"`
		RawSnapshotIDs    []string `json:"rawSnapshotIds"`
	}
	if err := json.Unmarshal(s.raw, &v); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(v.Namespaces, func(ns []string) bool { return slices.Equal(ns, []string{"default"}) }) {
		t.Errorf("listNamespaces: %v, want default among them", v.Namespaces)
	}
	if !slices.Equal(sorted(v.Tables), []string{"default.events", "default.keyed", "default.other"}) {
		t.Errorf("listTables(default): %v", v.Tables)
	}
	if !v.NSExists || v.NSMissing || !v.Exists || v.Missing {
		t.Errorf("namespaceExists default %v, missing %v; tableExists events %v, missing %v", v.NSExists, v.NSMissing, v.Exists, v.Missing)
	}
	wantTypes := map[string]string{"id": "long", "name": "string", "price": "double", "active": "boolean", "qty": "int",
		"city": "string", "ts": "timestamptz", "_kafka_partition": "int", "_kafka_offset": "long"}
	got := map[string]string{}
	for _, f := range v.Fields {
		got[f.Name] = f.Type
	}
	for name, typ := range wantTypes {
		if got[name] != typ {
			t.Errorf("column %s has type %q, want %s (schema %v)", name, got[name], typ, v.Fields)
		}
	}
	if v.FormatVersion < 1 || !strings.HasPrefix(v.Location, "s3://") {
		t.Errorf("format version %d, location %q", v.FormatVersion, v.Location)
	}
	if len(files) == 0 || len(v.SnapshotIDs) == 0 {
		t.Fatalf("no snapshot: %v", v.SnapshotIDs)
	}
	// JSON.parse turns numbers above 2^53 into the nearest double: an id the client saw
	// must be the id the server wrote.
	if !slices.Equal(sorted(v.SnapshotIDs), sorted(v.RawSnapshotIDs)) || !slices.Contains(v.RawSnapshotIDs, v.CurrentSnapshotID) {
		t.Errorf("snapshot ids as JavaScript parsed them %v (current %s) differ from the ids the catalog wrote %v: ids must stay below 2^53",
			head(v.SnapshotIDs), v.CurrentSnapshotID, head(v.RawSnapshotIDs))
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func head(s []string) []string { return s[:min(len(s), 4)] }
