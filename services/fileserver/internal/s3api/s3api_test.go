package s3api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/logging"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/services/fileserver/internal/files"
	"github.com/minkhq/mink/services/fileserver/internal/s3api"
)

const (
	readerSecret = "reader-secret-0123456789"
	adminSecret  = "admin-secret-0123456789"
)

// fakeFiles answers every Open with err, or with body; it counts the calls. List
// answers listing (or err) and keeps the query it was asked.
type fakeFiles struct {
	mu    sync.Mutex
	err   error
	body  func() io.Reader
	size  int64
	calls atomic.Int64

	listing  objects.Listing
	queries  []objects.Query
	readable []func(ns, name string) bool
	lists    atomic.Int64
}

func (f *fakeFiles) List(_ context.Context, q objects.Query, readable func(ns, name string) bool) (objects.Listing, error) {
	f.lists.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	f.readable = append(f.readable, readable)
	if f.err != nil {
		return objects.Listing{}, f.err
	}
	return f.listing, nil
}

func (f *fakeFiles) BucketCreated(context.Context) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC), f.err
}

func (f *fakeFiles) Open(_ context.Context, key string, _ *files.Range, infoOnly bool) (*files.Object, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	obj := &files.Object{Info: files.Info{Size: f.size, Length: f.size, ETag: `"0123"`, LastModified: time.Now(), ServedBy: "fs-a"}}
	if !infoOnly {
		obj.Body = f.body()
	}
	return obj, nil
}

func (f *fakeFiles) set(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// server is the handler on its own listener wrapped by s3api.Listener, as the file
// server runs it.
type server struct {
	url  string
	addr string
	fake *fakeFiles
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, a *auth.Authority) *server {
	t.Helper()
	data := []byte("0123456789abcdefghij")
	fake := &fakeFiles{body: func() io.Reader { return bytes.NewReader(data) }, size: int64(len(data))}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := s3api.New(s3api.Options{Files: fake, Auth: a, Region: "eu-west-1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(s3api.Listener(lis, log)) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return &server{url: "http://" + lis.Addr().String(), addr: lis.Addr().String(), fake: fake, logs: logs}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func authority(t *testing.T) *auth.Authority {
	t.Helper()
	a, err := auth.New(&auth.File{ClusterSecret: strings.Repeat("c", 40), Principals: []auth.PrincipalConfig{
		{ID: "reader", Secret: readerSecret, Role: auth.RoleReader, Tables: []string{"default.*"}},
		{ID: "admin", Secret: adminSecret, Role: auth.RoleAdmin},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type answer struct {
	status int
	header http.Header
	body   []byte
	err    apierr.S3Error
}

func do(t *testing.T, r *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: body}
	if resp.StatusCode >= 300 && len(body) > 0 {
		if err := xml.Unmarshal(body, &a.err); err != nil {
			t.Fatalf("%s %s: %d, not an S3 XML error: %q", r.Method, r.URL, resp.StatusCode, body)
		}
	}
	return a
}

func get(t *testing.T, method, url string, creds *aws.Credentials) answer {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if creds != nil {
		r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err := signer.SignHTTP(context.Background(), *creds, r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return do(t, r)
}

// TestSubresourcesNotImplemented: ?acl and the other subresources are other S3
// operations than GetObject: NotImplemented XML, never the object.
func TestSubresourcesNotImplemented(t *testing.T) {
	for _, a := range []*auth.Authority{nil, authority(t)} {
		s := start(t, a)
		creds := &aws.Credentials{AccessKeyID: "admin", SecretAccessKey: adminSecret}
		if a == nil {
			creds = nil
		}
		obj := s.url + "/mink/default/orders/data/f.parquet"
		for _, q := range []string{"acl", "tagging", "torrent", "policy", "uploads", "versions", "versioning", "retention",
			"legal-hold", "attributes", "restore", "select&select-type=2", "uploadId=1", "partNumber=1", "versionId=3",
			"location", "lifecycle", "cors", "website", "notification", "object-lock"} {
			urls := []string{obj + "?" + q, s.url + "/mink?" + q}
			if q == "location" {
				urls = urls[:1] // of the bucket, it is GetBucketLocation
			}
			for _, url := range urls {
				got := get(t, "GET", url, creds)
				if got.status != 501 || got.err.Code != "NotImplemented" || !strings.Contains(got.err.Message, "subresource") ||
					got.err.RequestID == "" || got.err.RequestID != got.header.Get("X-Amz-Request-Id") {
					t.Errorf("auth %v: GET %s: %d %+v", a != nil, url, got.status, got.err)
				}
			}
			if got := get(t, "HEAD", obj+"?"+q, creds); got.status != 501 || got.header.Get("X-Mink-Error-Code") != "NotImplemented" {
				t.Errorf("HEAD ?%s: %d", q, got.status)
			}
		}
		if n := s.fake.calls.Load(); n != 0 {
			t.Errorf("subresource requests opened %d files", n)
		}
		// What GetObject takes is still GetObject.
		for _, q := range []string{"", "?x-id=GetObject", "?versionId=null", "?response-content-type=text%2Fplain"} {
			if got := get(t, "GET", obj+q, creds); got.status != 200 || string(got.body) != "0123456789abcdefghij" {
				t.Errorf("GET %s: %d %q", q, got.status, got.body)
			}
		}
	}
}

// TestBadURIAndBoundedEcho: a request line net/http cannot parse is an S3 XML 400,
// and no error body repeats a long key.
func TestBadURIAndBoundedEcho(t *testing.T) {
	s := start(t, nil)
	raw := func(request string) (*http.Response, []byte) {
		t.Helper()
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		// Written aside: the server may answer and hang up before taking it all.
		go io.WriteString(c, request)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: %v", request, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	for _, c := range []struct{ request, code string }{
		{"GET /mink/%ZZ HTTP/1.1\r\nHost: x\r\n\r\n", "InvalidURI"},
		{"GET /mink/default/orders/a%2 HTTP/1.1\r\nHost: x\r\n\r\n", "InvalidURI"},
		{"HEAD /mink/%G0 HTTP/1.1\r\nHost: x\r\n\r\n", "InvalidURI"},
		{"GET /mink/x HTTP/1.1\r\n\r\n", "InvalidRequest"}, // no Host
		{"GET /mink/x HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", "InvalidRequest"},
		{"GET /mink/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "NotImplemented"},
	} {
		resp, body := raw(c.request)
		var e apierr.S3Error
		if err := xml.Unmarshal(body, &e); err != nil || e.Code != c.code || resp.Header.Get("Content-Type") != "application/xml" ||
			e.RequestID == "" || resp.Header.Get("X-Amz-Request-Id") != e.RequestID {
			t.Errorf("%q: %d %v %q, want %s XML", c.request, resp.StatusCode, resp.Header, body, c.code)
		}
		if c.code != "NotImplemented" && resp.StatusCode != 400 {
			t.Errorf("%q: status %d", c.request, resp.StatusCode)
		}
	}
	// A huge header section: S3's RequestHeaderSectionTooLarge.
	resp, body := raw("GET /mink/x HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n")
	if e := parseErr(t, body); resp.StatusCode != 400 || e.Code != "RequestHeaderSectionTooLarge" {
		t.Errorf("huge header: %d %+v", resp.StatusCode, e)
	}

	long := "default/orders/" + strings.Repeat("k", 3000)
	got := get(t, "GET", s.url+"/mink/"+long, nil)
	if got.status != 400 || got.err.Code != "KeyTooLongError" || len(got.err.Key) > 1024 || len(got.err.Resource) > 1024 ||
		bytes.Contains(got.body, []byte(strings.Repeat("k", 1100))) {
		t.Errorf("long key: %d %s %d-byte key element, %d-byte body", got.status, got.err.Code, len(got.err.Key), len(got.body))
	}
	got = get(t, "GET", s.url+"/"+strings.Repeat("b", 3000)+"/x", nil)
	if got.status != 404 || got.err.Code != "NoSuchBucket" || len(got.body) > 2048 {
		t.Errorf("long bucket: %d %s, %d-byte body", got.status, got.err.Code, len(got.body))
	}
	if n := s.fake.calls.Load(); n != 0 {
		t.Errorf("refused requests opened %d files", n)
	}
}

func parseErr(t *testing.T, body []byte) apierr.S3Error {
	t.Helper()
	var e apierr.S3Error
	if err := xml.Unmarshal(body, &e); err != nil {
		t.Fatalf("not an S3 XML error: %q", body)
	}
	return e
}

// TestNoInternalsInErrors: a driver's words (SQL, addresses) and paths on the node stay
// in the log, under the request id the answer carries; Mink's own words reach the
// client.
func TestNoInternalsInErrors(t *testing.T) {
	s := start(t, nil)
	key := "default/orders/data/f.parquet"
	pgErr := &pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: `relation "mink_data_files" does not exist`}
	pathErr := &os.PathError{Op: "open", Path: "/var/lib/mink/cache/3f/3f2a.part", Err: syscall.ENOSPC}
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5432}, Err: syscall.ECONNREFUSED}
	kafkaErr := fmt.Errorf("kafkasrc: kafka unavailable: fetch: no answer within 1.5s: unable to dial: %w",
		&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.9.9.9"), Port: 9092}, Err: syscall.ECONNREFUSED})
	for _, c := range []struct {
		name        string
		err         error
		status      int
		code, want  string
		mustNotSay  []string
		wantLogged  string
		notInternal bool
	}{
		{"an unclassified failure", fmt.Errorf("build %s: %w", key, &os.PathError{Op: "rename", Path: "/var/lib/mink/cache/3f/3f2a.part", Err: errors.New("odd")}),
			500, "InternalError", "internal error", []string{"/var/lib", "3f2a", "odd"}, "/var/lib/mink/cache/3f/3f2a.part", false},
		{"a full disk", apierr.Wrap(apierr.Unavailable, pathErr, "cannot build %s now: this node's cache cannot be written", key), 503, "ServiceUnavailable", "cannot build " + key,
			[]string{"/var/lib", "3f2a", "no space"}, "/var/lib/mink/cache/3f/3f2a.part", true},
		{"sql", apierr.Postgres(pgErr, "look up %s", key), 500, "InternalError", "look up " + key + ": postgres answered an error",
			[]string{"SQLSTATE", "relation", "mink_data_files"}, "SQLSTATE 42P01", false},
		{"sql formatted into a text", fmt.Errorf("SELECT size FROM mink_data_files WHERE key = $1: %v", pgErr), 500, "InternalError", "internal error",
			[]string{"SQLSTATE", "relation", "mink_data_files", "SELECT"}, "SQLSTATE 42P01", false},
		{"sql, not raised as Mink's", fmt.Errorf("look up file %s: %w", key, pgErr), 500, "InternalError", "internal error",
			[]string{"SQLSTATE", "relation", "mink_data_files", "look up"}, "SQLSTATE 42P01", false},
		{"postgres down", apierr.Wrap(apierr.Unavailable, fmt.Errorf("failed to connect to `user=mink database=mink`: %w", dialErr),
			"look up file %s: postgres is unavailable", key), 503, "ServiceUnavailable", "look up file " + key + ": postgres is unavailable",
			[]string{"10.1.2.3", "user=", "failed to connect"}, "10.1.2.3", true},
		// Another node's answers: what its door rendered is told as it is; a status no
		// node rendered (gRPC's own, of a call that failed on its way) keeps its code,
		// not its words.
		{"kafka down, from another node", apierr.GRPC(apierr.Wrap(apierr.Unavailable, kafkaErr,
			"cannot build %s from topic \"orders\" partition 0 offsets [0, 15): kafka is unavailable", key)),
			503, "ServiceUnavailable", "kafka is unavailable", []string{"10.9.9.9", "dial tcp", "connection refused"}, "", true},
		{"a path from another node", apierr.GRPC(apierr.Wrap(apierr.ResourceExhausted, pathErr, "no cache space to build %s now", key)),
			503, "SlowDown", "no cache space to build " + key, []string{"/var/lib"}, "", true},
		{"sql from another node", apierr.GRPC(apierr.Wrap(apierr.NotFound, pgErr, "no file %s", key)),
			404, "NoSuchKey", "no file " + key, []string{"SQLSTATE", "relation"}, "", true},
		{"a status no node rendered", status.Error(codes.Unavailable, "connection error: desc = transport: dial tcp 10.9.9.9:7070: connect: connection refused"),
			503, "ServiceUnavailable", "unavailable (the file server's log has the cause", []string{"10.9.9.9", "dial tcp", "connection refused"}, "10.9.9.9", true},
		{"bytes that differ", apierr.DataLossErr(errors.New("sha256 3013abc, recorded def"), "the file cannot be served now; retry"),
			503, "SlowDown", "cannot be served now", []string{"sha256", "3013abc", "recorded def"}, "recorded def", true},
		{"not found", apierr.New(apierr.NotFound, "no file %s in bucket mink", key), 404, "NoSuchKey", "no file " + key + " in bucket mink", nil, "", true},
	} {
		s.fake.set(c.err)
		got := get(t, "GET", s.url+"/mink/"+key, nil)
		if got.status != c.status || got.err.Code != c.code || !strings.Contains(got.err.Message, c.want) || got.err.Key != key {
			t.Errorf("%s: %d %+v, want %d %s %q", c.name, got.status, got.err, c.status, c.code, c.want)
		}
		for _, bad := range c.mustNotSay {
			if bytes.Contains(got.body, []byte(bad)) {
				t.Errorf("%s: the body says %q: %s", c.name, bad, got.body)
			}
		}
		id := got.header.Get("X-Amz-Request-Id")
		if got.err.RequestID != id || id == "" {
			t.Errorf("%s: request ids %q and %q", c.name, got.err.RequestID, id)
		}
		if c.wantLogged != "" {
			var line string
			for l := range strings.SplitSeq(s.logs.String(), "\n") {
				if strings.Contains(l, "request_id="+id) && strings.Contains(l, "s3 read failed") {
					line = l
				}
			}
			if !strings.Contains(line, c.wantLogged) {
				t.Errorf("%s: the log has no line with request id %s and %q:\n%s", c.name, id, c.wantLogged, s.logs.String())
			}
		}
	}
}

// TestBodiesNotRead: a request that is not GET or HEAD is answered at once, its body
// not awaited nor read, and its connection closed; with auth on, an unsigned one is
// refused the same way.
func TestBodiesNotRead(t *testing.T) {
	for _, a := range []*auth.Authority{nil, authority(t)} {
		s := start(t, a)
		for _, method := range []string{"PUT", "POST", "DELETE"} {
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			// 50 MB announced, not one byte sent: the answer must not wait for them.
			fmt.Fprintf(c, "%s /mink/default/orders/f HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n", method)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want, code := 405, "MethodNotAllowed"
			if a != nil {
				want, code = 403, "AccessDenied"
			}
			if e := parseErr(t, body); resp.StatusCode != want || e.Code != code || !resp.Close {
				t.Errorf("auth %v, %s with a body: %d %s, close %v", a != nil, method, resp.StatusCode, e.Code, resp.Close)
			}
			// The server hung up: what the client goes on sending goes nowhere.
			c.Write(make([]byte, 1<<20))
			if _, err := br.ReadByte(); err == nil {
				t.Errorf("%s: the connection stayed open", method)
			}
			c.Close()
		}
		if n := s.fake.calls.Load(); n != 0 {
			t.Errorf("opened %d files", n)
		}
	}
}

// TestAuthorization: with auth on, nothing is opened for a request that is not signed,
// or by a principal that may not read the key's table.
func TestAuthorization(t *testing.T) {
	a := authority(t)
	s := start(t, a)
	reader := &aws.Credentials{AccessKeyID: "reader", SecretAccessKey: readerSecret}
	admin := &aws.Credentials{AccessKeyID: "admin", SecretAccessKey: adminSecret}
	p, _ := a.Secret("reader", readerSecret)
	vended, err := a.Vend(p, "default", "orders")
	if err != nil {
		t.Fatal(err)
	}
	v := &aws.Credentials{AccessKeyID: vended.AccessKeyID, SecretAccessKey: vended.SecretAccessKey, SessionToken: vended.SessionToken}
	wrong := &aws.Credentials{AccessKeyID: "reader", SecretAccessKey: adminSecret}
	for _, c := range []struct {
		name   string
		method string
		path   string
		creds  *aws.Credentials
		status int
		code   string
	}{
		{"unsigned GET", "GET", "/mink/default/orders/f", nil, 403, "AccessDenied"},
		{"unsigned HEAD bucket", "HEAD", "/mink", nil, 403, ""},
		{"unsigned listing", "GET", "/mink?list-type=2", nil, 403, "AccessDenied"},
		{"unsigned list buckets", "GET", "/", nil, 403, "AccessDenied"},
		{"unsigned, another bucket", "GET", "/other/x", nil, 403, "AccessDenied"},
		{"wrong secret", "GET", "/mink/default/orders/f", wrong, 403, "SignatureDoesNotMatch"},
		{"reader, outside its tables", "GET", "/mink/sales/orders/f", reader, 403, "AccessDenied"},
		{"reader, no table in the key", "GET", "/mink/default", reader, 403, "AccessDenied"},
		{"vended, another table", "GET", "/mink/default/refunds/f", v, 403, "AccessDenied"},
		{"vended, another table by an encoded slash", "GET", "/mink/default%2Frefunds%2Ff", v, 403, "AccessDenied"},
		{"vended, a traversal", "GET", "/mink/default/orders/../refunds/f", v, 400, "InvalidArgument"},
		{"reader", "GET", "/mink/default/orders/f", reader, 200, ""},
		{"vended", "GET", "/mink/default/orders/f", v, 200, ""},
		{"vended, HEAD bucket", "HEAD", "/mink", v, 200, ""},
		{"admin, any table", "GET", "/mink/sales/orders/f", admin, 200, ""},
		{"admin, another bucket", "GET", "/other/x", admin, 404, "NoSuchBucket"},
	} {
		before := s.fake.calls.Load()
		if c.code == "InvalidArgument" {
			s.fake.set(files.ValidKey("default/orders/../refunds/f"))
		} else {
			s.fake.set(nil)
		}
		got := get(t, c.method, s.url+c.path, c.creds)
		if got.status != c.status || got.err.Code != c.code {
			t.Errorf("%s: %d %+v, want %d %s", c.name, got.status, got.err, c.status, c.code)
		}
		opened := s.fake.calls.Load() - before
		if wantOpen := c.status == 200 && c.path != "/mink" || c.code == "InvalidArgument"; (opened == 1) != wantOpen {
			t.Errorf("%s: opened %d files", c.name, opened)
		}
	}
}

// TestListenerKeepsSendfile: a cache file's body goes through the wrapped connection
// whole, by its ReadFrom, and the connection stays usable.
func TestListenerKeepsSendfile(t *testing.T) {
	s := start(t, nil)
	data := bytes.Repeat([]byte("parquet!"), 1<<17) // 1 MiB
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s.fake.mu.Lock()
	s.fake.size = int64(len(data))
	s.fake.body = func() io.Reader {
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
			return nil
		}
		t.Cleanup(func() { f.Close() })
		return &io.LimitedReader{R: f, N: int64(len(data))}
	}
	s.fake.mu.Unlock()
	for range 3 { // one kept-alive connection
		got := get(t, "GET", s.url+"/mink/default/orders/f", nil)
		if got.status != 200 || !bytes.Equal(got.body, data) {
			t.Fatalf("%d, %d bytes of %d", got.status, len(got.body), len(data))
		}
	}
}

// TestSignatureErrorsTellTheSigner: a SignatureDoesNotMatch carries, as S3's does, the
// string to sign and canonical request the server made of the request: the ones
// aws-sdk-go-v2's signer made (it logs them) when the only fault is the secret. Nothing
// secret is in the body. Vended keys sent without their session token are refused
// saying so.
func TestSignatureErrorsTellTheSigner(t *testing.T) {
	a := authority(t)
	s := start(t, a)
	var canonical, toSign string
	signer := v4.NewSigner(func(o *v4.SignerOptions) {
		o.DisableURIPathEscaping = true
		o.LogSigning = true
		o.Logger = logging.LoggerFunc(func(_ logging.Classification, _ string, v ...any) {
			canonical, toSign = v[0].(string), v[1].(string)
		})
	})
	r, err := http.NewRequest("GET", s.url+"/mink/default/orders/data/f.parquet?x-id=GetObject", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	wrong := aws.Credentials{AccessKeyID: "reader", SecretAccessKey: adminSecret}
	if err := signer.SignHTTP(context.Background(), wrong, r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	authz := r.Header.Get("Authorization")
	got := do(t, r)
	e := got.err
	if got.status != 403 || e.Code != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %d %s", got.status, got.body)
	}
	if canonical == "" || toSign == "" {
		t.Fatal("the signer logged no canonical request")
	}
	if e.CanonicalRequest != canonical || e.StringToSign != toSign {
		t.Errorf("the server's canonical request and string to sign differ from the signer's:\n%q\n%q\nsigner:\n%q\n%q",
			e.CanonicalRequest, e.StringToSign, canonical, toSign)
	}
	if e.AWSAccessKeyID != "reader" || !strings.HasSuffix(authz, "Signature="+e.SignatureProvided) || len(e.SignatureProvided) != 64 {
		t.Errorf("access key id %q, signature provided %q; the request's Authorization: %s", e.AWSAccessKeyID, e.SignatureProvided, authz)
	}
	if want := fmt.Sprintf("% x", e.StringToSign); e.StringToSignBytes != want {
		t.Errorf("StringToSignBytes %q, want %q", e.StringToSignBytes, want)
	}
	if want := fmt.Sprintf("% x", e.CanonicalRequest); e.CanonicalRequestBytes != want {
		t.Errorf("CanonicalRequestBytes %q, want %q", e.CanonicalRequestBytes, want)
	}
	for _, secret := range []string{readerSecret, adminSecret, strings.Repeat("c", 40)} {
		if bytes.Contains(got.body, []byte(secret)) {
			t.Errorf("the error body holds a secret: %s", got.body)
		}
	}
	// A right signature answers none of it.
	if got := get(t, "GET", s.url+"/mink/default/orders/f", &aws.Credentials{AccessKeyID: "reader", SecretAccessKey: readerSecret}); got.status != 200 {
		t.Errorf("the reader's own secret: %d %s", got.status, got.body)
	}

	// Vended keys without their session token: S3's code, and what is missing.
	p, _ := a.Secret("reader", readerSecret)
	vended, err := a.Vend(p, "default", "orders")
	if err != nil {
		t.Fatal(err)
	}
	got = get(t, "GET", s.url+"/mink/default/orders/f", &aws.Credentials{AccessKeyID: vended.AccessKeyID, SecretAccessKey: vended.SecretAccessKey})
	if got.status != 403 || got.err.Code != "InvalidAccessKeyId" || !strings.Contains(got.err.Message, "no session token") ||
		!strings.Contains(got.err.Message, "X-Amz-Security-Token") || strings.Contains(got.err.Message, "does not exist") {
		t.Errorf("vended keys without the session token: %d %+v", got.status, got.err)
	}
	// A key of no principal and not of the vended shape (one character more) is unknown.
	for _, id := range []string{"nobody", vended.AccessKeyID + "A"} {
		got = get(t, "GET", s.url+"/mink/default/orders/f", &aws.Credentials{AccessKeyID: id, SecretAccessKey: readerSecret})
		if got.status != 403 || got.err.Code != "InvalidAccessKeyId" || !strings.Contains(got.err.Message, "does not exist") {
			t.Errorf("unknown key %s: %d %+v", id, got.status, got.err)
		}
	}
}

// TestRequestIDs: the S3 door names each request with apierr.RequestID (which never
// holds "301": see its test), in the header and the error body alike.
func TestRequestIDs(t *testing.T) {
	s := start(t, nil)
	shape := regexp.MustCompile(`^[0-9A-F]{16}$`)
	seen := map[string]bool{}
	for range 20 {
		got := get(t, "GET", s.url+"/nobucket/k", nil)
		id := got.header.Get("X-Amz-Request-Id")
		if !shape.MatchString(id) || seen[id] || got.err.RequestID != id {
			t.Fatalf("request id %q, in the body %q", id, got.err.RequestID)
		}
		seen[id] = true
	}
}
