// Package catalog is the read side of the Apache Iceberg REST catalog over Mink's tables:
// config, namespaces, list, load and exists. A table load returns the table's current
// metadata (as its writer committed it to Postgres) and the FileIO config an engine needs
// to read the files from Mink's S3 API. Every error is the spec's JSON envelope; write
// endpoints answer 501, since tables are created through the admin API.
//
// A table is visible here once its writer has stored its first metadata (which it does
// as soon as it holds the table's writer lease, before any snapshot): before that a load
// answers 404 NoSuchTableException saying so. (Making up metadata instead would give the
// table a UUID that the writer's first metadata then changes, which engines refuse on
// refresh.) List and exists agree with load.
//
// A load is live (package live) unless the table's mink.live-load is false: it also
// holds the records Kafka has beyond the committed snapshot, as a load snapshot whose
// metadata-location is under metadata/live/; a table with no snapshot committed yet
// loads with all its records as the tail. HEAD never reads Kafka.
//
// Namespaces are one level in Mink. Paths accept the spec's multi-level form (levels
// joined by 0x1F); a multi-level namespace never exists.
package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/live"
)

// Exception types of the spec's 404s.
const (
	noSuchTable     = "NoSuchTableException"
	noSuchNamespace = "NoSuchNamespaceException"
)

// Options configure the catalog.
type Options struct {
	DB lease.DB
	// FileIO is the config a load hands engines for reading files: s3.endpoint,
	// s3.region, s3.path-style-access, credentials. It is also served as /v1/config
	// defaults.
	FileIO map[string]string
	// LookupTimeout bounds the Postgres reads of one request (default 5s), so an
	// unreachable Postgres answers 503 within it.
	LookupTimeout time.Duration
	// Live makes live loads; nil: every load returns the committed metadata.
	Live Loader
	// LiveTimeout bounds the live part of a load: reading Kafka's offsets and building
	// the tail (default 30s), so a load answers 503 within it rather than hang.
	LiveTimeout time.Duration
	Logger      *slog.Logger
}

// Loader makes live loads: *live.Loader.
type Loader interface {
	Load(ctx context.Context, t tables.Table, base live.Base) (live.Result, error)
}

// S3Config returns the FileIO config of an S3 endpoint URL with the given region: what
// iceberg-go, PyIceberg, Spark and Trino need to read from Mink's S3 API. Mink does not
// check credentials; clients still need some, as they never send anonymous requests.
func S3Config(endpoint, region string) map[string]string {
	return map[string]string{
		"s3.endpoint":          endpoint,
		"s3.region":            region,
		"client.region":        region,
		"s3.path-style-access": "true",
		"s3.access-key-id":     "mink",
		"s3.secret-access-key": "mink",
	}
}

// Endpoints are the endpoints /v1/config advertises: the read side only, so clients
// refuse writes before sending them, and use HEAD for existence checks.
var Endpoints = []string{
	"GET /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
}

type catalog struct {
	o      Options
	log    *slog.Logger
	fileIO []byte // o.FileIO as JSON, the config of every load

	mu     sync.Mutex
	logged map[string]time.Time // rate-limited log lines: when last logged
}

// logOnce reports whether a line about what may be logged now: at most once per every.
func (c *catalog) logOnce(what string, every time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.logged[what]) < every {
		return false
	}
	for k, t := range c.logged {
		if time.Since(t) >= every {
			delete(c.logged, k)
		}
	}
	c.logged[what] = time.Now()
	return true
}

// New returns the catalog's HTTP handler.
func New(o Options) (http.Handler, error) {
	if o.DB == nil {
		return nil, errors.New("catalog: DB is required")
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = 5 * time.Second
	}
	if o.LiveTimeout <= 0 {
		o.LiveTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	fileIO, err := json.Marshal(o.FileIO)
	if err != nil {
		return nil, fmt.Errorf("catalog: FileIO: %w", err)
	}
	c := &catalog{o: o, log: o.Logger, fileIO: fileIO, logged: map[string]time.Time{}}
	mux := http.NewServeMux()
	// GET patterns also match HEAD; the handlers tell them apart.
	mux.HandleFunc("GET /v1/config", c.config)
	mux.HandleFunc("GET /v1/namespaces", c.listNamespaces)
	mux.HandleFunc("GET /v1/namespaces/{namespace}", c.loadNamespace)
	mux.HandleFunc("GET /v1/namespaces/{namespace}/tables", c.listTables)
	mux.HandleFunc("GET /v1/namespaces/{namespace}/tables/{table}", c.loadTable)
	// Engines report scan metrics after reading; accepted and dropped.
	mux.HandleFunc("POST /v1/namespaces/{namespace}/tables/{table}/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	for _, p := range []string{
		"POST /v1/namespaces",
		"DELETE /v1/namespaces/{namespace}",
		"POST /v1/namespaces/{namespace}/properties",
		"POST /v1/namespaces/{namespace}/tables",
		"POST /v1/namespaces/{namespace}/register",
		"POST /v1/namespaces/{namespace}/tables/{table}",
		"DELETE /v1/namespaces/{namespace}/tables/{table}",
		"POST /v1/tables/rename",
		"POST /v1/transactions/commit",
		"POST /v1/namespaces/{namespace}/views",
	} {
		mux.HandleFunc(p, c.readOnly)
	}
	mux.HandleFunc("/", c.noRoute)
	return mux, nil
}

func (c *catalog) readOnly(w http.ResponseWriter, r *http.Request) {
	apierr.WriteIcebergModel(w, r, apierr.IcebergErrorModel{Code: http.StatusNotImplemented, Type: "NotImplementedException",
		Message: fmt.Sprintf("%s %s: Mink's catalog is read-only; tables are created and dropped with the admin API (minkctl table create)", r.Method, r.URL.Path)})
}

func (c *catalog) noRoute(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete:
		apierr.WriteIcebergModel(w, r, apierr.IcebergErrorModel{Code: http.StatusNotFound, Type: "NotFoundException",
			Message: fmt.Sprintf("no endpoint %s %s in Mink's Iceberg REST catalog", r.Method, r.URL.Path)})
	default:
		w.Header().Set("Allow", "GET, HEAD")
		apierr.WriteIcebergModel(w, r, apierr.IcebergErrorModel{Code: http.StatusMethodNotAllowed, Type: "MethodNotAllowedException",
			Message: fmt.Sprintf("method %s is not allowed in Mink's read-only Iceberg REST catalog", r.Method)})
	}
}

func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		apierr.WriteIceberg(w, r, fmt.Errorf("encode response: %w", err), "")
		return
	}
	writeBody(w, r, body)
}

// writeBody answers 200 with body, a JSON document.
func writeBody(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func (c *catalog) config(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, map[string]any{
		"defaults":  c.o.FileIO,
		"overrides": map[string]string{},
		"endpoints": Endpoints,
	})
}

// db bounds a request's Postgres reads and names Postgres when it cannot be reached.
func (c *catalog) db(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.o.LookupTimeout)
}

func postgresErr(err error, format string, args ...any) error {
	switch apierr.Classify(err) {
	case apierr.Unavailable, apierr.DeadlineExceeded:
		return apierr.Wrap(apierr.Unavailable, err, "%s: postgres is unavailable", fmt.Sprintf(format, args...))
	}
	return err
}

// namespace reads the {namespace} path value: levels joined by 0x1F. Mink's namespaces
// have one level, so a multi-level one is reported as missing.
func namespace(r *http.Request) (string, error) {
	return parseNamespace(r.PathValue("namespace"))
}

func parseNamespace(raw string) (string, error) {
	levels := strings.Split(raw, "\x1f")
	if slices.Contains(levels, "") {
		return "", apierr.Invalid("namespace", "%q has an empty level", strings.Join(levels, "."))
	}
	if len(levels) != 1 {
		return "", apierr.New(apierr.NotFound, "namespace %s does not exist: Mink namespaces have one level", strings.Join(levels, "."))
	}
	return levels[0], nil
}

// namespaceExists: a namespace exists while it has a table.
func (c *catalog) namespaceExists(ctx context.Context, ns string) (bool, error) {
	all, err := tables.Namespaces(ctx, c.o.DB)
	if err != nil {
		return false, postgresErr(err, "list namespaces")
	}
	return slices.Contains(all, ns), nil
}

func (c *catalog) listNamespaces(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.db(r)
	defer cancel()
	all, err := tables.Namespaces(ctx, c.o.DB)
	if err != nil {
		apierr.WriteIceberg(w, r, postgresErr(err, "list namespaces"), noSuchNamespace)
		return
	}
	out := [][]string{}
	if parent := r.URL.Query().Get("parent"); parent != "" {
		// One level: a parent that exists has no children.
		p, err := parseNamespace(parent)
		if err == nil && !slices.Contains(all, p) {
			err = apierr.New(apierr.NotFound, "namespace %s does not exist", p)
		}
		if err != nil {
			apierr.WriteIceberg(w, r, err, noSuchNamespace)
			return
		}
	} else {
		for _, ns := range all {
			out = append(out, []string{ns})
		}
	}
	writeJSON(w, r, map[string]any{"namespaces": out})
}

func (c *catalog) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err != nil {
		apierr.WriteIceberg(w, r, err, noSuchNamespace)
		return
	}
	ctx, cancel := c.db(r)
	defer cancel()
	ok, err := c.namespaceExists(ctx, ns)
	if err == nil && !ok {
		err = apierr.New(apierr.NotFound, "namespace %s does not exist", ns)
	}
	if err != nil {
		apierr.WriteIceberg(w, r, err, noSuchNamespace)
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, r, map[string]any{"namespace": []string{ns}, "properties": map[string]string{}})
}

type identifier struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

func (c *catalog) listTables(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err != nil {
		apierr.WriteIceberg(w, r, err, noSuchNamespace)
		return
	}
	ctx, cancel := c.db(r)
	defer cancel()
	ts, err := tables.List(ctx, c.o.DB, ns)
	if err != nil {
		apierr.WriteIceberg(w, r, postgresErr(err, "list the tables of %s", ns), noSuchNamespace)
		return
	}
	if len(ts) == 0 {
		apierr.WriteIceberg(w, r, apierr.New(apierr.NotFound, "namespace %s does not exist", ns), noSuchNamespace)
		return
	}
	ids := make([]int64, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	rows, err := c.o.DB.Query(ctx, `SELECT table_id FROM mink_table_meta WHERE table_id = ANY($1)`, ids)
	var committed []int64
	if err == nil {
		committed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		apierr.WriteIceberg(w, r, postgresErr(err, "list the tables of %s", ns), noSuchNamespace)
		return
	}
	out := []identifier{}
	for _, t := range ts {
		if slices.Contains(committed, t.ID) {
			out = append(out, identifier{Namespace: []string{ns}, Name: t.Name})
		}
	}
	writeJSON(w, r, map[string]any{"identifiers": out})
}

// current is a table's committed metadata.
type current struct {
	table   tables.Table
	key     string
	content []byte
}

// load returns the current metadata of namespace.name (without its content for HEAD).
// NotFound names what is missing: the namespace, the table, or its first commit.
func (c *catalog) load(ctx context.Context, ns, name string, content bool) (current, error) {
	t, err := tables.Get(ctx, c.o.DB, ns, name)
	if apierr.Classify(err) == apierr.NotFound {
		ok, nsErr := c.namespaceExists(ctx, ns)
		switch {
		case nsErr != nil:
			return current{}, nsErr
		case !ok:
			return current{}, &namespaceMissing{apierr.New(apierr.NotFound, "namespace %s does not exist", ns)}
		}
		return current{}, apierr.New(apierr.NotFound, "table %s.%s does not exist", ns, name)
	}
	if err != nil {
		return current{}, postgresErr(err, "load table %s.%s", ns, name)
	}
	cur := current{table: t}
	err = c.o.DB.QueryRow(ctx, `SELECT tm.metadata_key, CASE WHEN $2 THEN mf.content END
		FROM mink_table_meta tm LEFT JOIN mink_meta_files mf ON mf.key = tm.metadata_key
		WHERE tm.table_id = $1`, t.ID, content).Scan(&cur.key, &cur.content)
	if errors.Is(err, pgx.ErrNoRows) {
		return current{}, apierr.New(apierr.NotFound,
			"table %s has no committed snapshot yet, nor metadata: its writer stores the first as soon as it holds the table's writer lease, and commits within %s (table property %s) of its first indexed range",
			t.FullName(), t.Props().CommitInterval, tables.PropCommitInterval)
	}
	if err != nil {
		return current{}, postgresErr(err, "load table %s", t.FullName())
	}
	if content && cur.content == nil {
		return current{}, fmt.Errorf("table %s: its current metadata file %s is missing", t.FullName(), cur.key)
	}
	return cur, nil
}

// namespaceMissing marks a load's 404 as the namespace's rather than the table's.
type namespaceMissing struct{ error }

func (e *namespaceMissing) Unwrap() error { return e.error }

// tableNotFound is the exception type of a load's 404: the namespace's or the table's.
func tableNotFound(err error) string {
	var nm *namespaceMissing
	if errors.As(err, &nm) {
		return noSuchNamespace
	}
	return noSuchTable
}

func (c *catalog) loadTable(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err != nil {
		apierr.WriteIceberg(w, r, err, noSuchNamespace)
		return
	}
	name := r.PathValue("table")
	head := r.Method == http.MethodHead
	ctx, cancel := c.db(r)
	defer cancel()
	cur, err := c.load(ctx, ns, name, !head)
	if err != nil {
		apierr.WriteIceberg(w, r, err, tableNotFound(err))
		return
	}
	if head {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if c.o.Live != nil {
		lctx, lcancel := context.WithTimeout(r.Context(), c.o.LiveTimeout)
		res, err := c.o.Live.Load(lctx, cur.table, live.Base{Key: cur.key, Content: cur.content})
		lcancel()
		if err != nil {
			if r.Context().Err() == nil && c.logOnce("live "+cur.table.FullName(), 10*time.Second) {
				c.log.WarnContext(r.Context(), "live load failed (logged once per 10s per table)", "table", cur.table.FullName(), "error", err)
			}
			apierr.WriteIceberg(w, r, err, noSuchTable)
			return
		}
		cur.key, cur.content = res.Key, res.Content
	}
	// The metadata file's key names its content (files are immutable), so it makes a
	// strong ETag: a client holding this version gets 304 without the body.
	sum := sha256.Sum256([]byte(cur.key))
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body, err := c.loadTableResult(cur.key, cur.content)
	if err != nil {
		apierr.WriteIceberg(w, r, fmt.Errorf("table %s: %w", cur.table.FullName(), err), "")
		return
	}
	writeBody(w, r, body)
}

// loadTableResult is the JSON of a LoadTableResult: the metadata file's bytes as they
// are stored, in an envelope, without decoding or re-encoding them (encoding/json would
// validate and compact all of them, for every load, as a json.RawMessage). The files
// are written by Mink's own encoder (pkg/icebergmeta), as one JSON object.
func (c *catalog) loadTableResult(key string, metadata []byte) ([]byte, error) {
	if m := bytes.TrimSpace(metadata); len(m) < 2 || m[0] != '{' || m[len(m)-1] != '}' {
		return nil, fmt.Errorf("its metadata file %s is not a JSON object", key)
	}
	loc, err := json.Marshal(layout.URI(key))
	if err != nil {
		return nil, err
	}
	const (
		head = `{"metadata-location":`
		mid  = `,"metadata":`
		tail = `,"config":`
	)
	b := make([]byte, 0, len(head)+len(loc)+len(mid)+len(metadata)+len(tail)+len(c.fileIO)+1)
	b = append(append(append(append(b, head...), loc...), mid...), metadata...)
	b = append(append(append(b, tail...), c.fileIO...), '}')
	return b, nil
}
