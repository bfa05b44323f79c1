package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
)

// minkctlEnv runs minkctl with the environment env.
func minkctlEnv(env map[string]string, args ...string) (string, string, int) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return stdout.String(), stderr.String(), code
}

// TestConnectionHints: a command that reaches no node, or a node that wants credentials
// it was not given, says which flag or variable to set, not gRPC's transport words.
func TestConnectionHints(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := lis.Addr().String()
	lis.Close() // nothing listens there now

	// A node with auth on: pkg/auth's own door, as every node has it.
	f, err := auth.Generate([]string{"default.*"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(f)
	if err != nil {
		t.Fatal(err)
	}
	if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(apierr.UnaryServerInterceptor(slog.New(slog.DiscardHandler)), a.UnaryServerInterceptor()))
	adminv1.RegisterAdminServiceServer(gs, &fakeAdmin{status: &adminv1.GetStatusResponse{NodeId: "idx-1"}})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	node := lis.Addr().String()

	for _, tc := range []struct {
		what   string
		env    map[string]string
		args   []string
		want   []string
		unwant []string
	}{
		{"status against nothing, --addr", nil, []string{"--addr", nothing, "status"},
			[]string{"no Mink node answers at " + nothing, "(from --addr)", "connection refused", "Set --addr or MINK_ADDR", "make dev"},
			[]string{"rpc error", "transport:", "desc ="}},
		{"status against nothing, MINK_ADDR", map[string]string{"MINK_ADDR": nothing}, []string{"status"},
			[]string{"no Mink node answers at " + nothing, "(from MINK_ADDR)", "Set --addr or MINK_ADDR"}, []string{"desc ="}},
		{"a name that does not resolve", nil, []string{"--addr", "nowhere.invalid:7070", "nodes"},
			[]string{"no Mink node answers at nowhere.invalid:7070", "Set --addr or MINK_ADDR"}, nil},
		{"scan finds no node for its catalog", nil, []string{"--addr", nothing, "scan", "default.demo"},
			[]string{"no Mink node answers at " + nothing, "--catalog or MINK_CATALOG", "Set --addr or MINK_ADDR"}, []string{"desc ="}},
		{"no token", nil, []string{"--addr", node, "status"},
			[]string{"set MINK_TOKEN or --token", "checks credentials"}, []string{"metadata", "Bearer"}},
		{"a wrong token from MINK_TOKEN", map[string]string{"MINK_TOKEN": "not-a-secret"}, []string{"--addr", node, "status"},
			[]string{"Unauthenticated", "refused", "from MINK_TOKEN", "set MINK_TOKEN or --token"}, []string{"not-a-secret"}},
	} {
		_, errOut, code := minkctlEnv(tc.env, tc.args...)
		if code != exitRPC {
			t.Errorf("%s: exit %d, want %d: %s", tc.what, code, exitRPC, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: %q does not say %q", tc.what, errOut, w)
			}
		}
		for _, u := range tc.unwant {
			if strings.Contains(errOut, u) {
				t.Errorf("%s: %q says %q", tc.what, errOut, u)
			}
		}
	}
	// With the admin's secret it answers.
	if out, errOut, code := minkctlEnv(map[string]string{"MINK_TOKEN": f.Principals[0].Secret}, "--addr", node, "status"); code != 0 || !strings.Contains(out, "idx-1") {
		t.Errorf("status with the admin's secret: exit %d: %s%s", code, out, errOut)
	}
}

// TestTopicCommands: topic create and list call the node's CreateTopic and ListTopics.
func TestTopicCommands(t *testing.T) {
	f := &fakeAdmin{topics: []*adminv1.Topic{{Name: "clicks", Partitions: 2, Tables: []string{"default.clicks"}}, {Name: "raw", Partitions: 1}}}
	minkctl := startFake(t, f)
	out, errOut, code := minkctl("topic", "create", "clicks", "--partitions", "2", "--node", "idx-2")
	if code != 0 || !strings.Contains(out, "created topic clicks (2 partitions)") || !strings.Contains(out, "minkctl table create clicks") {
		t.Errorf("topic create: exit %d: %s%s", code, out, errOut)
	}
	if want := (&adminv1.CreateTopicRequest{Node: "idx-2", Name: "clicks", Partitions: 2}); !proto.Equal(f.last(t), want) {
		t.Errorf("topic create sent %v, want %v", f.last(t), want)
	}
	out, errOut, code = minkctl("topic", "list")
	if want := "TOPIC   PARTITIONS  TABLES\nclicks  2           default.clicks\nraw     1           -\n"; code != 0 || out != want {
		t.Errorf("topic list: exit %d %s:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	for _, bad := range [][]string{{"topic"}, {"topic", "create"}, {"topic", "create", "x", "--partitions", "-1"}, {"topic", "drop", "x"}} {
		if _, errOut, code := minkctl(bad...); code != exitUsage {
			t.Errorf("minkctl %s: exit %d, want %d: %s", strings.Join(bad, " "), code, exitUsage, errOut)
		}
	}
}

// TestScanFindsCatalog: without --catalog, scan asks the node at --addr for a catalog:
// its own (on the host --addr names) when it is a file server, else a live file server's
// from ListNodes.
func TestScanFindsCatalog(t *testing.T) {
	var hits []string
	cat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits = append(hits, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/config" {
			w.Write([]byte(`{"defaults":{},"overrides":{}}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"message":"no such table","type":"NoSuchTableException","code":404}}`))
	}))
	defer cat.Close()
	host := strings.TrimPrefix(cat.URL, "http://")

	for _, tc := range []struct {
		what string
		f    *fakeAdmin
	}{
		// As docker compose has it: the node advertises its container's name, and the host
		// reaches it by the host --addr names, on the same port.
		{"a file server", &fakeAdmin{status: &adminv1.GetStatusResponse{NodeId: "fs-1",
			Addrs: map[string]string{"catalog": "fs-1.invalid:" + strings.Split(host, ":")[1]}}}},
		{"an indexer", &fakeAdmin{status: &adminv1.GetStatusResponse{NodeId: "idx-1"}, nodes: []*adminv1.Node{
			{NodeId: "idx-1"}, {NodeId: "fs-2", Addrs: map[string]string{"catalog": host}},
			{NodeId: "fs-1", Draining: true, Addrs: map[string]string{"catalog": "127.0.0.1:1"}}}}},
	} {
		hits = nil
		minkctl := startFake(t, tc.f)
		_, errOut, code := minkctl("scan", "default.demo")
		if code != exitRPC || !strings.Contains(errOut, "table default.demo not loaded from catalog "+cat.URL) || len(hits) == 0 {
			t.Errorf("%s: scan without --catalog: exit %d, catalog hits %v: %s", tc.what, code, hits, errOut)
		}
	}
	minkctl := startFake(t, &fakeAdmin{status: &adminv1.GetStatusResponse{NodeId: "idx-1"}, nodes: []*adminv1.Node{{NodeId: "idx-1"}}})
	if _, errOut, code := minkctl("scan", "default.demo"); code != exitUsage || !strings.Contains(errOut, "no file server is live") ||
		!strings.Contains(errOut, "--catalog or MINK_CATALOG") {
		t.Errorf("no file server: exit %d: %s", code, errOut)
	}
}

// TestScanFrom: --limit keeps the newest rows by Kafka timestamp (--from end, the
// default) or the oldest (--from start), printed oldest first, reading only the files
// that can hold them: the files it must not need are deleted before it runs.
func TestScanFrom(t *testing.T) {
	ctx := context.Background()
	hc, dir := localCatalog(t)
	sc := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "_kafka_partition", Type: iceberg.PrimitiveTypes.Int32, Required: true},
		iceberg.NestedField{ID: 3, Name: "_kafka_offset", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 4, Name: "_kafka_timestamp", Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
	)
	tbl, err := hc.CreateTable(ctx, []string{"default", "events"}, sc)
	if err != nil {
		t.Fatal(err)
	}
	arrowSchema, err := itable.SchemaToArrowSchema(sc, nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	dataFiles := func() map[string]bool {
		out := map[string]bool{}
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error {
			if strings.HasSuffix(p, ".parquet") {
				out[p] = true
			}
			return nil
		})
		return out
	}
	// One file per append: rows (id, partition, offset, timestamp in ms).
	appendFile := func(partition int32, rows [][3]int64) string {
		before := dataFiles()
		b := array.NewRecordBuilder(memory.NewGoAllocator(), arrowSchema)
		defer b.Release()
		for _, r := range rows {
			b.Field(0).(*array.Int64Builder).Append(r[0])
			b.Field(1).(*array.Int32Builder).Append(partition)
			b.Field(2).(*array.Int64Builder).Append(r[1])
			b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(r[2] * 1000))
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		if tbl, err = tbl.AppendTable(ctx, array.NewTableFromRecords(arrowSchema, []arrow.RecordBatch{rec}), 10, nil); err != nil {
			t.Fatal(err)
		}
		for p := range dataFiles() {
			if !before[p] {
				return p
			}
		}
		t.Fatal("the append wrote no data file")
		return ""
	}
	fileA := appendFile(0, [][3]int64{{1, 0, 1000}, {3, 1, 2000}, {5, 2, 3000}})
	fileB := appendFile(1, [][3]int64{{2, 0, 1500}, {4, 1, 2500}, {6, 2, 3500}})
	fileC := appendFile(0, [][3]int64{{7, 3, 4000}, {8, 4, 5000}, {9, 5, 6000}})
	srv := stubCatalog(t, "events", tbl.MetadataLocation())

	scan := func(args ...string) string {
		t.Helper()
		out, errOut, code := minkctlEnv(nil, append([]string{"scan", "default.events", "--catalog", srv.URL, "--columns", "id,_kafka_partition,_kafka_offset"}, args...)...)
		if code != 0 {
			t.Fatalf("scan %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	row := func(id, p, o int) string { return strings.Join([]string{itoa(id), itoa(p), itoa(o)}, " ") }
	ids := func(out string) string {
		var rows []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] != "id" {
				rows = append(rows, strings.Join(f, " "))
			}
		}
		return strings.Join(rows, ", ")
	}
	if got := ids(scan("--limit", "0")); len(strings.Split(got, ", ")) != 9 {
		t.Errorf("--limit 0: %s, want every row", got)
	}
	// The oldest two: one of file A and one of B, across partitions, in timestamp order;
	// file C is not read.
	if err := os.Rename(fileC, fileC+".away"); err != nil {
		t.Fatal(err)
	}
	want := row(1, 0, 0) + ", " + row(2, 1, 0)
	if got := ids(scan("--limit", "2", "--from", "start")); got != want {
		t.Errorf("--limit 2 --from start: %s, want %s", got, want)
	}
	if err := os.Rename(fileC+".away", fileC); err != nil {
		t.Fatal(err)
	}
	// The newest three are all in file C: A and B are not read.
	os.Remove(fileA)
	os.Remove(fileB)
	want = strings.Join([]string{row(7, 0, 3), row(8, 0, 4), row(9, 0, 5)}, ", ")
	if got := ids(scan("--limit", "3")); got != want {
		t.Errorf("--limit 3 (--from end, the default): %s, want %s", got, want)
	}
	if got := ids(scan("--limit", "3", "--from", "end")); got != want {
		t.Errorf("--limit 3 --from end: %s, want %s", got, want)
	}
	// One more row than C has: B (newer than A) is read, and it is gone.
	if _, errOut, code := minkctlEnv(nil, "scan", "default.events", "--catalog", srv.URL, "--limit", "4"); code != exitRPC {
		t.Errorf("--limit 4 did not read file B, which holds the fourth newest row: exit %d: %s", code, errOut)
	}
	// Every row, as the files are planned: a file that cannot be read fails the scan.
	if _, errOut, code := minkctlEnv(nil, "scan", "default.events", "--catalog", srv.URL, "--limit", "0"); code != exitRPC || !strings.Contains(errOut, "read default.events") {
		t.Errorf("--limit 0 with files A and B gone: exit %d: %s", code, errOut)
	}
	if _, errOut, code := minkctlEnv(nil, "scan", "default.events", "--catalog", srv.URL, "--from", "middle"); code != exitUsage || !strings.Contains(errOut, "--from: want start") {
		t.Errorf("--from middle: exit %d: %s", code, errOut)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
