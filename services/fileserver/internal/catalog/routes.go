package catalog

// The catalog's endpoints, in one table: the routes it serves (each advertised in
// /v1/config's endpoints, so clients know what they may call) and the spec's write
// endpoints it refuses (never advertised). Routing and advertising are both derived
// from it; other packages add theirs with Options.Routes.

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/minkhq/mink/pkg/apierr"
)

// Route is one endpoint the catalog serves: Method and Path as the spec writes them in
// endpoints ("GET", "/v1/{prefix}/namespaces/{namespace}"), and its handler. The
// handler reads a path's wildcards with PathValue under the spec's names, '-' read as
// '_' ("{plan-id}" is PathValue("plan_id")). It runs behind the door: the caller's
// principal is in its context (auth.FromContext).
type Route struct {
	Method  string
	Path    string
	Handler http.HandlerFunc
}

// The spec's paths.
const (
	pathNamespaces     = "/v1/{prefix}/namespaces"
	pathNamespace      = pathNamespaces + "/{namespace}"
	pathProperties     = pathNamespace + "/properties"
	pathTables         = pathNamespace + "/tables"
	pathTable          = pathTables + "/{table}"
	pathCredentials    = pathTable + "/credentials"
	pathMetrics        = pathTable + "/metrics"
	pathRegister       = pathNamespace + "/register"
	pathViews          = pathNamespace + "/views"
	pathView           = pathViews + "/{view}"
	pathRegisterView   = pathNamespace + "/register-view"
	pathRenameTable    = "/v1/{prefix}/tables/rename"
	pathRenameView     = "/v1/{prefix}/views/rename"
	pathTransactions   = "/v1/{prefix}/transactions/commit"
	pathConfig         = "/v1/config"
	prefixPlaceholder  = "/{prefix}"
	statusUnsupported  = http.StatusNotAcceptable // UnsupportedOperationException, where the spec documents it
	statusNotPermitted = http.StatusForbidden     // where it does not: nobody may write through this catalog
)

// routes are the endpoints the catalog itself serves, in the order endpoints lists
// them. A HEAD route is its own endpoint in the spec (existence checks), so it is here
// beside its GET.
func (c *catalog) routes() []Route {
	return []Route{
		{http.MethodGet, pathNamespaces, c.listNamespaces},
		{http.MethodGet, pathNamespace, c.loadNamespace},
		{http.MethodHead, pathNamespace, c.loadNamespace},
		{http.MethodGet, pathTables, c.listTables},
		{http.MethodGet, pathTable, c.loadTable},
		{http.MethodHead, pathTable, c.tableExists},
		{http.MethodGet, pathCredentials, c.loadCredentials},
		{http.MethodPost, pathMetrics, c.metrics},
		{http.MethodGet, pathViews, c.listViews},
		{http.MethodGet, pathView, c.loadView},
		{http.MethodHead, pathView, c.loadView},
	}
}

// refused are the spec's write endpoints: Mink's tables are created, changed and
// dropped with the admin API. Each answers with the status the spec documents for an
// operation a server does not support: 406 UnsupportedOperationException where the
// endpoint lists it, else 403 (the one refusal every endpoint lists). The table's
// endpoints are never advertised, so clients that read endpoints (Java from 1.7,
// iceberg-go) refuse them before sending anything.
var refused = []struct {
	method, path string
	status       int
}{
	{http.MethodPost, pathNamespaces, statusUnsupported}, // createNamespace
	{http.MethodDelete, pathNamespace, statusNotPermitted},
	{http.MethodPost, pathProperties, statusUnsupported},
	{http.MethodPost, pathTables, statusNotPermitted}, // createTable
	{http.MethodPost, pathRegister, statusNotPermitted},
	{http.MethodPost, pathTable, statusNotPermitted}, // updateTable
	{http.MethodDelete, pathTable, statusNotPermitted},
	{http.MethodPost, pathRenameTable, statusUnsupported},
	{http.MethodPost, pathTransactions, statusNotPermitted},
	{http.MethodPost, pathViews, statusNotPermitted}, // createView
	{http.MethodPost, pathView, statusNotPermitted},  // replaceView
	{http.MethodDelete, pathView, statusNotPermitted},
	{http.MethodPost, pathRenameView, statusUnsupported},
	{http.MethodPost, pathRegisterView, statusNotPermitted},
}

// muxPattern is the ServeMux pattern of a spec endpoint: no prefix (Mink's config sets
// none), wildcards named as Go allows.
func muxPattern(method, path string) string {
	segs := strings.Split(strings.Replace(path, prefixPlaceholder, "", 1), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = strings.ReplaceAll(s, "-", "_")
		}
	}
	return method + " " + strings.Join(segs, "/")
}

// register routes served and refused endpoints on mux and returns the endpoints to
// advertise: every served route, in order.
func (c *catalog) register(mux *http.ServeMux, extra []Route) ([]string, error) {
	var endpoints []string
	seen := map[string]bool{}
	for _, rt := range append(c.routes(), extra...) {
		if rt.Handler == nil || !strings.HasPrefix(rt.Path, "/v1/") {
			return nil, fmt.Errorf("catalog: route %s %s: a handler and a /v1/ path are required", rt.Method, rt.Path)
		}
		e := rt.Method + " " + rt.Path
		if seen[e] {
			return nil, fmt.Errorf("catalog: route %s is given twice", e)
		}
		seen[e] = true
		mux.HandleFunc(muxPattern(rt.Method, rt.Path), rt.Handler)
		endpoints = append(endpoints, e)
	}
	for _, rf := range refused {
		if seen[rf.method+" "+rf.path] {
			continue // served by an extra route
		}
		mux.HandleFunc(muxPattern(rf.method, rf.path), c.refuse(rf.status))
	}
	return endpoints, nil
}

// refuse answers a write endpoint: the kind is what apierr maps to status.
func (c *catalog) refuse(status int) http.HandlerFunc {
	kind := apierr.Unimplemented
	if status == statusNotPermitted {
		kind = apierr.PermissionDenied
	}
	return func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, apierr.New(kind, "%s %s: Mink's catalog is read-only; tables are created, changed and dropped with the admin API (minkctl table create)",
			r.Method, shortPath(r)), "")
	}
}
