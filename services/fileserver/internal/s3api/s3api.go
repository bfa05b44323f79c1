// Package s3api is the S3 API of a file server, path-style, as S3-compatible clients
// (iceberg-go's, Spark's S3A, Trino's, PyIceberg's, DuckDB's, aws-cli) send it, over the
// one bucket, "mink": reads of every file a snapshot names and listings of the committed
// ones, every request checked by pkg/auth when auth is on.
//
// Design notes: docs/design/s3api.md.
package s3api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/services/fileserver/internal/files"
)

// Files are the bucket's files: *files.Store.
type Files interface {
	// Open opens a file at its owner.
	Open(ctx context.Context, key string, rng *files.Range, infoOnly bool) (*files.Object, error)
	// List lists a page of the files of the tables readable allows.
	List(ctx context.Context, q objects.Query, readable func(namespace, name string) bool) (objects.Listing, error)
	// BucketCreated is the bucket's creation date.
	BucketCreated(ctx context.Context) (time.Time, error)
}

// Options configure a Handler.
type Options struct {
	Files Files
	// Auth verifies every request's signature and who may read what; nil is auth off
	// (every request is anonymous and may read every file, as before auth).
	Auth   *auth.Authority
	Region string       // the bucket's region, as HeadBucket and GetBucketLocation say it; default us-east-1
	Meter  metric.Meter // nil: no metrics
	Logger *slog.Logger
}

// Handler serves the S3 API.
type Handler struct {
	files  Files
	auth   *auth.Authority // nil: auth off
	region string
	log    *slog.Logger
	bytes  metric.Int64Counter
}

// New returns the S3 handler of o.
func New(o Options) (*Handler, error) {
	if o.Files == nil {
		return nil, errors.New("s3api: Files is required")
	}
	if o.Meter == nil {
		o.Meter = noop.NewMeterProvider().Meter("")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	bytes, err := o.Meter.Int64Counter("mink.fileserver.bytes_served",
		metric.WithDescription("File bytes sent, by api (s3: to clients; forward: to other file servers)."), metric.WithUnit("By"))
	if err != nil {
		return nil, err
	}
	return &Handler{files: o.Files, auth: o.Auth, region: o.Region, log: o.Logger, bytes: bytes}, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := requestID()
	w.Header().Set("X-Amz-Request-Id", id)
	w.Header().Set("Server", "Mink")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && (r.ContentLength != 0 || len(r.TransferEncoding) > 0) {
		// Nothing here reads a body. Closing the connection after the answer keeps
		// net/http from reading one (up to 256 KiB) to reuse the connection.
		w.Header().Set("Connection", "close")
	}
	r.Body = http.MaxBytesReader(w, r.Body, 0)
	// The raw path, not r.URL.Path: keys are percent-encoded by clients, and a path
	// must not be cleaned (".." resolved) before the key is checked.
	path := r.URL.EscapedPath()
	bucket, rawKey, hasKey := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	fail := func(e apierr.S3Error) {
		e.RequestID = id
		if e.Resource == "" {
			e.Resource = path
		}
		apierr.WriteS3(w, r, bounded(e))
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		fail(apierr.S3Error{Status: http.StatusBadRequest, Code: "InvalidURI",
			Message: "Couldn't parse the specified URI: the query string is not validly percent-encoded."})
		return
	}
	p := auth.Anonymous
	if h.auth != nil {
		if p, err = h.auth.VerifyS3(r); err != nil {
			e := authError(err)
			h.log.DebugContext(r.Context(), "s3 request not authenticated", "request_id", id, "code", e.Code,
				"error", err, "remote_addr", r.RemoteAddr)
			fail(e)
			return
		}
	}
	if bucket == "" {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			fail(apierr.S3Error{Status: http.StatusMethodNotAllowed, Code: "MethodNotAllowed",
				Message: "Mink's S3 API is read-only: " + r.Method + " / is not allowed (GET / lists the buckets)"})
			return
		}
		h.listBuckets(w, r, id, p, query, fail)
		return
	}
	if b, err := url.PathUnescape(bucket); err != nil || b != layout.Bucket {
		fail(apierr.S3Error{Status: http.StatusNotFound, Code: "NoSuchBucket", BucketName: bucket,
			Message: "the bucket does not exist: Mink serves one bucket, " + layout.Bucket + ", with path-style requests"})
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		fail(apierr.S3Error{Status: http.StatusMethodNotAllowed, Code: "MethodNotAllowed", BucketName: layout.Bucket,
			Message: "Mink's S3 API is read-only: " + r.Method + " is not allowed"})
		return
	}
	bucketLevel := !hasKey || rawKey == ""
	if _, ok := query["location"]; ok && bucketLevel && r.Method == http.MethodGet {
		h.location(w, r)
		return
	}
	if sub, ok := subresource(query); ok {
		fail(apierr.S3Error{Status: http.StatusNotImplemented, Code: "NotImplemented", BucketName: layout.Bucket,
			Message: "the ?" + sub + " subresource is not supported: Mink's S3 API serves GetObject, HeadObject, " +
				"ListObjectsV2, ListObjects, ListBuckets, HeadBucket and GetBucketLocation only"})
		return
	}
	if bucketLevel {
		if r.Method == http.MethodHead { // HeadBucket: the bucket exists
			w.Header().Set("X-Amz-Bucket-Region", h.region)
			w.WriteHeader(http.StatusOK)
			return
		}
		h.list(w, r, id, p, query, fail)
		return
	}
	key, err := url.PathUnescape(rawKey)
	if err != nil {
		fail(apierr.S3Error{Status: http.StatusBadRequest, Code: "InvalidURI", BucketName: layout.Bucket,
			Message: "Couldn't parse the specified URI: the key is not validly percent-encoded."})
		return
	}
	if len(key) > files.MaxKeyLen {
		fail(apierr.S3Error{Status: http.StatusBadRequest, Code: "KeyTooLongError", BucketName: layout.Bucket, Key: key,
			Message: "Your key is too long: " + strconv.Itoa(len(key)) + " bytes, more than " + strconv.Itoa(files.MaxKeyLen)})
		return
	}
	if msg, ok := authorized(p, key); !ok {
		h.log.InfoContext(r.Context(), "s3 read refused", "request_id", id, "principal", p.ID, "table", p.Table, "key", key)
		fail(apierr.S3Error{Status: http.StatusForbidden, Code: "AccessDenied", BucketName: layout.Bucket, Key: key,
			Message: "Access Denied: " + msg})
		return
	}
	h.object(w, r, id, key, fail)
}

// failure is the S3 error of err, a failure of Mink's own (not of the request's form):
// the client is told Mink's words; what it is not told (a driver's words, a path) is
// logged under the request id its error carries.
func (h *Handler) failure(r *http.Request, id, what string, err error, attrs ...any) apierr.S3Error {
	e := apierr.S3(err)
	e.Message = publicMessage(err, e)
	if r.Context().Err() == nil {
		level := slog.LevelDebug
		switch {
		case e.Status == http.StatusInternalServerError:
			level = slog.LevelWarn
		case e.Status >= 500:
			level = slog.LevelInfo
		}
		h.log.Log(r.Context(), level, what, append([]any{"request_id", id, "code", e.Code, "error", err}, attrs...)...)
	}
	return e
}

// object answers GetObject and HeadObject.
func (h *Handler) object(w http.ResponseWriter, r *http.Request, id, key string, fail func(apierr.S3Error)) {
	// A Range header that is not one byte range is ignored, as RFC 9110 says: the whole
	// file.
	rng := files.ParseRange(r.Header.Get("Range"))
	keyErr := func(err error) {
		e := h.failure(r, id, "s3 read failed", err, "key", key, "range", rng.String())
		e.BucketName, e.Key = layout.Bucket, key
		fail(e)
	}
	head := r.Method == http.MethodHead
	obj, err := h.files.Open(r.Context(), key, rng, head)
	if err != nil {
		keyErr(err)
		return
	}
	defer obj.Close()

	hd := w.Header()
	hd.Set("ETag", obj.ETag)
	hd.Set("Last-Modified", obj.LastModified.UTC().Format(http.TimeFormat))
	hd.Set("Accept-Ranges", "bytes")
	hd.Set("Content-Type", contentType(key))
	hd.Set("X-Mink-Served-By", obj.ServedBy)
	if obj.CacheHit {
		hd.Set("X-Mink-Cache", "hit")
	} else {
		hd.Set("X-Mink-Cache", "miss")
	}
	if code, ok := precondition(r, obj.ETag, obj.LastModified); !ok {
		if code == http.StatusNotModified {
			w.WriteHeader(code)
			return
		}
		fail(apierr.S3Error{Status: code, Code: "PreconditionFailed", BucketName: layout.Bucket, Key: key,
			Message: "at least one of the preconditions (If-Match, If-Unmodified-Since) does not hold"})
		return
	}
	status := http.StatusOK
	length := obj.Size
	if rng != nil {
		status = http.StatusPartialContent
		length = obj.Length
		hd.Set("Content-Range", "bytes "+strconv.FormatInt(obj.Offset, 10)+"-"+
			strconv.FormatInt(obj.Offset+obj.Length-1, 10)+"/"+strconv.FormatInt(obj.Size, 10))
	}
	hd.Set("Content-Length", strconv.FormatInt(length, 10))
	w.WriteHeader(status)
	if head || obj.Body == nil {
		return
	}
	n, err := sendBody(w, obj.Body, length)
	h.bytes.Add(r.Context(), n, metric.WithAttributes(attribute.String("api", "s3")))
	if err != nil || n != length {
		if r.Context().Err() == nil {
			h.log.WarnContext(r.Context(), "s3 read cut short", "request_id", id, "key", key, "sent", n, "want", length, "served_by", obj.ServedBy, "error", err)
		}
		// The status is sent: abort the connection so the client sees a broken
		// transfer (Content-Length unmet), never a short file that looks whole.
		panic(http.ErrAbortHandler)
	}
}

const (
	// writeIdle is how long a client may leave a response unread before the connection
	// is cut: a reader that walks away without closing (it happens) must not hold a
	// handler, a cache file and an owner's stream forever.
	writeIdle = time.Minute
	// sendChunk is what one write deadline covers: at least 8 MiB a minute.
	sendChunk = 8 << 20
)

// sendBody copies n bytes of body to w, a chunk per write deadline. A cache file's body
// is an *io.LimitedReader over an *os.File, which it hands to net/http as one, so the
// kernel sends it (sendfile) without copying it through user space. A forwarded body
// (an io.WriterTo) writes each chunk it receives from the owner straight to w.
func sendBody(w http.ResponseWriter, body io.Reader, n int64) (int64, error) {
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{})
	if wt, ok := body.(io.WriterTo); ok {
		dw := &deadlineWriter{w: w, rc: rc, left: n}
		m, err := wt.WriteTo(dw)
		if err == nil && m < n {
			err = io.ErrUnexpectedEOF
		}
		return m, err
	}
	var sent int64
	for sent < n {
		rc.SetWriteDeadline(time.Now().Add(writeIdle))
		chunk := min(sendChunk, n-sent)
		var m int64
		var err error
		if lr, ok := body.(*io.LimitedReader); ok {
			m, err = io.Copy(w, &io.LimitedReader{R: lr.R, N: min(chunk, lr.N)})
			lr.N -= m
		} else {
			m, err = io.CopyN(w, body, chunk)
		}
		sent += m
		if err != nil {
			return sent, err
		}
		if m == 0 {
			return sent, io.ErrUnexpectedEOF
		}
	}
	return sent, nil
}

// deadlineWriter writes at most left bytes to w, moving the write deadline on every
// sendChunk bytes.
type deadlineWriter struct {
	w     io.Writer
	rc    *http.ResponseController
	left  int64
	since int64 // bytes written since the deadline was last moved
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > d.left {
		return 0, errors.New("s3api: the body is longer than its length")
	}
	if d.since == 0 || d.since >= sendChunk {
		d.rc.SetWriteDeadline(time.Now().Add(writeIdle))
		d.since = 0
	}
	n, err := d.w.Write(p)
	d.left -= int64(n)
	d.since += int64(n)
	return n, err
}

// precondition evaluates If-Match, If-None-Match, If-Unmodified-Since and
// If-Modified-Since as S3 does; it returns false with 412 or 304 when the request must
// not be served.
func precondition(r *http.Request, etag string, modified time.Time) (int, bool) {
	match := func(list string) bool {
		for t := range strings.SplitSeq(list, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == "*" || t == etag {
				return true
			}
		}
		return false
	}
	modified = modified.Truncate(time.Second)
	if im := r.Header.Get("If-Match"); im != "" {
		if !match(im) {
			return http.StatusPreconditionFailed, false
		}
	} else if t, err := http.ParseTime(r.Header.Get("If-Unmodified-Since")); err == nil && modified.After(t) {
		return http.StatusPreconditionFailed, false
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		if match(inm) {
			return http.StatusNotModified, false
		}
	} else if t, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && !modified.After(t) {
		return http.StatusNotModified, false
	}
	return 0, true
}

func contentType(key string) string {
	switch {
	case strings.HasSuffix(key, ".parquet"):
		return "application/vnd.apache.parquet"
	case strings.HasSuffix(key, ".json"):
		return "application/json"
	case strings.HasSuffix(key, ".avro"):
		return "application/avro"
	}
	return "application/octet-stream"
}

// requestID names a request in its answer and the log. It never holds "301": the S3
// library iceberg-go reads through (gocloud.dev's s3blob) takes any failed request whose
// error text holds it, request id included, for a missing bucket, and stops retrying.
func requestID() string {
	for {
		var b [8]byte
		rand.Read(b[:])
		if id := strings.ToUpper(hex.EncodeToString(b[:])); !strings.Contains(id, "301") {
			return id
		}
	}
}
