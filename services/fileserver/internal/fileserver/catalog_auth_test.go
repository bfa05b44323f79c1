package fileserver_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/tables"
)

const (
	catClusterSecret = "fileserver-test-cluster-secret-0123456789"
	catEtlSecret     = "etl-secret-0123456789-etl"
	catOpsSecret     = "ops-secret-0123456789-ops"
)

// catAuthority: etl reads default.orders only; ops is an admin.
func catAuthority(t testing.TB, clusterSecret string) *auth.Authority {
	t.Helper()
	a, err := auth.New(&auth.File{ClusterSecret: clusterSecret, Principals: []auth.PrincipalConfig{
		{ID: "etl", Secret: catEtlSecret, Role: auth.RoleReader, Tables: []string{"default.orders"}},
		{ID: "ops", Secret: catOpsSecret, Role: auth.RoleAdmin},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// catAddTable adds a committed table that shares the env table's metadata: enough to
// be listed and refused.
func (e *env) catAddTable(ns, name string) {
	e.t.Helper()
	tbl, err := tables.Create(e.ctx, e.db, tables.Table{Namespace: ns, Name: name, Topic: tableName, Spec: spec}, partitions)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.db.Exec(e.ctx, `INSERT INTO mink_table_meta (table_id, metadata_key, version) VALUES ($1, $2, 1)`, tbl.ID, e.metaKey); err != nil {
		e.t.Fatal(err)
	}
}

// catDigest sums what a failed request must leave as it was: the tables, their
// partitions, the index, the files and the commits.
func (e *env) catDigest() string {
	e.t.Helper()
	var out []string
	for _, tbl := range []string{"mink_tables", "mink_partitions", "mink_ranges", "mink_data_files", "mink_meta_files",
		"mink_table_meta", "mink_file_problems", "mink_table_versions"} {
		var d string
		if err := e.db.QueryRow(e.ctx, `SELECT count(*)::text || ':' || md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM `+tbl+` x`).Scan(&d); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, tbl+"="+d)
	}
	return strings.Join(out, " ")
}

// s3Gate stands between engines and a node's S3 API (table loads name it as the
// endpoint) and records who signed each request.
type s3Gate struct {
	srv    *httptest.Server
	target atomic.Pointer[url.URL]
	tr     *http.Transport
	mu     sync.Mutex
	seen   []s3Signer
}

type s3Signer struct{ keyID, token, path string }

func newS3Gate(t *testing.T) *s3Gate {
	g := &s3Gate{tr: &http.Transport{}}
	proxy := &httputil.ReverseProxy{Transport: g.tr, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(g.target.Load())
		pr.Out.Host = pr.In.Host // signed: it must reach the S3 API as the client sent it
	}}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := s3Signer{token: r.Header.Get("X-Amz-Security-Token"), path: r.URL.Path}
		if cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="); ok {
			s.keyID, _, _ = strings.Cut(cred, "/")
		}
		g.mu.Lock()
		g.seen = append(g.seen, s)
		g.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { g.srv.Close(); g.tr.CloseIdleConnections() })
	return g
}

func (g *s3Gate) take() []s3Signer {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.seen
	g.seen = nil
	return s
}

// catSign is an access token as pkg/auth signs them, with any expiry.
func catSign(t *testing.T, clusterSecret, subject string, exp time.Time) string {
	t.Helper()
	m := hmac.New(sha256.New, []byte(clusterSecret))
	m.Write([]byte("mink/token/v1"))
	key := m.Sum(nil)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"kind": "access", "iss": "mink", "sub": subject, "exp": exp.Unix()})
	sum := sha256.Sum256(key)
	tok.Header["kid"] = hex.EncodeToString(sum[:4])
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// catScan loads the env table through cat and reads every row.
func (e *env) catScan(cat *rest.Catalog) ([]row, error) {
	tbl, err := cat.LoadTable(e.ctx, table.Identifier{ns, tableName})
	if err != nil {
		return nil, err
	}
	at, err := tbl.Scan().ToArrowTable(e.ctx)
	if err != nil {
		return nil, err
	}
	defer at.Release()
	return rowsOf(e.t, at), nil
}

func catNewCatalog(t *testing.T, ctx context.Context, uri string, opts ...rest.Option) *rest.Catalog {
	t.Helper()
	cat, err := rest.NewCatalog(ctx, "mink", uri, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

// TestCatalogAuth: iceberg-go through a file server with auth on: the OAuth2
// exchange (credential id:secret) and static tokens; the scan's S3 reads signed with the
// vended credentials of the load (the client has no keys of its own), or with a
// principal's keys when it asks for none; what a reader may not see is 403 or absent;
// without credentials, or with expired or forged ones, 401. No failing case changes
// the tables or the index.
func TestCatalogAuth(t *testing.T) {
	// The engine has no S3 keys of its own: no environment, no files, no instance role.
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	e := newEnv(t, envOptions{})
	e.catAddTable(ns, "hidden")
	e.catAddTable("other", "secret")
	a := catAuthority(t, catClusterSecret)
	gate := newS3Gate(t)
	n := e.startNode("fs-a", nodeOptions{auth: a, s3Endpoint: gate.srv.URL})
	gate.target.Store(&url.URL{Scheme: "http", Host: n.srv.S3Addr().String()})
	e.waitMembers([]*node{n})
	ctx := e.ctx

	t.Run("credential", func(t *testing.T) {
		cat := catNewCatalog(t, ctx, n.catalog, rest.WithCredential("etl:"+catEtlSecret))
		nss, err := cat.ListNamespaces(ctx, nil)
		if err != nil || !slices.EqualFunc(nss, []table.Identifier{{"default"}}, slices.Equal) {
			t.Errorf("namespaces %v %v", nss, err)
		}
		var ids []string
		for id, err := range cat.ListTables(ctx, table.Identifier{ns}) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, strings.Join(id, "."))
		}
		if !slices.Equal(ids, []string{"default.orders"}) {
			t.Errorf("tables %v", ids)
		}
		gate.take()
		rows, err := e.catScan(cat)
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, "scan through vended credentials", rows, e.rows)
		seen := gate.take()
		if len(seen) == 0 {
			t.Fatal("no S3 request went through the gate")
		}
		for _, s := range seen {
			p, _, err := a.S3Key(s.keyID, s.token)
			if err != nil || !strings.HasPrefix(s.keyID, "MVK") || p.ID != "etl" || p.Table != "default.orders" {
				t.Errorf("S3 %s signed by %q (token %t): %+v %v", s.path, s.keyID, s.token != "", p, err)
			}
		}
		t.Logf("%d S3 requests, all signed with the vended credentials of default.orders", len(seen))

		before := e.catDigest()
		if _, err := cat.LoadTable(ctx, table.Identifier{ns, "hidden"}); !errors.Is(err, rest.ErrForbidden) {
			t.Errorf("load of a table outside etl's patterns: %v", err)
		}
		if _, err := cat.CheckTableExists(ctx, table.Identifier{ns, "hidden"}); !errors.Is(err, rest.ErrForbidden) {
			t.Errorf("exists of a table outside etl's patterns: %v", err)
		}
		if _, err := cat.LoadTable(ctx, table.Identifier{"other", "secret"}); !errors.Is(err, icecatalog.ErrNoSuchTable) {
			t.Errorf("load of a table of a namespace etl does not see: %v", err)
		}
		if ok, err := cat.CheckNamespaceExists(ctx, table.Identifier{"other"}); ok || err != nil {
			t.Errorf("a namespace etl does not see exists: %v %v", ok, err)
		}
		for _, err := range cat.ListTables(ctx, table.Identifier{"other"}) {
			if !errors.Is(err, icecatalog.ErrNoSuchNamespace) {
				t.Errorf("tables of a namespace etl does not see: %v", err)
			}
			break
		}
		if after := e.catDigest(); after != before {
			t.Errorf("refused loads changed the tables or the index:\nbefore %s\nafter  %s", before, after)
		}
	})

	t.Run("static token", func(t *testing.T) {
		cat := catNewCatalog(t, ctx, n.catalog, rest.WithOAuthToken(catEtlSecret))
		rows, err := e.catScan(cat)
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, "scan with a static token", rows, e.rows)
		admin := catNewCatalog(t, ctx, n.catalog, rest.WithOAuthToken(catOpsSecret))
		nss, err := admin.ListNamespaces(ctx, nil)
		if err != nil || len(nss) != 2 {
			t.Errorf("an admin's namespaces: %v %v", nss, err)
		}
		if _, err := admin.LoadTable(ctx, table.Identifier{"other", "secret"}); err != nil {
			t.Errorf("an admin's load: %v", err)
		}
	})

	t.Run("principal keys", func(t *testing.T) {
		// No vended credentials asked for: the load names no keys, and the engine signs
		// with the ones it was configured with, the principal's id and secret.
		cat := catNewCatalog(t, ctx, n.catalog, rest.WithOAuthToken(catEtlSecret),
			rest.WithHeaders(map[string]string{"X-Iceberg-Access-Delegation": ""}),
			rest.WithAdditionalProps(iceberg.Properties{"s3.access-key-id": "etl", "s3.secret-access-key": catEtlSecret}))
		gate.take()
		rows, err := e.catScan(cat)
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, "scan with the principal's keys", rows, e.rows)
		for _, s := range gate.take() {
			if s.keyID != "etl" || s.token != "" {
				t.Errorf("S3 %s signed by %q (token %t)", s.path, s.keyID, s.token != "")
			}
		}
	})

	t.Run("fresh credentials", func(t *testing.T) {
		// loadCredentials, then an S3 client that has only those: a data file reads; the
		// same keys with another secret do not (the S3 API verifies the signatures).
		resp, body := get(t, "GET", n.catalog+"/v1/namespaces/default/tables/orders/credentials", map[string]string{"Authorization": "Bearer " + catEtlSecret})
		var lc struct {
			Creds []struct {
				Prefix string            `json:"prefix"`
				Config map[string]string `json:"config"`
			} `json:"storage-credentials"`
		}
		if err := json.Unmarshal(body, &lc); resp.StatusCode != 200 || err != nil || len(lc.Creds) != 1 || lc.Creds[0].Prefix != "s3://mink/default/orders/" {
			t.Fatalf("credentials: %d %s", resp.StatusCode, body)
		}
		cfg := lc.Creds[0].Config
		read := func(secret string) ([]byte, error) {
			cl := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(cfg["s3.endpoint"]), UsePathStyle: true,
				Credentials: credentials.NewStaticCredentialsProvider(cfg["s3.access-key-id"], secret, cfg["s3.session-token"])})
			out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("mink"), Key: aws.String(e.files[0].key)})
			if err != nil {
				return nil, err
			}
			defer out.Body.Close()
			return io.ReadAll(out.Body)
		}
		got, err := read(cfg["s3.secret-access-key"])
		if err != nil || !bytes.Equal(got, e.files[0].bytes) {
			t.Errorf("GetObject with fresh vended credentials: %d bytes, %v", len(got), err)
		}
		if _, err := read(strings.Repeat("x", 40)); err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
			t.Errorf("GetObject with the wrong secret: %v", err)
		}
	})

	t.Run("token exchange", func(t *testing.T) {
		// A token alone is not exchanged for a new one (it would renew itself for ever);
		// with the client credentials beside it, as the Java client falls back to, it is.
		tok := catToken(t, n, url.Values{"grant_type": {"client_credentials"}, "client_id": {"etl"}, "client_secret": {catEtlSecret}})
		exchange := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"subject_token": {tok}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}}
		resp, err := http.PostForm(n.catalog+"/v1/oauth/tokens", exchange)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "invalid_grant") {
			t.Errorf("a token exchanged alone: %d %s", resp.StatusCode, body)
		}
		exchange.Set("client_id", "etl")
		exchange.Set("client_secret", catEtlSecret)
		fresh := catToken(t, n, exchange)
		cat := catNewCatalog(t, ctx, n.catalog, rest.WithOAuthToken(fresh))
		if _, err := cat.LoadTable(ctx, table.Identifier{ns, tableName}); err != nil {
			t.Errorf("load with an exchanged token: %v", err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		before := e.catDigest()
		forged, _, _ := func() (string, time.Duration, error) {
			o := catAuthority(t, strings.Repeat("f", 40))
			p, _ := o.Secret("ops", catOpsSecret)
			return o.Issue(p)
		}()
		good := catToken(t, n, url.Values{"grant_type": {"client_credentials"}, "client_id": {"ops"}, "client_secret": {catOpsSecret}})
		for name, opts := range map[string][]rest.Option{
			"no credentials":   nil,
			"expired token":    {rest.WithOAuthToken(catSign(t, catClusterSecret, "ops", time.Now().Add(-time.Hour)))},
			"forged token":     {rest.WithOAuthToken(forged)},
			"tampered token":   {rest.WithOAuthToken(good[:len(good)-4] + "AAAA")},
			"unknown secret":   {rest.WithOAuthToken("not-anyones-secret-at-all")},
			"a gone principal": {rest.WithOAuthToken(catSign(t, catClusterSecret, "mallory", time.Now().Add(time.Hour)))},
		} {
			cat, err := rest.NewCatalog(ctx, "mink", n.catalog, opts...)
			if err == nil {
				cat.Close()
			}
			if !errors.Is(err, rest.ErrUnauthorized) || !strings.Contains(err.Error(), "NotAuthorizedException") {
				t.Errorf("%s: %v", name, err)
			}
		}
		cat, err := rest.NewCatalog(ctx, "mink", n.catalog, rest.WithCredential("etl:wrong-secret"))
		if err == nil {
			cat.Close()
		}
		if !errors.Is(err, rest.ErrOAuthError) || !strings.Contains(err.Error(), "invalid_client") {
			t.Errorf("wrong client secret: %v", err)
		}
		// By hand, each route without a token, and with a forged one.
		for _, p := range []string{"/v1/config", "/v1/namespaces", "/v1/namespaces/default/tables", "/v1/namespaces/default/tables/orders",
			"/v1/namespaces/default/tables/orders/credentials"} {
			for _, h := range []map[string]string{nil, {"Authorization": "Bearer " + forged}} {
				resp, body := get(t, "GET", n.catalog+p, h)
				if ie := icebergError(t, body); resp.StatusCode != 401 || ie.Type != "NotAuthorizedException" || resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("GET %s (%v): %d %+v", p, h != nil, resp.StatusCode, ie)
				}
			}
		}
		etl := map[string]string{"Authorization": "Bearer " + catEtlSecret, "X-Iceberg-Access-Delegation": "vended-credentials"}
		for _, p := range []string{"/v1/namespaces/default/tables/hidden", "/v1/namespaces/default/tables/hidden/credentials"} {
			resp, body := get(t, "GET", n.catalog+p, etl)
			if ie := icebergError(t, body); resp.StatusCode != 403 || ie.Type != "ForbiddenException" {
				t.Errorf("GET %s as etl: %d %+v", p, resp.StatusCode, ie)
			}
		}
		// Hardening at the real listener: no redirect, bounded bodies.
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Get(n.catalog + "/v1/namespaces/../config")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ie := icebergError(t, body); resp.StatusCode != 400 || ie.Type != "BadRequestException" {
			t.Errorf("a path with ..: %d %v %s", resp.StatusCode, resp.Header, body)
		}
		start := time.Now()
		req, _ := http.NewRequest("POST", n.catalog+"/v1/namespaces/default/tables/orders/metrics", io.LimitReader(zeros{}, 50<<20))
		req.Header.Set("Authorization", "Bearer "+catEtlSecret)
		resp, err = client.Do(req)
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if ie := icebergError(t, body); resp.StatusCode != 413 || ie.Code != 413 {
				t.Errorf("a 50 MB metrics report: %d %s", resp.StatusCode, body)
			}
		} else if !strings.Contains(err.Error(), "connection reset") && !strings.Contains(err.Error(), "broken pipe") {
			t.Errorf("a 50 MB metrics report: %v", err)
		}
		t.Logf("a 50 MB metrics report refused in %v", time.Since(start))
		if after := e.catDigest(); after != before {
			t.Errorf("failed requests changed the tables or the index:\nbefore %s\nafter  %s", before, after)
		}
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// catToken posts a token request to n and returns the access token.
func catToken(t *testing.T, n *node, form url.Values) string {
	t.Helper()
	resp, err := http.PostForm(n.catalog+"/v1/oauth/tokens", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != 200 || tr.TokenType != "bearer" || tr.ExpiresIn <= 0 {
		t.Fatalf("token: %d %+v %v", resp.StatusCode, tr, err)
	}
	return tr.AccessToken
}
