package auth

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/await"
)

const (
	clusterSecret = "0123456789abcdef0123456789abcdef-cluster"
	etlSecret     = "etl-secret-0123456789"
	opsSecret     = "ops-secret-0123456789"
)

func testFile() *File {
	return &File{ClusterSecret: clusterSecret, Principals: []PrincipalConfig{
		{ID: "etl", Secret: etlSecret, Role: RoleReader, Tables: []string{"default.*", "sales.orders"}},
		{ID: "ops", Secret: opsSecret, Role: RoleAdmin},
	}}
}

func testAuthority(t *testing.T) *Authority {
	t.Helper()
	a, err := New(testFile())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func kind(err error) apierr.Kind { return apierr.Classify(err) }

func TestParseFileNamesTheFieldAndNeverTheSecret(t *testing.T) {
	cases := []struct{ json, want string }{
		{`{"cluster_secret":"short","principals":[]}`, "cluster_secret: must be at least 32 bytes"},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[{"id":"a b","secret":"` + etlSecret + `","role":"admin"}]}`, `principals[0] ("a b"): id must match`},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[{"id":"a","secret":"tiny","role":"admin"}]}`, `principals[0] ("a"): secret must be at least 16 bytes`},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[{"id":"a","secret":"` + etlSecret + `","role":"root"}]}`, `role "root" is not reader or admin`},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[{"id":"a","secret":"` + etlSecret + `","role":"reader"}]}`, `a reader needs tables`},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[{"id":"a","secret":"` + etlSecret + `","role":"reader","tables":["orders"]}]}`, `tables[0]: "orders" is not namespace.table`},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[{"id":"a","secret":"` + etlSecret + `","role":"reader","tables":["d.[x"]}]}`, `bad glob`},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[{"id":"a","secret":"` + etlSecret + `","role":"admin"},{"id":"a","secret":"` + opsSecret + `","role":"admin"}]}`, `id is given twice`},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[{"id":"a","secret":"` + etlSecret + `","role":"admin"},{"id":"b","secret":"` + etlSecret + `","role":"admin"}]}`, `has the same secret as "a"`},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[],"token_ttl":"5s"}`, `token_ttl: 5s is outside 1m to 24h`},
		{`{"cluster_secret":"` + clusterSecret + `","principals":[],"colour":"` + etlSecret + `"}`, `unknown field "colour"`},
		{`{"cluster_secret": 12}`, `field "cluster_secret": want string`},
		{`{"cluster_secret":"` + clusterSecret + `",`, `not valid JSON`},
	}
	for _, c := range cases {
		_, err := ParseFile([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.json, err, c.want)
			continue
		}
		for _, secret := range []string{etlSecret, opsSecret, clusterSecret, "short", "tiny"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q quotes a secret", err)
			}
		}
	}
	f, err := ParseFile([]byte(`{"cluster_secret":"` + clusterSecret + `","principals":[],"vended_ttl":"30m"}`))
	if err != nil || time.Duration(f.TokenTTL) != DefaultTokenTTL || time.Duration(f.VendedTTL) != 30*time.Minute {
		t.Fatalf("defaults: %+v %v", f, err)
	}
}

func TestRolesAndPatterns(t *testing.T) {
	a := testAuthority(t)
	etl, err := a.Secret("etl", etlSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns, name string
		want     bool
	}{{"default", "demo", true}, {"default", "x", true}, {"sales", "orders", true}, {"sales", "refunds", false}, {"other", "demo", false}} {
		if got := etl.CanRead(c.ns, c.name); got != c.want {
			t.Errorf("etl reads %s.%s: %v", c.ns, c.name, got)
		}
	}
	if etl.IsAdmin() || !etl.CanReadNamespace("sales") || etl.CanReadNamespace("other") {
		t.Error("reader namespaces")
	}
	ops, _ := a.Secret("ops", opsSecret)
	if !ops.IsAdmin() || !ops.CanRead("any", "thing") {
		t.Error("admin")
	}
	for _, bad := range [][2]string{{"etl", opsSecret}, {"nobody", etlSecret}, {"etl", ""}, {"", ""}} {
		if _, err := a.Secret(bad[0], bad[1]); kind(err) != apierr.Unauthenticated {
			t.Errorf("Secret(%q, ...) = %v", bad[0], err)
		}
	}
	var off *Authority
	if p, err := off.Bearer(""); err != nil || p != Anonymous || !p.IsAdmin() || off.Enabled() {
		t.Error("auth off is not anonymous admin")
	}
}

func TestTokens(t *testing.T) {
	a := testAuthority(t)
	etl, _ := a.Secret("etl", etlSecret)
	tok, ttl, err := a.Issue(etl)
	if err != nil || ttl != DefaultTokenTTL {
		t.Fatal(err)
	}
	p, err := a.Bearer(tok)
	if err != nil || p.ID != "etl" || p.Role != RoleReader || p.Expires.IsZero() {
		t.Fatalf("bearer %+v %v", p, err)
	}
	// A principal's secret is a static token too.
	if p, err := a.Bearer(opsSecret); err != nil || !p.IsAdmin() {
		t.Fatalf("static %+v %v", p, err)
	}
	// Another node verifies what this one issued: only the config is shared.
	b := testAuthority(t)
	if p, err := b.Bearer(tok); err != nil || p.ID != "etl" {
		t.Fatalf("another node: %+v %v", p, err)
	}

	st := a.state.Load()
	expired := st.accessToken("etl", time.Now().Add(-time.Hour))
	forged := func() string {
		other := testFile()
		other.ClusterSecret = strings.Repeat("x", 40)
		o, _ := New(other)
		t, _, _ := o.Issue(etl)
		return t
	}()
	tampered := tok[:len(tok)-3] + "abc"
	peer, _ := a.PeerToken("fs-1")
	gone := st.accessToken("mallory", time.Now().Add(time.Hour))
	none, _ := a.state.Load().signNone()
	for name, c := range map[string]struct{ tok, want string }{
		"expired":   {expired, "expired"},
		"forged":    {forged, "not signed by this cluster"},
		"tampered":  {tampered, "does not verify"},
		"peer":      {peer, "peer token is not accepted"},
		"gone":      {gone, `principal "mallory" is not in the auth config`},
		"alg none":  {none, "does not verify"},
		"empty":     {"", "no bearer token"},
		"not a jwt": {"hunter2-hunter2-hunter2", "neither a token"},
	} {
		_, err := a.Bearer(c.tok)
		if kind(err) != apierr.Unauthenticated || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}

	// Peer tokens are for peers only, and name the node.
	pp, err := a.Peer(peer)
	if err != nil || !pp.Peer || pp.ID != "node:fs-1" || pp.CanRead("default", "demo") || pp.IsAdmin() {
		t.Fatalf("peer %+v %v", pp, err)
	}
	if _, err := a.Peer(tok); kind(err) != apierr.Unauthenticated {
		t.Fatalf("an access token as a peer token: %v", err)
	}
	creds := NewPeerCredentials(a, "fs-1")
	md, err := creds.GetRequestMetadata(context.Background())
	if err != nil || md[MetadataPeer] == "" {
		t.Fatalf("peer credentials %v %v", md, err)
	}
	if md2, _ := creds.GetRequestMetadata(context.Background()); md2[MetadataPeer] != md[MetadataPeer] {
		t.Error("peer token not reused while fresh")
	}
}

// Rotation: a new cluster secret signs; the previous one still verifies until dropped.
func TestRotation(t *testing.T) {
	old := testAuthority(t)
	etl, _ := old.Secret("etl", etlSecret)
	tok, _, _ := old.Issue(etl)
	creds, err := old.Vend(etl, "default", "demo")
	if err != nil {
		t.Fatal(err)
	}
	f := testFile()
	f.PreviousClusterSecrets = []string{f.ClusterSecret}
	f.ClusterSecret = strings.Repeat("n", 40)
	rotated, _ := New(f)
	if _, err := rotated.Bearer(tok); err != nil {
		t.Fatalf("old token after rotation: %v", err)
	}
	if _, secret, err := rotated.S3Key(creds.AccessKeyID, creds.SessionToken); err != nil || secret != creds.SecretAccessKey {
		t.Fatalf("old vended credentials after rotation: %v", err)
	}
	f.PreviousClusterSecrets = nil
	dropped, _ := New(f)
	if _, err := dropped.Bearer(tok); kind(err) != apierr.Unauthenticated {
		t.Fatalf("old token once the old secret is dropped: %v", err)
	}
}

func TestVendedCredentials(t *testing.T) {
	a := testAuthority(t)
	etl, _ := a.Secret("etl", etlSecret)
	c, err := a.Vend(etl, "default", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.AccessKeyID) != 20 || len(c.SecretAccessKey) != 40 || c.Table != "default.demo" || time.Until(c.Expires) > DefaultVendedTTL+time.Second {
		t.Fatalf("credentials %+v", c)
	}
	p, secret, err := a.S3Key(c.AccessKeyID, c.SessionToken)
	if err != nil || secret != c.SecretAccessKey || p.ID != "etl" || p.Table != "default.demo" {
		t.Fatalf("S3Key %+v %q %v", p, secret, err)
	}
	if !p.CanRead("default", "demo") || p.CanRead("default", "other") || p.IsAdmin() {
		t.Error("vended scope")
	}
	if _, err := a.Vend(etl, "other", "t"); kind(err) != apierr.PermissionDenied {
		t.Errorf("vend outside the patterns: %v", err)
	}
	// Static keys: the principal's id and secret.
	if p, secret, err := a.S3Key("ops", ""); err != nil || secret != opsSecret || !p.IsAdmin() {
		t.Errorf("static keys %+v %v", p, err)
	}
	s3code := func(err error) string {
		var e *apierr.Error
		if errors.As(err, &e) {
			return e.S3Code
		}
		return ""
	}
	expired := func() Credentials {
		f := testFile()
		f.VendedTTL = Duration(5 * time.Minute)
		b, _ := New(f)
		etl2 := *etl
		etl2.Expires = time.Now().Add(-time.Minute) // a token that ran out bounds what it vends
		c, _ := b.Vend(&etl2, "default", "demo")
		return c
	}()
	for name, c := range map[string]struct {
		key, token, code string
	}{
		"unknown key":    {"AKIANOTAPRINCIPAL", "", "InvalidAccessKeyId"},
		"tampered token": {c.AccessKeyID, c.SessionToken[:len(c.SessionToken)-2] + "xx", "InvalidToken"},
		"foreign token":  {c.AccessKeyID, "FwoGZXIvYXdzEJr", "InvalidToken"},
		"other key":      {"MVKAAAAAAAAAAAAAAAAA", c.SessionToken, "InvalidAccessKeyId"},
		"expired":        {expired.AccessKeyID, expired.SessionToken, "ExpiredToken"},
	} {
		_, _, err := a.S3Key(c.key, c.token)
		if kind(err) != apierr.Unauthenticated || s3code(err) != c.code {
			t.Errorf("%s: %v (code %q), want %s", name, err, s3code(err), c.code)
		}
	}
}

func TestReloadAndWatch(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "auth.json")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	body := func(extra string) string {
		return `{"cluster_secret":"` + clusterSecret + `","principals":[{"id":"ops","secret":"` + opsSecret + `","role":"admin"}` + extra + `]}`
	}
	write(body(""))
	logged := make(logLines, 64)
	a, err := Load(p, slog.New(slog.NewTextHandler(logged, nil)))
	if err != nil || a.Principals() != 1 {
		t.Fatal(err)
	}
	if off, err := Load("", nil); off != nil || err != nil {
		t.Fatal("an empty path is auth off")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { a.Watch(ctx, 20*time.Millisecond); close(done) }()

	// A change to the file is picked up.
	write(body(`,{"id":"etl","secret":"` + etlSecret + `","role":"reader","tables":["default.*"]}`))
	await.True(t, 5*time.Second, "the added principal to be loaded", func() bool { return a.Principals() == 2 })
	if _, err := a.Secret("etl", etlSecret); err != nil {
		t.Fatal(err)
	}
	// A broken file keeps the config in force: checked once Watch has read it.
	write(`{"cluster_secret": "`)
	await.True(t, 5*time.Second, "the broken file to be logged", func() bool {
		select {
		case l := <-logged:
			return strings.Contains(l, "auth config not reloaded")
		default:
			return false
		}
	})
	if a.Principals() != 2 {
		t.Fatal("a broken file changed the config")
	}
	// SIGHUP reloads at once (the poll is slowed so only the signal can explain it).
	cancel()
	<-done
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done2 := make(chan struct{})
	// The test's own subscription keeps a SIGHUP sent before Watch subscribes from
	// ending the process; the signal is sent again until Watch has reloaded. It is never
	// stopped: a SIGHUP still on its way when the last subscription ends would take the
	// signal's default action and end the test binary.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() { a.Watch(ctx2, time.Hour); close(done2) }()
	write(body(""))
	await.True(t, 5*time.Second, "a SIGHUP to reload the file", func() bool {
		syscall.Kill(os.Getpid(), syscall.SIGHUP)
		return a.Principals() == 1
	})
	if _, err := a.Secret("etl", etlSecret); kind(err) != apierr.Unauthenticated {
		t.Fatal("a removed principal still authenticates")
	}
	cancel2()
	<-done2
}

// accessToken is an access token for subject as Issue signs them, bound to the subject's
// secret when it is a principal, with any expiry.
func (s *state) accessToken(subject string, exp time.Time) string {
	gen := ""
	if pc, ok := s.principals[subject]; ok {
		gen = s.generation(0, pc)
	}
	tok, err := s.sign(kindAccess, subject, gen, time.Now(), exp)
	if err != nil {
		panic(err)
	}
	return tok
}

// signNone is a token whose header says it needs no signature: the classic forgery.
func (s *state) signNone() (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodNone, claims{Kind: kindAccess, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: issuer, Subject: "ops", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	t.Header["kid"] = keyID(s.tokenKey)
	return t.SignedString(jwt.UnsafeAllowNoneSignatureType)
}

// logLines passes each log line to whoever reads it, dropping lines nobody reads.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}
