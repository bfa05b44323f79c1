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
//
// With auth on (Options.Auth), every request but the OAuth2 token endpoint needs a
// bearer token (door.go): one POST /v1/oauth/tokens issued (tokens.go), or a principal's
// secret. A reader sees only the tables its patterns match: loads of others are 403,
// lists leave them out, and a namespace without a table it may read is absent (404). A
// load asking for vended-credentials gets S3 credentials scoped to the table
// (vend.go). With auth off every caller is auth.Anonymous and the catalog answers as it
// did before auth.
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
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/live"
	"github.com/minkhq/mink/services/fileserver/internal/plan"
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
	// Auth checks credentials; nil: auth off, every caller is auth.Anonymous.
	Auth *auth.Authority
	// PlanBatchFiles is how many file scan tasks a planning answer holds (package plan;
	// default plan.DefaultBatchFiles).
	PlanBatchFiles int
	Logger         *slog.Logger
}

// Loader makes live loads: *live.Loader.
type Loader interface {
	Load(ctx context.Context, t tables.Table, base live.Base) (live.Result, error)
}

// S3Config returns the FileIO config of an S3 endpoint URL with the given region: what
// iceberg-go, PyIceberg, Spark and Trino need to read from Mink's S3 API. With auth off
// Mink does not check S3 credentials, but clients still need some, as they never send
// anonymous requests: the config names dummy keys, which New leaves out when auth is on
// (engines then sign with vended credentials, or with the keys they were configured
// with: a principal's id and secret).
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
// refuse writes before sending them, and use HEAD for existence checks. With auth on,
// EndpointCredentials too.
var Endpoints = append([]string{
	"GET /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
}, plan.Endpoints...) // server-side scan planning

// EndpointCredentials is the spec's loadCredentials: fresh vended credentials for a
// table, which clients call before the ones a load gave them expire.
const EndpointCredentials = "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials"

type catalog struct {
	o         Options
	log       *slog.Logger
	fileIO    []byte            // fileIOMap as JSON, the config of every load without vended credentials
	fileIOMap map[string]string // o.FileIO, without the dummy keys when auth is on
	endpoints []string

	mu     sync.Mutex
	logged map[string]time.Time // rate-limited log lines: when last logged (at most 10000 kept)
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
	if len(c.logged) >= 10000 {
		return false // a flood from many addresses: enough has been said
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
	c := &catalog{o: o, log: o.Logger, fileIOMap: o.FileIO, endpoints: Endpoints, logged: map[string]time.Time{}}
	if o.Auth != nil {
		// Dummy keys would override the keys an engine was configured with.
		c.fileIOMap = maps.Clone(o.FileIO)
		delete(c.fileIOMap, keyAccessKeyID)
		delete(c.fileIOMap, keySecretAccessKey)
		delete(c.fileIOMap, keySessionToken)
		c.endpoints = append(slices.Clone(Endpoints), EndpointCredentials)
	}
	var err error
	if c.fileIO, err = json.Marshal(c.fileIOMap); err != nil {
		return nil, fmt.Errorf("catalog: FileIO: %w", err)
	}
	mux := http.NewServeMux()
	// GET patterns also match HEAD; the handlers tell them apart.
	mux.HandleFunc("GET /v1/config", c.config)
	mux.HandleFunc("POST "+tokensPath, c.tokens)
	mux.HandleFunc("GET /v1/namespaces", c.listNamespaces)
	mux.HandleFunc("GET /v1/namespaces/{namespace}", c.loadNamespace)
	mux.HandleFunc("GET /v1/namespaces/{namespace}/tables", c.listTables)
	mux.HandleFunc("GET /v1/namespaces/{namespace}/tables/{table}", c.loadTable)
	mux.HandleFunc("GET /v1/namespaces/{namespace}/tables/{table}/credentials", c.loadCredentials)
	mux.HandleFunc("POST /v1/namespaces/{namespace}/tables/{table}/metrics", c.metrics)
	planner, err := plan.New(plan.Options{DB: o.DB, Catalog: planCatalog{c}, LookupTimeout: o.LookupTimeout,
		BatchFiles: o.PlanBatchFiles})
	if err != nil {
		return nil, err
	}
	planner.Register(mux)
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
	return c.door(mux), nil
}

func (c *catalog) readOnly(w http.ResponseWriter, r *http.Request) {
	apierr.WriteIcebergModel(w, r, apierr.IcebergErrorModel{Code: http.StatusNotImplemented, Type: "NotImplementedException",
		Message: fmt.Sprintf("%s %s: Mink's catalog is read-only; tables are created and dropped with the admin API (minkctl table create)", r.Method, shortPath(r))})
}

func (c *catalog) noRoute(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete:
		apierr.WriteIcebergModel(w, r, apierr.IcebergErrorModel{Code: http.StatusNotFound, Type: "NotFoundException",
			Message: fmt.Sprintf("no endpoint %s %s in Mink's Iceberg REST catalog", r.Method, shortPath(r))})
	default:
		w.Header().Set("Allow", "GET, HEAD")
		apierr.WriteIcebergModel(w, r, apierr.IcebergErrorModel{Code: http.StatusMethodNotAllowed, Type: "MethodNotAllowedException",
			Message: fmt.Sprintf("method %s is not allowed in Mink's read-only Iceberg REST catalog", r.Method)})
	}
}

func (c *catalog) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		c.fail(w, r, fmt.Errorf("encode response: %w", err), "")
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
	c.writeJSON(w, r, map[string]any{
		"defaults":  c.fileIOMap,
		"overrides": map[string]string{},
		"endpoints": c.endpoints,
	})
}

// db bounds a request's Postgres reads and names Postgres when it cannot be reached.
func (c *catalog) db(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.o.LookupTimeout)
}

// postgresErr says what failed in Postgres, keeping err's kind: the words are the
// client's, the cause (the driver's text, SQLSTATE, addresses) is for the log (fail).
func postgresErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	switch k := apierr.Classify(err); k {
	case apierr.Unavailable, apierr.DeadlineExceeded:
		return apierr.Wrap(apierr.Unavailable, err, "%s: postgres is unavailable", what)
	case apierr.Canceled:
		return err
	default:
		return apierr.Wrap(k, err, "%s: postgres answered an error", what)
	}
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
	if err := checkName("namespace", levels[0]); err != nil {
		return "", err
	}
	return levels[0], nil
}

// tableName reads the {table} path value.
func tableName(r *http.Request) (string, error) {
	name := r.PathValue("table")
	return name, checkName("table", name)
}

// checkName refuses what no table or namespace can be called and Postgres cannot even
// compare (its error would name the SQLSTATE): bytes that are not UTF-8, NUL.
func checkName(field, s string) error {
	switch {
	case len(s) > maxNameBytes:
		return apierr.Invalid(field, "%q is longer than %d bytes: no %s is", truncate(s, 64), maxNameBytes, field)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return apierr.Invalid(field, "%q is not valid UTF-8 without NUL bytes", truncate(s, 128))
	}
	return nil
}

// maxNameBytes is more than any namespace or table name takes (tables.Validate: 128).
const maxNameBytes = 255

// namespaceExists: a namespace exists while it has a table.
func (c *catalog) namespaceExists(ctx context.Context, ns string) (bool, error) {
	all, err := tables.Namespaces(ctx, c.o.DB)
	if err != nil {
		return false, postgresErr(err, "list namespaces")
	}
	return slices.Contains(all, ns), nil
}

// namespaceVisible: a namespace exists for p while it has a table p may read (for an
// admin, and anyone with auth off: while it has a table). A namespace p may not see is
// answered as absent, so that its name tells nothing.
func (c *catalog) namespaceVisible(ctx context.Context, p *auth.Principal, ns string) (bool, error) {
	if p.IsAdmin() {
		return c.namespaceExists(ctx, ns)
	}
	if !p.CanReadNamespace(ns) {
		return false, nil
	}
	ts, err := tables.List(ctx, c.o.DB, ns)
	if err != nil {
		return false, postgresErr(err, "list the tables of %s", ns)
	}
	return slices.ContainsFunc(ts, func(t tables.Table) bool { return p.CanRead(ns, t.Name) }), nil
}

// visibleNamespaces are the namespaces p sees, sorted.
func (c *catalog) visibleNamespaces(ctx context.Context, p *auth.Principal) ([]string, error) {
	if p.IsAdmin() {
		all, err := tables.Namespaces(ctx, c.o.DB)
		return all, postgresErr(err, "list namespaces")
	}
	ts, err := tables.List(ctx, c.o.DB, "")
	if err != nil {
		return nil, postgresErr(err, "list namespaces")
	}
	var out []string
	for _, t := range ts { // ordered by namespace
		if p.CanRead(t.Namespace, t.Name) && (len(out) == 0 || out[len(out)-1] != t.Namespace) {
			out = append(out, t.Namespace)
		}
	}
	return out, nil
}

func noNamespace(ns string) error {
	return apierr.New(apierr.NotFound, "namespace %s does not exist", ns)
}

func (c *catalog) listNamespaces(w http.ResponseWriter, r *http.Request) {
	parent := r.URL.Query().Get("parent")
	if parent != "" {
		if _, err := parseNamespace(parent); err != nil {
			c.fail(w, r, err, noSuchNamespace)
			return
		}
	}
	ctx, cancel := c.db(r)
	defer cancel()
	all, err := c.visibleNamespaces(ctx, auth.FromContext(r.Context()))
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	out := [][]string{}
	if parent != "" {
		// One level: a parent that exists has no children.
		if p, _ := parseNamespace(parent); !slices.Contains(all, p) {
			c.fail(w, r, noNamespace(p), noSuchNamespace)
			return
		}
	} else {
		for _, ns := range all {
			out = append(out, []string{ns})
		}
	}
	c.writeJSON(w, r, map[string]any{"namespaces": out})
}

func (c *catalog) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	ctx, cancel := c.db(r)
	defer cancel()
	ok, err := c.namespaceVisible(ctx, auth.FromContext(r.Context()), ns)
	if err == nil && !ok {
		err = noNamespace(ns)
	}
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	c.writeJSON(w, r, map[string]any{"namespace": []string{ns}, "properties": map[string]string{}})
}

type identifier struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

func (c *catalog) listTables(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	p := auth.FromContext(r.Context())
	ctx, cancel := c.db(r)
	defer cancel()
	ts, err := tables.List(ctx, c.o.DB, ns)
	if err != nil {
		c.fail(w, r, postgresErr(err, "list the tables of %s", ns), noSuchNamespace)
		return
	}
	ts = slices.DeleteFunc(ts, func(t tables.Table) bool { return !p.CanRead(ns, t.Name) })
	if len(ts) == 0 {
		c.fail(w, r, noNamespace(ns), noSuchNamespace)
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
		c.fail(w, r, postgresErr(err, "list the tables of %s", ns), noSuchNamespace)
		return
	}
	out := []identifier{}
	for _, t := range ts {
		if slices.Contains(committed, t.ID) {
			out = append(out, identifier{Namespace: []string{ns}, Name: t.Name})
		}
	}
	c.writeJSON(w, r, map[string]any{"identifiers": out})
}

// current is a table's committed metadata.
type current struct {
	table   tables.Table
	key     string
	content []byte
}

// load returns the current metadata of namespace.name for p (without its content for
// HEAD). NotFound names what is missing: the namespace, the table, or its first commit;
// a table p may not read is PermissionDenied, in a namespace p sees (else the
// namespace is missing).
func (c *catalog) load(ctx context.Context, p *auth.Principal, ns, name string, content bool) (current, error) {
	if !p.CanRead(ns, name) {
		ok, err := c.namespaceVisible(ctx, p, ns)
		switch {
		case err != nil:
			return current{}, err
		case !ok:
			return current{}, &namespaceMissing{noNamespace(ns)}
		}
		return current{}, apierr.New(apierr.PermissionDenied, "principal %q may not read table %s.%s: it is not among its tables (%s)",
			p.ID, ns, name, strings.Join(p.Tables, ", "))
	}
	t, err := tables.Get(ctx, c.o.DB, ns, name)
	if apierr.Classify(err) == apierr.NotFound {
		ok, nsErr := c.namespaceVisible(ctx, p, ns)
		switch {
		case nsErr != nil:
			return current{}, nsErr
		case !ok:
			return current{}, &namespaceMissing{noNamespace(ns)}
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

// tablePath reads {namespace} and {table}.
func tablePath(r *http.Request) (ns, name string, err error) {
	if ns, err = namespace(r); err != nil {
		return "", "", err
	}
	name, err = tableName(r)
	return ns, name, err
}

func (c *catalog) loadTable(w http.ResponseWriter, r *http.Request) {
	ns, name, err := tablePath(r)
	if err != nil {
		c.fail(w, r, err, noSuchNamespace)
		return
	}
	p := auth.FromContext(r.Context())
	head := r.Method == http.MethodHead
	ctx, cancel := c.db(r)
	defer cancel()
	cur, err := c.load(ctx, p, ns, name, !head)
	if err != nil {
		c.fail(w, r, err, tableNotFound(err))
		return
	}
	if head {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// Credentials first: a principal refused them needs no live load.
	config, creds := c.fileIO, []byte(nil)
	if c.o.Auth != nil {
		w.Header().Set("Vary", "Authorization, "+headerAccessDelegation)
		if wantsVended(r) {
			config, creds, err = c.vend(p, ns, name)
			if err != nil {
				c.fail(w, r, err, noSuchTable)
				return
			}
			w.Header().Set("Cache-Control", "no-store")
		}
	}
	if c.o.Live != nil {
		lctx, lcancel := context.WithTimeout(r.Context(), c.o.LiveTimeout)
		res, err := c.o.Live.Load(lctx, cur.table, live.Base{Key: cur.key, Content: cur.content})
		lcancel()
		if err != nil {
			c.fail(w, r, err, noSuchTable)
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
	body, err := c.loadTableResult(cur.key, cur.content, config, creds)
	if err != nil {
		c.fail(w, r, fmt.Errorf("table %s: %w", cur.table.FullName(), err), "")
		return
	}
	writeBody(w, r, body)
}

// loadTableResult is the JSON of a LoadTableResult: the metadata file's bytes as they
// are stored, in an envelope, without decoding or re-encoding them (encoding/json would
// validate and compact all of them, for every load, as a json.RawMessage). The files
// are written by Mink's own encoder (pkg/icebergmeta), as one JSON object. config is the
// config object's JSON; storageCreds, when not nil, the storage-credentials array's.
func (c *catalog) loadTableResult(key string, metadata, config, storageCreds []byte) ([]byte, error) {
	if m := bytes.TrimSpace(metadata); len(m) < 2 || m[0] != '{' || m[len(m)-1] != '}' {
		return nil, fmt.Errorf("its metadata file %s is not a JSON object", key)
	}
	loc, err := json.Marshal(layout.URI(key))
	if err != nil {
		return nil, err
	}
	const (
		head  = `{"metadata-location":`
		mid   = `,"metadata":`
		tail  = `,"config":`
		creds = `,"storage-credentials":`
	)
	b := make([]byte, 0, len(head)+len(loc)+len(mid)+len(metadata)+len(tail)+len(config)+len(creds)+len(storageCreds)+1)
	b = append(append(append(append(b, head...), loc...), mid...), metadata...)
	b = append(append(b, tail...), config...)
	if storageCreds != nil {
		b = append(append(b, creds...), storageCreds...)
	}
	return append(b, '}'), nil
}
