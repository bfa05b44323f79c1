package catalog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/tables"
)

// specEndpoints is every endpoint of the REST spec (open-api/rest-catalog-open-api.yaml)
// but config and the OAuth2 token endpoint, which are not endpoints in its sense (no
// client reads them from endpoints).
var specEndpoints = []string{
	"GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}", "HEAD /v1/{prefix}/namespaces/{namespace}",
	"DELETE /v1/{prefix}/namespaces/{namespace}", "POST /v1/{prefix}/namespaces/{namespace}/properties",
	"GET /v1/{prefix}/namespaces/{namespace}/tables", "POST /v1/{prefix}/namespaces/{namespace}/tables",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
	"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
	"POST /v1/{prefix}/namespaces/{namespace}/register",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}", "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}", "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
	"POST /v1/{prefix}/tables/rename", "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
	"POST /v1/{prefix}/transactions/commit",
	"GET /v1/{prefix}/namespaces/{namespace}/views", "POST /v1/{prefix}/namespaces/{namespace}/views",
	"GET /v1/{prefix}/namespaces/{namespace}/views/{view}", "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
	"DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}", "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
	"POST /v1/{prefix}/views/rename", "POST /v1/{prefix}/namespaces/{namespace}/register-view",
}

// request is the request an endpoint names, its placeholders filled in.
func request(endpoint string) *http.Request {
	method, path, _ := strings.Cut(endpoint, " ")
	path = strings.NewReplacer("/{prefix}", "", "{namespace}", "default", "{table}", "orders", "{view}", "v",
		"{plan-id}", "p1").Replace(path)
	return httptest.NewRequest(method, path, strings.NewReader("{}"))
}

func (f *fixture) endpoints() []string {
	f.t.Helper()
	var cfg struct {
		Endpoints []string `json:"endpoints"`
	}
	if a := f.do("GET", "/v1/config", nil); a.status != 200 || json.Unmarshal(a.body, &cfg) != nil {
		f.t.Fatalf("config: %d %s", a.status, a.body)
	}
	return cfg.Endpoints
}

// TestEndpointsAreWhatIsServed: /v1/config advertises exactly the spec endpoints the
// catalog routes to a handler of its own, HEAD checks included: not the write
// endpoints it refuses, nor anything not in the spec. Each advertised endpoint answers
// as itself (not as an unknown route nor a refusal).
func TestEndpointsAreWhatIsServed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	advertised := f.endpoints()
	c, mux, err := newCatalog(Options{DB: f.db})
	if err != nil {
		t.Fatal(err)
	}
	refusedPatterns := map[string]bool{}
	for _, rf := range refused {
		refusedPatterns[muxPattern(rf.method, rf.path)] = true
	}
	for _, e := range specEndpoints {
		_, pattern := mux.Handler(request(e))
		served := pattern != "/" && !refusedPatterns[pattern]
		if served != slices.Contains(advertised, e) {
			t.Errorf("%s: routed to %q, advertised %v", e, pattern, slices.Contains(advertised, e))
		}
	}
	for _, e := range advertised {
		if !slices.Contains(specEndpoints, e) {
			t.Errorf("advertised %q is not an endpoint of the spec", e)
		}
		r := request(e)
		w := httptest.NewRecorder()
		c.door(mux).ServeHTTP(w, r)
		var env struct {
			Error struct{ Type, Message string }
		}
		json.Unmarshal(w.Body.Bytes(), &env)
		if w.Code == 404 && env.Error.Type == "NotFoundException" || w.Code == 405 || strings.Contains(env.Error.Message, "read-only") {
			t.Errorf("advertised %s answers %d %s", e, w.Code, w.Body)
		}
	}
	for _, want := range []string{"HEAD /v1/{prefix}/namespaces/{namespace}", "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
		"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials", "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
		"GET /v1/{prefix}/namespaces/{namespace}/views", "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}"} {
		if !slices.Contains(advertised, want) {
			t.Errorf("%s is not advertised", want)
		}
	}

	// Another package's routes (planning's are served so already): served, advertised,
	// and one may take a refused endpoint.
	extraPath := "/v1/{prefix}/namespaces/{namespace}/tables/{table}/extra/{extra-id}"
	extra := []Route{
		{http.MethodGet, extraPath, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Extra", r.PathValue("extra_id"))
			w.WriteHeader(299)
		}},
		{http.MethodPost, pathRenameTable, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }},
	}
	h, err := New(Options{DB: f.db, Routes: extra})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	advertised = f.endpoints()
	for _, e := range []string{"GET " + extraPath, "POST /v1/{prefix}/tables/rename"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(e))
		if w.Code != 299 || !slices.Contains(advertised, e) {
			t.Errorf("extra %s: %d, advertised %v", e, w.Code, slices.Contains(advertised, e))
		}
	}
	if a := f.do("GET", "/v1/namespaces/default/tables/orders/extra/p-7", nil); a.header.Get("X-Extra") != "p-7" {
		t.Errorf("extra-id read as %q", a.header.Get("X-Extra"))
	}
	for _, bad := range [][]Route{
		{{http.MethodGet, pathTable, c.loadTable}},
		{{http.MethodGet, "/v2/x", c.loadTable}},
		{{http.MethodGet, pathTable + "/x", nil}},
	} {
		if _, err := New(Options{DB: f.db, Routes: bad}); err == nil {
			t.Errorf("extra routes %s %s were taken", bad[0].Method, bad[0].Path)
		}
	}
}

// TestUnsupportedOperations: each write endpoint answers what the spec documents for
// it: 406 UnsupportedOperationException where it lists that, 403 elsewhere; always the
// envelope, pointing to the admin API; with auth on, only after the caller is known.
func TestUnsupportedOperations(t *testing.T) {
	t.Parallel()
	for _, authOn := range []bool{false, true} {
		f := newFixture(t, authOn)
		var creds []string
		if authOn {
			creds = bearer(f.token("etl", etlSecret))
		}
		for _, c := range []struct {
			endpoint string
			status   int
			typ      string
		}{
			{"POST /v1/{prefix}/namespaces", 406, "UnsupportedOperationException"},
			{"POST /v1/{prefix}/namespaces/{namespace}/properties", 406, "UnsupportedOperationException"},
			{"POST /v1/{prefix}/tables/rename", 406, "UnsupportedOperationException"},
			{"POST /v1/{prefix}/views/rename", 406, "UnsupportedOperationException"},
			{"DELETE /v1/{prefix}/namespaces/{namespace}", 403, "ForbiddenException"},
			{"POST /v1/{prefix}/namespaces/{namespace}/tables", 403, "ForbiddenException"},
			{"POST /v1/{prefix}/namespaces/{namespace}/register", 403, "ForbiddenException"},
			{"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}", 403, "ForbiddenException"},
			{"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}", 403, "ForbiddenException"},
			{"POST /v1/{prefix}/transactions/commit", 403, "ForbiddenException"},
			{"POST /v1/{prefix}/namespaces/{namespace}/views", 403, "ForbiddenException"},
			{"POST /v1/{prefix}/namespaces/{namespace}/views/{view}", 403, "ForbiddenException"},
			{"DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}", 403, "ForbiddenException"},
			{"POST /v1/{prefix}/namespaces/{namespace}/register-view", 403, "ForbiddenException"},
		} {
			r := request(c.endpoint)
			a := f.do(r.Method, r.URL.Path, strings.NewReader("{}"), creds...)
			if a.status != c.status {
				t.Errorf("auth %v: %s: %d %s, want %d", authOn, c.endpoint, a.status, a.body, c.status)
				continue
			}
			if e := a.envelope(t); e.Type != c.typ || !strings.Contains(e.Message, "admin API") || !strings.Contains(e.Message, r.Method) {
				t.Errorf("auth %v: %s: %+v", authOn, c.endpoint, e)
			}
			if authOn {
				if a := f.do(r.Method, r.URL.Path, strings.NewReader("{}")); a.status != 401 {
					t.Errorf("%s without credentials: %d, want 401", c.endpoint, a.status)
				}
			}
		}
	}
}

// addTables creates committed tables ns.name... with stand-in metadata.
func (f *fixture) addTables(ns string, names ...string) {
	f.t.Helper()
	for _, n := range names {
		tbl, err := tables.Create(context.Background(), f.db, tables.Table{Namespace: ns, Name: n, Topic: ns + "-" + n, Spec: testSpec}, 1)
		if err != nil {
			f.t.Fatal(err)
		}
		f.commit(tbl.ID, ns+"/"+n+"/metadata/00001-x.metadata.json", []byte(`{"format-version":2,"table-uuid":"u-`+n+`"}`))
	}
}

// commit stores a metadata file and makes it the table's current one.
func (f *fixture) commit(table int64, key string, content []byte) {
	f.t.Helper()
	ctx := context.Background()
	if _, err := f.db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, $2, $3)`, table, key, content); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `INSERT INTO mink_table_meta (table_id, metadata_key, version) VALUES ($1, $2, 1)
		ON CONFLICT (table_id) DO UPDATE SET metadata_key = $2, version = mink_table_meta.version + 1`, table, key); err != nil {
		f.t.Fatal(err)
	}
}

type listPage struct {
	Next        *string      `json:"next-page-token"`
	Identifiers []identifier `json:"identifiers"`
	Namespaces  [][]string   `json:"namespaces"`
	raw         map[string]any
}

func (f *fixture) list(path string, headers ...string) (listPage, answer) {
	f.t.Helper()
	a := f.do("GET", path, nil, headers...)
	var p listPage
	if a.status == 200 {
		if err := json.Unmarshal(a.body, &p); err != nil {
			f.t.Fatalf("%s: %v: %s", path, err, a.body)
		}
		json.Unmarshal(a.body, &p.raw)
	}
	return p, a
}

// pageAll pages through path with pageSize size, returning every name listed.
func (f *fixture) pageAll(path string, size int, between func(page int), headers ...string) []string {
	f.t.Helper()
	var out []string
	token := ""
	for page := 0; ; page++ {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		p, a := f.list(fmt.Sprintf("%s%spageToken=%s&pageSize=%d", path, sep, token, size), headers...)
		if a.status != 200 {
			f.t.Fatalf("page %d of %s: %d %s", page, path, a.status, a.body)
		}
		if _, ok := p.raw["next-page-token"]; !ok {
			f.t.Fatalf("page %d of %s has no next-page-token: %s", page, path, a.body)
		}
		n := len(p.Identifiers) + len(p.Namespaces)
		if n > size || (p.Next != nil && n == 0) {
			f.t.Fatalf("page %d of %s: %d items, pageSize %d, next %v", page, path, n, size, p.Next)
		}
		for _, id := range p.Identifiers {
			out = append(out, strings.Join(id.Namespace, ".")+"."+id.Name)
		}
		for _, ns := range p.Namespaces {
			out = append(out, strings.Join(ns, "."))
		}
		if p.Next == nil {
			return out
		}
		token = *p.Next
		if between != nil {
			between(page)
		}
		if page > 1000 {
			f.t.Fatal("pages never end")
		}
	}
}

// TestPagination: lists page with pageToken and pageSize; every page holds at most
// pageSize items, the last says null; paging lists what one request lists, for admins
// and for readers whose tables are scattered; tables created and dropped between pages
// are listed at most once and the others exactly once; bad tokens and sizes are 400s
// naming the parameter.
func TestPagination(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	var big []string
	for i := range 23 {
		big = append(big, fmt.Sprintf("t%02d", i))
	}
	f.addTables("big", big...)
	if _, err := tables.Create(context.Background(), f.db, tables.Table{Namespace: "big", Name: "t05x", Topic: "x", Spec: testSpec}, 1); err != nil {
		t.Fatal(err) // not committed: never listed
	}
	for i := range 7 {
		f.addTables(fmt.Sprintf("ns%d", i), "orders")
	}
	ops := bearer(f.token("ops", opsSecret))
	etl := bearer(f.token("etl", etlSecret))

	_, all := f.list("/v1/namespaces/big/tables", ops...)
	var whole listPage
	json.Unmarshal(all.body, &whole)
	if all.status != 200 || len(whole.Identifiers) != 23 || whole.Next != nil || !strings.Contains(string(all.body), `"next-page-token":null`) {
		t.Fatalf("without pageToken: %d, %d tables, next %v", all.status, len(whole.Identifiers), whole.Next)
	}
	var want []string
	for _, id := range whole.Identifiers {
		want = append(want, "big."+id.Name)
	}
	for _, size := range []int{1, 4, 22, 23, 24, 5000} {
		if got := f.pageAll("/v1/namespaces/big/tables", size, nil, ops...); !slices.Equal(got, want) {
			t.Errorf("pageSize %d: %v", size, got)
		}
	}
	// pageSize alone lists everything, as the spec has it; an empty token starts at the
	// default page size.
	if p, _ := f.list("/v1/namespaces/big/tables?pageSize=2", ops...); len(p.Identifiers) != 23 || p.Next != nil {
		t.Errorf("pageSize without pageToken: %d tables, next %v", len(p.Identifiers), p.Next)
	}
	if p, _ := f.list("/v1/namespaces/big/tables?pageToken=", ops...); len(p.Identifiers) != 23 || p.Next != nil {
		t.Errorf("an empty pageToken alone: %d tables, next %v", len(p.Identifiers), p.Next)
	}

	// Namespaces: ops sees all ten; etl (default.*, sales.orders) two, among seven it
	// does not see.
	wantNS := []string{"big", "default", "ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "other", "sales"}
	if got := f.pageAll("/v1/namespaces", 3, nil, ops...); !slices.Equal(got, wantNS) {
		t.Errorf("ops's namespaces: %v", got)
	}
	if got := f.pageAll("/v1/namespaces", 1, nil, etl...); !slices.Equal(got, []string{"default", "sales"}) {
		t.Errorf("etl's namespaces: %v", got)
	}
	if got := f.pageAll("/v1/namespaces/sales/tables", 1, nil, etl...); !slices.Equal(got, []string{"sales.orders"}) {
		t.Errorf("etl's sales tables: %v", got)
	}
	if got := f.pageAll("/v1/namespaces?parent=sales", 2, nil, etl...); len(got) != 0 {
		t.Errorf("children of sales: %v", got)
	}

	// Between pages: t00 (listed already) and t20 (not yet) dropped, t05a and t99 created.
	got := f.pageAll("/v1/namespaces/big/tables", 5, func(page int) {
		if page != 0 {
			return
		}
		for _, n := range []string{"t00", "t20"} {
			if err := tables.Drop(context.Background(), f.db, "big", n); err != nil {
				t.Fatal(err)
			}
		}
		f.addTables("big", "t05a", "t99")
	}, ops...)
	seen := map[string]int{}
	for _, n := range got {
		seen[n]++
	}
	for _, n := range want {
		if n != "big.t00" && n != "big.t20" && seen[n] != 1 {
			t.Errorf("%s listed %d times across the changes: %v", n, seen[n], got)
		}
	}
	if seen["big.t20"] != 0 || seen["big.t00"] != 1 || seen["big.t99"] != 1 || seen["big.t05a"] > 1 {
		t.Errorf("changed tables listed %v", seen)
	}

	// Bad parameters: 400, the parameter named; nothing leaks.
	other := f.pageAll("/v1/namespaces", 1, nil, ops...)
	_ = other
	p, _ := f.list("/v1/namespaces?pageToken=&pageSize=1", ops...)
	nsToken := *p.Next
	p, _ = f.list("/v1/namespaces/big/tables?pageToken=&pageSize=1", ops...)
	tablesToken := *p.Next
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"l":"tables","s":"sales","a":"a"}`))
	for _, c := range []struct{ path, field, words string }{
		{"/v1/namespaces/big/tables?pageToken=&pageSize=0", "pageSize", "at least 1"},
		{"/v1/namespaces/big/tables?pageSize=-3", "pageSize", "at least 1"},
		{"/v1/namespaces/big/tables?pageToken=&pageSize=ten", "pageSize", `"ten"`},
		{"/v1/namespaces?pageSize=1&pageSize=2", "pageSize", "once"},
		{"/v1/namespaces/big/tables?pageToken=garbage!", "pageToken", "not a token Mink issued"},
		{"/v1/namespaces/big/tables?pageToken=" + base64.RawURLEncoding.EncodeToString([]byte("[1]")), "pageToken", "not a token Mink issued"},
		{"/v1/namespaces/big/tables?pageToken=" + strings.Repeat("A", 5000), "pageToken", "not a token Mink issued"},
		{"/v1/namespaces/big/tables?pageToken=" + nsToken, "pageToken", "another listing (namespaces)"},
		{"/v1/namespaces?pageToken=" + tablesToken, "pageToken", "another listing (the tables of big)"},
		{"/v1/namespaces/default/tables?pageToken=" + tablesToken, "pageToken", "not for this one (the tables of default)"},
		{"/v1/namespaces/big/tables?pageToken=" + forged, "pageToken", "another listing"},
		{"/v1/namespaces/default/views?pageToken=" + tablesToken, "pageToken", "another listing"},
	} {
		a := f.do("GET", c.path, nil, ops...)
		if a.status != 400 {
			t.Errorf("%s: %d %s", c.path, a.status, a.body)
			continue
		}
		if e := a.envelope(t); e.Type != "BadRequestException" || !strings.HasPrefix(e.Message, c.field+": ") || !strings.Contains(e.Message, c.words) {
			t.Errorf("%s: %+v, want %s saying %q", c.path, e, c.field, c.words)
		}
	}
	// A namespace etl does not see stays absent, paged or not.
	if _, a := f.list("/v1/namespaces/ns1/tables?pageToken=&pageSize=1", etl...); a.status != 404 {
		t.Errorf("etl pages ns1's tables: %d %s", a.status, a.body)
	}
	if _, a := f.list("/v1/namespaces/nowhere/tables?pageToken=", ops...); a.status != 404 {
		t.Errorf("tables of no namespace: %d %s", a.status, a.body)
	}
}

// TestViews: no views: an existing namespace lists none (with the pagination field), a
// view is 404 NoSuchViewException (no body for HEAD), a namespace that does not exist
// (or that a reader does not see) is 404 NoSuchNamespaceException.
func TestViews(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	etl := bearer(f.token("etl", etlSecret))
	for _, path := range []string{"/v1/namespaces/default/views", "/v1/namespaces/default/views?pageToken=&pageSize=5"} {
		if a := f.do("GET", path, nil, etl...); a.status != 200 || string(a.body) != `{"next-page-token":null,"identifiers":[]}` {
			t.Errorf("%s: %d %s", path, a.status, a.body)
		}
	}
	for _, c := range []struct {
		method, path string
		status       int
		typ, words   string
	}{
		{"GET", "/v1/namespaces/default/views/v", 404, noSuchView, "view default.v does not exist"},
		{"GET", "/v1/namespaces/nowhere/views/v", 404, noSuchNamespace, "namespace nowhere does not exist"},
		{"GET", "/v1/namespaces/other/views/v", 404, noSuchNamespace, "namespace other does not exist"},
		{"GET", "/v1/namespaces/other/views", 404, noSuchNamespace, "namespace other does not exist"},
		{"GET", "/v1/namespaces/nowhere/views", 404, noSuchNamespace, "namespace nowhere does not exist"},
		{"GET", "/v1/namespaces/default/views?pageSize=x", 400, "BadRequestException", "pageSize"},
		{"HEAD", "/v1/namespaces/default/views/v", 404, "", ""},
		{"HEAD", "/v1/namespaces/other/views/v", 404, "", ""},
	} {
		a := f.do(c.method, c.path, nil, etl...)
		if a.status != c.status {
			t.Errorf("%s %s: %d %s", c.method, c.path, a.status, a.body)
			continue
		}
		if c.method == "HEAD" {
			if len(a.body) != 0 {
				t.Errorf("HEAD %s has a body", c.path)
			}
			continue
		}
		if e := a.envelope(t); e.Type != c.typ || !strings.Contains(e.Message, c.words) {
			t.Errorf("%s %s: %+v", c.method, c.path, e)
		}
	}
}

// TestExistenceChecks: HEAD of namespaces and tables: 204 or 404 (403 for a table a
// reader may not read), never a body.
func TestExistenceChecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	etl := bearer(f.token("etl", etlSecret))
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/v1/namespaces/default", 204}, {"/v1/namespaces/nowhere", 404}, {"/v1/namespaces/other", 404},
		{"/v1/namespaces/default%1Fsub", 404},
		{"/v1/namespaces/default/tables/orders", 204}, {"/v1/namespaces/default/tables/fresh", 404},
		{"/v1/namespaces/default/tables/nothing", 404}, {"/v1/namespaces/sales/tables/refunds", 403},
		{"/v1/namespaces/other/tables/secret", 404},
	} {
		a := f.do("HEAD", c.path, nil, etl...)
		if a.status != c.status || len(a.body) != 0 {
			t.Errorf("HEAD %s: %d with %d body bytes, want %d and none", c.path, a.status, len(a.body), c.status)
		}
	}
}

// snapshotTable commits a table with three snapshots, as the writer's metadata.
func (f *fixture) snapshotTable(name string) icebergmeta.Table {
	f.t.Helper()
	ctx := context.Background()
	tbl, err := tables.Create(ctx, f.db, tables.Table{Namespace: "default", Name: name, Topic: name, Spec: testSpec}, 2)
	if err != nil {
		f.t.Fatal(err)
	}
	schema, err := testSpec.IcebergSchema()
	if err != nil {
		f.t.Fatal(err)
	}
	it := icebergmeta.Table{Namespace: "default", Name: name, Schema: schema}
	res, err := icebergmeta.Create(it)
	if err != nil {
		f.t.Fatal(err)
	}
	files := map[string][]byte{}
	store := func(res *icebergmeta.Result) {
		for _, fl := range res.Files {
			files[fl.Key] = fl.Content
			if _, err := f.db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, $2, $3)`, tbl.ID, fl.Key, fl.Content); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	store(res)
	base := icebergmeta.Base{Version: 1, Key: res.Key, Metadata: res.Metadata}
	r := icebergmeta.NewReader(icebergmeta.StoreFunc(func(_ context.Context, key string) ([]byte, error) { return files[key], nil }))
	for i := range int64(3) {
		sha := fmt.Sprintf("%064x", i)
		res, err := icebergmeta.Commit(ctx, r, it, base, icebergmeta.Change{Operation: table.OpAppend, Now: time.Now(),
			Add: []icebergmeta.DataFile{{Key: layout.DataKey("default", name, 0, i, i+1, sha), Partition: 0, Start: i, End: i + 1, Records: 1, Size: 10, SHA256: sha}}})
		if err != nil {
			f.t.Fatal(err)
		}
		store(res)
		base = icebergmeta.Base{Version: res.Version, Key: res.Key, Metadata: res.Metadata}
	}
	if _, err := f.db.Exec(ctx, `INSERT INTO mink_table_meta (table_id, metadata_key, version) VALUES ($1, $2, $3)`, tbl.ID, base.Key, base.Version); err != nil {
		f.t.Fatal(err)
	}
	return it
}

type loadAnswer struct {
	Location string          `json:"metadata-location"`
	Metadata json.RawMessage `json:"metadata"`
	Config   map[string]string
}

func snapshotCount(t *testing.T, a answer) (int, table.Metadata) {
	t.Helper()
	var l loadAnswer
	if err := json.Unmarshal(a.body, &l); err != nil {
		t.Fatalf("%v: %s", err, a.body)
	}
	md, err := table.ParseMetadataBytes(l.Metadata)
	if err != nil {
		t.Fatalf("iceberg-go refuses the metadata: %v", err)
	}
	return len(md.Snapshots()), md
}

// TestSnapshotsParameter: snapshots=all (or none) answers every snapshot, refs only
// main's, with a log and refs naming it; anything else is a 400 naming the parameter.
// The two forms have different ETags.
func TestSnapshotsParameter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.snapshotTable("history")
	base := "/v1/namespaces/default/tables/history"
	etags := map[string]string{}
	for _, q := range []string{"", "?snapshots=all", "?snapshots=ALL", "?snapshots=refs", "?snapshots=Refs"} {
		a := f.do("GET", base+q, nil)
		if a.status != 200 {
			t.Fatalf("%s: %d %s", q, a.status, a.body)
		}
		n, md := snapshotCount(t, a)
		want := 3
		if strings.Contains(strings.ToLower(q), "refs") {
			want = 1
			if md.CurrentSnapshot() == nil || len(slices.Collect(md.SnapshotLogs())) != 1 || slices.Collect(md.SnapshotLogs())[0].SnapshotID != md.CurrentSnapshot().SnapshotID {
				t.Errorf("%s: current %v, log %v", q, md.CurrentSnapshot(), slices.Collect(md.SnapshotLogs()))
			}
		}
		if n != want {
			t.Errorf("%s: %d snapshots, want %d", q, n, want)
		}
		etags[strings.ToLower(q)] = a.header.Get("ETag")
	}
	if etags[""] != etags["?snapshots=all"] || etags["?snapshots=refs"] == etags[""] || etags["?snapshots=refs"] == "" {
		t.Errorf("ETags %v: all and the default must share one, refs have its own", etags)
	}
	for _, q := range []string{"?snapshots=bogus", "?snapshots=", "?snapshots=all&snapshots=refs"} {
		a := f.do("GET", base+q, nil)
		if a.status != 400 {
			t.Errorf("%s: %d %s", q, a.status, a.body)
			continue
		}
		if e := a.envelope(t); e.Type != "BadRequestException" || !strings.HasPrefix(e.Message, "snapshots: ") {
			t.Errorf("%s: %+v", q, e)
		}
	}
}

// TestETag: a load's ETag is stable while its answer is, changes with every commit, and
// If-None-Match with it (or *, or in a list, or weak) answers 304 without a body;
// answers carrying fresh vended credentials never share one.
func TestETag(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	ops := bearer(f.token("ops", opsSecret))
	path := "/v1/namespaces/default/tables/orders"
	a := f.do("GET", path, nil, ops...)
	etag := a.header.Get("ETag")
	if a.status != 200 || !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 10 {
		t.Fatalf("load: %d, ETag %q", a.status, etag)
	}
	if b := f.do("GET", path, nil, ops...); b.header.Get("ETag") != etag || string(b.body) != string(a.body) {
		t.Errorf("a second load: ETag %q, want %q", b.header.Get("ETag"), etag)
	}
	for _, inm := range []string{etag, `"other", ` + etag, "W/" + etag, "*"} {
		b := f.do("GET", path, nil, append([]string{"If-None-Match", inm}, ops...)...)
		if b.status != 304 || len(b.body) != 0 || b.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d with %d body bytes, ETag %q", inm, b.status, len(b.body), b.header.Get("ETag"))
		}
	}
	if b := f.do("GET", path, nil, append([]string{"If-None-Match", `"stale"`}, ops...)...); b.status != 200 || len(b.body) == 0 {
		t.Errorf("a stale ETag: %d", b.status)
	}
	// A commit: new metadata, new ETag; the old one no longer matches.
	tbl, err := tables.Get(context.Background(), f.db, "default", "orders")
	if err != nil {
		t.Fatal(err)
	}
	f.commit(tbl.ID, "default/orders/metadata/00002-y.metadata.json", []byte(`{"format-version":2,"table-uuid":"u-orders","properties":{"k":"v"}}`))
	b := f.do("GET", path, nil, append([]string{"If-None-Match", etag}, ops...)...)
	if b.status != 200 || b.header.Get("ETag") == etag || b.header.Get("ETag") == "" {
		t.Errorf("after a commit: %d, ETag %q (was %q)", b.status, b.header.Get("ETag"), etag)
	}
	// Fresh credentials each time: each answer its own ETag, never a 304 on an old one.
	vended := append([]string{headerAccessDelegation, "vended-credentials"}, ops...)
	v1, v2 := f.do("GET", path, nil, vended...), f.do("GET", path, nil, vended...)
	if v1.status != 200 || v1.header.Get("ETag") == b.header.Get("ETag") || (string(v1.body) != string(v2.body)) != (v1.header.Get("ETag") != v2.header.Get("ETag")) {
		t.Errorf("vended: ETags %q %q (unvended %q); bodies equal %v", v1.header.Get("ETag"), v2.header.Get("ETag"), b.header.Get("ETag"), string(v1.body) == string(v2.body))
	}
	if v := f.do("GET", path, nil, append([]string{"If-None-Match", b.header.Get("ETag")}, vended...)...); v.status != 200 {
		t.Errorf("vended credentials answered 304 on an ETag without them: %d", v.status)
	}
}

// TestAccessDelegation: vended-credentials is offered (with auth on); remote-signing is
// not: asking for it alone gets a load without credentials, as the spec lets a server
// choose none; unknown mechanisms are ignored the same way.
func TestAccessDelegation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	etl := bearer(f.token("etl", etlSecret))
	path := "/v1/namespaces/default/tables/orders"
	type load struct {
		Config map[string]string   `json:"config"`
		Creds  []StorageCredential `json:"storage-credentials"`
	}
	for _, c := range []struct {
		header string
		vended bool
	}{
		{"", false}, {"remote-signing", false}, {"bogus", false}, {"vended-credentials", true},
		{"remote-signing, vended-credentials", true}, {"Vended-Credentials", true},
	} {
		hs := etl
		if c.header != "" {
			hs = append([]string{headerAccessDelegation, c.header}, etl...)
		}
		a := f.do("GET", path, nil, hs...)
		var l load
		if err := json.Unmarshal(a.body, &l); a.status != 200 || err != nil {
			t.Fatalf("%q: %d %s", c.header, a.status, a.body)
		}
		if got := len(l.Creds) == 1 && l.Config[keySessionToken] != ""; got != c.vended || l.Config["s3.remote-signing-enabled"] != "" {
			t.Errorf("%q: vended %v, want %v: %s", c.header, got, c.vended, a.body)
		}
	}
}
