// Package console is the operator console a node serves in the browser (--console-addr):
// a page and its assets embedded in the binary, and a JSON gateway to the node's own
// admin API. The gateway runs the AdminService's handlers through the same interceptors
// as the gRPC server (errors mapped by pkg/apierr, callers checked by pkg/auth), with the
// signed-in principal's token as the call's credentials, so the page shows what grpcurl
// shows and may do what its principal may do there.
//
// Design notes: docs/design/console.md.
package console

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
)

//go:embed web
var webFS embed.FS

const (
	// CookieName is the session cookie's name.
	CookieName = "mink_console"
	// CSRFHeader carries a POST's CSRF token.
	CSRFHeader = "X-CSRF-Token"
	// MaxBody bounds a request body: admin requests are a few KiB.
	MaxBody = 1 << 20
	// WriteTimeout bounds an answer, from its request's header to its last byte (a
	// page of rows read from the catalog and S3 included).
	WriteTimeout = 2 * time.Minute
	// callTimeout bounds one admin call of the gateway.
	callTimeout = 30 * time.Second
	// anonymousTTL is how long a session lasts when auth is off.
	anonymousTTL = 12 * time.Hour
)

// ContentSecurityPolicy is the policy of every answer: scripts, styles and everything
// else from the console itself only, no inline script, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Options build a Console.
type Options struct {
	NodeID string
	// Service is the admin API's descriptor and Impl its implementation; Interceptor is
	// the node's gRPC door (error mapping, then credentials), run around every call.
	Service     *grpc.ServiceDesc
	Impl        any
	Interceptor grpc.UnaryServerInterceptor
	// Auth checks sign-ins and issues session tokens; nil: auth off, everyone is an
	// anonymous admin (as at the gRPC door).
	Auth *auth.Authority
	// TLS is on for the console's listener: cookies are Secure.
	TLS bool
	// CatalogTLS gives the TLS config of reads through a file server's catalog and S3
	// API (the rows view), as it is now (its CA bundle reloads); nil: plain HTTP.
	CatalogTLS func() *tls.Config
	Logger     *slog.Logger
}

// Console serves the page, its assets and the API under any path prefix.
type Console struct {
	o       Options
	log     *slog.Logger
	methods map[string]grpc.MethodDesc
	mux     *http.ServeMux
}

// New builds the console.
func New(o Options) (*Console, error) {
	if o.Service == nil || o.Impl == nil {
		return nil, errors.New("console: Service and Impl are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Console{o: o, log: o.Logger, methods: map[string]grpc.MethodDesc{}, mux: http.NewServeMux()}
	for _, m := range o.Service.Methods {
		c.methods[m.MethodName] = m
	}
	static, err := fs.Sub(webFS, "web")
	if err != nil {
		return nil, err
	}
	files := http.FileServerFS(static)
	c.mux.Handle("GET /", files)
	c.mux.HandleFunc("GET /api/session", c.session)
	c.mux.HandleFunc("POST /api/login", c.login)
	c.mux.HandleFunc("POST /api/logout", c.withSession(true, c.logout))
	c.mux.HandleFunc("POST /api/call/{method}", c.withSession(true, c.call))
	c.mux.HandleFunc("GET /api/rows", c.withSession(false, c.rows))
	c.mux.HandleFunc("GET /api/fileservers", c.withSession(false, c.fileServers))
	c.mux.HandleFunc("GET /api/charts", c.withSession(false, c.charts))
	return c, nil
}

// ServeHTTP serves r with the console's security headers and bounds.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if c.o.TLS {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		h.Set("Cache-Control", "no-store")
		// A browser says where a request comes from: another site's page never gets in,
		// whatever the cookie's SameSite (an old browser may ignore it).
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			writeError(w, apierr.New(apierr.PermissionDenied, "cross-site requests are refused"))
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if ct != "application/json" {
			// A cross-site form cannot send JSON without the browser asking first.
			writeErrorStatus(w, http.StatusUnsupportedMediaType, "InvalidArgument", "send the request body as application/json")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	}
	c.mux.ServeHTTP(w, r)
}

// sessionInfo is what the page knows of its session.
type sessionInfo struct {
	Auth      bool   `json:"auth"`
	Principal string `json:"principal"`
	Role      string `json:"role"`
	Admin     bool   `json:"admin"`
	CSRF      string `json:"csrf"`
	Node      string `json:"node"`
	Expires   string `json:"expires,omitempty"`
}

// sess is a request's verified session.
type sess struct {
	cookie string
	token  string // the bearer token of admin calls; "" with auth off
	p      *auth.Principal
}

// current is r's session: its cookie verified (pkg/auth); with auth off any cookie the
// console set names an anonymous admin session.
func (c *Console) current(r *http.Request) (*sess, error) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil, apierr.New(apierr.Unauthenticated, "not signed in")
	}
	if c.o.Auth == nil {
		if !strings.HasPrefix(ck.Value, "anon.") {
			return nil, apierr.New(apierr.Unauthenticated, "not a session of this console")
		}
		return &sess{cookie: ck.Value, p: auth.Anonymous}, nil
	}
	p, err := c.o.Auth.Bearer(ck.Value)
	if err != nil {
		return nil, apierr.Wrap(apierr.Unauthenticated, err, "the session does not verify: sign in again")
	}
	return &sess{cookie: ck.Value, token: ck.Value, p: p}, nil
}

// withSession runs h with r's session; with csrf, only when r carries its CSRF token.
func (c *Console) withSession(csrf bool, h func(http.ResponseWriter, *http.Request, *sess)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.current(r)
		if err != nil {
			writeError(w, err)
			return
		}
		if csrf {
			if err := c.o.Auth.CheckCSRF(s.cookie, r.Header.Get(CSRFHeader)); err != nil {
				c.log.Info("console: a request without its CSRF token refused", "principal", s.p.ID, "path", r.URL.Path)
				writeError(w, err)
				return
			}
		}
		h(w, r, s)
	}
}

// session answers the page's session; with auth off, a new anonymous one when it has
// none.
func (c *Console) session(w http.ResponseWriter, r *http.Request) {
	s, err := c.current(r)
	if err != nil && c.o.Auth == nil {
		b := make([]byte, 24)
		rand.Read(b)
		s = &sess{cookie: "anon." + hex.EncodeToString(b), p: auth.Anonymous}
		c.setCookie(w, s.cookie, anonymousTTL)
		err = nil
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c.info(s))
}

func (c *Console) info(s *sess) sessionInfo {
	in := sessionInfo{Auth: c.o.Auth != nil, Principal: s.p.ID, Role: string(s.p.Role), Admin: s.p.IsAdmin(),
		CSRF: c.o.Auth.CSRFToken(s.cookie), Node: c.o.NodeID}
	if !s.p.Expires.IsZero() {
		in.Expires = s.p.Expires.UTC().Format(time.RFC3339)
	}
	return in
}

// login signs a principal in with its client id and secret, or a token (an access token
// or its secret), and sets the session cookie to a fresh access token of it.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.o.Auth == nil {
		writeError(w, apierr.New(apierr.FailedPrecondition, "auth is off on this node: there is nothing to sign in to"))
		return
	}
	var req struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Token        string `json:"token"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, apierr.Invalid("body", "not a sign-in request: want {\"client_id\", \"client_secret\"} or {\"token\"}"))
		return
	}
	var p *auth.Principal
	var err error
	switch {
	case req.Token != "" && req.ClientID == "":
		p, err = c.o.Auth.Bearer(req.Token)
	case req.ClientID != "" && req.Token == "":
		p, err = c.o.Auth.Secret(req.ClientID, req.ClientSecret)
	default:
		err = apierr.Invalid("client_id", "give a client id and its secret, or a token")
	}
	if err == nil && (p.Peer || p.Table != "") {
		err = apierr.New(apierr.Unauthenticated, "only a principal's credentials sign in")
	}
	if err != nil {
		c.log.Info("console: sign-in refused", "client_id", req.ClientID, "error", err)
		writeError(w, err)
		return
	}
	tok, ttl, err := c.o.Auth.Issue(p)
	if err != nil {
		writeError(w, apierr.Wrap(apierr.Unauthenticated, err, "sign-in"))
		return
	}
	c.setCookie(w, tok, ttl)
	p.Expires = time.Now().Add(ttl)
	c.log.Info("console: signed in", "principal", p.ID, "role", string(p.Role))
	writeJSON(w, http.StatusOK, c.info(&sess{cookie: tok, token: tok, p: p}))
}

func (c *Console) logout(w http.ResponseWriter, _ *http.Request, _ *sess) {
	c.setCookie(w, "", -1)
	writeJSON(w, http.StatusOK, struct{}{})
}

// setCookie sets the session cookie. It names no Path: the browser scopes it to the
// folder of the sign-in's URL (.../api), which is right under any proxy prefix.
func (c *Console) setCookie(w http.ResponseWriter, value string, ttl time.Duration) {
	ck := &http.Cookie{Name: CookieName, Value: value, HttpOnly: true, Secure: c.o.TLS, SameSite: http.SameSiteStrictMode}
	if ttl < 0 {
		ck.MaxAge = -1
	} else {
		ck.MaxAge = int(ttl / time.Second)
	}
	http.SetCookie(w, ck)
}

// call is the gateway: POST api/call/{Method} with the request as protobuf JSON, answered
// with the response as protobuf JSON (grpcurl's names, every field shown).
func (c *Console) call(w http.ResponseWriter, r *http.Request, s *sess) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, apierr.Invalid("body", "the request body is over %d bytes", MaxBody))
		return
	}
	resp, err := c.invoke(r.Context(), s, r.PathValue("method"), func(m proto.Message) error {
		if len(body) == 0 {
			return nil
		}
		if err := protojson.Unmarshal(body, m); err != nil {
			return apierr.Invalid("body", "not a %s: %v", m.ProtoReflect().Descriptor().Name(), err)
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := marshal.Marshal(resp)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

var marshal = protojson.MarshalOptions{EmitUnpopulated: true}

// invoke calls the admin method named method as session s, through the node's gRPC door.
func (c *Console) invoke(ctx context.Context, s *sess, method string, fill func(proto.Message) error) (proto.Message, error) {
	md, ok := c.methods[method]
	if !ok {
		return nil, apierr.New(apierr.NotFound, "the admin API has no method %q", path.Base(method))
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	in := metadata.MD{}
	if s.token != "" {
		in.Set(auth.MetadataAuthorization, "Bearer "+s.token)
	}
	ctx = metadata.NewIncomingContext(ctx, in)
	resp, err := md.Handler(c.o.Impl, ctx, func(v any) error { return fill(v.(proto.Message)) }, c.o.Interceptor)
	if err != nil {
		return nil, err
	}
	return resp.(proto.Message), nil
}

// apiError is the body of every error answer: the gRPC code's name and its message, as
// grpcurl prints them.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, err error) {
	st := status.Convert(apierr.GRPC(err))
	writeErrorStatus(w, apierr.HTTPStatus(err), st.Code().String(), st.Message())
}

func writeErrorStatus(w http.ResponseWriter, code int, name, msg string) {
	writeJSON(w, code, apiError{Code: name, Message: apierr.Truncate(msg)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
