package catalog

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

const (
	clusterSecret = "catalog-test-cluster-secret-0123456789abcdef"
	etlSecret     = "etl-secret+with/odd=chars%"
	opsSecret     = "ops-secret-0123456789"
	fileIOURL     = "http://fs-1:9000"
)

func testAuthFile() *auth.File {
	return &auth.File{ClusterSecret: clusterSecret, Principals: []auth.PrincipalConfig{
		{ID: "etl", Secret: etlSecret, Role: auth.RoleReader, Tables: []string{"default.*", "sales.orders"}},
		{ID: "ops", Secret: opsSecret, Role: auth.RoleAdmin},
	}}
}

func testAuthority(t testing.TB) *auth.Authority {
	t.Helper()
	a, err := auth.New(testAuthFile())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// logBuffer collects a handler's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// fixture is a catalog over a database of its own: default.{orders,events,fresh}
// (fresh uncommitted), sales.{orders,refunds}, other.secret.
type fixture struct {
	t    *testing.T
	db   pg.DB
	h    http.Handler
	a    *auth.Authority
	logs *logBuffer
}

var testSpec = tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "id", Type: "long"}}}

func newFixture(t *testing.T, authOn bool) *fixture {
	t.Helper()
	ctx := context.Background()
	db, _ := pgtest.DB(t)
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, tn := range [][2]string{{"default", "orders"}, {"default", "events"}, {"default", "fresh"},
		{"sales", "orders"}, {"sales", "refunds"}, {"other", "secret"}} {
		tbl, err := tables.Create(ctx, db, tables.Table{Namespace: tn[0], Name: tn[1], Topic: tn[0] + "-" + tn[1], Spec: testSpec}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if tn[1] == "fresh" {
			continue
		}
		key := tn[0] + "/" + tn[1] + "/metadata/00001-x.metadata.json"
		if _, err := db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, $2, $3)`,
			tbl.ID, key, []byte(`{"format-version":2,"table-uuid":"u-`+tn[1]+`"}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO mink_table_meta (table_id, metadata_key, version) VALUES ($1, $2, 1)`, tbl.ID, key); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{t: t, db: db, logs: &logBuffer{}}
	if authOn {
		f.a = testAuthority(t)
	}
	f.h = f.handler(db)
	return f
}

func (f *fixture) handler(db pg.DB) http.Handler {
	f.t.Helper()
	h, err := New(Options{DB: db, FileIO: S3Config(fileIOURL, "us-east-1"), Auth: f.a, LookupTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) envelope(t *testing.T) apierr.IcebergErrorModel {
	t.Helper()
	var e apierr.IcebergErrorResponse
	if err := json.Unmarshal(a.body, &e); err != nil || e.Error.Code != a.status || e.Error.Type == "" || e.Error.Message == "" {
		t.Fatalf("not an Iceberg error envelope of %d: %v: %s", a.status, err, a.body)
	}
	if a.header.Get("Content-Type") != "application/json" {
		t.Errorf("error content type %q", a.header.Get("Content-Type"))
	}
	return e.Error
}

func (a answer) oauthError(t *testing.T) OAuthError {
	t.Helper()
	var e OAuthError
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil ||
		!slices.Contains([]string{"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type", "invalid_scope"}, e.Error) {
		t.Fatalf("not an OAuthError: %v: %s", err, a.body)
	}
	return e
}

// do sends a request with headers (key, value pairs) to the handler.
func (f *fixture) do(method, target string, body io.Reader, headers ...string) answer {
	f.t.Helper()
	r := httptest.NewRequest(method, target, body)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return answer{w.Code, w.Header(), w.Body.Bytes()}
}

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// token gets an access token with client credentials.
func (f *fixture) token(id, secret string) string {
	f.t.Helper()
	a := f.do("POST", tokensPath, strings.NewReader(url.Values{"grant_type": {"client_credentials"},
		"client_id": {id}, "client_secret": {secret}, "scope": {"catalog"}}.Encode()), "Content-Type", "application/x-www-form-urlencoded")
	if a.status != 200 {
		f.t.Fatalf("token for %s: %d %s", id, a.status, a.body)
	}
	var tr OAuthTokenResponse
	if err := json.Unmarshal(a.body, &tr); err != nil {
		f.t.Fatal(err)
	}
	return tr.AccessToken
}

// signToken is a token as pkg/auth signs them (HS256 over a key derived from the
// cluster secret, the key's id in the header), with any expiry: what a test needs to
// make an expired one.
func signToken(t *testing.T, secret, subject string, exp time.Time) string {
	t.Helper()
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("mink/token/v1"))
	key := m.Sum(nil)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"kind": "access", "iss": "mink", "sub": subject,
		"iat": exp.Add(-time.Hour).Unix(), "exp": exp.Unix()})
	sum := sha256.Sum256(key)
	tok.Header["kid"] = hex.EncodeToString(sum[:4])
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func listedNames(t *testing.T, body []byte, field string) []string {
	t.Helper()
	var v map[string]json.RawMessage
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var out []string
	switch field {
	case "namespaces":
		var ns [][]string
		json.Unmarshal(v[field], &ns)
		for _, n := range ns {
			out = append(out, strings.Join(n, "."))
		}
	case "identifiers":
		var ids []identifier
		json.Unmarshal(v[field], &ids)
		for _, id := range ids {
			out = append(out, strings.Join(id.Namespace, ".")+"."+id.Name)
		}
	}
	return out
}

// TestAuthOff: without an Authority the catalog answers as before auth: no credentials
// needed, the dummy keys in every config, no vended credentials.
func TestAuthOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	a := f.do("GET", "/v1/config", nil)
	var cfg struct {
		Defaults  map[string]string `json:"defaults"`
		Endpoints []string          `json:"endpoints"`
	}
	if err := json.Unmarshal(a.body, &cfg); a.status != 200 || err != nil || !maps.Equal(cfg.Defaults, S3Config(fileIOURL, "us-east-1")) ||
		!slices.Contains(cfg.Endpoints, "GET "+pathTable) {
		t.Fatalf("config: %d %s", a.status, a.body)
	}
	a = f.do("GET", "/v1/namespaces/other/tables/secret", nil, headerAccessDelegation, "vended-credentials")
	var load struct {
		Config map[string]string `json:"config"`
		Creds  json.RawMessage   `json:"storage-credentials"`
	}
	if err := json.Unmarshal(a.body, &load); a.status != 200 || err != nil || !maps.Equal(load.Config, S3Config(fileIOURL, "us-east-1")) || load.Creds != nil {
		t.Fatalf("load: %d %s", a.status, a.body)
	}
	if got := listedNames(t, f.do("GET", "/v1/namespaces", nil).body, "namespaces"); !slices.Equal(got, []string{"default", "other", "sales"}) {
		t.Errorf("namespaces %v", got)
	}
	if a := f.do("GET", "/v1/namespaces/sales/tables/refunds/credentials", nil); a.status != 200 || string(a.body) != `{"storage-credentials":[]}` {
		t.Errorf("credentials with auth off: %d %s", a.status, a.body)
	}
	a = f.do("POST", tokensPath, strings.NewReader("grant_type=client_credentials&client_id=etl&client_secret=x"), "Content-Type", "application/x-www-form-urlencoded")
	if e := a.oauthError(t); a.status != 400 || e.Error != "invalid_request" || !strings.Contains(e.Description, "auth is off") {
		t.Errorf("token with auth off: %d %s", a.status, a.body)
	}
	if a := f.do("POST", "/v1/namespaces/x%1Fy/tables/t/metrics", strings.NewReader("not json")); a.status != 204 {
		t.Errorf("metrics with auth off: %d %s", a.status, a.body)
	}
	// Credentials sent anyway are ignored.
	if a := f.do("GET", "/v1/config", nil, bearer("nonsense")...); a.status != 200 {
		t.Errorf("config with a token and auth off: %d", a.status)
	}
}

// TestTokenEndpoint: the OAuth2 token endpoint, as each client calls it, and every
// OAuthError it answers.
func TestTokenEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	form := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	ct := []string{"Content-Type", "application/x-www-form-urlencoded"}
	basic := func(id, secret string) []string {
		return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))}
	}
	etlToken := f.token("etl", etlSecret)
	expired := signToken(t, clusterSecret, "etl", time.Now().Add(-time.Hour))
	forged := signToken(t, strings.Repeat("x", 40), "etl", time.Now().Add(time.Hour))

	ok := []struct {
		name      string
		body      string
		headers   []string
		principal string
	}{
		{"iceberg-go: form, scope catalog", form("grant_type", "client_credentials", "client_id", "etl", "client_secret", etlSecret, "scope", "catalog"), nil, "etl"},
		{"PyIceberg: bare secret", form("grant_type", "client_credentials", "client_secret", opsSecret, "scope", "catalog"), nil, "ops"},
		{"PyIceberg refresh: an expired bearer beside form credentials", form("grant_type", "client_credentials", "client_id", "etl", "client_secret", etlSecret), bearer(expired), "etl"},
		{"DuckDB: another scope", form("grant_type", "client_credentials", "client_id", "ops", "client_secret", opsSecret, "scope", "PRINCIPAL_ROLE:ALL"), nil, "ops"},
		{"HTTP basic", form("grant_type", "client_credentials"), basic("etl", etlSecret), "etl"},
		{"HTTP basic, form-encoded (RFC 6749)", form("grant_type", "client_credentials"), basic("etl", url.QueryEscape(etlSecret)), "etl"},
		{"token exchange of a static token", form("grant_type", grantTokenExchange, "subject_token", opsSecret, "subject_token_type", tokenTypeAccess), nil, "ops"},
		{"Java refresh of an expired token: with the credential as basic", form("grant_type", grantTokenExchange, "subject_token", expired,
			"subject_token_type", tokenTypeAccess), basic("etl", etlSecret), "etl"},
		{"Java refresh, its fallback: a valid token with the credential as basic", form("grant_type", grantTokenExchange, "subject_token", etlToken,
			"subject_token_type", tokenTypeAccess, "scope", "catalog"), basic("etl", etlSecret), "etl"},
	}
	for _, c := range ok {
		a := f.do("POST", tokensPath, strings.NewReader(c.body), append(slices.Clone(ct), c.headers...)...)
		if a.status != 200 {
			t.Errorf("%s: %d %s", c.name, a.status, a.body)
			continue
		}
		var tr map[string]any
		json.Unmarshal(a.body, &tr)
		if tr["token_type"] != "bearer" || tr["issued_token_type"] != tokenTypeAccess || tr["expires_in"] != float64(3600) ||
			a.header.Get("Cache-Control") != "no-store" || a.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %s %v", c.name, a.body, a.header)
		}
		tok, _ := tr["access_token"].(string)
		p, err := f.a.Bearer(tok)
		if err != nil || p.ID != c.principal {
			t.Errorf("%s: the token is %+v, %v; want %s's", c.name, p, err, c.principal)
		}
		if a := f.do("GET", "/v1/config", nil, bearer(tok)...); a.status != 200 {
			t.Errorf("%s: the token does not open the catalog: %d", c.name, a.status)
		}
	}

	bad := []struct {
		name        string
		body        string
		headers     []string
		status      int
		code, words string
	}{
		{"wrong secret", form("grant_type", "client_credentials", "client_id", "etl", "client_secret", opsSecret), nil, 401, "invalid_client", "wrong secret"},
		{"unknown id", form("grant_type", "client_credentials", "client_id", "mallory", "client_secret", etlSecret), nil, 401, "invalid_client", "unknown client"},
		{"empty secret", form("grant_type", "client_credentials", "client_id", "etl", "client_secret", ""), nil, 401, "invalid_client", "empty"},
		{"wrong basic", form("grant_type", "client_credentials"), basic("etl", "nope"), 401, "invalid_client", "wrong secret"},
		{"an issued token is no client secret", form("grant_type", "client_credentials", "client_secret", etlToken), nil, 401, "invalid_client", "wrong secret"},
		{"no credentials", form("grant_type", "client_credentials"), nil, 401, "invalid_client", "no client credentials"},
		{"a bearer is no client credential", form("grant_type", "client_credentials"), bearer(etlToken), 401, "invalid_client", "no client credentials"},
		{"two methods", form("grant_type", "client_credentials", "client_id", "etl", "client_secret", etlSecret), basic("etl", etlSecret), 400, "invalid_request", "twice"},
		{"no grant", form("client_id", "etl", "client_secret", etlSecret), nil, 400, "invalid_request", "grant_type is missing"},
		{"unknown grant", form("grant_type", "password", "username", "etl", "password", etlSecret), nil, 400, "unsupported_grant_type", "password"},
		{"duplicate parameter", form("grant_type", "client_credentials", "client_id", "etl", "client_id", "ops", "client_secret", etlSecret), nil, 400, "invalid_request", "more than once"},
		{"exchange without subject", form("grant_type", grantTokenExchange), nil, 400, "invalid_request", "subject_token is missing"},
		{"exchange of an expired token", form("grant_type", grantTokenExchange, "subject_token", expired, "subject_token_type", tokenTypeAccess), bearer(expired), 400, "invalid_grant", "expired"},
		{"exchange of a forged token", form("grant_type", grantTokenExchange, "subject_token", forged, "subject_token_type", tokenTypeAccess), nil, 400, "invalid_grant", "not signed by this cluster"},
		{"exchange of garbage", form("grant_type", grantTokenExchange, "subject_token", "hunter2-hunter2"), nil, 400, "invalid_grant", "neither"},
		{"exchange of an id token type", form("grant_type", grantTokenExchange, "subject_token", etlToken, "subject_token_type", "urn:ietf:params:oauth:token-type:saml2"), nil, 400, "invalid_request", "subject_token_type"},
		{"exchange with an actor", form("grant_type", grantTokenExchange, "subject_token", etlToken, "actor_token", etlToken, "actor_token_type", tokenTypeAccess), nil, 400, "invalid_request", "actor"},
		{"exchange for a refresh token", form("grant_type", grantTokenExchange, "subject_token", etlToken, "requested_token_type", "urn:ietf:params:oauth:token-type:refresh_token"), nil, 400, "invalid_request", "requested_token_type"},
		{"Java refresh: token exchange of a valid token, as its own credential", form("grant_type", grantTokenExchange, "subject_token", etlToken,
			"subject_token_type", tokenTypeAccess, "scope", "catalog"), bearer(etlToken), 400, "invalid_grant", "not exchanged for a new one"},
		{"exchange of a valid token, no client authentication", form("grant_type", grantTokenExchange, "subject_token", etlToken), nil, 400, "invalid_grant", "not exchanged"},
		{"exchange with wrong client credentials", form("grant_type", grantTokenExchange, "subject_token", etlToken), basic("etl", "nope"), 401, "invalid_client", "wrong secret"},
	}
	for _, c := range bad {
		a := f.do("POST", tokensPath, strings.NewReader(c.body), append(slices.Clone(ct), c.headers...)...)
		e := a.oauthError(t)
		if a.status != c.status || e.Error != c.code || !strings.Contains(e.Description, c.words) {
			t.Errorf("%s: %d %s; want %d %s saying %q", c.name, a.status, a.body, c.status, c.code, c.words)
		}
		if (a.status == 401) != (a.header.Get("WWW-Authenticate") != "") {
			t.Errorf("%s: %d with WWW-Authenticate %q", c.name, a.status, a.header.Get("WWW-Authenticate"))
		}
		for _, secret := range []string{etlSecret, opsSecret, clusterSecret} {
			if strings.Contains(string(a.body), secret) {
				t.Errorf("%s: the answer quotes a secret: %s", c.name, a.body)
			}
		}
	}
	// Not a form.
	a := f.do("POST", tokensPath, strings.NewReader(`{"grant_type":"client_credentials"}`), "Content-Type", "application/json")
	if e := a.oauthError(t); a.status != 400 || e.Error != "invalid_request" {
		t.Errorf("JSON body: %d %s", a.status, a.body)
	}
	// Too large: declared, or found out while reading.
	huge := form("grant_type", "client_credentials", "client_id", "etl", "client_secret", strings.Repeat("x", MaxTokenBodyBytes))
	if a := f.do("POST", tokensPath, strings.NewReader(huge), ct...); a.status != 413 || a.envelope(t).Type != "RequestTooLargeException" {
		t.Errorf("huge token request: %d %s", a.status, a.body)
	}
	r := httptest.NewRequest("POST", tokensPath, io.MultiReader(strings.NewReader(huge)))
	r.ContentLength = -1
	r.Header.Set("Content-Type", ct[1])
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != 413 {
		t.Errorf("huge chunked token request: %d %s", w.Code, w.Body)
	}
	// The token endpoint takes POST only.
	if a := f.do("GET", tokensPath, nil); a.status != 404 || a.envelope(t).Type != "NotFoundException" {
		t.Errorf("GET %s: %d %s", tokensPath, a.status, a.body)
	}
}

// TestAuthentication: with auth on every route but the token endpoint needs a bearer
// token; missing or bad ones are 401 NotAuthorizedException with a challenge.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	etlToken := f.token("etl", etlSecret)
	other, _ := auth.New(&auth.File{ClusterSecret: strings.Repeat("y", 40), Principals: testAuthFile().Principals})
	otherP, _ := other.Secret("etl", etlSecret)
	forged, _, _ := other.Issue(otherP)
	peer, _ := f.a.PeerToken("fs-1")
	routes := [][2]string{
		{"GET", "/v1/config"}, {"GET", "/v1/namespaces"}, {"GET", "/v1/namespaces/default"}, {"HEAD", "/v1/namespaces/default"},
		{"GET", "/v1/namespaces/default/tables"}, {"GET", "/v1/namespaces/default/tables/orders"},
		{"HEAD", "/v1/namespaces/default/tables/orders"}, {"GET", "/v1/namespaces/default/tables/orders/credentials"},
		{"POST", "/v1/namespaces/default/tables/orders/metrics"}, {"POST", "/v1/namespaces"},
		{"DELETE", "/v1/namespaces/default/tables/orders"}, {"GET", "/v1/nothing"}, {"PUT", "/v1/config"},
	}
	for _, c := range []struct {
		name   string
		header []string
		words  string
	}{
		{"none", nil, "no credentials"},
		{"expired", bearer(signToken(t, clusterSecret, "etl", time.Now().Add(-time.Hour))), "expired"},
		{"forged", bearer(forged), "not signed by this cluster"},
		{"tampered", bearer(etlToken[:len(etlToken)-4] + "AAAA"), "does not verify"},
		{"a principal gone", bearer(signToken(t, clusterSecret, "mallory", time.Now().Add(time.Hour))), "not in the auth config"},
		{"a peer token", bearer(peer), "peer token is not accepted"},
		{"a wrong secret", bearer("not-the-secret-of-anyone"), "neither"},
		{"empty bearer", []string{"Authorization", "Bearer "}, "no bearer token"},
		{"another scheme", []string{"Authorization", "Digest x=1"}, "Digest"},
		{"wrong basic", []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("etl:nope"))}, "wrong secret"},
		{"bad basic", []string{"Authorization", "Basic !!!"}, "base64"},
	} {
		for _, rt := range routes {
			a := f.do(rt[0], rt[1], nil, c.header...)
			if a.status != 401 || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: %s %s: %d %v", c.name, rt[0], rt[1], a.status, a.header)
				continue
			}
			if rt[0] == "HEAD" {
				if len(a.body) != 0 {
					t.Errorf("%s: HEAD with a body", c.name)
				}
				continue
			}
			if e := a.envelope(t); e.Type != "NotAuthorizedException" || !strings.Contains(e.Message, c.words) {
				t.Errorf("%s: %s %s: %+v, want %q", c.name, rt[0], rt[1], e, c.words)
			}
		}
	}
	for _, h := range [][]string{bearer(etlToken), bearer(etlSecret), bearer(opsSecret), {"Authorization", "bearer " + etlToken},
		{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("etl:"+etlSecret))}} {
		if a := f.do("GET", "/v1/namespaces/default/tables/orders", nil, h...); a.status != 200 {
			t.Errorf("%s: %d %s", h[1][:10], a.status, a.body)
		}
	}
}

// TestReaderSees: a reader sees the tables its patterns match, and the namespaces that
// hold one: others are 403 (a table of a namespace it sees) or absent.
func TestReaderSees(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	etl, ops := bearer(f.token("etl", etlSecret)), bearer(opsSecret)
	if got := listedNames(t, f.do("GET", "/v1/namespaces", nil, etl...).body, "namespaces"); !slices.Equal(got, []string{"default", "sales"}) {
		t.Errorf("etl's namespaces: %v", got)
	}
	if got := listedNames(t, f.do("GET", "/v1/namespaces", nil, ops...).body, "namespaces"); !slices.Equal(got, []string{"default", "other", "sales"}) {
		t.Errorf("ops's namespaces: %v", got)
	}
	if got := listedNames(t, f.do("GET", "/v1/namespaces/sales/tables", nil, etl...).body, "identifiers"); !slices.Equal(got, []string{"sales.orders"}) {
		t.Errorf("etl's sales tables: %v", got)
	}
	if got := listedNames(t, f.do("GET", "/v1/namespaces/sales/tables", nil, ops...).body, "identifiers"); !slices.Equal(got, []string{"sales.orders", "sales.refunds"}) {
		t.Errorf("ops's sales tables: %v", got)
	}
	if got := listedNames(t, f.do("GET", "/v1/namespaces/default/tables", nil, etl...).body, "identifiers"); !slices.Equal(got, []string{"default.events", "default.orders"}) {
		t.Errorf("etl's default tables: %v", got)
	}
	for _, c := range []struct {
		method, path string
		status       int
		typ, words   string
	}{
		{"GET", "/v1/namespaces/other", 404, noSuchNamespace, "namespace other does not exist"},
		{"HEAD", "/v1/namespaces/other", 404, "", ""},
		{"GET", "/v1/namespaces/other/tables", 404, noSuchNamespace, "namespace other does not exist"},
		{"GET", "/v1/namespaces?parent=other", 404, noSuchNamespace, "other"},
		// A table of a namespace etl does not see: as absent, existing or not.
		{"GET", "/v1/namespaces/other/tables/secret", 404, noSuchNamespace, "namespace other does not exist"},
		{"GET", "/v1/namespaces/other/tables/nothing", 404, noSuchNamespace, "namespace other does not exist"},
		{"GET", "/v1/namespaces/nowhere/tables/orders", 404, noSuchNamespace, "namespace nowhere does not exist"},
		{"HEAD", "/v1/namespaces/other/tables/secret", 404, "", ""},
		{"GET", "/v1/namespaces/other/tables/secret/credentials", 404, noSuchNamespace, "namespace other does not exist"},
		// A table outside its patterns in a namespace it sees: 403, existing or not.
		{"GET", "/v1/namespaces/sales/tables/refunds", 403, "ForbiddenException", `principal "etl" may not read table sales.refunds`},
		{"HEAD", "/v1/namespaces/sales/tables/refunds", 403, "", ""},
		{"GET", "/v1/namespaces/sales/tables/nothing", 403, "ForbiddenException", "may not read table sales.nothing"},
		{"GET", "/v1/namespaces/sales/tables/refunds/credentials", 403, "ForbiddenException", "may not read"},
		{"POST", "/v1/namespaces/sales/tables/refunds/metrics", 403, "ForbiddenException", "may not read"},
		// Its own tables answer as before.
		{"GET", "/v1/namespaces/default/tables/nothing", 404, noSuchTable, "table default.nothing does not exist"},
		{"GET", "/v1/namespaces/default/tables/fresh", 404, noSuchTable, "no committed snapshot yet"},
		{"POST", "/v1/namespaces/default/tables", 403, "ForbiddenException", "read-only"},
	} {
		a := f.do(c.method, c.path, nil, etl...)
		if a.status != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, a.status, a.body, c.status)
			continue
		}
		if c.method == "HEAD" {
			continue
		}
		if e := a.envelope(t); e.Type != c.typ || !strings.Contains(e.Message, c.words) {
			t.Errorf("%s %s: %+v, want %s saying %q", c.method, c.path, e, c.typ, c.words)
		}
	}
	for _, p := range []string{"/v1/namespaces/default/tables/orders", "/v1/namespaces/sales/tables/orders"} {
		if a := f.do("GET", p, nil, etl...); a.status != 200 {
			t.Errorf("etl loads %s: %d %s", p, a.status, a.body)
		}
	}
	for _, p := range []string{"/v1/namespaces/other/tables/secret", "/v1/namespaces/sales/tables/refunds"} {
		if a := f.do("GET", p, nil, ops...); a.status != 200 {
			t.Errorf("ops loads %s: %d %s", p, a.status, a.body)
		}
	}
	if a := f.do("POST", "/v1/namespaces/default/tables/orders/metrics", strings.NewReader(`{"report-type":"scan-report"}`), etl...); a.status != 204 {
		t.Errorf("etl reports metrics: %d %s", a.status, a.body)
	}
}

// TestVendedCredentials: a load asking for vended credentials gets ones scoped to the
// table, in storage-credentials and the config; without asking, no keys at all.
func TestVendedCredentials(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	etlToken := f.token("etl", etlSecret)
	etl := bearer(etlToken)
	type loadResult struct {
		Location string              `json:"metadata-location"`
		Config   map[string]string   `json:"config"`
		Creds    []StorageCredential `json:"storage-credentials"`
	}
	check := func(what string, sc StorageCredential) {
		t.Helper()
		if sc.Prefix != "s3://mink/default/orders/" || sc.Config["s3.endpoint"] != fileIOURL || sc.Config["s3.path-style-access"] != "true" {
			t.Errorf("%s: %+v", what, sc)
		}
		p, secret, err := f.a.S3Key(sc.Config[keyAccessKeyID], sc.Config[keySessionToken])
		if err != nil || secret != sc.Config[keySecretAccessKey] || p.ID != "etl" || p.Table != "default.orders" {
			t.Errorf("%s: S3Key %+v %v", what, p, err)
		}
		exp, err := strconv.ParseInt(sc.Config[keyTokenExpiresAtMs], 10, 64)
		if until := time.Until(time.UnixMilli(exp)); err != nil || until <= 0 || until > time.Hour+time.Minute {
			t.Errorf("%s: expires in %v (%v)", what, until, err)
		}
	}
	for _, h := range []string{"vended-credentials", "remote-signing, Vended-Credentials"} {
		a := f.do("GET", "/v1/namespaces/default/tables/orders", nil, append(slices.Clone(etl), headerAccessDelegation, h)...)
		var res loadResult
		if err := json.Unmarshal(a.body, &res); a.status != 200 || err != nil || len(res.Creds) != 1 {
			t.Fatalf("load with %q: %d %s", h, a.status, a.body)
		}
		check("storage credential", res.Creds[0])
		if !strings.HasPrefix(res.Location, res.Creds[0].Prefix) {
			t.Errorf("the metadata location %s is outside the credential's prefix", res.Location)
		}
		for _, k := range []string{keyAccessKeyID, keySecretAccessKey, keySessionToken, keyTokenExpiresAtMs, "s3.endpoint"} {
			if res.Config[k] != res.Creds[0].Config[k] {
				t.Errorf("config[%s] = %q, not the credential's", k, res.Config[k])
			}
		}
		if res.Config[keyRefreshCredsURI] != "v1/namespaces/default/tables/orders/credentials" {
			t.Errorf("refresh endpoint %q", res.Config[keyRefreshCredsURI])
		}
		if a.header.Get("Cache-Control") != "no-store" || !strings.Contains(a.header.Get("Vary"), headerAccessDelegation) {
			t.Errorf("headers of a load with credentials: %v", a.header)
		}
	}
	// Without the header: no keys, neither dummy nor vended.
	a := f.do("GET", "/v1/namespaces/default/tables/orders", nil, etl...)
	var res loadResult
	json.Unmarshal(a.body, &res)
	want := S3Config(fileIOURL, "us-east-1")
	delete(want, keyAccessKeyID)
	delete(want, keySecretAccessKey)
	if a.status != 200 || !maps.Equal(res.Config, want) || res.Creds != nil {
		t.Errorf("load without asking: %d %s", a.status, a.body)
	}
	var cfg struct {
		Defaults  map[string]string `json:"defaults"`
		Endpoints []string          `json:"endpoints"`
	}
	json.Unmarshal(f.do("GET", "/v1/config", nil, etl...).body, &cfg)
	if !maps.Equal(cfg.Defaults, want) || !slices.Contains(cfg.Endpoints, "GET "+pathCredentials) {
		t.Errorf("config with auth on: %+v", cfg)
	}
	// Fresh ones.
	a = f.do("GET", "/v1/namespaces/default/tables/orders/credentials", nil, etl...)
	var lc struct {
		Creds []StorageCredential `json:"storage-credentials"`
	}
	if err := json.Unmarshal(a.body, &lc); a.status != 200 || err != nil || len(lc.Creds) != 1 {
		t.Fatalf("credentials: %d %s", a.status, a.body)
	}
	check("loadCredentials", lc.Creds[0])
	if a := f.do("GET", "/v1/namespaces/default/tables/fresh/credentials", nil, etl...); a.status != 404 || a.envelope(t).Type != noSuchTable {
		t.Errorf("credentials of an uncommitted table: %d %s", a.status, a.body)
	}
	if a := f.do("GET", "/v1/namespaces/default/tables/nothing/credentials", nil, etl...); a.status != 404 {
		t.Errorf("credentials of no table: %d %s", a.status, a.body)
	}
}

// TestTokensEndWithTheirSecret, as an attacker holding a token would try it: every way
// of exchanging the token for a new one is refused (so a chain of renewals never gets
// past the first token's expiry), and once the principal's secret is rotated and the
// config reloaded, the token, the credentials vended on it and the old secret are all
// refused, while the new secret works at once.
func TestTokensEndWithTheirSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	path := filepath.Join(t.TempDir(), "auth.json")
	if err := auth.WriteFile(path, testAuthFile()); err != nil {
		t.Fatal(err)
	}
	a, err := auth.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	f.h = f.handler(f.db)
	tok := f.token("etl", etlSecret)
	ct := []string{"Content-Type", "application/x-www-form-urlencoded"}
	exchange := func(form url.Values, headers ...string) answer {
		return f.do("POST", tokensPath, strings.NewReader(form.Encode()), append(slices.Clone(ct), headers...)...)
	}
	basic := func(id, secret string) []string {
		return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))}
	}
	xf := func(kv ...string) url.Values {
		v := url.Values{"grant_type": {grantTokenExchange}, "subject_token": {tok}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for name, try := range map[string]answer{
		"exchange, bearer beside":    exchange(xf("subject_token_type", tokenTypeAccess), bearer(tok)...),
		"exchange, jwt type":         exchange(xf("subject_token_type", tokenTypeJWT)),
		"exchange, requested access": exchange(xf("requested_token_type", tokenTypeAccess)),
		"the token as basic secret":  exchange(xf(), basic("", tok)...),
		"the token as etl's secret":  exchange(xf(), basic("etl", tok)...),
		"the token as client_secret": exchange(url.Values{"grant_type": {grantClientCredentials}, "client_id": {"etl"}, "client_secret": {tok}}),
	} {
		if try.status == 200 {
			t.Errorf("%s: a new token from a token: %s", name, try.body)
		}
	}

	type creds struct {
		Creds []StorageCredential `json:"storage-credentials"`
	}
	var before creds
	if a := f.do("GET", "/v1/namespaces/default/tables/orders/credentials", nil, bearer(tok)...); a.status != 200 || json.Unmarshal(a.body, &before) != nil || len(before.Creds) != 1 {
		t.Fatalf("credentials before the rotation: %d %s", a.status, a.body)
	}

	const newSecret = "etl-secret-after-rotation-0123"
	rotated := testAuthFile()
	rotated.Principals[0].Secret = newSecret
	if err := auth.WriteFile(path, rotated); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	for _, route := range []string{"/v1/config", "/v1/namespaces/default/tables/orders", "/v1/namespaces/default/tables/orders/credentials"} {
		if a := f.do("GET", route, nil, bearer(tok)...); a.status != 401 || !strings.Contains(a.envelope(t).Message, "secret changed") {
			t.Errorf("GET %s with a token of the old secret: %d %s", route, a.status, a.body)
		}
		if a := f.do("GET", route, nil, bearer(etlSecret)...); a.status != 401 {
			t.Errorf("GET %s with the old secret: %d %s", route, a.status, a.body)
		}
	}
	c := before.Creds[0].Config
	if _, _, err := a.S3Key(c[keyAccessKeyID], c[keySessionToken]); apierr.Classify(err) != apierr.Unauthenticated {
		t.Errorf("credentials vended before the rotation: %v", err)
	}
	if a := exchange(url.Values{"grant_type": {grantClientCredentials}, "client_id": {"etl"}, "client_secret": {etlSecret}}); a.status != 401 {
		t.Errorf("the old secret as client credentials: %d %s", a.status, a.body)
	}
	if a := exchange(xf(), basic("etl", etlSecret)...); a.status != 401 {
		t.Errorf("Java's fallback with the old credential: %d %s", a.status, a.body)
	}
	fresh := f.token("etl", newSecret)
	if a := f.do("GET", "/v1/namespaces/default/tables/orders", nil, bearer(fresh)...); a.status != 200 {
		t.Errorf("a token of the new secret: %d %s", a.status, a.body)
	}
}

// TestPathsAreNotRedirected: what ServeMux would redirect (307) is an Iceberg envelope.
func TestPathsAreNotRedirected(t *testing.T) {
	t.Parallel()
	for _, authOn := range []bool{false, true} {
		f := newFixture(t, authOn)
		srv := httptest.NewServer(f.h)
		for _, p := range []string{"/v1/namespaces/../config", "/v1/namespaces/default/tables/../../../config", "/v1//config", "/v1/./config",
			"/v1/namespaces/default/tables/orders/..", "/v1/namespaces/%2e%2e/tables", "/v1/namespaces/default/tables/%2E%2E",
			"//v1/config", "/v1/namespaces/default/tables/.", "/v1/namespaces/default/./tables/orders", "/v1/namespaces/default%2F..%2F..%2Fconfig"} {
			for _, method := range []string{"GET", "POST", "HEAD", "DELETE"} {
				// Written by hand, so that no client cleans the path first.
				conn, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: catalog\r\nAuthorization: Bearer %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", method, p, opsSecret)
				resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				conn.Close()
				if resp.StatusCode != 400 && resp.StatusCode != 404 {
					t.Errorf("auth %v: %s %s: %d %v", authOn, method, p, resp.StatusCode, resp.Header)
					continue
				}
				if method != "HEAD" {
					answer{resp.StatusCode, resp.Header, body}.envelope(t)
				}
			}
		}
		srv.Close()
	}
}

// TestBodiesAreBounded: every POST body is bounded; past it, 413 in the envelope.
func TestBodiesAreBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	ops := bearer(opsSecret)
	big := strings.Repeat("x", MaxBodyBytes+1)
	for _, p := range []string{"/v1/namespaces/default/tables/orders/metrics", "/v1/namespaces", "/v1/transactions/commit", "/v1/nothing"} {
		a := f.do("POST", p, strings.NewReader(big), ops...)
		if a.status != 413 || !strings.Contains(a.envelope(t).Message, strconv.Itoa(MaxBodyBytes)) {
			t.Errorf("POST %s, %d bytes: %d %s", p, len(big), a.status, a.body)
		}
	}
	// A body of unknown length is cut while read.
	r := httptest.NewRequest("POST", "/v1/namespaces/default/tables/orders/metrics", io.MultiReader(strings.NewReader(big)))
	r.ContentLength = -1
	r.Header.Set("Authorization", ops[1])
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != 413 {
		t.Errorf("chunked metrics: %d %s", w.Code, w.Body)
	}
	// Unauthenticated: refused before anything is read.
	if a := f.do("POST", "/v1/namespaces/default/tables/orders/metrics", strings.NewReader(big)); a.status != 413 {
		t.Errorf("unauthenticated big POST: %d", a.status)
	}
	if a := f.do("POST", "/v1/namespaces/default/tables/orders/metrics", strings.NewReader(strings.Repeat(" ", MaxBodyBytes)), ops...); a.status != 204 {
		t.Errorf("a POST of the bound: %d %s", a.status, a.body)
	}
}

// failingDB answers every statement with err, counting them.
type failingDB struct {
	err   error
	mu    sync.Mutex
	calls int
}

func (d *failingDB) count() {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
}

func (d *failingDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	d.count()
	return pgconn.CommandTag{}, d.err
}
func (d *failingDB) Query(context.Context, string, ...any) (pgx.Rows, error) {
	d.count()
	return nil, d.err
}
func (d *failingDB) QueryRow(context.Context, string, ...any) pgx.Row {
	d.count()
	return errRow{d.err}
}
func (d *failingDB) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults {
	panic("not used by the catalog")
}
func (d *failingDB) Begin(context.Context) (pgx.Tx, error) { d.count(); return nil, d.err }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// TestErrorsCarryNoInternals: what Postgres says (SQLSTATE text, addresses, paths) is
// logged under the request id; the envelope says what failed and where to look.
func TestErrorsCarryNoInternals(t *testing.T) {
	t.Parallel()
	pgErr := &pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: `relation "mink_tables" does not exist`,
		File: "/usr/src/postgresql/parse_relation.c", Routine: "parserOpenTable"}
	badUTF8 := &pgconn.PgError{Severity: "ERROR", Code: "22021", Message: `invalid byte sequence for encoding "UTF8": 0xff`}
	dial := fmt.Errorf("failed to connect to `user=mink database=mink_prod`: %w",
		&net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: "/var/run/postgresql/.s.PGSQL.5432"}, Err: syscall.ECONNREFUSED})
	sqlText := fmt.Errorf("SELECT name FROM mink_tables WHERE namespace > $1: %v", pgErr)
	for _, c := range []struct {
		name   string
		err    error
		path   string
		status int
		words  string
	}{
		{"missing relation", pgErr, "/v1/namespaces", 500, "list namespaces: postgres answered an error"},
		{"missing relation, load", pgErr, "/v1/namespaces/default/tables/orders", 500, "load table default.orders"},
		{"data exception", badUTF8, "/v1/namespaces/default/tables", 400, "list the tables of default"},
		{"unreachable", dial, "/v1/namespaces/default", 503, "postgres is unavailable"},
		// The driver's words formatted into a text: no type says what they are, and
		// none of them is told.
		{"SQL in a text", sqlText, "/v1/namespaces", 500, "list namespaces"},
	} {
		for _, authOn := range []bool{false, true} {
			f := &fixture{t: t, logs: &logBuffer{}}
			if authOn {
				f.a = testAuthority(t)
			}
			f.h = f.handler(&failingDB{err: c.err})
			a := f.do("GET", c.path, nil, bearer(opsSecret)...)
			e := a.envelope(t)
			id := a.header.Get("X-Request-Id")
			if a.status != c.status || id == "" || !strings.Contains(e.Message, c.words) || !strings.Contains(e.Message, "request id "+id) {
				t.Errorf("%s (auth %v): %d %+v (request id %q), want %d saying %q", c.name, authOn, a.status, e, id, c.status, c.words)
			}
			for _, internal := range []string{"SQLSTATE", "42P01", "22021", "relation", "mink_tables", "0xff", "/var/run", "/usr/src", "mink_prod", "user=", "SELECT"} {
				if strings.Contains(string(a.body), internal) {
					t.Errorf("%s: the answer carries %q: %s", c.name, internal, a.body)
				}
			}
			logs := f.logs.String()
			if !strings.Contains(logs, "request_id="+id) || !strings.Contains(logs, "catalog request failed") {
				t.Errorf("%s: the log lacks request %s: %s", c.name, id, logs)
			}
			if (c.err == pgErr || c.err == badUTF8 || c.err == sqlText) && !strings.Contains(logs, "SQLSTATE") {
				t.Errorf("%s: the log lacks the cause: %s", c.name, logs)
			}
		}
	}
	// Names Postgres could not even compare are refused before it is asked.
	db := &failingDB{err: pgErr}
	f := &fixture{t: t, logs: &logBuffer{}}
	f.h = f.handler(db)
	long := strings.Repeat("n", 129) // names.Namespace and names.Table: 128 bytes at most
	for _, p := range []string{"/v1/namespaces/a%00b", "/v1/namespaces/a%ffb/tables", "/v1/namespaces/default/tables/x%00y",
		"/v1/namespaces/default/tables/x%c3/credentials", "/v1/namespaces?parent=a%00", "/v1/namespaces/a%0ab/tables",
		"/v1/namespaces/default/tables/x%0dy", "/v1/namespaces/default/views/v%00", "/v1/namespaces/" + long + "/tables",
		"/v1/namespaces/default/tables/" + long, "/v1/namespaces/default/views/" + long} {
		a := f.do("GET", p, nil)
		msg := a.envelope(t).Message
		if a.status != 400 || a.envelope(t).Type != "BadRequestException" || strings.Contains(string(a.body), "SQLSTATE") ||
			!(strings.HasPrefix(msg, "namespace: ") || strings.HasPrefix(msg, "table: ") || strings.HasPrefix(msg, "view: ")) {
			t.Errorf("%s: %d %s", p, a.status, a.body)
		}
	}
	if db.calls != 0 {
		t.Errorf("bad names reached Postgres %d times", db.calls)
	}
}

// TestRequestIDs: every answer names its request, with an id of apierr.RequestID, as
// every door does.
func TestRequestIDs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	seen := map[string]bool{}
	for range 20 {
		a := f.do("GET", "/v1/config", nil)
		id := a.header.Get("X-Request-Id")
		if !regexp.MustCompile(`^[0-9A-F]{16}$`).MatchString(id) || strings.Contains(id, "301") || seen[id] {
			t.Fatalf("request id %q", id)
		}
		seen[id] = true
	}
	if reflect.DeepEqual(seen, map[string]bool{}) {
		t.Fatal("no ids")
	}
}
