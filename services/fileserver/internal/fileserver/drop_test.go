package fileserver_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/tables"
)

// A dropped table's files (data, manifest lists, manifests, metadata JSON) answer 404 from
// every file server, owner and not, within a second of the drop (the file servers' own
// look at the tables comes every 5s, so only the drop's notification can do it), and leave
// the caches; a table created again under the same name over the same topic is served
// only its own files: a key it shares with the old table is built anew, never the old
// table's cached bytes.
func TestDroppedTableIsNotServed(t *testing.T) {
	e := newEnv(t, envOptions{})
	nodes := e.startNodes(2)
	oldMeta := e.metaKeys()
	oldData := e.files
	keys := append(dataKeys(oldData), oldMeta...)
	for _, n := range nodes {
		for _, f := range oldData {
			resp, body := get(t, http.MethodGet, objectURL(n, f.key), nil)
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, f.bytes) {
				t.Fatalf("GET %s via %s before the drop: %s", f.key, n.id, resp.Status)
			}
		}
		for _, k := range oldMeta {
			if resp, _ := get(t, http.MethodGet, objectURL(n, k), nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s via %s before the drop: %s", k, n.id, resp.Status)
			}
		}
	}
	if c := e.cachedFiles(nodes); c != len(keys) {
		t.Fatalf("%d files cached before the drop, want %d (each at its owner)", c, len(keys))
	}

	if err := tables.Drop(e.ctx, e.db, ns, tableName); err != nil {
		t.Fatal(err)
	}
	dropped := time.Now()
	await.For(t, 2*time.Second, "every GET of the dropped table's files to answer 404", func() (string, bool) {
		for _, n := range nodes {
			for _, k := range keys {
				if resp, _ := get(t, http.MethodGet, objectURL(n, k), nil); resp.StatusCode != http.StatusNotFound {
					return fmt.Sprintf("GET %s via %s: %s (%s)", k, n.id, resp.Status, resp.Header.Get("X-Mink-Cache")), false
				}
			}
		}
		return "", true
	})
	if d := time.Since(dropped); d > time.Second {
		t.Errorf("the dropped table's files were served for %v after the drop", d)
	}
	if c := e.cachedFiles(nodes); c != 0 {
		t.Errorf("%d files of the dropped table still cached", c)
	}
	for _, n := range nodes {
		for _, k := range keys {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				resp, body := get(t, method, objectURL(n, k), nil)
				if resp.StatusCode != http.StatusNotFound || method == http.MethodGet && s3Error(t, body).Code != "NoSuchKey" {
					t.Errorf("%s %s via %s after the drop: %s %s", method, k, n.id, resp.Status, body)
				}
			}
		}
	}
	if c := e.cachedFiles(nodes); c != 0 {
		t.Errorf("%d files cached after reads of the dropped table", c)
	}

	// The same table again, over the same topic: its data files have the same keys (the
	// same bytes); its metadata files new ones.
	e.files = nil
	e.commit()
	for _, n := range nodes {
		for _, k := range oldMeta {
			if resp, _ := get(t, http.MethodGet, objectURL(n, k), nil); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s (the old table's metadata) via %s after the table was created again: %s", k, n.id, resp.Status)
			}
		}
	}
	for i, f := range e.files {
		own, other := e.owner(f.key)
		n := []*node{own, other}[i%2]
		// Answered 404 for up to the miss TTL (2s) after the reads above found nothing.
		resp := await.For(t, 10*time.Second, "GET "+f.key+" of the new table", func() (*http.Response, bool) {
			resp, body := get(t, http.MethodGet, objectURL(n, f.key), nil)
			if resp.StatusCode == http.StatusOK && !bytes.Equal(body, f.bytes) {
				t.Errorf("GET %s of the new table via %s: other bytes", f.key, n.id)
			}
			return resp, resp.StatusCode != http.StatusNotFound
		})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s of the new table via %s: %s", f.key, n.id, resp.Status)
		}
		if c := resp.Header.Get("X-Mink-Cache"); c != "miss" {
			t.Errorf("GET %s of the new table via %s: first read a cache %s: an old table's cached bytes?", f.key, n.id, c)
		}
	}
	rows, err := e.scan(nodes[1])
	if err != nil || len(rows) != len(e.rows) {
		t.Errorf("scan of the new table: %d rows, %v; want %d", len(rows), err, len(e.rows))
	}
}

// With auth on, a reader of default.* reads the table's files, and nothing of them once
// the table is dropped, from any node.
func TestDroppedTableIsNotServedToAReader(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := saAuthority(t)
	nodes := []*node{e.startNode("fs-a", nodeOptions{auth: a}), e.startNode("fs-b", nodeOptions{auth: a})}
	e.waitMembers(nodes)
	keys := append(dataKeys(e.files), e.metaKeys()...)
	read := func(n *node, key string) (int, error) {
		out, err := saClient(n, saKeys("etl", saEtlSecret, "")).GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("mink"), Key: aws.String(key)})
		if err != nil {
			return 0, err
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		return len(b), err
	}
	for _, n := range nodes {
		for _, k := range keys {
			if _, err := read(n, k); err != nil {
				t.Fatalf("the reader GETs %s via %s: %v", k, n.id, err)
			}
		}
	}
	if err := tables.Drop(e.ctx, e.db, ns, tableName); err != nil {
		t.Fatal(err)
	}
	await.For(t, 2*time.Second, "the reader's GETs of the dropped table's files to fail", func() (string, bool) {
		for _, n := range nodes {
			for _, k := range keys {
				if got, err := read(n, k); err == nil {
					return fmt.Sprintf("%s via %s: %d bytes", k, n.id, got), false
				}
			}
		}
		return "", true
	})
	for _, n := range nodes {
		for _, k := range keys {
			got, err := read(n, k)
			code, status := saCode(err)
			if err == nil || status != http.StatusNotFound || code != "NoSuchKey" {
				t.Errorf("the reader GETs %s via %s after the drop: %d bytes, %v", k, n.id, got, errors.Unwrap(err))
			}
		}
	}
}

func dataKeys(fs []dataFile) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.key)
	}
	return out
}

// metaKeys are the current table's metadata files: metadata JSON, manifest lists,
// manifests.
func (e *env) metaKeys() []string {
	e.t.Helper()
	rows, err := e.db.Query(e.ctx, `SELECT key FROM mink_meta_files WHERE table_id = $1 ORDER BY key`, e.table.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var k string
		rows.Scan(&k)
		out = append(out, k)
	}
	if rows.Err() != nil || len(out) < 3 {
		e.t.Fatalf("metadata files %v: %v", out, rows.Err())
	}
	return out
}

// cachedFiles is how many files the nodes' caches hold together.
func (e *env) cachedFiles(nodes []*node) int {
	n := 0
	for _, nd := range nodes {
		_, cs := nd.srv.Stats()
		n += cs.Files
	}
	return n
}

// A file the writer collects (its row deleted while the table lives on) answers 404 from
// every node within a second and leaves the cache; the table's other files are served
// from the cache as before.
func TestCollectedFileIsNotServed(t *testing.T) {
	e := newEnv(t, envOptions{})
	nodes := e.startNodes(2)
	for _, n := range nodes {
		for _, f := range e.files {
			if resp, _ := get(t, http.MethodGet, objectURL(n, f.key), nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s via %s: %s", f.key, n.id, resp.Status)
			}
		}
	}
	gone, kept := e.files[0], e.files[1]
	if _, err := e.db.Exec(e.ctx, `DELETE FROM mink_data_files WHERE key = $1`, gone.key); err != nil {
		t.Fatal(err)
	}
	collected := time.Now()
	await.For(t, 2*time.Second, "GETs of the collected file to answer 404", func() (string, bool) {
		for _, n := range nodes {
			if resp, _ := get(t, http.MethodGet, objectURL(n, gone.key), nil); resp.StatusCode != http.StatusNotFound {
				return n.id + ": " + resp.Status, false
			}
		}
		return "", true
	})
	if d := time.Since(collected); d > time.Second {
		t.Errorf("the collected file was served for %v after it was collected", d)
	}
	if c := e.cachedFiles(nodes); c != len(e.files)-1 {
		t.Errorf("%d files cached, want %d: the collected one gone, the others kept", c, len(e.files)-1)
	}
	resp, body := get(t, http.MethodGet, objectURL(nodes[0], kept.key), nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, kept.bytes) || resp.Header.Get("X-Mink-Cache") != "hit" {
		t.Errorf("GET %s (not collected): %s, cache %s", kept.key, resp.Status, resp.Header.Get("X-Mink-Cache"))
	}
}
