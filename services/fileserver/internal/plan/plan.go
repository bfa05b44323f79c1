// Package plan is the Iceberg REST catalog's server-side scan planning: planTableScan
// (POST .../tables/{table}/plan), fetchPlanningResult and cancelPlanning (GET and
// DELETE .../plan/{plan-id}) and fetchScanTasks (POST .../tables/{table}/tasks).
//
// Design notes: docs/design/plan.md.
package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/tables"
)

// Route is one planning endpoint as the spec writes it in /v1/config's endpoints
// ("POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/plan"), and its handler.
// The catalog serves and advertises them behind its door, reading "{plan-id}" as
// PathValue("plan_id").
type Route struct {
	Method, Path string
	Handler      http.HandlerFunc
}

const pathTable = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"

// Routes are the endpoints planning serves.
func (p *Planner) Routes() []Route {
	return []Route{
		{http.MethodPost, pathTable + "/plan", p.planTableScan},
		{http.MethodGet, pathTable + "/plan/{plan-id}", p.fetchPlanningResult},
		{http.MethodDelete, pathTable + "/plan/{plan-id}", p.cancelPlanning},
		{http.MethodPost, pathTable + "/tasks", p.fetchScanTasks},
	}
}

// Exception types of planning's 404s.
const (
	noSuchPlanID   = "NoSuchPlanIdException"
	noSuchPlanTask = "NoSuchPlanTaskException"
)

// Defaults of Options.
const (
	DefaultBatchFiles = 1000
	DefaultTokenTTL   = time.Hour
)

// Metadata says what Catalog.Table reads besides the table.
type Metadata int

const (
	NoMetadata Metadata = iota // the table alone: authorization
	Committed                  // its committed metadata
	Live                       // what a table load returns: with the live tail
)

// Loaded is a table and, if asked, one of its metadata files.
type Loaded struct {
	Table   tables.Table
	Key     string
	Content []byte
}

// Catalog is what planning uses of the catalog: its loads with their checks, its
// credentials and its error envelope.
type Catalog interface {
	// Table is the table r's path names, if the caller may read it (errors as a table
	// load's: 404 for a missing table or namespace, 403 for one it may not read), with
	// the metadata m asks for.
	Table(r *http.Request, m Metadata) (Loaded, error)
	// Credentials are the storage credentials r asks for to read t's files, if any.
	Credentials(r *http.Request, t tables.Table) ([]StorageCredential, error)
	// Fail answers r with err in the catalog's envelope; notFound is the exception type
	// of a 404 ("": the table's or namespace's).
	Fail(w http.ResponseWriter, r *http.Request, err error, notFound string)
	// TooLarge answers a body over the catalog's bound.
	TooLarge(w http.ResponseWriter, r *http.Request)
}

// Options configure a Planner.
type Options struct {
	DB      pg.DB
	Catalog Catalog
	// LookupTimeout bounds each Postgres read (default 5s).
	LookupTimeout time.Duration
	// BatchFiles is how many file scan tasks one answer holds (default
	// DefaultBatchFiles): a larger plan answers with plan tasks of this many.
	BatchFiles int
	// TokenTTL is how long plan ids and plan tasks are answered (default
	// DefaultTokenTTL), while their metadata is still stored.
	TokenTTL time.Duration
}

// Planner serves planning's endpoints.
type Planner struct {
	o   Options
	now func() time.Time
}

// New returns a Planner.
func New(o Options) (*Planner, error) {
	if o.DB == nil || o.Catalog == nil {
		return nil, errors.New("plan: DB and Catalog are required")
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = 5 * time.Second
	}
	if o.BatchFiles <= 0 {
		o.BatchFiles = DefaultBatchFiles
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	return &Planner{o: o, now: time.Now}, nil
}

func (p *Planner) planTableScan(w http.ResponseWriter, r *http.Request) {
	// The table first: a caller that may not read it learns nothing from its body.
	if _, err := p.o.Catalog.Table(r, NoMetadata); err != nil {
		p.o.Catalog.Fail(w, r, err, "")
		return
	}
	body, ok := p.body(w, r)
	if !ok {
		return
	}
	req, err := parseRequest(body)
	if err != nil {
		p.o.Catalog.Fail(w, r, err, "")
		return
	}
	src, err := p.source(r, req)
	if err != nil {
		p.o.Catalog.Fail(w, r, err, "")
		return
	}
	k, err := resolve(req, src)
	if err != nil {
		p.o.Catalog.Fail(w, r, err, "")
		return
	}
	p.answer(w, r, src, k, p.now().Add(p.o.TokenTTL).UnixMilli(), true)
}

// source is the metadata to plan req over: a live load's (what a load of the table
// returns now), unless every snapshot req names is committed.
func (p *Planner) source(r *http.Request, req request) (source, error) {
	if ids := req.snapshots(); len(ids) > 0 {
		l, err := p.o.Catalog.Table(r, Committed)
		if err != nil {
			return source{}, err
		}
		src, err := newSource(l.Table, l.Key, l.Content)
		if err != nil || src.has(ids...) {
			return src, err
		}
	}
	l, err := p.o.Catalog.Table(r, Live)
	if err != nil {
		return source{}, err
	}
	return newSource(l.Table, l.Key, l.Content)
}

// answer plans k over src and writes the completed result: the first batch of file
// scan tasks, plan tasks (expiring at expires) for the others, and storage credentials
// if asked. withID: the planTableScan form, with its plan id; without, a replay of it.
func (p *Planner) answer(w http.ResponseWriter, r *http.Request, src source, k scanKey, expires int64, withID bool) {
	pl, err := p.scan(r.Context(), k, src)
	if errors.Is(err, errGone) {
		err = apierr.New(apierr.NotFound, "the plan's snapshot is gone from table %s: plan the scan again", src.table.FullName())
	}
	if err != nil {
		p.o.Catalog.Fail(w, r, err, noSuchPlanID)
		return
	}
	res := completed{Status: statusCompleted}
	if withID {
		if res.PlanID, err = (token{scanKey: k, Expires: expires}).encode(); err != nil {
			p.o.Catalog.Fail(w, r, fmt.Errorf("plan id: %w", err), "")
			return
		}
	}
	n := len(pl.tasks)
	for b := 1; b*p.o.BatchFiles < n; b++ {
		t, err := (token{scanKey: k, Expires: expires, Batch: b}).encode()
		if err != nil {
			p.o.Catalog.Fail(w, r, fmt.Errorf("plan task: %w", err), "")
			return
		}
		res.PlanTasks = append(res.PlanTasks, t)
	}
	if res.FileScanTasks, err = pl.encode(pl.tasks[:min(n, p.o.BatchFiles)]); err != nil {
		p.o.Catalog.Fail(w, r, err, "")
		return
	}
	if res.StorageCredentials, err = p.o.Catalog.Credentials(r, src.table); err != nil {
		p.o.Catalog.Fail(w, r, err, "")
		return
	}
	if len(res.StorageCredentials) > 0 {
		w.Header().Set("Cache-Control", "no-store")
	}
	p.writeJSON(w, r, res)
}

func (p *Planner) fetchPlanningResult(w http.ResponseWriter, r *http.Request) {
	tbl, t, ok := p.planID(w, r)
	if !ok {
		return
	}
	src, err := p.replay(r, tbl, t, "plan")
	if err != nil {
		p.o.Catalog.Fail(w, r, err, noSuchPlanID)
		return
	}
	p.answer(w, r, src, t.scanKey, t.Expires, false)
}

// cancelPlanning answers 204 for a plan id of the table: a plan holds nothing to
// release.
func (p *Planner) cancelPlanning(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := p.planID(w, r); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

// planID reads the plan id of r's path, of the table the path names, which the caller
// may read; false: answered already.
func (p *Planner) planID(w http.ResponseWriter, r *http.Request) (tables.Table, token, bool) {
	l, err := p.o.Catalog.Table(r, NoMetadata)
	if err != nil {
		p.o.Catalog.Fail(w, r, err, "")
		return tables.Table{}, token{}, false
	}
	t, err := p.token(l.Table, r.PathValue("plan_id"), "plan id")
	if err == nil && t.Batch != 0 {
		err = apierr.New(apierr.NotFound, "plan id %s is a plan task: fetch its tasks with POST .../tasks", clip(r.PathValue("plan_id")))
	}
	if err != nil {
		p.o.Catalog.Fail(w, r, err, noSuchPlanID)
		return tables.Table{}, token{}, false
	}
	return l.Table, t, true
}

func (p *Planner) fetchScanTasks(w http.ResponseWriter, r *http.Request) {
	l, err := p.o.Catalog.Table(r, NoMetadata)
	if err != nil {
		p.o.Catalog.Fail(w, r, err, "")
		return
	}
	body, ok := p.body(w, r)
	if !ok {
		return
	}
	var req struct {
		PlanTask *string `json:"plan-task"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.PlanTask == nil {
		p.o.Catalog.Fail(w, r, apierr.Invalid("plan-task", "the body is a FetchScanTasksRequest: {\"plan-task\": \"<a plan task of a plan of this table>\"}"), "")
		return
	}
	t, err := p.token(l.Table, *req.PlanTask, "plan task")
	if err == nil && t.Batch == 0 {
		err = apierr.New(apierr.NotFound, "plan task %s is a plan id", clip(*req.PlanTask))
	}
	if err != nil {
		p.o.Catalog.Fail(w, r, err, noSuchPlanTask)
		return
	}
	src, err := p.replay(r, l.Table, t, "plan task")
	if err != nil {
		p.o.Catalog.Fail(w, r, err, noSuchPlanTask)
		return
	}
	pl, err := p.scan(r.Context(), t.scanKey, src)
	if errors.Is(err, errGone) {
		err = apierr.New(apierr.NotFound, "plan task %s: its plan's snapshot is gone from table %s", clip(*req.PlanTask), l.Table.FullName())
	}
	if err != nil {
		p.o.Catalog.Fail(w, r, err, noSuchPlanTask)
		return
	}
	from := t.Batch * p.o.BatchFiles
	if from >= len(pl.tasks) {
		p.o.Catalog.Fail(w, r, apierr.New(apierr.NotFound, "plan task %s is past the end of its plan", clip(*req.PlanTask)), noSuchPlanTask)
		return
	}
	var res scanTasks
	if res.FileScanTasks, err = pl.encode(pl.tasks[from:min(len(pl.tasks), from+p.o.BatchFiles)]); err != nil {
		p.o.Catalog.Fail(w, r, err, "")
		return
	}
	p.writeJSON(w, r, res)
}

// token reads a plan id or plan task of table t: NotFound (404) if it is not one, is of
// another table, or has expired.
func (p *Planner) token(t tables.Table, s, what string) (token, error) {
	tok, err := decodeToken(s)
	switch {
	case err != nil:
		return token{}, apierr.New(apierr.NotFound, "%s %q does not exist: it is not one Mink's catalog issued", what, clip(s))
	case tok.Table != t.ID:
		return token{}, apierr.New(apierr.NotFound, "%s %s does not exist for table %s: it is of another table", what, clip(s), t.FullName())
	case tok.expired(p.now()):
		return token{}, apierr.New(apierr.NotFound, "%s %s has expired (plans are answered for %s)", what, clip(s), p.o.TokenTTL)
	}
	return tok, nil
}

// replay is the metadata a token's plan was made from: its metadata file while stored,
// else the committed metadata if it still has the plan's snapshots (a committed
// version leaves the metadata log after a few commits; its snapshots stay for the
// retention age).
func (p *Planner) replay(r *http.Request, t tables.Table, tok token, what string) (source, error) {
	ctx, cancel := context.WithTimeout(r.Context(), p.o.LookupTimeout)
	content, err := objects.MetaFile(ctx, p.o.DB, t.ID, tok.Metadata)
	cancel()
	if err == nil {
		return newSource(t, tok.Metadata, content)
	}
	if !errors.Is(err, icebergmeta.ErrNoMetaFile) {
		return source{}, planErr(t, err)
	}
	l, err := p.o.Catalog.Table(r, Committed)
	if err != nil {
		return source{}, err
	}
	src, err := newSource(l.Table, l.Key, l.Content)
	if err != nil {
		return source{}, err
	}
	ids := []int64{tok.Snapshot}
	if tok.Snapshot == 0 {
		ids = []int64{tok.End}
	}
	if (ids[0] != 0 && !src.has(ids...)) || l.Table.ID != t.ID {
		return source{}, apierr.New(apierr.NotFound, "the snapshot of this %s is gone from table %s: plan the scan again", what, t.FullName())
	}
	return src, nil
}

// body reads r's body, within the catalog's bound; false: answered already.
func (p *Planner) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		p.o.Catalog.TooLarge(w, r)
		return nil, false
	case err != nil:
		p.o.Catalog.Fail(w, r, apierr.Wrap(apierr.InvalidArgument, err, "reading the request body"), "")
		return nil, false
	}
	return b, true
}

func (p *Planner) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		p.o.Catalog.Fail(w, r, fmt.Errorf("encode the answer: %w", err), "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}
