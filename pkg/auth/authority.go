package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
)

// Principal is who a request comes from, once its credentials verified.
type Principal struct {
	ID   string
	Role Role
	// Tables are a reader's patterns ("namespace.table" globs).
	Tables []string
	// Peer is a cluster node (a peer token): it may call the node-to-node services,
	// nothing else.
	Peer bool
	// Table, when set, limits the principal to that one table ("namespace.table"):
	// vended S3 credentials.
	Table string
	// Expires is when the credential stops working (zero: a static secret).
	Expires time.Time
	// checked is the principal's entry of the config its credential was checked
	// against: a token or vended credentials made for p are bound to that secret
	// (Issue, Vend refuse once it has changed). A pointer, so printing p shows no secret.
	checked *PrincipalConfig
}

// Anonymous is every caller when auth is off: it may do everything, as before auth.
var Anonymous = &Principal{ID: "anonymous", Role: RoleAdmin}

// IsAdmin reports whether p may do everything.
func (p *Principal) IsAdmin() bool {
	return p != nil && !p.Peer && p.Role == RoleAdmin && p.Table == ""
}

// CanRead reports whether p may read table ns.name.
func (p *Principal) CanRead(ns, name string) bool {
	if p == nil || p.Peer {
		return false
	}
	if p.Table != "" && p.Table != ns+"."+name {
		return false
	}
	if p.Role == RoleAdmin {
		return true
	}
	for _, pat := range p.Tables {
		if matches(pat, ns, name) {
			return true
		}
	}
	return false
}

// CanReadNamespace reports whether p may see namespace ns at all: some table of it could
// match one of p's patterns.
func (p *Principal) CanReadNamespace(ns string) bool {
	if p == nil || p.Peer {
		return false
	}
	if p.Table != "" {
		n, _, _ := cutTable(p.Table)
		return n == ns
	}
	if p.Role == RoleAdmin {
		return true
	}
	for _, pat := range p.Tables {
		pns, _, _ := cutTable(pat)
		if ok, _ := matchGlob(pns, ns); ok {
			return true
		}
	}
	return false
}

type principalKey struct{}

// WithPrincipal is ctx carrying p: what the doors hand to handlers.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the principal a door put in ctx; nil when none did (a request that
// never passed a door: a bug, treated as no one).
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Authority verifies credentials against the current auth config. A nil *Authority is
// auth turned off: every request is Anonymous. Safe for concurrent use; Reload swaps the
// config whole.
type Authority struct {
	path  string
	state atomic.Pointer[state]
	log   *slog.Logger
	keys  signingKeys // SigV4 signing keys derived lately (sigv4.go)
}

// state is one loaded config with its derived keys.
type state struct {
	file       *File
	raw        []byte // the file's bytes, to tell a changed file from a touched one
	principals map[string]*PrincipalConfig
	tokenKey   []byte   // signs tokens
	verifyKeys [][]byte // token keys that verify: the current one first
	vendKey    []byte   // signs vended credentials
	vendKeys   [][]byte
	// genKeys[i] makes the secret generations of what verifyKeys[i] and vendKeys[i]
	// verify (generation): the same cluster secret.
	genKeys [][]byte
}

// derive is a key for one purpose from a cluster secret: HMAC-SHA256(secret, purpose).
func derive(secret, purpose string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("mink/" + purpose))
	return m.Sum(nil)
}

func newState(f *File, raw []byte) *state {
	s := &state{file: f, raw: raw, principals: map[string]*PrincipalConfig{}}
	for i := range f.Principals {
		s.principals[f.Principals[i].ID] = &f.Principals[i]
	}
	s.tokenKey = derive(f.ClusterSecret, "token/v1")
	s.vendKey = derive(f.ClusterSecret, "vend/v1")
	for _, sec := range append([]string{f.ClusterSecret}, f.PreviousClusterSecrets...) {
		s.verifyKeys = append(s.verifyKeys, derive(sec, "token/v1"))
		s.vendKeys = append(s.vendKeys, derive(sec, "vend/v1"))
		s.genKeys = append(s.genKeys, derive(sec, "generation/v1"))
	}
	return s
}

// Load reads the auth config at path. An empty path is auth off: Load returns nil.
func Load(path string, log *slog.Logger) (*Authority, error) {
	if path == "" {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	a := &Authority{path: path, log: log}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// New is an Authority over a config already read (tests, tools).
func New(f *File) (*Authority, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	a := &Authority{log: slog.Default()}
	a.state.Store(newState(f, nil))
	return a, nil
}

// Enabled reports whether auth is on.
func (a *Authority) Enabled() bool { return a != nil }

// Principals is how many principals the current config has.
func (a *Authority) Principals() int {
	if a == nil {
		return 0
	}
	return len(a.state.Load().file.Principals)
}

// Reload reads the file again. A bad file keeps the config in force and is an error:
// a typo must not lock everyone out (or let everyone in).
func (a *Authority) Reload() error {
	raw, err := os.ReadFile(a.path)
	if err != nil {
		return fmt.Errorf("auth config %s: %w", a.path, err)
	}
	if cur := a.state.Load(); cur != nil && bytes.Equal(cur.raw, raw) {
		return nil
	}
	f, err := ParseFile(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", a.path, err)
	}
	a.state.Store(newState(f, raw))
	return nil
}

// Watch reloads the file on SIGHUP and whenever its content changes (checked every
// interval; a Kubernetes Secret update swaps the file under its mount), until ctx ends.
// A file that does not parse is logged and the config in force is kept.
func (a *Authority) Watch(ctx context.Context, interval time.Duration) {
	if a == nil {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-tick.C:
		}
		before := a.state.Load()
		if err := a.Reload(); err != nil {
			a.log.Error("auth config not reloaded; the one in force stays", "error", err)
			continue
		}
		if after := a.state.Load(); after != before {
			a.log.Info("auth config reloaded", "principals", len(after.file.Principals))
		}
	}
}

// unauthenticated is the error of a credential that does not verify.
func unauthenticated(format string, args ...any) error {
	return apierr.New(apierr.Unauthenticated, format, args...)
}

// principal is the current config's principal id, as a Principal.
func (s *state) principal(id string) (*Principal, bool) {
	pc, ok := s.principals[id]
	if !ok {
		return nil, false
	}
	return &Principal{ID: pc.ID, Role: pc.Role, Tables: pc.Tables, checked: pc}, true
}

// generation names the secret of pc, keyed with the cluster secret of genKeys[i], so a
// token or vended credentials carry it without revealing anything of the secret: what
// they were issued under. A rotated secret has another generation, and everything
// issued under the old one stops verifying at the reload that brings the new one.
func (s *state) generation(i int, pc *PrincipalConfig) string {
	m := hmac.New(sha256.New, s.genKeys[i])
	m.Write([]byte(pc.ID + "\x00" + pc.Secret))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// sameGeneration reports whether gen, carried by a credential verified with the keys of
// cluster secret i, is the generation of pc's secret now.
func (s *state) sameGeneration(i int, pc *PrincipalConfig, gen string) bool {
	return hmac.Equal([]byte(s.generation(i, pc)), []byte(gen))
}

// current is p's entry of the config in force, refused when p's credential was checked
// against another secret than the one in force now (the config was reloaded meanwhile)
// or p is no principal (a peer, vended credentials, anonymous): what Issue and Vend
// make their credentials from.
func (s *state) current(p *Principal) (*PrincipalConfig, error) {
	if p == nil || p.checked == nil || p.Peer || p.Table != "" {
		return nil, unauthenticated("only a principal's own credentials get tokens and vended credentials")
	}
	pc, ok := s.principals[p.ID]
	if !ok {
		return nil, unauthenticated("principal %q is not in the auth config", p.ID)
	}
	if subtle.ConstantTimeCompare([]byte(pc.Secret), []byte(p.checked.Secret)) != 1 {
		return nil, unauthenticated("principal %q's secret has changed: authenticate with the new one", p.ID)
	}
	return pc, nil
}

// Secret checks a principal's id and secret (OAuth2 client credentials, HTTP basic).
func (a *Authority) Secret(id, secret string) (*Principal, error) {
	if a == nil {
		return Anonymous, nil
	}
	s := a.state.Load()
	pc, ok := s.principals[id]
	// Compare whatever the id, so that timing does not tell which ids exist.
	want := []byte("\x00not a principal's secret\x00")
	if ok {
		want = []byte(pc.Secret)
	}
	if subtle.ConstantTimeCompare(want, []byte(secret)) != 1 || !ok {
		return nil, unauthenticated("unknown client id or wrong secret")
	}
	p, _ := s.principal(id)
	return p, nil
}

// Bearer verifies a bearer token: an access token this cluster issued, or a principal's
// secret used as a static token.
func (a *Authority) Bearer(token string) (*Principal, error) {
	if a == nil {
		return Anonymous, nil
	}
	if token == "" {
		return nil, unauthenticated("no bearer token")
	}
	s := a.state.Load()
	if looksLikeJWT(token) {
		return s.verifyToken(token, kindAccess)
	}
	for _, pc := range s.file.Principals {
		if subtle.ConstantTimeCompare([]byte(pc.Secret), []byte(token)) == 1 {
			p, _ := s.principal(pc.ID)
			return p, nil
		}
	}
	return nil, unauthenticated("the bearer token is neither a token of this cluster nor a principal's secret")
}

// keyID names a key in a token's header without revealing it.
func keyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

var errNoKey = errors.New("no key")
