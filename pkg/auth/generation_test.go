package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
)

// An exchange chain, as an attacker holding one token would run it: each new token is
// issued to the principal the one before verified as, and none expires later than the
// first; neither do credentials vended on any of them. The secret itself still gets a
// whole token TTL.
func TestTokenChainNeverOutlivesItsSource(t *testing.T) {
	a := testAuthority(t)
	first := a.state.Load().accessToken("etl", time.Now().Add(2*time.Minute))
	p, err := a.Bearer(first)
	if err != nil {
		t.Fatal(err)
	}
	end := p.Expires
	tok := first
	for i := range 5 {
		p, err := a.Bearer(tok)
		if err != nil {
			t.Fatalf("link %d: %v", i, err)
		}
		next, ttl, err := a.Issue(p)
		if err != nil {
			t.Fatalf("link %d: issue: %v", i, err)
		}
		q, err := a.Bearer(next)
		if err != nil {
			t.Fatalf("link %d: the renewed token: %v", i, err)
		}
		if q.Expires.After(end) || ttl > time.Until(end)+time.Second {
			t.Fatalf("link %d expires at %v (ttl %v), after the first token's %v", i, q.Expires, ttl, end)
		}
		c, err := a.Vend(q, "default", "demo")
		if err != nil || c.Expires.After(end) {
			t.Fatalf("link %d: vended credentials until %v (%v), after %v", i, c.Expires, err, end)
		}
		tok = next
	}
	etl, _ := a.Secret("etl", etlSecret)
	if _, ttl, err := a.Issue(etl); err != nil || ttl != DefaultTokenTTL {
		t.Fatalf("a token for the secret: %v %v", ttl, err)
	}
	// Vended credentials and peers are no principals: they get no tokens.
	c, _ := a.Vend(etl, "default", "demo")
	vp, _, err := a.S3Key(c.AccessKeyID, c.SessionToken)
	if err != nil {
		t.Fatal(err)
	}
	peerTok, _ := a.PeerToken("fs-1")
	peer, _ := a.Peer(peerTok)
	for name, p := range map[string]*Principal{"vended": vp, "peer": peer, "anonymous": Anonymous} {
		if _, _, err := a.Issue(p); kind(err) != apierr.Unauthenticated {
			t.Errorf("a token for %s credentials: %v", name, err)
		}
	}
}

// A principal's secret rotates (the file changes and is reloaded): everything issued
// under the old secret stops at every door: its access tokens (catalog and admin API
// bearer), the credentials vended on the secret or on a token, the old secret as a
// static token, as S3 keys and as client credentials; a principal checked just before
// the reload gets nothing issued after it. Other principals keep theirs; the new secret
// works at once. Removing a principal ends its tokens too.
func TestSecretRotationEndsWhatWasIssuedUnderIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	if err := WriteFile(path, testFile()); err != nil {
		t.Fatal(err)
	}
	a, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	etl, _ := a.Secret("etl", etlSecret)
	tok, _, _ := a.Issue(etl)
	viaTok, err := a.Bearer(tok)
	if err != nil {
		t.Fatal(err)
	}
	vended, _ := a.Vend(etl, "default", "demo")
	vendedViaTok, _ := a.Vend(viaTok, "default", "demo")
	ops, _ := a.Secret("ops", opsSecret)
	opsTok, _, _ := a.Issue(ops)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(MetadataAuthorization, "Bearer "+tok))
	if _, err := a.Authorize(ctx, adminv1.AdminService_ListTables_FullMethodName); err != nil {
		t.Fatalf("the admin API before the rotation: %v", err)
	}

	reload := func(f *File) {
		t.Helper()
		if err := WriteFile(path, f); err != nil {
			t.Fatal(err)
		}
		if err := a.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	const newSecret = "etl-secret-rotated-0123456789"
	f := testFile()
	f.Principals[0].Secret = newSecret
	reload(f)

	for name, err := range map[string]error{
		"token":              func() error { _, err := a.Bearer(tok); return err }(),
		"old secret, bearer": func() error { _, err := a.Bearer(etlSecret); return err }(),
		"old secret, client": func() error { _, err := a.Secret("etl", etlSecret); return err }(),
		"admin API, token": func() error {
			_, err := a.Authorize(ctx, adminv1.AdminService_ListTables_FullMethodName)
			return err
		}(),
		"issue for a principal checked before": func() error { _, _, err := a.Issue(etl); return err }(),
		"issue on a token verified before":     func() error { _, _, err := a.Issue(viaTok); return err }(),
		"vend on a token verified before":      func() error { _, err := a.Vend(viaTok, "default", "demo"); return err }(),
	} {
		if kind(err) != apierr.Unauthenticated {
			t.Errorf("%s after the rotation: %v", name, err)
		}
	}
	if _, err := a.Bearer(tok); err == nil || !strings.Contains(err.Error(), "secret changed") {
		t.Errorf("the token's refusal says why: %v", err)
	}
	for name, c := range map[string]Credentials{"vended on the secret": vended, "vended on a token": vendedViaTok} {
		if _, _, err := a.S3Key(c.AccessKeyID, c.SessionToken); kind(err) != apierr.Unauthenticated || s3Code(err) != "InvalidToken" {
			t.Errorf("S3 with %s after the rotation: %v (%s)", name, err, s3Code(err))
		}
	}
	if _, secret, err := a.S3Key("etl", ""); err != nil || secret != newSecret {
		t.Errorf("S3 keys of etl sign with the new secret only: %v", err)
	}

	// ops's secret did not change: its token still works; the new secret works at once.
	if p, err := a.Bearer(opsTok); err != nil || p.ID != "ops" {
		t.Errorf("another principal's token: %v", err)
	}
	fresh, err := a.Secret("etl", newSecret)
	if err != nil {
		t.Fatal(err)
	}
	if tok2, _, err := a.Issue(fresh); err != nil {
		t.Fatal(err)
	} else if _, err := a.Bearer(tok2); err != nil {
		t.Errorf("a token of the new secret: %v", err)
	}

	// Removed, then added back under the same id with another secret: its old token is
	// refused both times.
	f.Principals = f.Principals[:1] // ops removed
	reload(f)
	if _, err := a.Bearer(opsTok); kind(err) != apierr.Unauthenticated {
		t.Errorf("a removed principal's token: %v", err)
	}
	f.Principals = append(f.Principals, PrincipalConfig{ID: "ops", Secret: "ops-secret-readded-0123456789", Role: RoleAdmin})
	reload(f)
	if _, err := a.Bearer(opsTok); kind(err) != apierr.Unauthenticated {
		t.Errorf("a principal re-added with another secret, its old token: %v", err)
	}
}

// Forged tokens and vended credentials: claims altered after signing never verify; a
// token signed with the cluster's key but bound to another secret (an old one, another
// principal's, none: a token of a Mink before generations) is refused; so are vended
// statements whose generation is not the principal's.
func TestForgedGenerationsRefused(t *testing.T) {
	a := testAuthority(t)
	st := a.state.Load()
	etl, _ := a.Secret("etl", etlSecret)
	tok, _, _ := a.Issue(etl)
	alter := func(tok string, change func(map[string]any)) string {
		parts := strings.Split(tok, ".")
		raw, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		change(c)
		raw, _ = json.Marshal(c)
		parts[1] = base64.RawURLEncoding.EncodeToString(raw)
		return strings.Join(parts, ".")
	}
	exp := time.Now().Add(time.Hour)
	signed := func(sub, gen string) string {
		s, err := st.sign(kindAccess, sub, gen, time.Now(), exp)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	oldEtl := &PrincipalConfig{ID: "etl", Secret: "etl-secret-of-last-year-0123"}
	for name, c := range map[string]struct{ tok, want string }{
		"subject altered":        {alter(tok, func(c map[string]any) { c["sub"] = "ops" }), "does not verify"},
		"expiry altered":         {alter(tok, func(c map[string]any) { c["exp"] = exp.Add(24 * time.Hour).Unix() }), "does not verify"},
		"generation altered":     {alter(tok, func(c map[string]any) { c["gen"] = st.generation(0, oldEtl) }), "does not verify"},
		"generation removed":     {alter(tok, func(c map[string]any) { delete(c, "gen") }), "does not verify"},
		"no generation":          {signed("etl", ""), "secret changed"},
		"an old secret's":        {signed("etl", st.generation(0, oldEtl)), "secret changed"},
		"another principal's":    {signed("etl", st.generation(0, st.principals["ops"])), "secret changed"},
		"a generation as secret": {signed("ops", st.generation(0, st.principals["etl"])), "secret changed"},
	} {
		_, err := a.Bearer(c.tok)
		if kind(err) != apierr.Unauthenticated || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}

	// Vended credentials: the statement altered keeps its MAC and fails it; one MAC'd
	// with the cluster's key under another generation is refused.
	c, _ := a.Vend(etl, "default", "demo")
	body, sig, _ := strings.Cut(strings.TrimPrefix(c.SessionToken, vendPrefix), ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	var v vended
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	restate := func(change func(*vended), remac bool) (key, token string) {
		w := v
		change(&w)
		b, _ := json.Marshal(w)
		nb := base64.RawURLEncoding.EncodeToString(b)
		m := sig
		if remac {
			m = base64.RawURLEncoding.EncodeToString(mac(st.vendKey, "token", nb))
		}
		token = vendPrefix + nb + "." + m
		return accessKeyOf(token), token
	}
	for name, f := range map[string]struct {
		change func(*vended)
		remac  bool
	}{
		"table altered":      {func(w *vended) { w.Table = "default.other" }, false},
		"expiry altered":     {func(w *vended) { w.Expires += 86400 }, false},
		"generation altered": {func(w *vended) { w.Gen = st.generation(0, oldEtl) }, false},
		"an old secret's":    {func(w *vended) { w.Gen = st.generation(0, oldEtl) }, true},
		"no generation":      {func(w *vended) { w.Gen = "" }, true},
	} {
		key, token := restate(f.change, f.remac)
		if _, _, err := a.S3Key(key, token); kind(err) != apierr.Unauthenticated || s3Code(err) != "InvalidToken" {
			t.Errorf("vended, %s: %v (%s)", name, err, s3Code(err))
		}
	}
}
