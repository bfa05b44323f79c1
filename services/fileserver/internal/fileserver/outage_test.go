package fileserver_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/minkhq/mink/pkg/lease/leasetest"
)

// TestPostgresOutage is the seed's failure row "Postgres is unreachable: table loads, and
// reads of data files not in the owner's cache, answer 503. Cached files are still
// served. Once Postgres answers, ... without a restart."
func TestPostgresOutage(t *testing.T) {
	e := newEnv(t, envOptions{privatePostgres: true})
	nodes := e.startNodes(2)
	a, b := nodes[0], nodes[1]
	// Warm: a file owned by b and one owned by a, both read through a.
	fb, fa := e.fileOwnedBy(b), e.fileOwnedBy(a)
	for _, f := range []dataFile{fb, fa} {
		if resp, body := get(t, "GET", objectURL(a, f.key), nil); resp.StatusCode != 200 || !bytes.Equal(body, f.bytes) {
			t.Fatalf("warm %s: %d", f.key, resp.StatusCode)
		}
	}
	var uncached dataFile
	for _, f := range e.files {
		if f.key != fa.key && f.key != fb.key {
			uncached = f
			break
		}
	}

	if err := e.pg.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, n := range nodes {
		// Table loads: 503 in the Iceberg envelope; iceberg-go sees a 503.
		resp, body := get(t, "GET", n.catalog+"/v1/namespaces/default/tables/orders", nil)
		if ie := icebergError(t, body); resp.StatusCode != 503 || ie.Type != "ServiceUnavailableException" || !strings.Contains(ie.Message, "postgres") {
			t.Errorf("%s: load while Postgres is down: %d %+v", n.id, resp.StatusCode, ie)
		}
		if _, err := e.catalogClient(n).LoadTable(e.ctx, table.Identifier{ns, tableName}); !errors.Is(err, rest.ErrServiceUnavailable) {
			t.Errorf("%s: iceberg-go load while Postgres is down: %v, want ErrServiceUnavailable", n.id, err)
		}
		// An uncached file: 503 ServiceUnavailable naming Postgres, from its owner.
		resp, body = get(t, "GET", objectURL(n, uncached.key), nil)
		if se := s3Error(t, body); resp.StatusCode != 503 || se.Code != "ServiceUnavailable" || !strings.Contains(se.Message, "postgres") {
			t.Errorf("%s: uncached read while Postgres is down: %d %+v", n.id, resp.StatusCode, se)
		}
		// A listing reads Postgres: 503 naming it, without the driver's words.
		resp, body = get(t, "GET", n.s3+"/mink?list-type=2", nil)
		if se := s3Error(t, body); resp.StatusCode != 503 || se.Code != "ServiceUnavailable" || !strings.Contains(se.Message, "postgres is unavailable") ||
			strings.Contains(se.Message, "127.0.0.1") || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: listing while Postgres is down: %d %+v", n.id, resp.StatusCode, se)
		}
		// Cached files, whichever node the read lands on: served, from the owner.
		for _, f := range []dataFile{fb, fa} {
			resp, body := get(t, "GET", objectURL(n, f.key), map[string]string{"Range": "bytes=4-"})
			if resp.StatusCode != 206 || !bytes.Equal(body, f.bytes[4:]) || resp.Header.Get("X-Mink-Cache") != "hit" {
				t.Errorf("%s: cached read of %s while Postgres is down: %d, cache %q", n.id, f.key, resp.StatusCode, resp.Header.Get("X-Mink-Cache"))
			}
		}
	}
	t.Logf("answers while Postgres was down took %v", time.Since(start))

	if err := e.pg.Start(); err != nil {
		t.Fatal(err)
	}
	// Nothing restarts: the same nodes serve everything again.
	leasetest.Eventually(t, 20*time.Second, "loads to work again", func() bool {
		resp, _ := get(t, "GET", a.catalog+"/v1/namespaces/default/tables/orders", nil)
		return resp.StatusCode == 200
	})
	e.waitMembers(nodes)
	if resp, body := get(t, "GET", objectURL(a, uncached.key), nil); resp.StatusCode != 200 || !bytes.Equal(body, uncached.bytes) {
		t.Errorf("uncached read after Postgres is back: %d", resp.StatusCode)
	}
	if resp, body := get(t, "GET", b.s3+"/mink?list-type=2", nil); resp.StatusCode != 200 || !bytes.Contains(body, []byte("<Key>"+uncached.key+"</Key>")) {
		t.Errorf("listing after Postgres is back: %d %s", resp.StatusCode, body)
	}
	for _, n := range nodes {
		got, err := e.scan(n)
		if err != nil || !slices.Equal(got, e.rows) {
			t.Errorf("scan through %s after Postgres is back: %d rows, %v", n.id, len(got), err)
		}
	}
}

// TestKafkaOutage is the seed's "Kafka is unreachable: Table loads, builds and indexing
// fail until Kafka answers. Cached data files are still served." Loads are live (they
// read Kafka's last stable offsets): 503 naming Kafka. TestLiveLoadKafkaOutage has more.
func TestKafkaOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{persistentKafka: true})
	nodes := e.startNodes(2)
	a, b := nodes[0], nodes[1]
	fb := e.fileOwnedBy(b)
	if resp, _ := get(t, "GET", objectURL(a, fb.key), nil); resp.StatusCode != 200 {
		t.Fatalf("warm: %d", resp.StatusCode)
	}
	var uncached []dataFile
	for _, f := range e.files {
		if f.key != fb.key {
			uncached = append(uncached, f)
		}
	}

	e.kafka.Stop()
	for _, n := range nodes {
		for _, f := range uncached[:2] {
			start := time.Now()
			resp, body := get(t, "GET", objectURL(n, f.key), nil)
			se := s3Error(t, body)
			if resp.StatusCode != 503 || se.Code != "ServiceUnavailable" || !strings.Contains(se.Message, "kafka is unavailable") || !strings.Contains(se.Message, f.key) {
				t.Errorf("%s: uncached read while Kafka is down: %d %+v", n.id, resp.StatusCode, se)
			}
			t.Logf("503 after %v: %s", time.Since(start), se.Message)
		}
		resp, body := get(t, "GET", objectURL(n, fb.key), nil)
		if resp.StatusCode != 200 || !bytes.Equal(body, fb.bytes) {
			t.Errorf("%s: cached read while Kafka is down: %d", n.id, resp.StatusCode)
		}
		// Metadata files come from Postgres: still served, so an engine that loaded the
		// table before can still plan its scan.
		if resp, _ := get(t, "GET", objectURL(n, e.metaKey), nil); resp.StatusCode != 200 {
			t.Errorf("%s: metadata file while Kafka is down: %d", n.id, resp.StatusCode)
		}
		// Table loads: 503 in the Iceberg envelope, naming Kafka.
		resp, body = get(t, "GET", n.catalog+"/v1/namespaces/default/tables/orders", nil)
		if ie := icebergError(t, body); resp.StatusCode != 503 || ie.Type != "ServiceUnavailableException" || !strings.Contains(ie.Message, "kafka is unavailable") {
			t.Errorf("%s: load while Kafka is down: %d %+v", n.id, resp.StatusCode, ie)
		}
	}
	if got := counter(t, b, "mink.fileserver.build_failures", map[string]string{"reason": "unavailable"}) +
		counter(t, a, "mink.fileserver.build_failures", map[string]string{"reason": "unavailable"}); got == 0 {
		t.Error("no build failure counted")
	}

	e.kafka.Restart()
	leasetest.Eventually(t, 20*time.Second, "builds to work again", func() bool {
		resp, body := get(t, "GET", objectURL(a, uncached[0].key), nil)
		return resp.StatusCode == 200 && bytes.Equal(body, uncached[0].bytes)
	})
	for _, n := range nodes {
		got, err := e.scan(n)
		if err != nil || !slices.Equal(got, e.rows) {
			t.Errorf("scan through %s after Kafka is back: %d rows, %v", n.id, len(got), err)
		}
	}
}

// repairingAnswer checks the answer to a read of a file the writer is replacing: 503
// SlowDown with Retry-After, as S3 clients retry it, and a message naming the cause in
// words only: no key, offset or digest (they are in the log and the problem row).
func repairingAnswer(t *testing.T, what string, resp *http.Response, body []byte, cause string) {
	t.Helper()
	se := s3Error(t, body)
	if resp.StatusCode != 503 || se.Code != "SlowDown" || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(se.Message, cause) || !strings.Contains(se.Message, "retry") {
		t.Errorf("%s: %d %+v, Retry-After %q; want 503 SlowDown naming %q", what, resp.StatusCode, se, resp.Header.Get("Retry-After"), cause)
	}
	if m := regexp.MustCompile(`[0-9a-f]{16}|[0-9]{3}|/`).FindString(se.Message); m != "" {
		t.Errorf("%s: the message says %q: %q", what, m, se.Message)
	}
}

// TestRebuiltBytesDiffer: a file whose rebuild differs from what indexing recorded is
// never served: the topic compacted after indexing, a recorded checksum that does not
// match, offsets Kafka deleted. Each read is answered 503 SlowDown, through the owner or
// not, while the writer replaces the file it is reported for.
func TestRebuiltBytesDiffer(t *testing.T) {
	t.Parallel()
	t.Run("compacted", func(t *testing.T) {
		e := newEnv(t, envOptions{compacted: true})
		e.startNodes(2)
		e.kafka.Compact()
		f := e.files[0]
		own, other := e.owner(f.key)
		for _, n := range []*node{other, own} {
			resp, body := get(t, "GET", objectURL(n, f.key), nil)
			repairingAnswer(t, "read via "+n.id+" of a compacted file", resp, body, "compaction")
			if resp, _ := get(t, "HEAD", objectURL(n, f.key), nil); resp.StatusCode != 503 || resp.Header.Get("X-Mink-Error-Code") != "SlowDown" {
				t.Errorf("HEAD via %s of a compacted file: %d", n.id, resp.StatusCode)
			}
		}
		// One build found it out; later reads are refused without rebuilding.
		if got := counter(t, own, "mink.fileserver.build_failures", map[string]string{"reason": "mismatch"}); got != 1 {
			t.Errorf("mismatched builds: %d, want 1", got)
		}
		if got := counter(t, own, "mink.fileserver.files_reported", map[string]string{"reason": "mismatch"}); got != 1 {
			t.Errorf("files reported: %d, want 1", got)
		}
		var reason, detail, by string
		if err := e.db.QueryRow(e.ctx, `SELECT reason, detail, reported_by FROM mink_file_problems WHERE key = $1`, f.key).Scan(&reason, &detail, &by); err != nil {
			t.Fatalf("no problem row for %s: %v", f.key, err)
		}
		if reason != "mismatch" || by != own.id || !strings.Contains(detail, "sha256") {
			t.Errorf("problem row: %s %s %q", reason, by, detail)
		}
	})

	t.Run("checksum and deleted offsets", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		nodes := e.startNodes(2)
		// A recorded checksum that is not what Kafka yields.
		g := e.files[0]
		bad := strings.Repeat("ab", 32)
		if _, err := e.db.Exec(e.ctx, `UPDATE mink_data_files SET sha256 = $2 WHERE key = $1`, g.key, bad); err != nil {
			t.Fatal(err)
		}
		resp, body := get(t, "GET", objectURL(nodes[0], g.key), nil)
		repairingAnswer(t, "tampered checksum", resp, body, "compaction")

		// Offsets Kafka deleted (retention, DeleteRecords): the file cannot be built.
		h := e.files[len(e.files)-1] // partition 1's last range
		adm := kadm.NewClient(e.kafka.Client())
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: tableName, Partition: h.partition, At: h.end})
		if _, err := adm.DeleteRecords(ctx, offs); err != nil {
			t.Fatal(err)
		}
		resp, body = get(t, "GET", objectURL(nodes[1], h.key), nil)
		repairingAnswer(t, "deleted offsets", resp, body, "retention")
		rows, err := e.db.Query(e.ctx, `SELECT key || ' ' || reason FROM mink_file_problems ORDER BY reason`)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		if want := []string{g.key + " mismatch", h.key + " offsets_gone"}; !slices.Equal(got, want) {
			t.Errorf("problem rows %v, want %v", got, want)
		}
	})
}
