// Package catalog is the read side of the Apache Iceberg REST catalog over Mink's tables:
// config, namespaces, tables and views (list, load, exists), credentials and metrics. A
// table load returns the table's current metadata (as its writer committed it to
// Postgres) and the FileIO config an engine needs to read the files from Mink's S3 API.
// Every error is the spec's JSON envelope, naming what is wrong; what Mink cannot tell a
// client (SQL, paths, a driver's words) goes to the log under the request id.
//
// Design notes: docs/design/catalog.md.
package catalog

import (
	"context"
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

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/names"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/live"
	"github.com/minkhq/mink/services/fileserver/internal/plan"
)

// Exception types of the spec's 404s.
const (
	noSuchTable     = "NoSuchTableException"
	noSuchNamespace = "NoSuchNamespaceException"
	noSuchView      = "NoSuchViewException"
)

// Options configure the catalog.
type Options struct {
	DB pg.DB
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
	// Routes are more endpoints to serve (and advertise) behind the catalog's door, after
	// its own and planning's: another package's part of the spec. One may take over a
	// refused write endpoint; none may repeat a served one.
	Routes []Route
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

type catalog struct {
	o         Options
	log       *slog.Logger
	fileIO    []byte                     // fileIOMap as JSON, the config of every load without vended credentials
	fileIOMap map[string]string          // o.FileIO, without the dummy keys when auth is on
	endpoints []string                   // what /v1/config advertises: every served route
	refs      *lru.Cache[string, []byte] // metadata key -> its snapshots=refs form

	mu     sync.Mutex
	logged map[string]time.Time // rate-limited log lines: when last logged (at most 10000 kept)
}

// refsCacheKeys bounds the snapshots=refs forms kept: a few metadata versions per table
// loaded at once. Each is small (one snapshot or a few).
const refsCacheKeys = 512

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
	c, mux, err := newCatalog(o)
	if err != nil {
		return nil, err
	}
	return c.door(routed(mux)), nil
}

// newCatalog is the catalog and its routes, without the door.
func newCatalog(o Options) (*catalog, *http.ServeMux, error) {
	if o.DB == nil {
		return nil, nil, errors.New("catalog: DB is required")
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
	refs, err := lru.New[string, []byte](refsCacheKeys)
	if err != nil {
		return nil, nil, err
	}
	c := &catalog{o: o, log: o.Logger, fileIOMap: o.FileIO, refs: refs, logged: map[string]time.Time{}}
	if o.Auth != nil {
		// Dummy keys would override the keys an engine was configured with.
		c.fileIOMap = maps.Clone(o.FileIO)
		delete(c.fileIOMap, keyAccessKeyID)
		delete(c.fileIOMap, keySecretAccessKey)
		delete(c.fileIOMap, keySessionToken)
	}
	if c.fileIO, err = json.Marshal(c.fileIOMap); err != nil {
		return nil, nil, fmt.Errorf("catalog: FileIO: %w", err)
	}
	mux := http.NewServeMux()
	// Not endpoints in the spec's sense (clients call them before reading endpoints),
	// so not advertised.
	mux.HandleFunc("GET "+pathConfig, c.config)
	mux.HandleFunc("POST "+tokensPath, c.tokens)
	planner, err := plan.New(plan.Options{DB: o.DB, Catalog: planCatalog{c}, LookupTimeout: o.LookupTimeout,
		BatchFiles: o.PlanBatchFiles})
	if err != nil {
		return nil, nil, err
	}
	var routes []Route
	for _, rt := range planner.Routes() {
		routes = append(routes, Route{rt.Method, rt.Path, rt.Handler})
	}
	if c.endpoints, err = c.register(mux, append(routes, o.Routes...)); err != nil {
		return nil, nil, err
	}
	mux.HandleFunc("/", c.noRoute)
	return c, mux, nil
}

// routed labels a request's HTTP metrics with its route (http.route, as
// "/v1/namespaces/{namespace}/tables/{table}"), so table loads are told from other calls:
// otelhttp reads the route from the request the mux saw, and the door hands the mux a
// copy.
func routed(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l, ok := otelhttp.LabelerFromContext(r.Context()); ok {
			if _, pattern := mux.Handler(r); strings.Contains(pattern, "/") {
				l.Add(attribute.String("http.route", pattern[strings.IndexByte(pattern, '/'):])) // without the method
			}
		}
		mux.ServeHTTP(w, r)
	})
}

func (c *catalog) noRoute(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete:
		c.fail(w, r, apierr.New(apierr.NotFound, "no endpoint %s %s in Mink's Iceberg REST catalog (GET /v1/config lists its endpoints)",
			r.Method, shortPath(r)), "")
	default:
		w.Header().Set("Allow", "GET, HEAD")
		c.fail(w, r, apierr.HTTPErr(apierr.Unimplemented, http.StatusMethodNotAllowed,
			"method %s is not allowed in Mink's read-only Iceberg REST catalog", r.Method), "")
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
	if err := names.Check("namespace", names.Namespace, levels[0]); err != nil {
		return "", err
	}
	return levels[0], nil
}

// tableName reads the {table} path value.
func tableName(r *http.Request) (string, error) {
	name := r.PathValue("table")
	return name, names.Check("table", names.Table, name)
}

// namespaceExists: a namespace exists while it has a table.
func (c *catalog) namespaceExists(ctx context.Context, ns string) (bool, error) {
	ts, err := tables.ListPage(ctx, c.o.DB, ns, "", 1, false)
	if err != nil {
		return false, apierr.Postgres(err, "look up namespace %s", ns)
	}
	return len(ts) > 0, nil
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
		return false, apierr.Postgres(err, "list the tables of %s", ns)
	}
	return slices.ContainsFunc(ts, func(t tables.Table) bool { return p.CanRead(ns, t.Name) }), nil
}

func noNamespace(ns string) error {
	return apierr.New(apierr.NotFound, "namespace %s does not exist", ns)
}
