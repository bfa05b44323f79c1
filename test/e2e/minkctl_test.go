package e2e

import (
	"context"
	"encoding/json"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/roleproc"
	"github.com/minkhq/mink/test/cluster"
)

// minkctl runs the built CLI and returns its stdout, stderr and exit code.
func minkctl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(cluster.Bin("minkctl"), args...)
	cmd.Env = append(roleproc.CleanEnv(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestMinkctl: every command against running nodes, in both output formats.
func TestMinkctl(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	c := newCluster(t, ttl)
	c.Start("indexer", "idx-a")
	c.Start("writer", "wr-1")
	a := c.Member("idx-a").Addr()
	c.Member("wr-1").Addr()
	table := addTable(c, "clicks", 2)
	waitFor(t, 20*time.Second, "idx-a to hold both partitions and wr-1 the writer lease", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-a"] == 2 && s.Writer == "wr-1"
	})

	ok := func(env []string, args ...string) string {
		t.Helper()
		out, errOut, code := minkctl(t, env, args...)
		if code != 0 {
			t.Fatalf("minkctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}

	// The cluster at a glance: every node (asked through idx-a) and every table's lag.
	out := ok(nil, "--addr", a, "status", "--cluster")
	for _, w := range []string{"idx-a", "wr-1", "partition_leases=2", "writer_leases=1", "default.clicks", "TOTAL", "HIGH WATERMARK"} {
		if !strings.Contains(out, w) {
			t.Errorf("status --cluster does not show %q:\n%s", w, out)
		}
	}
	jsonLines := strings.Split(strings.TrimSpace(ok(nil, "--addr", a, "-o", "json", "status", "--cluster")), "\n")
	if len(jsonLines) != 3 { // two nodes, one table
		t.Errorf("status --cluster -o json: %d lines, want 3:\n%s", len(jsonLines), strings.Join(jsonLines, "\n"))
	}

	out = ok(nil, "--addr", a, "status")
	for _, w := range []string{"NODE", "idx-a", "indexer", "partition_leases=2", "default.clicks"} {
		if !strings.Contains(out, w) {
			t.Errorf("status does not show %q:\n%s", w, out)
		}
	}

	// --node after the command, -o json: wr-1's own status, forwarded by idx-a.
	var st adminv1.GetStatusResponse
	if err := protojson.Unmarshal([]byte(ok(nil, "status", "--addr", a, "--node", "wr-1", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.GetNodeId() != "wr-1" || len(st.GetLeases()) != 1 {
		t.Errorf("status of wr-1 through idx-a: %v", &st)
	}

	// MINK_ADDR instead of --addr.
	out = ok([]string{"MINK_ADDR=" + a}, "nodes")
	if !strings.Contains(out, "idx-a") || !strings.Contains(out, "wr-1") || !strings.Contains(out, "DRAINING") {
		t.Errorf("nodes:\n%s", out)
	}
	var leases adminv1.ListLeasesResponse
	if err := protojson.Unmarshal([]byte(ok(nil, "--addr", a, "-o", "json", "leases")), &leases); err != nil {
		t.Fatal(err)
	}
	if len(leases.GetLeases()) != 3 {
		t.Errorf("leases -o json: %v", &leases)
	}
	out = ok(nil, "--addr", a, "leases", "--table", "1")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 || !strings.Contains(lines[0], "HOLDER") {
		t.Errorf("leases --table 1:\n%s", out)
	}

	// Drain idx-a through wr-1; its partitions are free when drain returns.
	out = ok([]string{"MINK_ADDR=" + c.Member("wr-1").Addr()}, "drain", "idx-a")
	if !strings.Contains(out, "idx-a is draining and holds no lease") {
		t.Errorf("drain: %s", out)
	}
	if s := c.Shares(table); s.Partitions["idx-a"] != 0 {
		t.Errorf("after drain: %v", s)
	}
	ok(nil, "--addr", a, "undrain", "idx-a")
	waitFor(t, 10*time.Second, "idx-a to take its partitions back", func() (cluster.Shares, bool) {
		s := c.Shares(table)
		return s, s.Partitions["idx-a"] == 2
	})

	fails := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--addr", a, "table", "create", "nosuchtopic", "--column", "id:long:required"}, 1, "does not exist"},
		{[]string{"--addr", a, "table", "describe", "nosuchtable"}, 1, "NotFound"},
		{[]string{"--addr", a, "leases", "--table", "-1"}, 1, "table_id"},
		{[]string{"--addr", a, "status", "--node", "nope"}, 1, "NotFound"},
		{[]string{"--addr", a, "drain"}, 2, "NODE"},
		{[]string{"--addr", a, "frobnicate"}, 2, "unknown command"},
		{[]string{"--addr", a, "-o", "yaml", "status"}, 2, "-o"},
		{[]string{"--addr", a, "table", "create", "events", "--column", "id"}, 2, "--column"},
	}
	for _, f := range fails {
		_, errOut, code := minkctl(t, nil, f.args...)
		if code != f.code || !strings.Contains(errOut, f.want) {
			t.Errorf("minkctl %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(f.args, " "), code, errOut, f.code, f.want)
		}
	}
}

// TestFlagValidation: a bad value stops a role at start, naming the flag, and the
// variable when it came from the environment. No Postgres is needed to get there.
func TestFlagValidation(t *testing.T) {
	good := []string{"--postgres-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "127.0.0.1:9"}
	cases := []struct {
		bin  string
		args []string
		env  []string
		want []string
	}{
		{"mink-indexer", append([]string{"--lease-ttl", "10ms"}, good...), nil, []string{"--lease-ttl", "10ms"}},
		{"mink-writer", append([]string{"--lease-ttl", "soon"}, good...), nil, []string{"lease-ttl", "soon"}},
		{"mink-fileserver", good, []string{"MINK_LEASE_TTL=soon"}, []string{"--lease-ttl", "MINK_LEASE_TTL"}},
		{"mink-indexer", []string{"--postgres-url", "postgres://u@h:port/db", "--kafka-brokers", "k:9"}, nil, []string{"--postgres-url"}},
		{"mink-writer", []string{"--kafka-brokers", "k:9"}, []string{"MINK_POSTGRES_URL=::nonsense"}, []string{"--postgres-url", "MINK_POSTGRES_URL"}},
		{"mink-indexer", append([]string{"--max-partitions", "-2"}, good...), nil, []string{"--max-partitions"}},
		{"mink-fileserver", good, []string{"MINK_CACHE_BYTES=lots"}, []string{"--cache-bytes", "MINK_CACHE_BYTES"}},
		{"mink-writer", []string{"--postgres-url", "postgres://u@h/db"}, nil, []string{"--kafka-brokers"}},
	}
	for _, tc := range cases {
		cmd := exec.Command(cluster.Bin(tc.bin), tc.args...)
		cmd.Env = append(roleproc.CleanEnv(), tc.env...)
		out, err := cmd.CombinedOutput()
		ee, isExit := err.(*exec.ExitError)
		if !isExit || ee.ExitCode() != 2 {
			t.Errorf("%s %v %v: %v, want exit 2; output %s", tc.bin, tc.env, tc.args, err, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s %v %v: %q does not mention %s", tc.bin, tc.env, tc.args, out, w)
			}
		}
	}
	out, err := exec.Command(cluster.Bin("mink-fileserver"), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-cache-bytes") || !strings.Contains(string(out), "MINK_") {
		t.Errorf("--help: %v %s", err, out)
	}

	// The Postgres URL is a secret: a role refusing it says which flag and where it came
	// from, never the password, however it is written; a file holding it that others may
	// read is refused.
	open := filepath.Join(t.TempDir(), "pg-url")
	if err := os.WriteFile(open, []byte("postgres://mink:f1le-pw@127.0.0.1:1/db\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o644)
	for _, tc := range []struct {
		env, hidden []string
		want        []string
	}{
		{[]string{"MINK_POSTGRES_URL=postgres://mink:pg%40s3cr%3At@127.0.0.1:notaport/db"}, []string{"pg%40s3cr", "pg@s3cr", "s3cr"}, []string{"--postgres-url", "MINK_POSTGRES_URL"}},
		{[]string{"MINK_POSTGRES_URL=postgres://mink:pg@s3cr:t@127.0.0.1:notaport/db"}, []string{"s3cr"}, []string{"--postgres-url", "MINK_POSTGRES_URL"}},
		{[]string{"MINK_POSTGRES_URL=postgres://postgres:postgres@127.0.0.1:1/db?sslmode=bogus"}, []string{"postgres:postgres"}, []string{"--postgres-url", "postgres://postgres:xxxxx@"}},
		{[]string{"MINK_POSTGRES_URL_FILE=" + open}, []string{"f1le-pw"}, []string{"--postgres-url-file", "MINK_POSTGRES_URL_FILE", "chmod 600"}},
	} {
		cmd := exec.Command(cluster.Bin("mink-writer"), "--kafka-brokers", "127.0.0.1:9")
		cmd.Env = append(roleproc.CleanEnv(), tc.env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("mink-writer %v: %v, want exit 2; output %s", tc.env, err, out)
		}
		for _, h := range tc.hidden {
			if strings.Contains(string(out), h) {
				t.Errorf("mink-writer %v: its output shows %q: %s", tc.env, h, out)
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("mink-writer %v: %q does not mention %s", tc.env, out, w)
			}
		}
	}
}

// The registry subjects of TestMinkctlTables: an Avro value with every nested kind, an
// Avro key.
const (
	ctlOrderAvro = `{"type":"record","name":"Order","namespace":"acme","fields":[
		{"name":"id","type":"long"},
		{"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
		{"name":"ship_to","type":{"type":"record","name":"Address","fields":[
			{"name":"zip","type":"string"},{"name":"lines","type":{"type":"array","items":"string"}}]}},
		{"name":"attrs","type":{"type":"map","values":"int"}},
		{"name":"session","type":{"type":"string","logicalType":"uuid"}},
		{"name":"hash","type":{"type":"fixed","name":"Hash","size":2}},
		{"name":"ratio","type":"float"}]}`
	ctlOrderKeyAvro = `{"type":"record","name":"OrderKey","namespace":"acme","fields":[{"name":"order_id","type":"long"}]}`
)

// ctlAvro encodes v in the Confluent wire format with schema id id, as a producer's
// serializer does.
func ctlAvro(t *testing.T, id int, schema string, v any) []byte {
	t.Helper()
	s := avro.MustParse(schema)
	var serde sr.Serde
	serde.Register(id, v, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }))
	b, err := serde.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type ctlOrder struct {
	ID      int64            `avro:"id"`
	Price   *big.Rat         `avro:"price"`
	ShipTo  ctlAddress       `avro:"ship_to"`
	Attrs   map[string]int32 `avro:"attrs"`
	Session string           `avro:"session"`
	Hash    [2]byte          `avro:"hash"`
	Ratio   float32          `avro:"ratio"`
}

type ctlAddress struct {
	Zip   string   `avro:"zip"`
	Lines []string `avro:"lines"`
}

type ctlOrderKey struct {
	OrderID int64 `avro:"order_id"`
}

// ctlSpaced is minkctl's aligned output with every run of spaces one space, so that
// checks do not depend on how wide other rows make a column.
func ctlSpaced(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// ctlFileServer starts a file server on free loopback ports and returns its catalog URL,
// read back from its status.
func ctlFileServer(t *testing.T, c *cluster.Cluster, id string, extra ...string) string {
	t.Helper()
	c.Start("fileserver", id, append([]string{"--cache-bytes", "256MiB"}, extra...)...)
	addrs := waitFor(t, 20*time.Second, id+" to advertise its catalog", func() (map[string]string, bool) {
		st, err := c.Member(id).Admin().GetStatus(context.Background(), &adminv1.GetStatusRequest{})
		if err != nil {
			return nil, false
		}
		return st.GetAddrs(), st.GetAddrs()["catalog"] != "" && st.GetAddrs()["s3"] != ""
	})
	return "http://" + addrs["catalog"]
}

// TestMinkctlTables: minkctl against real nodes that reach an srfake Schema Registry:
// an Avro table (values and keys) created from its subjects, described, and scanned with
// its nested values; a JSON table altered (a column added, renamed, widened) keeping its
// field ids; the server's refusals as minkctl shows them.
func TestMinkctlTables(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	reg := srfake.New()
	t.Cleanup(reg.Close)
	valueID, _, err := reg.RegisterSchema("orders-value", sr.Schema{Schema: ctlOrderAvro})
	if err != nil {
		t.Fatal(err)
	}
	keyID, _, err := reg.RegisterSchema("orders-key", sr.Schema{Schema: ctlOrderKeyAvro})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, ttl)
	c.Kafka.CreateTopic("orders", 2, nil)
	c.Kafka.CreateTopic("events", 1, nil)
	regFlag := []string{"--schema-registry-url", reg.URL()}
	c.Start("indexer", "idx-a", regFlag...)
	c.Start("writer", "wr-1", regFlag...)
	catalog := ctlFileServer(t, c, "fs-1", regFlag...)
	a := c.Member("idx-a").Addr()

	ok := func(args ...string) string {
		t.Helper()
		out, errOut, code := minkctl(t, nil, append([]string{"--addr", a}, args...)...)
		if code != 0 {
			t.Fatalf("minkctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	fails := func(code int, args []string, want ...string) {
		t.Helper()
		_, errOut, got := minkctl(t, nil, append([]string{"--addr", a}, args...)...)
		if got != code {
			t.Errorf("minkctl %s: exit %d (%s), want %d", strings.Join(args, " "), got, errOut, code)
		}
		for _, w := range want {
			if !strings.Contains(errOut, w) {
				t.Errorf("minkctl %s: %q does not mention %q", strings.Join(args, " "), errOut, w)
			}
		}
	}

	// An Avro table: the subjects default to orders-value and orders-key; the columns
	// come from the registry.
	out := ok("table", "create", "orders", "--format", "avro", "--key-format", "avro",
		"--property", "mink.range.max-age=200ms", "--property", "mink.commit.interval=200ms")
	for _, w := range []string{
		"FORMAT avro\n",
		"VALUES avro, subject orders-value, prefix mode\n",
		"KEYS avro, subject orders-key, prefix mode (column _kafka_key_decoded)\n",
		"SCHEMA table version 0 (Iceberg schema id 0)\n",
		"1 id long\n",
		"2 price decimal(10, 2)\n",
		"3 ship_to struct<",
		"4 attrs map<string, int>\n",
		"5 session uuid\n",
		"6 hash fixed[2]\n",
		"7 ratio float\n",
		"_kafka_key_decoded struct<",
	} {
		if !strings.Contains(ctlSpaced(out), w) {
			t.Errorf("table create --format avro does not show %q:\n%s", w, out)
		}
	}
	var d adminv1.DescribeTableResponse
	if err := protojson.Unmarshal([]byte(ok("-o", "json", "table", "describe", "orders", "--node", "wr-1")), &d); err != nil {
		t.Fatal(err)
	}
	if v, k := d.GetTable().GetValue(), d.GetTable().GetKey(); v.GetSubject() != "orders-value" || k.GetSubject() != "orders-key" ||
		len(d.GetTable().GetSchema()) != 14 || len(d.GetPartitions()) != 2 {
		t.Errorf("describe -o json through wr-1: %v", &d)
	}
	if out := ok("table", "list"); !strings.Contains(out, "avro") || !strings.Contains(out, "TABLE VERSION") {
		t.Errorf("table list:\n%s", out)
	}

	// Two orders, written as a producer's serializer writes them, scanned through the
	// catalog and S3 with their nested values.
	prod := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	sess := "0f8fad5b-d9cb-469f-a165-70867728950e"
	kafkatest.Produce(t, prod,
		&kgo.Record{Topic: "orders", Partition: 0, Key: ctlAvro(t, keyID, ctlOrderKeyAvro, ctlOrderKey{1}),
			Value: ctlAvro(t, valueID, ctlOrderAvro, ctlOrder{ID: 1, Price: big.NewRat(1250, 100), ShipTo: ctlAddress{"10115", []string{"pen", "ink"}},
				Attrs: map[string]int32{"gift": 1}, Session: sess, Hash: [2]byte{0xca, 0xfe}, Ratio: 0.1})},
		&kgo.Record{Topic: "orders", Partition: 0, Key: ctlAvro(t, keyID, ctlOrderKeyAvro, ctlOrderKey{2}),
			Value: ctlAvro(t, valueID, ctlOrderAvro, ctlOrder{ID: 2, Price: big.NewRat(-5, 100), ShipTo: ctlAddress{Zip: "75001"},
				Attrs: map[string]int32{}, Session: sess, Hash: [2]byte{'h', 'i'}, Ratio: 2.5})},
	)
	cols := "id,price,ship_to,attrs,session,hash,ratio,_kafka_key_decoded,_mink_error"
	want := `{"id":1,"price":12.50,"ship_to":{"zip":"10115","lines":["pen","ink"]},"attrs":{"gift":1},"session":"` + sess + `","hash":"yv4=","ratio":0.1,"_kafka_key_decoded":{"order_id":1},"_mink_error":null}
{"id":2,"price":-0.05,"ship_to":{"zip":"75001","lines":[]},"attrs":{},"session":"` + sess + `","hash":"aGk=","ratio":2.5,"_kafka_key_decoded":{"order_id":2},"_mink_error":null}
`
	got := waitFor(t, 30*time.Second, "both orders to be scanned", func() (string, bool) {
		out, _, code := minkctl(t, nil, "scan", "orders", "--catalog", catalog, "--columns", cols, "-o", "json")
		return out, code == 0 && strings.Count(out, "\n") == 2
	})
	if got != want {
		t.Errorf("scan -o json:\n%s\nwant:\n%s", got, want)
	}
	out = ok("scan", "default.orders", "--catalog", catalog, "--columns", "id,price,ship_to,attrs,hash,ratio")
	for _, w := range []string{
		"1 12.50 {zip: 10115, lines: [pen, ink]} {gift: 1} 0xcafe 0.1\n",
		"2 -0.05 {zip: 75001, lines: []} {} hi 2.5\n",
		"(2 rows)",
	} {
		if !strings.Contains(ctlSpaced(out), w) {
			t.Errorf("scan does not show %q:\n%s", w, out)
		}
	}

	// The registry's refusals, as minkctl shows them.
	fails(1, []string{"table", "create", "orders2", "--topic", "orders", "--format", "avro", "--column", "id:long"},
		"InvalidArgument", "columns", "schema registry")
	fails(1, []string{"table", "create", "orders2", "--topic", "orders", "--format", "avro", "--value-subject", "nope"},
		"NotFound", `subject "nope"`, reg.URL())
	fails(1, []string{"table", "create", "orders2", "--topic", "orders", "--format", "protobuf"},
		"InvalidArgument", "format", "AVRO")
	fails(2, []string{"table", "create", "orders2", "--format", "avro", "--value-schema-mode", "sometimes"}, "--value-schema-mode")
	fails(1, []string{"table", "alter", "orders", "--add", "note:string"}, "InvalidArgument", "only JSON tables")

	// Partition specs: checked against the registry's schema, field named; any other than
	// identity(_kafka_partition) refused until files are built per tuple.
	fails(1, []string{"table", "create", "orders2", "--topic", "orders", "--format", "avro", "--partition-by", "hour(ship_to.zip)"},
		"InvalidArgument", "partition_spec[0]", "hour(ship_to.zip)", "string")
	fails(1, []string{"table", "create", "orders2", "--topic", "orders", "--format", "avro", "--partition-by", "bucket(8, id)"},
		"Unimplemented", "partition_spec", "not supported yet")
	fails(2, []string{"table", "create", "orders2", "--format", "avro", "--partition-by", "day(ts"}, "--partition-by")

	// A JSON table, altered: a column added, one renamed, one widened, in one version.
	ok("table", "create", "events", "--column", "id:int:required", "--column", "name:string")
	out = ok("table", "alter", "events", "--add", "note:string:meta.note", "--rename", "name:customer", "--widen", "id:long",
		"--set", "owner=growth")
	for _, w := range []string{
		"SCHEMA table version 1 (Iceberg schema id 1)\n",
		"PROPERTIES owner=growth\n",
		"1 id long true id\n",
		"2 customer string false name\n",
		"12 note string false meta.note\n",
	} {
		if !strings.Contains(ctlSpaced(out), w) {
			t.Errorf("table alter does not show %q:\n%s", w, out)
		}
	}
	if err := protojson.Unmarshal([]byte(ok("-o", "json", "table", "describe", "events")), &d); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int32{}
	for _, col := range d.GetTable().GetSchema() {
		ids[col.GetName()] = col.GetFieldId()
	}
	// Version 0 had id=1, name=2, the Kafka columns 3..8 and the headers' nested ids up
	// to 11: the new column gets 12, the others keep theirs.
	if ids["id"] != 1 || ids["customer"] != 2 || ids["_kafka_offset"] != 4 || ids["note"] != 12 || d.GetTable().GetSchemaVersion() != 1 {
		t.Errorf("field ids after the alter: %v (version %d)", ids, d.GetTable().GetSchemaVersion())
	}
	fails(1, []string{"table", "alter", "events", "--widen", "customer:long"},
		`InvalidArgument: changes[0]: widen "customer": string cannot become long`)
	fails(1, []string{"table", "alter", "events", "--add", "x:string", "--rename", "x:id"}, "InvalidArgument", "changes[1]", "duplicate name")
	fails(1, []string{"table", "alter", "events", "--set", "mink.assembly.target-bytes=-1"},
		"InvalidArgument", `properties["mink.assembly.target-bytes"]`)
	fails(1, []string{"table", "alter", "events", "--set", "owner=x", "--unset", "owner"}, "InvalidArgument", "remove_properties")
	fails(2, []string{"table", "alter", "events"}, "nothing to change")
	fails(1, []string{"table", "alter", "nope", "--optional", "id"}, "NotFound", "default.nope")
	// None of the refused alters changed anything.
	resp, err := c.Member("idx-a").Admin().DescribeTable(context.Background(), &adminv1.DescribeTableRequest{Name: "events"})
	if err != nil || resp.GetTable().GetSchemaVersion() != 1 || len(resp.GetTable().GetColumns()) != 3 || resp.GetTable().GetProperties()["owner"] != "growth" {
		t.Errorf("after refused alters: %v %v", resp.GetTable(), err)
	}

	// The README's grpcurl examples of CreateTable (JSON, then Avro with a subject) and of
	// AlterTable, as written there, on tables of the same names made afresh.
	if grpcurl == "" {
		t.Log("grpcurl not found in .tmp/bin or PATH: the README examples are not run")
		return
	}
	ok("table", "drop", "events")
	ok("table", "drop", "default.orders")
	for _, ex := range []struct{ method, body string }{
		{"CreateTable", `{"namespace":"default","name":"events","topic":"events","format":"RECORD_FORMAT_JSON",
  "columns":[{"name":"id","type":"int","required":true},{"name":"msg","type":"string"}]}`},
		{"CreateTable", `{"name":"orders","topic":"orders","format":"RECORD_FORMAT_AVRO",
  "value_subject":"orders-value","key_format":"RECORD_FORMAT_AVRO"}`},
		{"AlterTable", `{"name":"events","changes":[{"add":{"name":"city","type":"string","json_path":"addr.city"}},
  {"widen":{"name":"id","type":"long"}},{"rename":{"name":"msg","new_name":"message"}},{"make_optional":"id"}],
  "set_properties":{"mink.commit.interval":"10s"},"remove_properties":["owner"]}`},
	} {
		out, code, msg := runGrpcurl(t, "-plaintext", "-d", ex.body, a, "mink.admin.v1.AdminService/"+ex.method)
		if code != "" || msg != "" {
			t.Errorf("README's grpcurl %s %s: %s %s", ex.method, ex.body, code, msg)
			continue
		}
		var resp struct{ Table *json.RawMessage }
		if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Table == nil {
			t.Errorf("README's grpcurl %s: %v\n%s", ex.method, err, out)
		}
	}
	out = ok("table", "describe", "events")
	for _, w := range []string{"SCHEMA table version 1 (Iceberg schema id 1)\n", "1 id long false id\n", "2 message string false msg\n",
		"city string false addr.city\n", "PROPERTIES mink.commit.interval=10s\n"} {
		if !strings.Contains(ctlSpaced(out), w) {
			t.Errorf("after the README's AlterTable, describe does not show %q:\n%s", w, out)
		}
	}
	if out := ok("table", "describe", "orders"); !strings.Contains(ctlSpaced(out), "KEYS avro, subject orders-key, prefix mode") {
		t.Errorf("after the README's CreateTable:\n%s", out)
	}
}
