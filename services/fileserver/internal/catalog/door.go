package catalog

// The catalog's door: what every request passes before a handler. It names the request
// (X-Request-Id, in every log line about it), refuses paths Go's ServeMux would redirect,
// bounds bodies, and, with auth on, authenticates the caller and puts the principal in
// the request's context. fail is the one way handlers answer an error (apierr.Iceberg):
// what is not the client's to read (a driver's text, SQLSTATE, paths, addresses) goes to
// the log under the request id, and the envelope points there.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
)

const (
	// MaxBodyBytes bounds the body of every request but the token endpoint's.
	MaxBodyBytes = 1 << 20
	// MaxTokenBodyBytes bounds a token request's form.
	MaxTokenBodyBytes = 64 << 10

	tokensPath = "/v1/oauth/tokens"
	// wwwAuthenticate is the challenge of a 401 (RFC 6750).
	wwwAuthenticate = `Bearer realm="mink"`
)

type requestIDKey struct{}

// requestID is the id the door gave the request ("" outside one).
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// cleanPath is what Go's ServeMux redirects a path to (net/http's own cleanPath).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// shortPath is r's path as error messages quote it: at most 256 bytes.
func shortPath(r *http.Request) string {
	p := r.URL.EscapedPath()
	if len(p) > 256 {
		p = p[:256] + "..."
	}
	return p
}

// door wraps the catalog's routes.
func (c *catalog) door(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := apierr.RequestID()
		w.Header().Set("X-Request-Id", id)
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		r = r.WithContext(ctx)

		// ServeMux answers a path with . or .. segments or repeated slashes with a 307 to
		// its clean form: a redirect no Iceberg client expects (and one that could send
		// a client's token elsewhere). Such a path names nothing here.
		if ep := r.URL.EscapedPath(); ep != cleanPath(ep) || r.URL.Path != cleanPath(r.URL.Path) {
			c.fail(w, r, apierr.New(apierr.InvalidArgument, "path %q is not in canonical form (it has . or .. segments, or empty ones): "+
				"Mink's catalog does not redirect; send the path the client means", shortPath(r)), "")
			return
		}
		limit := int64(MaxBodyBytes)
		if r.URL.Path == tokensPath {
			limit = MaxTokenBodyBytes
		}
		if r.ContentLength > limit {
			c.tooLarge(w, r, limit)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		if r.URL.Path == tokensPath {
			// The token endpoint authenticates its clients itself.
			next.ServeHTTP(w, r)
			return
		}
		p, err := c.authenticate(r)
		if err != nil {
			if c.logOnce("auth "+remoteHost(r), time.Minute) {
				c.log.InfoContext(ctx, "catalog request refused (logged once a minute per client address)",
					"request_id", id, "remote", remoteHost(r), "method", r.Method, "path", shortPath(r), "reason", err.Error())
			}
			c.fail(w, r, err, "")
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(ctx, p)))
	})
}

func remoteHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// tooLarge answers a body over limit bytes with 413.
func (c *catalog) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	// The rest of the body is not read: the connection closes after the answer.
	w.Header().Set("Connection", "close")
	c.fail(w, r, apierr.HTTPErr(apierr.InvalidArgument, http.StatusRequestEntityTooLarge,
		"%s %s: the request body is over %d bytes, the most Mink's catalog reads", r.Method, shortPath(r), limit), "")
}

// isTooLarge reports whether err is a read past the door's body bound.
func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// authenticate is the caller of r: with auth on, the principal of its bearer token (an
// issued token or a principal's secret), or of HTTP basic credentials (id and secret).
func (c *catalog) authenticate(r *http.Request) (*auth.Principal, error) {
	if c.o.Auth == nil {
		return auth.Anonymous, nil
	}
	h := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(strings.TrimSpace(h), " ")
	switch {
	case h == "":
		return nil, apierr.New(apierr.Unauthenticated, "no credentials: send Authorization: Bearer <token>, with a token from POST %s "+
			"(OAuth2 client credentials: configure the client with credential=<id>:<secret>) or a principal's secret as the token", tokensPath)
	case strings.EqualFold(scheme, "Bearer"):
		return c.o.Auth.Bearer(strings.TrimSpace(cred))
	case strings.EqualFold(scheme, "Basic"):
		id, secret, ok := r.BasicAuth()
		if !ok {
			return nil, apierr.New(apierr.Unauthenticated, "the Basic credentials are not base64 of id:secret")
		}
		return c.o.Auth.Secret(id, secret)
	}
	return nil, apierr.New(apierr.Unauthenticated, "authorization scheme %q is not accepted: send Authorization: Bearer <token>", truncate(scheme, 32))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// fail answers r with err in the Iceberg envelope; notFound is the exception type of a
// 404. A server-side failure (5xx), or an error whose answer leaves out a cause, is
// logged whole under the request id the answer names.
func (c *catalog) fail(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	id := requestID(r.Context())
	m := apierr.Iceberg(err, notFound, id)
	if m.Code != 499 && (m.Code >= 500 || m.Logged) { // 499: the client has gone, nobody reads it
		attrs := []any{"request_id", id, "method", r.Method, "path", shortPath(r), "status", m.Code, "error", err.Error()}
		if p := auth.FromContext(r.Context()); p != nil {
			attrs = append(attrs, "principal", p.ID)
		}
		if m.Code == http.StatusInternalServerError {
			c.log.ErrorContext(r.Context(), "catalog request failed", attrs...)
		} else {
			c.log.WarnContext(r.Context(), "catalog request failed", attrs...)
		}
	}
	if m.Code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", wwwAuthenticate)
	}
	apierr.WriteIceberg(w, r, m)
}
