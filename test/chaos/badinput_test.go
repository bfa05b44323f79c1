package chaos

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/layout"
)

// counts are the rows of the tables that table creation writes, to show that a refused
// request left nothing half-written.
func (c *chaosCluster) counts() string {
	c.T.Helper()
	var tables, leases, parts int
	if err := c.DB.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM mink_tables),
		(SELECT count(*) FROM mink_leases), (SELECT count(*) FROM mink_partitions)`).Scan(&tables, &leases, &parts); err != nil {
		c.T.Fatal(err)
	}
	return fmt.Sprintf("%d tables, %d leases, %d partitions", tables, leases, parts)
}

// TestBadInput is bad input at every door: malformed admin requests (each answered
// InvalidArgument or NotFound naming the field, directly and forwarded to another node),
// poison records (each still one row, with _mink_error saying why), malformed catalog
// requests (the Iceberg error envelope) and S3 requests (bad and huge ranges, path
// traversal, unknown buckets, writes: S3 XML errors). Nothing is lost or half-written:
// the tables and leases are as before, and the table view is exact.
func TestBadInput(t *testing.T) {
	c := newCluster(t)
	a := c.Join("indexer", "idx-a")
	c.Join("writer", "wr-1")
	fs := c.Join("fileserver", "fs-1")
	table := c.createTable(a, "poison", 2)

	t.Run("admin", func(t *testing.T) {
		before := c.counts()
		c.Kafka.CreateTopic("other", 1, nil)
		cases := []struct {
			name  string
			call  func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error
			code  codes.Code
			field string
		}{
			{"no format", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.CreateTable(ctx, &adminv1.CreateTableRequest{Node: node, Name: "t1", Topic: "other"})
				return err
			}, codes.InvalidArgument, "format"},
			{"bad column type", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.CreateTable(ctx, &adminv1.CreateTableRequest{Node: node, Name: "t2", Topic: "other", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
					Columns: []*adminv1.Column{{Name: "id", Type: "long"}, {Name: "x", Type: "lon"}}})
				return err
			}, codes.InvalidArgument, "columns[1]"},
			{"bad table name", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.CreateTable(ctx, &adminv1.CreateTableRequest{Node: node, Name: "no spaces please", Topic: "other", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW})
				return err
			}, codes.InvalidArgument, "name"},
			{"bad namespace", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.CreateTable(ctx, &adminv1.CreateTableRequest{Node: node, Namespace: "../etc", Name: "t3", Topic: "other", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW})
				return err
			}, codes.InvalidArgument, "namespace"},
			{"unknown topic", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.CreateTable(ctx, &adminv1.CreateTableRequest{Node: node, Name: "t4", Topic: "nope", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW})
				return err
			}, codes.InvalidArgument, "topic"},
			{"bad property", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.CreateTable(ctx, &adminv1.CreateTableRequest{Node: node, Name: "t5", Topic: "other", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
					Properties: map[string]string{"mink.range.max-age": "forever"}})
				return err
			}, codes.InvalidArgument, `properties["mink.range.max-age"]`},
			{"existing table", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.CreateTable(ctx, &adminv1.CreateTableRequest{Node: node, Name: "poison", Topic: "other", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW})
				return err
			}, codes.AlreadyExists, "poison"},
			{"negative table id", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.ListLeases(ctx, &adminv1.ListLeasesRequest{Node: node, TableId: -1})
				return err
			}, codes.InvalidArgument, "table_id"},
			{"drop without a name", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.DropTable(ctx, &adminv1.DropTableRequest{Node: node})
				return err
			}, codes.InvalidArgument, "name"},
			{"describe without a name", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.DescribeTable(ctx, &adminv1.DescribeTableRequest{Node: node})
				return err
			}, codes.InvalidArgument, "name"},
			{"describe an unknown table", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.DescribeTable(ctx, &adminv1.DescribeTableRequest{Node: node, Name: "nope"})
				return err
			}, codes.NotFound, "nope"},
			{"drain without a node", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.DrainNode(ctx, &adminv1.DrainNodeRequest{})
				return err
			}, codes.InvalidArgument, "node"},
			{"unknown node", func(ctx context.Context, cl adminv1.AdminServiceClient, node string) error {
				_, err := cl.GetStatus(ctx, &adminv1.GetStatusRequest{Node: "no-such-node"})
				return err
			}, codes.NotFound, "no-such-node"},
		}
		for _, via := range []string{"", "wr-1"} { // asked of idx-a, and forwarded by idx-a to wr-1
			for _, tc := range cases {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := tc.call(ctx, a.Admin(), via)
				cancel()
				st, _ := status.FromError(err)
				if err == nil || st.Code() != tc.code || !strings.Contains(st.Message(), tc.field) {
					t.Errorf("%s (node %q): %v, want %v naming %s", tc.name, via, err, tc.code, tc.field)
				}
			}
		}
		if after := c.counts(); after != before {
			t.Errorf("refused requests changed the tables: %s, before %s", after, before)
		}
	})

	// Poison records: every one is still a row, its fields null and _mink_error saying why.
	good := func(i int) []byte { return fmt.Appendf(nil, `{"id":%d,"item":"thing %d"}`, i, i) }
	poison := [][]byte{
		[]byte(`{"id":"seven"}`),
		[]byte(`not json at all`),
		[]byte(``),
		nil, // a tombstone
		[]byte(`[1,2,3]`),
		[]byte(`{"item":"no id"}`),
		[]byte(`{"id":1.5}`),
		[]byte(`{"id":123456789012345678901234567890}`),
		[]byte("\xff\xfe\x00\x01binary"),
		[]byte(strings.Repeat("[", 5000)),
		[]byte(`{"id":1,"item":"unterminated`),
		append([]byte(`{"id":2,"item":"`), append([]byte(strings.Repeat("x", 512<<10)), `", "id": null}`...)...),
	}
	prod := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	bad := map[int32]map[int64]bool{0: {}, 1: {}}
	ids := map[int32]map[int64]int64{0: {}, 1: {}}
	n := 0
	for round := 0; round < 3; round++ {
		for p := int32(0); p < 2; p++ {
			for i := 0; i < 5; i++ {
				r := kafkatest.Produce(t, prod, &kgo.Record{Topic: "poison", Partition: p, Value: good(n)})[0]
				ids[p][r.Offset] = int64(n)
				n++
			}
			for _, v := range poison {
				r := kafkatest.Produce(t, prod, &kgo.Record{Topic: "poison", Partition: p, Value: v,
					Headers: []kgo.RecordHeader{{Key: "\xff bad key", Value: []byte{0}}}})[0]
				bad[p][r.Offset] = true
			}
		}
	}
	c.check()
	var rows, decodeErrors int64
	for _, r := range c.ranges(table) {
		rows += r.records
		decodeErrors += r.errors
	}
	if want := int64(len(bad[0]) + len(bad[1])); decodeErrors != want || rows != int64(n)+want {
		t.Errorf("index: %d rows with %d decode errors, want %d rows with %d", rows, decodeErrors, int64(n)+want, want)
	}

	t.Run("poison rows through the catalog", func(t *testing.T) {
		var scanned []row
		waitFor(t, 30*time.Second, "the scan to hold every record", func() (string, bool) {
			rs, err := c.scan(fs, "default", "poison")
			if err != nil {
				return err.Error(), false
			}
			scanned = rs
			return strconv.Itoa(len(rs)) + " rows", int64(len(rs)) == rows
		})
		for _, r := range scanned {
			switch {
			case bad[r.partition][r.offset] && (r.minkErr == "" || r.idValid):
				t.Errorf("poison record %d/%d: id %v (valid %v), _mink_error %q", r.partition, r.offset, r.id, r.idValid, r.minkErr)
			case !bad[r.partition][r.offset] && (r.minkErr != "" || !r.idValid || r.id != ids[r.partition][r.offset]):
				t.Errorf("good record %d/%d: id %v (valid %v), _mink_error %q", r.partition, r.offset, r.id, r.idValid, r.minkErr)
			}
		}
	})

	t.Run("catalog", func(t *testing.T) {
		catURL, _, err := fs.Endpoints()
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			method, path string
			status       int
			typ          string
		}{
			{"GET", "/v1/namespaces/nope/tables/poison", 404, "NoSuchNamespaceException"},
			{"GET", "/v1/namespaces/default/tables/nope", 404, "NoSuchTableException"},
			{"GET", "/v1/namespaces/default%1Fx/tables/poison", 404, "NoSuchNamespaceException"},
			{"GET", "/v1/namespaces/%1F/tables/poison", 400, ""},
			// Traversal: refused in the envelope, never redirected to a cleaned path.
			{"GET", "/v1/namespaces/default/tables/..%2F..%2Fetc%2Fpasswd", 400, "BadRequestException"},
			{"GET", "/v1/namespaces/../../etc/passwd", 400, "BadRequestException"},
			{"GET", "/v1/nothing/here", 404, ""},
			{"POST", "/v1/namespaces/default/tables", 403, "ForbiddenException"},
			{"DELETE", "/v1/namespaces/default/tables/poison", 403, "ForbiddenException"},
			{"POST", "/v1/tables/rename", 406, "UnsupportedOperationException"},
			{"PATCH", "/v1/config", 405, ""},
		}
		for _, tc := range cases {
			r := do(t, tc.method, catURL, tc.path, nil)
			e, ok := icebergError(r.body)
			if r.status != tc.status || !ok || e.Code != tc.status || tc.typ != "" && e.Type != tc.typ {
				t.Errorf("%s %s: %d %s, want %d %s in the Iceberg error envelope", tc.method, tc.path, r.status, r.body, tc.status, tc.typ)
			}
		}
		// The refused delete deleted nothing.
		if r := do(t, "GET", catURL, "/v1/namespaces/default/tables/poison", nil); r.status != 200 {
			t.Errorf("the table does not load after the refused requests: %d %s", r.status, r.body)
		}
	})

	t.Run("S3", func(t *testing.T) {
		_, s3, err := fs.Endpoints()
		if err != nil {
			t.Fatal(err)
		}
		keys := c.dataFiles(table)
		if len(keys) == 0 {
			t.Fatal("no data files")
		}
		key := keys[0]
		whole := do(t, "GET", s3, "/"+layout.Bucket+"/"+key, nil)
		if whole.status != 200 || len(whole.body) == 0 {
			t.Fatalf("GET %s: %d", key, whole.status)
		}
		size := len(whole.body)
		obj := "/" + layout.Bucket + "/" + key
		cases := []struct {
			name, method, path, rng string
			status                  int
			code                    string
		}{
			{"range past the end", "GET", obj, fmt.Sprintf("bytes=%d-", size+10), 416, "InvalidRange"},
			{"overflowing range", "GET", obj, "bytes=99999999999999999999-", 416, "InvalidRange"},
			{"unknown bucket", "GET", "/other/" + key, "", 404, "NoSuchBucket"},
			{"traversal", "GET", "/" + layout.Bucket + "/default/poison/../../../etc/passwd", "", 400, "InvalidArgument"},
			{"encoded traversal", "GET", "/" + layout.Bucket + "/default%2Fpoison%2F..%2F..%2F..%2Fetc%2Fpasswd", "", 400, "InvalidArgument"},
			{"missing key", "GET", "/" + layout.Bucket + "/default/poison/data/nope.parquet", "", 404, "NoSuchKey"},
			{"write", "PUT", obj, "", 405, "MethodNotAllowed"},
			{"bad max-keys", "GET", "/" + layout.Bucket + "?list-type=2&max-keys=lots", "", 400, "InvalidArgument"},
			{"bad continuation token", "GET", "/" + layout.Bucket + "?list-type=2&continuation-token=forged", "", 400, "InvalidArgument"},
		}
		for _, tc := range cases {
			h := map[string]string{}
			if tc.rng != "" {
				h["Range"] = tc.rng
			}
			r := do(t, tc.method, s3, tc.path, h)
			e, ok := s3Error(r.body)
			if r.status != tc.status || !ok || e.Code != tc.code {
				t.Errorf("%s: %s %s (Range %q): %d %s, want %d %s", tc.name, tc.method, tc.path, tc.rng, r.status, r.body, tc.status, tc.code)
			}
		}
		// A 416 says the size; a Range that is not one byte range is ignored, as RFC 9110
		// says: the whole file.
		if r := do(t, "GET", s3, obj, map[string]string{"Range": fmt.Sprintf("bytes=%d-", size+10)}); r.header.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
			t.Errorf("416 Content-Range %q, want bytes */%d", r.header.Get("Content-Range"), size)
		}
		for _, rng := range []string{"bytes=abc", "bytes=10-5", "bytes=0-1,4-5", "items=0-5"} {
			if r := do(t, "GET", s3, obj, map[string]string{"Range": rng}); r.status != 200 || string(r.body) != string(whole.body) {
				t.Errorf("Range %q: %d, %d bytes of %d; want 200 and the whole file", rng, r.status, len(r.body), size)
			}
		}
		// The bucket lists; a listing names each committed file with its recorded size,
		// and no live load's tail file.
		if r := do(t, "GET", s3, "", nil); r.status != 200 || !strings.Contains(string(r.body), "<Name>"+layout.Bucket+"</Name>") {
			t.Errorf("ListBuckets: %d %s", r.status, r.body)
		}
		type dataRow struct {
			key  string
			size int64
			live bool
		}
		dataRows := func() map[string]dataRow {
			rows, err := c.DB.Query(context.Background(), `SELECT key, file_size, live FROM mink_data_files WHERE table_id = $1`, table)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			out := map[string]dataRow{}
			for rows.Next() {
				var d dataRow
				if err := rows.Scan(&d.key, &d.size, &d.live); err != nil {
					t.Fatal(err)
				}
				out[d.key] = d
			}
			return out
		}
		for _, d := range dataRows() {
			r := do(t, "GET", s3, "/"+layout.Bucket+"?list-type=2&prefix="+url.QueryEscape(d.key), nil)
			listed := strings.Contains(string(r.body), "<Key>"+d.key+"</Key>")
			// A commit may name a tail meanwhile (live only ever turns false): a row still
			// live after the listing was live during it.
			stillLive := dataRows()[d.key].live
			if r.status != 200 || !d.live && (!listed || !strings.Contains(string(r.body), fmt.Sprintf("<Size>%d</Size>", d.size))) || stillLive && listed {
				t.Errorf("ListObjectsV2 of %s (a live load's tail: %v, then %v): %d %s", d.key, d.live, stillLive, r.status, r.body)
			}
		}
		// A huge range is the whole file, not a huge allocation.
		r := do(t, "GET", s3, obj, map[string]string{"Range": "bytes=0-9223372036854775806"})
		if r.status != 206 || string(r.body) != string(whole.body) || r.header.Get("Content-Range") != fmt.Sprintf("bytes 0-%d/%d", size-1, size) {
			t.Errorf("huge range: %d, %d bytes of %d, Content-Range %q", r.status, len(r.body), size, r.header.Get("Content-Range"))
		}
		// Nothing landed outside the cache folder, and the file is still served whole.
		filepath.WalkDir(fs.CacheDir(), func(path string, d os.DirEntry, err error) error {
			if err == nil && strings.Contains(path, "passwd") {
				t.Errorf("a traversal wrote %s", path)
			}
			return nil
		})
		if r := do(t, "GET", s3, obj, nil); r.status != 200 || string(r.body) != string(whole.body) {
			t.Errorf("after the bad requests: %d, %d bytes", r.status, len(r.body))
		}
	})
	c.check()
}
