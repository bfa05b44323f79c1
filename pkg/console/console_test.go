package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/console"
)

// admin is the admin API's core as far as these tests need it: it answers GetStatus and
// records which principal drained which node. What it stands for is tested in pkg/admin;
// here the gateway in front of it is.
type admin struct {
	adminv1.UnimplementedAdminServiceServer
	mu      sync.Mutex
	drained []string
}

func (a *admin) GetStatus(ctx context.Context, _ *adminv1.GetStatusRequest) (*adminv1.GetStatusResponse, error) {
	return &adminv1.GetStatusResponse{NodeId: "n1", AuthEnabled: auth.EnabledIn(ctx)}, nil
}

func (a *admin) DrainNode(ctx context.Context, req *adminv1.DrainNodeRequest) (*adminv1.DrainNodeResponse, error) {
	if req.GetNode() == "" {
		return nil, apierr.GRPC(apierr.Invalid("node", "required: name the node to drain"))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drained = append(a.drained, auth.FromContext(ctx).ID+":"+req.GetNode())
	return &adminv1.DrainNodeResponse{NodeId: req.GetNode(), Draining: true}, nil
}

const (
	adminSecret  = "ops-secret-0123456789"
	readerSecret = "etl-secret-0123456789"
)

// door is the node's: errors mapped around the credentials check (pkg/node chains them so).
func door(a *auth.Authority) grpc.UnaryServerInterceptor {
	errs, creds := apierr.UnaryServerInterceptor(nil), a.UnaryServerInterceptor()
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return errs(ctx, req, info, func(ctx context.Context, req any) (any, error) { return creds(ctx, req, info, h) })
	}
}

func newConsole(t *testing.T, authOn, tls bool) (*httptest.Server, *admin) {
	t.Helper()
	var a *auth.Authority
	if authOn {
		var err error
		a, err = auth.New(&auth.File{ClusterSecret: "0123456789abcdef0123456789abcdef-cluster", Principals: []auth.PrincipalConfig{
			{ID: "etl", Secret: readerSecret, Role: auth.RoleReader, Tables: []string{"default.*"}},
			{ID: "ops", Secret: adminSecret, Role: auth.RoleAdmin},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	impl := &admin{}
	c, err := console.New(console.Options{NodeID: "n1", Service: &adminv1.AdminService_ServiceDesc, Impl: impl,
		Interceptor: door(a), Auth: a, TLS: tls})
	if err != nil {
		t.Fatal(err)
	}
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(c)
	} else {
		srv = httptest.NewServer(c)
	}
	t.Cleanup(srv.Close)
	return srv, impl
}

// browser is a client with a cookie jar, as a browser is.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newBrowser(t *testing.T, srv *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	c := *srv.Client() // its own jar: a browser of its own
	c.Jar = jar
	return &browser{t: t, base: srv.URL + "/", c: &c}
}

func (b *browser) do(method, path string, body any, hdr map[string]string) (*http.Response, map[string]any) {
	b.t.Helper()
	var r io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		r = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, b.base+path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.csrf != "" {
		req.Header.Set(console.CSRFHeader, b.csrf)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &out)
	return resp, out
}

func (b *browser) login(creds map[string]string) *http.Response {
	b.t.Helper()
	resp, out := b.do("POST", "api/login", creds, nil)
	if resp.StatusCode == http.StatusOK {
		b.csrf, _ = out["csrf"].(string)
	}
	return resp
}

func cookieOf(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie set", console.CookieName)
	return nil
}

// TestSignInAndRoles: a principal signs in with its id and secret or with a token; the
// session cookie holds an access token of the cluster (never the secret), HttpOnly and
// SameSite=Strict, with no Path (so it stays under a proxy's prefix); a reader's admin
// call is refused by the door as over gRPC, an admin's is served as that admin; wrong
// credentials and no session are Unauthenticated.
func TestSignInAndRoles(t *testing.T) {
	srv, impl := newConsole(t, true, false)

	anon := newBrowser(t, srv)
	if resp, out := anon.do("GET", "api/session", nil, nil); resp.StatusCode != http.StatusUnauthorized || out["code"] != "Unauthenticated" {
		t.Errorf("no session: %d %v", resp.StatusCode, out)
	}
	if resp := anon.login(map[string]string{"client_id": "ops", "client_secret": "wrong-secret-012345"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d", resp.StatusCode)
	}
	if resp, _ := anon.do("POST", "api/call/GetStatus", map[string]any{}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a call without a session: %d", resp.StatusCode)
	}

	reader := newBrowser(t, srv)
	resp := reader.login(map[string]string{"client_id": "etl", "client_secret": readerSecret})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reader sign-in: %d", resp.StatusCode)
	}
	ck := cookieOf(t, resp)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "" || ck.MaxAge <= 0 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, no Path, a Max-Age; Secure only with TLS", ck)
	}
	if strings.Contains(ck.Value, readerSecret) || !strings.HasPrefix(ck.Value, "eyJ") {
		t.Errorf("the cookie holds %q: want an access token, not the secret", ck.Value)
	}
	if _, out := reader.do("GET", "api/session", nil, nil); out["principal"] != "etl" || out["admin"] != false || out["csrf"] != reader.csrf {
		t.Errorf("reader's session: %v", out)
	}
	if resp, out := reader.do("POST", "api/call/GetStatus", map[string]any{}, nil); resp.StatusCode != http.StatusOK || out["nodeId"] != "n1" || out["authEnabled"] != true {
		t.Errorf("reader's GetStatus: %d %v", resp.StatusCode, out)
	}
	resp, out := reader.do("POST", "api/call/DrainNode", map[string]any{"node": "n2"}, nil)
	if resp.StatusCode != http.StatusForbidden || out["code"] != "PermissionDenied" || !strings.Contains(out["message"].(string), "role admin") {
		t.Errorf("reader's DrainNode: %d %v", resp.StatusCode, out)
	}

	admin := newBrowser(t, srv)
	if resp := admin.login(map[string]string{"token": adminSecret}); resp.StatusCode != http.StatusOK {
		t.Fatalf("admin sign-in with a token: %d", resp.StatusCode)
	}
	if resp, out := admin.do("POST", "api/call/DrainNode", map[string]any{"node": "n2"}, nil); resp.StatusCode != http.StatusOK || out["draining"] != true {
		t.Errorf("admin's DrainNode: %d %v", resp.StatusCode, out)
	}
	// The API's validation error, as it is.
	resp, out = admin.do("POST", "api/call/DrainNode", map[string]any{}, nil)
	if resp.StatusCode != http.StatusBadRequest || out["code"] != "InvalidArgument" || !strings.Contains(out["message"].(string), "node") {
		t.Errorf("DrainNode without a node: %d %v", resp.StatusCode, out)
	}
	resp, out = admin.do("POST", "api/call/NoSuchMethod", map[string]any{}, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown method: %d %v", resp.StatusCode, out)
	}
	resp, out = admin.do("POST", "api/call/DrainNode", map[string]any{"node": "n2", "bogus": 1}, nil)
	if resp.StatusCode != http.StatusBadRequest || out["code"] != "InvalidArgument" {
		t.Errorf("a request with an unknown field: %d %v", resp.StatusCode, out)
	}
	if len(impl.drained) != 1 || impl.drained[0] != "ops:n2" {
		t.Errorf("drained: %v, want the admin's one", impl.drained)
	}
	// Signed out, the cookie is gone.
	if resp, _ := admin.do("POST", "api/logout", map[string]any{}, nil); resp.StatusCode != http.StatusOK || cookieOf(t, resp).MaxAge >= 0 {
		t.Errorf("logout: %d", resp.StatusCode)
	}
	if resp, _ := admin.do("GET", "api/session", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after logout: %d", resp.StatusCode)
	}
}

// TestCSRF: every POST needs the CSRF token of its own session: none, another session's
// (a reader's, stolen), or a made-up one is refused before the admin API is called; and
// a request another site's page makes (Sec-Fetch-Site: cross-site) or one that is not
// JSON (a plain HTML form) is refused whatever it carries.
func TestCSRF(t *testing.T) {
	srv, impl := newConsole(t, true, false)
	admin, reader := newBrowser(t, srv), newBrowser(t, srv)
	admin.login(map[string]string{"client_id": "ops", "client_secret": adminSecret})
	reader.login(map[string]string{"client_id": "etl", "client_secret": readerSecret})
	own := admin.csrf
	for name, tok := range map[string]string{"none": "", "the reader's": reader.csrf, "made up": "AAAA" + own[4:]} {
		admin.csrf = tok
		resp, out := admin.do("POST", "api/call/DrainNode", map[string]any{"node": "n2"}, nil)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(out["message"].(string), "CSRF") {
			t.Errorf("%s CSRF token: %d %v", name, resp.StatusCode, out)
		}
	}
	admin.csrf = own
	resp, _ := admin.do("POST", "api/call/DrainNode", map[string]any{"node": "n2"}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site request: %d", resp.StatusCode)
	}
	form, _ := http.NewRequest("POST", admin.base+"api/call/DrainNode", strings.NewReader(url.Values{"node": {"n2"}}.Encode()))
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	form.Header.Set(console.CSRFHeader, own)
	if resp, err := admin.c.Do(form); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a form post: %v %v", resp, err)
	}
	if len(impl.drained) != 0 {
		t.Errorf("forged requests drained %v", impl.drained)
	}
	if resp, _ := admin.do("POST", "api/call/DrainNode", map[string]any{"node": "n2"}, nil); resp.StatusCode != http.StatusOK || len(impl.drained) != 1 {
		t.Errorf("the admin's own request: %d, drained %v", resp.StatusCode, impl.drained)
	}
}

// TestHeadersAndCaps: every answer (the page, its assets, the API, errors) carries a
// Content-Security-Policy that allows no inline script, and no framing; the page loads
// no script inline and nothing from elsewhere; a body over the cap is refused; cookies
// are Secure with TLS.
func TestHeadersAndCaps(t *testing.T) {
	srv, _ := newConsole(t, true, true)
	b := newBrowser(t, srv)
	for _, path := range []string{"", "app.js", "vendor/uPlot.iife.min.js", "api/session", "nope"} {
		resp, _ := b.do("GET", path, nil, nil)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /%s: CSP %q, nosniff %q", path, csp, resp.Header.Get("X-Content-Type-Options"))
		}
	}
	resp, err := b.c.Get(b.base)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, bad := range []string{"<script>", "onclick=", "http://", "https://", "style="} {
		if strings.Contains(string(page), bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	if !strings.Contains(string(page), `src="app.js"`) {
		t.Errorf("the page does not load app.js by a relative URL")
	}
	if resp := b.login(map[string]string{"client_id": "ops", "client_secret": adminSecret}); !cookieOf(t, resp).Secure {
		t.Errorf("with TLS the cookie is not Secure")
	}
	big := map[string]string{"node": strings.Repeat("x", console.MaxBody+1)}
	if resp, _ := b.do("POST", "api/call/DrainNode", big, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body over the cap: %d", resp.StatusCode)
	}
}

// TestAuthOff: without auth a visitor gets an anonymous admin session at once (the page
// says auth is off), still bound to a CSRF token; sign-in has nothing to do.
func TestAuthOff(t *testing.T) {
	srv, impl := newConsole(t, false, false)
	b := newBrowser(t, srv)
	resp, out := b.do("GET", "api/session", nil, nil)
	if resp.StatusCode != http.StatusOK || out["auth"] != false || out["admin"] != true {
		t.Fatalf("session: %d %v", resp.StatusCode, out)
	}
	if resp, _ := b.do("POST", "api/call/DrainNode", map[string]any{"node": "n2"}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d", resp.StatusCode)
	}
	b.csrf = out["csrf"].(string)
	if resp, _ := b.do("POST", "api/call/DrainNode", map[string]any{"node": "n2"}, nil); resp.StatusCode != http.StatusOK || len(impl.drained) != 1 {
		t.Errorf("with it: %d, %v", resp.StatusCode, impl.drained)
	}
	if resp := b.login(map[string]string{"client_id": "ops", "client_secret": adminSecret}); resp.StatusCode != http.StatusConflict {
		t.Errorf("sign-in with auth off: %d", resp.StatusCode)
	}
}

// history is an admin core of several nodes for the charts: ListNodes names them and
// GetHistory answers each one's samples (forwarding is pkg/admin's, tested there).
type history struct {
	admin
	series map[string][]*adminv1.Series
	asked  []string // the nodes GetStatus was asked of
}

func (h *history) ListNodes(context.Context, *adminv1.ListNodesRequest) (*adminv1.ListNodesResponse, error) {
	out := &adminv1.ListNodesResponse{}
	for id := range h.series {
		out.Nodes = append(out.Nodes, &adminv1.Node{NodeId: id, Roles: []adminv1.Role{adminv1.Role_ROLE_FILESERVER}})
	}
	return out, nil
}

func (h *history) GetStatus(_ context.Context, req *adminv1.GetStatusRequest) (*adminv1.GetStatusResponse, error) {
	h.mu.Lock()
	h.asked = append(h.asked, req.GetNode())
	h.mu.Unlock()
	return &adminv1.GetStatusResponse{NodeId: req.GetNode(), Figures: map[string]string{"cache_bytes": "1"}}, nil
}

func (h *history) GetHistory(_ context.Context, req *adminv1.GetHistoryRequest) (*adminv1.GetHistoryResponse, error) {
	return &adminv1.GetHistoryResponse{NodeId: req.GetNode(), Interval: durationpb.New(5 * time.Second), Series: h.series[req.GetNode()]}, nil
}

// anonymous is a browser with a session of node's console over impl, with auth off.
func anonymous(t *testing.T, node string, impl adminv1.AdminServiceServer) *browser {
	t.Helper()
	c, err := console.New(console.Options{NodeID: node, Service: &adminv1.AdminService_ServiceDesc, Impl: impl, Interceptor: door(nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, srv)
	b.do("GET", "api/session", nil, nil)
	return b
}

// TestCharts: the charts put every node's samples on one axis: counters as rates between
// a node's samples, summed over nodes per table; a counter that went back (a restart)
// gives no rate; gauges as they are, summed; file servers apart; the axis starts at the
// first sample.
func TestCharts(t *testing.T) {
	now := time.Now().Truncate(5 * time.Second)
	at := func(steps ...int) []*timestamppb.Timestamp {
		var out []*timestamppb.Timestamp
		for _, s := range steps {
			out = append(out, timestamppb.New(now.Add(time.Duration(s)*5*time.Second)))
		}
		return out
	}
	h := &history{series: map[string][]*adminv1.Series{
		"idx-a": {{Name: "records_indexed", Table: "default.t", Times: at(-3, -2, -1), Values: []float64{100, 150, 200}},
			{Name: "lag_records", Table: "default.t", Times: at(-3, -2, -1), Values: []float64{1, 2, 3}}},
		"idx-b": {{Name: "records_indexed", Table: "default.t", Times: at(-3, -2, -1), Values: []float64{500, 10, 60}},
			{Name: "lag_records", Table: "default.t", Times: at(-3, -2, -1), Values: []float64{10, 20, 30}}},
		"fs-1": {{Name: "s3_gets", Times: at(-2, -1), Values: []float64{0, 25}}, {Name: "table_loads", Times: at(-2, -1), Values: []float64{3, 3}}},
	}}
	b := anonymous(t, "idx-a", h)
	resp, err := b.c.Get(b.base + "api/charts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Times       []int64
		Tables      map[string]map[string][]*float64
		FileServers map[string]map[string][]*float64 `json:"fileservers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	str := func(vs []*float64) string {
		var out []string
		for _, v := range vs {
			if v == nil {
				out = append(out, "-")
			} else {
				out = append(out, strconv.FormatFloat(*v, 'g', -1, 64))
			}
		}
		return strings.Join(out, " ")
	}
	// Steps -3, -2, -1 and now: idx-b's counter went back at -2 (no rate there).
	for what, want := range map[string]string{
		"rate": "- 10 20 -", "lag": "11 22 33 -",
	} {
		if s := str(got.Tables["default.t"][what]); s != want {
			t.Errorf("default.t %s: %s, want %s", what, s, want)
		}
	}
	for what, want := range map[string]string{"s3_gets": "- - 5 -", "table_loads": "- - 0 -"} {
		if s := str(got.FileServers["fs-1"][what]); s != want {
			t.Errorf("fs-1 %s: %s, want %s", what, s, want)
		}
	}
	if len(got.Times) != 4 || got.Times[0] != now.Add(-15*time.Second).Unix() {
		t.Errorf("axis %v: want 4 steps from the first sample", got.Times)
	}
}

// TestFileServersPaged: a hundred file servers are shown 25 at a time, each page asking
// its own 25 for their status, and no other.
func TestFileServersPaged(t *testing.T) {
	h := &history{series: map[string][]*adminv1.Series{}}
	for i := range 100 {
		h.series[fmt.Sprintf("fs-%03d", i)] = nil
	}
	b := anonymous(t, "fs-000", h)
	_, out := b.do("GET", "api/fileservers?page=3", nil, nil)
	nodes, _ := out["nodes"].([]any)
	if out["total"] != float64(100) || len(nodes) != 25 || nodes[0].(map[string]any)["node"] != "fs-075" {
		t.Fatalf("page 4: %v", out)
	}
	if len(h.asked) != 25 || slices.Min(h.asked) != "fs-075" || slices.Max(h.asked) != "fs-099" {
		t.Errorf("asked for the status of %v, want fs-075 to fs-099", h.asked)
	}
	if st := nodes[0].(map[string]any)["status"].(map[string]any); st["nodeId"] != "fs-075" {
		t.Errorf("fs-075's status: %v", st)
	}
}
