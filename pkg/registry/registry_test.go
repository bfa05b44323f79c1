package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/schemafmt"
)

var (
	addressSrc = schemafmt.Source{Text: addressAvro}
	orderSrc   = schemafmt.Source{Text: orderAvro, References: []schemafmt.Reference{
		{Name: "com.example.Address", Subject: "address-value", Version: 1, Source: addressSrc}}}
	order2Src = schemafmt.Source{Text: order2Avro, References: orderSrc.References}

	currencySrc = schemafmt.Source{Text: currencyProto}
	moneySrc    = schemafmt.Source{Text: moneyProto, References: []schemafmt.Reference{
		{Name: "currency.proto", Subject: "currency", Version: 1, Source: currencySrc}}}
	paymentSrc = schemafmt.Source{Text: paymentProto, References: []schemafmt.Reference{
		{Name: "money.proto", Subject: "money", Version: 1, Source: moneySrc}}}

	customerSrc = schemafmt.Source{Text: customerJSON}
	signupSrc   = schemafmt.Source{Text: signupJSON, References: []schemafmt.Reference{
		{Name: "https://example.com/customer.json", Subject: "customer", Version: 1, Source: customerSrc}}}
)

func TestResolve(t *testing.T) {
	reg := newRegistry(t)
	c := newClient(t, registry.Config{URL: reg.URL()})
	ctx := t.Context()

	for _, tc := range []struct {
		name    string
		id      int
		subject string
		version int
		typ     registry.Type
		src     schemafmt.Source
	}{
		{"avro", 2, "orders-value", 1, registry.Avro, orderSrc},
		{"avro without references", 1, "address-value", 1, registry.Avro, addressSrc},
		{"protobuf two deep", 12, "payments-value", 1, registry.Protobuf, paymentSrc},
		{"json schema", 21, "signups-value", 1, registry.JSON, signupSrc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.ByID(ctx, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			want := registry.Schema{ID: tc.id, Type: tc.typ, Source: tc.src}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ByID(%d) =\n%+v\nwant\n%+v", tc.id, got, want)
			}
			got, err = c.ByVersion(ctx, tc.subject, tc.version)
			if err != nil {
				t.Fatal(err)
			}
			want.Subject, want.Version = tc.subject, tc.version
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ByVersion(%q, %d) =\n%+v\nwant\n%+v", tc.subject, tc.version, got, want)
			}
		})
	}

	got, err := c.Latest(ctx, "orders-value")
	if err != nil {
		t.Fatal(err)
	}
	want := registry.Schema{ID: 3, Subject: "orders-value", Version: 2, Type: registry.Avro, Source: order2Src}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Latest = %+v, want %+v", got, want)
	}
	if c.URL() != reg.URL() || c.String() != "schema registry "+reg.URL() {
		t.Errorf("URL %q, String %q", c.URL(), c.String())
	}
}

// An empty schemaType is Avro; the registry's names map one to one.
func TestTypes(t *testing.T) {
	reg := srfake.New()
	t.Cleanup(reg.Close)
	for id, typ := range map[int]string{1: `""`, 2: `"AVRO"`, 3: `"PROTOBUF"`, 4: `"JSON"`} {
		serve(reg, fmt.Sprintf("/schemas/ids/%d", id), `{"schema":"x","schemaType":`+typ+`}`)
	}
	serve(reg, "/schemas/ids/5", `{"schema":"{}"}`)
	c := newClient(t, registry.Config{URL: reg.URL()})
	for id, want := range map[int]registry.Type{1: registry.Avro, 2: registry.Avro, 3: registry.Protobuf, 4: registry.JSON, 5: registry.Avro} {
		s, err := c.ByID(t.Context(), id)
		if err != nil || s.Type != want {
			t.Errorf("ByID(%d) type %q, %v; want %q", id, s.Type, err, want)
		}
	}
}

func TestCache(t *testing.T) {
	reg := newRegistry(t)
	n := count(reg)
	c := newClient(t, registry.Config{URL: reg.URL()})
	ctx := t.Context()

	if _, err := c.ByID(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n.get("/schemas/ids/2") != 1 || n.get("/subjects/address-value/versions/1") != 1 || n.total() != 2 {
		t.Fatalf("first ByID made %v requests, want the id and its reference", n.n)
	}
	// Everything since is cached: the id, the reference by (subject, version), and the
	// reference's own id.
	before := n.total()
	if s, err := c.ByID(ctx, 2); err != nil || !reflect.DeepEqual(s.Source, orderSrc) {
		t.Fatalf("second ByID: %+v, %v", s, err)
	}
	if _, err := c.ByVersion(ctx, "address-value", 1); err != nil {
		t.Fatal(err)
	}
	if s, err := c.ByID(ctx, 1); err != nil || s.Subject != "" || s.Version != 0 {
		t.Fatalf("ByID of a cached reference: %+v, %v (want no subject, as by id)", s, err)
	}
	if got := n.total(); got != before {
		t.Errorf("cached lookups made %d requests, want none", got-before)
	}

	// Latest always asks; what it fetched is cached by version and id.
	for range 2 {
		if _, err := c.Latest(ctx, "orders-value"); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.get("/subjects/orders-value/versions/latest"); got != 2 {
		t.Errorf("two Latest made %d requests, want 2", got)
	}
	before = n.total()
	if s, err := c.ByVersion(ctx, "orders-value", 2); err != nil || s.ID != 3 {
		t.Fatal(s, err)
	}
	if s, err := c.ByID(ctx, 3); err != nil || s.Subject != "" || !reflect.DeepEqual(s.Source, order2Src) {
		t.Fatal(s, err)
	}
	if got := n.total(); got != before {
		t.Errorf("lookups of what Latest fetched made %d requests, want none", got-before)
	}

	// Errors are not cached: a schema registered after a miss is found.
	if _, err := c.ByID(ctx, 30); apierr.Classify(err) != apierr.NotFound {
		t.Fatal(err)
	}
	reg.SeedSchema("late-value", 1, 30, sr.Schema{Schema: addressAvro})
	if _, err := c.ByID(ctx, 30); err != nil {
		t.Fatalf("after registering: %v", err)
	}
}

// Concurrent callers asking one id share one request; one caller giving up does not
// fail the others.
func TestShared(t *testing.T) {
	reg := newRegistry(t)
	n := count(reg)
	release := make(chan struct{})
	reg.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/schemas/ids/12" {
			<-release
		}
		return false
	})
	c := newClient(t, registry.Config{URL: reg.URL()})

	canceled, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.ByID(canceled, 12)
		gaveUp <- err
	}()
	const callers = 20
	var wg sync.WaitGroup
	results := make([]registry.Schema, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { results[i], errs[i] = c.ByID(t.Context(), 12) })
	}
	await.True(t, 5*time.Second, "every caller to wait for one request", func() bool {
		return n.get("/schemas/ids/12") == 1 && registry.WaitingForID(c, 12) == callers+1
	})

	cancel()
	select {
	case err := <-gaveUp:
		wantKind(t, err, apierr.Canceled, reg.URL(), "schema id 12")
	case <-time.After(5 * time.Second):
		t.Fatal("a canceled caller kept waiting")
	}
	close(release)
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || !reflect.DeepEqual(results[i].Source, paymentSrc) {
			t.Fatalf("caller %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if got := n.get("/schemas/ids/12"); got != 1 {
		t.Errorf("%d concurrent callers made %d requests for the id, want 1", callers+1, got)
	}
}

func TestNotFound(t *testing.T) {
	reg := newRegistry(t)
	// A schema whose reference is gone (a real registry can lose one to a hard delete).
	serve(reg, "/schemas/ids/50", `{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\";","references":[{"name":"gone.proto","subject":"gone","version":1}]}`)
	n := count(reg)
	c := newClient(t, registry.Config{URL: reg.URL()})
	ctx := t.Context()
	u := reg.URL()

	for _, tc := range []struct {
		name string
		get  func() (registry.Schema, error)
		want string
	}{
		{"id", func() (registry.Schema, error) { return c.ByID(ctx, 999) }, "schema registry " + u + " has no schema id 999"},
		{"subject", func() (registry.Schema, error) { return c.Latest(ctx, "orders") }, "schema registry " + u + ` has no subject "orders"`},
		{"version", func() (registry.Schema, error) { return c.ByVersion(ctx, "orders-value", 9) }, ` has no version 9 of subject "orders-value"`},
		// srfake answers "version not found" here; a Confluent registry, "subject not found".
		{"subject by version", func() (registry.Schema, error) { return c.ByVersion(ctx, "nope", 1) }, `subject "nope"`},
		{"reference", func() (registry.Schema, error) { return c.ByID(ctx, 50) },
			`has no version 1 of subject "gone" (referenced as "gone.proto" by schema id 50)`},
		{"negative id", func() (registry.Schema, error) { return c.ByID(ctx, -1) }, "has no schema id -1"},
		{"version 0", func() (registry.Schema, error) { return c.ByVersion(ctx, "orders-value", 0) }, `has no version 0 of subject "orders-value"`},
		{"version -1", func() (registry.Schema, error) { return c.ByVersion(ctx, "orders-value", -1) }, `has no version of subject "orders-value"`},
		{"empty subject", func() (registry.Schema, error) { return c.Latest(ctx, "") }, `has no subject ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.get()
			wantKind(t, err, apierr.NotFound, tc.want, u)
		})
	}
	for _, p := range []string{"/subjects/orders-value/versions/0", "/subjects/orders-value/versions/-1", "/subjects//versions/latest"} {
		if n.get(p) != 0 {
			t.Errorf("asked the registry for %s", p)
		}
	}
}

// Every answer of the registry's other than a schema or "not found" has its kind.
func TestRegistryAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ctype  string
		body   string
		kind   apierr.Kind
		want   []string
	}{
		{"500", 500, "", `{"error_code":50001,"message":"Error in the backend datastore"}`, apierr.Unavailable,
			[]string{"is unavailable: HTTP 500", "Error in the backend datastore", "50001"}},
		{"503 from a proxy", 503, "text/html", `<html><body>upstream unavailable</body></html>`, apierr.Unavailable, []string{"HTTP 503", "upstream unavailable"}},
		{"429", 429, "", `{"error_code":429,"message":"slow down"}`, apierr.Unavailable, []string{"HTTP 429", "slow down"}},
		{"422", 422, "", `{"error_code":42202,"message":"The specified version is not a valid version id"}`, apierr.Internal,
			[]string{"answered HTTP 422", "schema id 7", "not a valid version id"}},
		{"400", 400, "", `{"error_code":400,"message":"bad request"}`, apierr.Internal, []string{"HTTP 400", "bad request"}},
		{"404 not from a registry", 404, "text/plain", "404 page not found", apierr.Unavailable,
			[]string{"HTTP 404", "no registry error code", "--schema-registry-url"}},
		{"200 not JSON", 200, "text/html", "<html>hello</html>", apierr.Internal, []string{"schema id 7", "cannot read"}},
		{"200 unknown type", 200, "", `{"schema":"x","schemaType":"XML"}`, apierr.Internal, []string{"cannot read", "XML"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := srfake.New()
			t.Cleanup(reg.Close)
			reg.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
				ct := tc.ctype
				if ct == "" {
					ct = "application/vnd.schemaregistry.v1+json"
				}
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
				return true
			})
			c := newClient(t, registry.Config{URL: reg.URL()})
			_, err := c.ByID(t.Context(), 7)
			wantKind(t, err, tc.kind, append(tc.want, reg.URL())...)
		})
	}
}

func TestUnreachable(t *testing.T) {
	t.Run("closed port", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		u := "http://" + l.Addr().String()
		l.Close()
		c := newClient(t, registry.Config{URL: u})
		_, err = c.ByID(t.Context(), 1)
		wantKind(t, err, apierr.Unavailable, "schema registry "+u+" is unreachable", "/schemas/ids/1", "refused")
		_, err = c.Latest(t.Context(), "orders-value")
		wantKind(t, err, apierr.Unavailable, "is unreachable")
	})
	t.Run("dns", func(t *testing.T) {
		c := newClient(t, registry.Config{URL: "http://no-such-host.invalid:8081", Timeout: 3 * time.Second})
		_, err := c.ByID(t.Context(), 1)
		wantKind(t, err, apierr.Unavailable, "schema registry http://no-such-host.invalid:8081 is unreachable")
	})

	// A registry that never answers.
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	t.Run("timeout", func(t *testing.T) {
		c := newClient(t, registry.Config{URL: srv.URL, Timeout: 100 * time.Millisecond})
		_, err := c.ByVersion(t.Context(), "orders-value", 1)
		wantKind(t, err, apierr.Unavailable, "schema registry "+srv.URL+" is unreachable", "Timeout")
	})
	// The caller's own deadline and cancellation are theirs, not the registry's.
	t.Run("caller deadline", func(t *testing.T) {
		c := newClient(t, registry.Config{URL: srv.URL})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := c.ByID(ctx, 1)
		wantKind(t, err, apierr.DeadlineExceeded, srv.URL, "schema id 1")
	})
	t.Run("caller canceled", func(t *testing.T) {
		c := newClient(t, registry.Config{URL: srv.URL})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := c.Latest(ctx, "orders-value")
		wantKind(t, err, apierr.Canceled, srv.URL)
	})
}

func TestAuth(t *testing.T) {
	t.Run("bearer", func(t *testing.T) {
		reg := newRegistry(t, srfake.WithAuth("Bearer tok-123"))
		good := newClient(t, registry.Config{URL: reg.URL(), BearerToken: "tok-123"})
		if s, err := good.ByID(t.Context(), 2); err != nil || !reflect.DeepEqual(s.Source, orderSrc) {
			t.Fatalf("with the token: %+v, %v", s, err)
		}
		wrong := newClient(t, registry.Config{URL: reg.URL(), BearerToken: "tok-999"})
		_, err := wrong.ByID(t.Context(), 2)
		wantKind(t, err, apierr.Unavailable, "schema registry "+reg.URL()+" refused the credentials", "bearer token", "HTTP 403")
		none := newClient(t, registry.Config{URL: reg.URL()})
		_, err = none.Latest(t.Context(), "orders-value")
		wantKind(t, err, apierr.Unavailable, "refused the request, which had no credentials", "HTTP 401")
	})
	t.Run("basic", func(t *testing.T) {
		const user, pass = "mink", "p@ss:w/rd"
		reg := newRegistry(t, srfake.WithAuth(basic(user, pass)))
		host := strings.TrimPrefix(reg.URL(), "http://")
		withUserInfo := "http://mink:p%40ss%3Aw%2Frd@" + host
		for name, cfg := range map[string]registry.Config{
			"url user info": {URL: withUserInfo},
			"flags":         {URL: reg.URL(), Username: user, Password: pass},
		} {
			c := newClient(t, cfg)
			if s, err := c.ByVersion(t.Context(), "payments-value", 1); err != nil || !reflect.DeepEqual(s.Source, paymentSrc) {
				t.Errorf("%s: %+v, %v", name, s, err)
			}
			if c.URL() != reg.URL() {
				t.Errorf("%s: URL %q, want %q", name, c.URL(), reg.URL())
			}
		}
		for name, cfg := range map[string]registry.Config{
			"url user info": {URL: "http://mink:wrong@" + host},
			"flags":         {URL: reg.URL(), Username: user, Password: "wrong"},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := newClient(t, cfg).ByID(t.Context(), 1)
				wantKind(t, err, apierr.Unavailable, "schema registry "+reg.URL()+" refused the credentials", "basic auth")
			})
		}
	})
}

func basic(user, pass string) string {
	r, _ := http.NewRequest("GET", "http://x", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}

func TestTLS(t *testing.T) {
	reg := srfake.NewRegistry(srfake.WithAuth(basic("mink", "tls-pass")))
	seed(reg)
	srv := httptest.NewUnstartedServer(reg.Handler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes below are meant
	srv.StartTLS()
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	ca := writePEM(t, srv.Certificate())

	c := newClient(t, registry.Config{URL: "https://mink:tls-pass@" + host, CAFile: ca})
	if s, err := c.ByID(t.Context(), 21); err != nil || !reflect.DeepEqual(s.Source, signupSrc) {
		t.Fatalf("over TLS: %+v, %v", s, err)
	}

	system := newClient(t, registry.Config{URL: "https://mink:tls-pass@" + host})
	_, err := system.ByID(t.Context(), 21)
	wantKind(t, err, apierr.Unavailable, "schema registry "+srv.URL+" is unreachable", "certificate", "--schema-registry-ca-file")

	wrong := newClient(t, registry.Config{URL: "https://mink:tls-pass@" + host, CAFile: writePEM(t, otherCA(t))})
	_, err = wrong.ByID(t.Context(), 21)
	wantKind(t, err, apierr.Unavailable, "is unreachable", "is --schema-registry-ca-file the CA that signed its certificate?")

	// Plain HTTP to a TLS port: Go's TLS server answers 400, a 4xx like any other.
	plain := newClient(t, registry.Config{URL: "http://" + host})
	_, err = plain.ByID(t.Context(), 21)
	wantKind(t, err, apierr.Internal, "HTTP 400")
}

func TestReferenceGuards(t *testing.T) {
	reg := newRegistry(t)
	version := func(subject string, id int, refs ...string) string {
		type ref struct {
			Name    string `json:"name"`
			Subject string `json:"subject"`
			Version int    `json:"version"`
		}
		var rs []ref
		for _, r := range refs {
			rs = append(rs, ref{r, r, 1})
		}
		b, _ := json.Marshal(map[string]any{"subject": subject, "version": 1, "id": id, "schema": "{}", "references": rs})
		return string(b)
	}
	// a → b → a, and an id that refers into it.
	serve(reg, "/subjects/a/versions/1", version("a", 100, "b"))
	serve(reg, "/subjects/b/versions/1", version("b", 101, "a"))
	serve(reg, "/schemas/ids/102", `{"schema":"{}","references":[{"name":"a","subject":"a","version":1}]}`)
	// deep0 → deep1 → ... without end.
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		rest, ok := strings.CutPrefix(r.URL.Path, "/subjects/deep")
		if !ok {
			return false
		}
		n, _ := strconv.Atoi(strings.TrimSuffix(rest, "/versions/1"))
		_, _ = io.WriteString(w, version(fmt.Sprint("deep", n), 200+n, fmt.Sprint("deep", n+1)))
		return true
	})
	// A reference to version -1: Confluent's "latest".
	serve(reg, "/schemas/ids/103", `{"schema":"{}","references":[{"name":"com.example.Order","subject":"orders-value","version":-1}]}`)
	serve(reg, "/schemas/ids/104", `{"schema":"{}","references":[{"name":"x","subject":"orders-value","version":0}]}`)
	c := newClient(t, registry.Config{URL: reg.URL()})
	ctx := t.Context()

	_, err := c.ByVersion(ctx, "a", 1)
	wantKind(t, err, apierr.Internal, "cycle", `subject "a" version 1 → subject "b" version 1 → subject "a" version 1`)
	_, err = c.ByID(ctx, 102)
	wantKind(t, err, apierr.Internal, "cycle")
	_, err = c.ByVersion(ctx, "deep0", 1)
	wantKind(t, err, apierr.Internal, "nested deeper than 32", `subject "deep0" version 1 → subject "deep1" version 1 → … → subject "deep30" version 1`, `subject "deep32" version 1`)

	s, err := c.ByID(ctx, 103)
	if err != nil {
		t.Fatal(err)
	}
	want := []schemafmt.Reference{{Name: "com.example.Order", Subject: "orders-value", Version: 2, Source: order2Src}}
	if !reflect.DeepEqual(s.Source.References, want) {
		t.Errorf("latest reference resolved to %+v, want %+v", s.Source.References, want)
	}
	_, err = c.ByID(ctx, 104)
	wantKind(t, err, apierr.Internal, `reference "x" to version 0 of subject "orders-value"`)
}

func TestNotConfigured(t *testing.T) {
	c, err := registry.New(registry.Config{})
	if c != nil || err != nil {
		t.Fatalf("New without a URL = %v, %v; want nil, nil", c, err)
	}
	if _, err := c.ByID(t.Context(), 1); err != registry.ErrNotConfigured || apierr.Classify(err) != apierr.FailedPrecondition {
		t.Errorf("nil client ByID: %v", err)
	}
	if _, err := c.Latest(t.Context(), "x"); err != registry.ErrNotConfigured {
		t.Errorf("nil client Latest: %v", err)
	}
	if _, err := c.ByVersion(t.Context(), "x", 1); err != registry.ErrNotConfigured {
		t.Errorf("nil client ByVersion: %v", err)
	}
	if c.URL() != "" || c.String() != "no schema registry" {
		t.Errorf("nil client URL %q String %q", c.URL(), c.String())
	}
	c.Close()
}
