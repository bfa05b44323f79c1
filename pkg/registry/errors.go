package registry

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/minkhq/mink/pkg/apierr"
)

// ErrNotFound is within every error of an unknown id, subject or version (whose Kind is
// apierr.NotFound): errors.Is(err, ErrNotFound).
var ErrNotFound = errors.New("not in the schema registry")

// ErrNotConfigured is what a nil Client (New without a URL) returns from every fetch.
var ErrNotConfigured error = apierr.New(apierr.FailedPrecondition, "no schema registry is configured (--%s)", flagURL)

// notFoundError is an apierr NotFound error that also answers errors.Is(ErrNotFound).
type notFoundError struct{ err error }

func (e *notFoundError) Error() string        { return e.err.Error() }
func (e *notFoundError) Unwrap() error        { return e.err }
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// notFound says the registry has no what (default: t); where says what referred to it.
func (c *Client) notFound(t target, what, where string) error {
	if what == "" {
		what = t.String()
		if t.version == latest {
			what = fmt.Sprintf("version of subject %q", t.subject)
		}
	}
	return &notFoundError{apierr.New(apierr.NotFound, "schema registry %s has no %s%s", c.url, what, where)}
}

// fail classifies an error of fetching t: the caller's own end, an answer of the
// registry, or no answer at all.
func (c *Client) fail(ctx context.Context, err error, t target, where string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		kind := apierr.Canceled
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			kind = apierr.DeadlineExceeded
		}
		return apierr.Wrap(kind, ctxErr, "schema registry %s: gave up on %s%s", c.url, t, where)
	}
	if re, ok := errors.AsType[*sr.ResponseError](err); ok {
		return c.answered(re, t, where)
	}
	// Every failure of http.Client.Do is a *url.Error: DNS, refused, reset, TLS, timeout.
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return apierr.Wrap(apierr.Unavailable, ue.Err, "schema registry %s is unreachable%s: %s %s",
			c.url, c.tlsHint(ue.Err), strings.ToUpper(ue.Op), requestURI(ue.URL))
	}
	// The answer broke off while its body was read.
	if _, ok := errors.AsType[net.Error](err); ok || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) {
		return apierr.Wrap(apierr.Unavailable, err, "schema registry %s is unreachable: reading its answer for %s", c.url, t)
	}
	// A 2xx answer that is not the registry's JSON (or names an unknown schema type).
	return apierr.Wrap(apierr.Internal, err, "schema registry %s answered %s%s with something Mink cannot read", c.url, t, where)
}

// answered classifies an HTTP error answer by status first, then the registry's error
// code: some registries put a code on auth failures that means something else.
func (c *Client) answered(re *sr.ResponseError, t target, where string) error {
	status := fmt.Sprintf("HTTP %d %s", re.StatusCode, http.StatusText(re.StatusCode))
	req := re.Method + " " + requestURI(re.URL)
	msg := registryMessage(re)
	switch {
	case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
		// Retrying will not help, but neither will turning records into error rows: the
		// registry cannot be used until someone fixes the credentials.
		if c.auth == authName(false, false, false) {
			return apierr.New(apierr.Unavailable, "schema registry %s refused the request, which had no credentials: %s: %s", c.url, status, msg)
		}
		return apierr.New(apierr.Unavailable, "schema registry %s refused the credentials (%s): %s: %s", c.url, c.auth, status, msg)
	case re.StatusCode == http.StatusTooManyRequests || re.StatusCode >= 500:
		return apierr.New(apierr.Unavailable, "schema registry %s is unavailable: %s for %s: %s", c.url, status, req, msg)
	case sr.IsNotFoundError(re.ErrorCode):
		what := ""
		if t.subject != "" && (re.ErrorCode == sr.ErrSubjectNotFound.Code || re.ErrorCode == sr.ErrSubjectSoftDeleted.Code) {
			what = fmt.Sprintf("subject %q", t.subject)
		}
		return c.notFound(t, what, where)
	case re.StatusCode == http.StatusNotFound:
		// A 404 with no registry error code is a server that is not a registry (or a
		// path prefix missing from the URL): nothing is known about the schema.
		return apierr.New(apierr.Unavailable, "schema registry %s is unavailable: %s for %s with no registry error code (is --%s the registry's URL?)",
			c.url, status, req, flagURL)
	}
	return apierr.New(apierr.Internal, "schema registry %s answered %s for %s%s: %s", c.url, status, t, where, msg)
}

// tlsHint points at the CA flag when the registry's certificate was not trusted.
func (c *Client) tlsHint(err error) string {
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); !ok {
		return ""
	}
	if c.caFile {
		return fmt.Sprintf(" (is --%s the CA that signed its certificate?)", flagCAFile)
	}
	return fmt.Sprintf(" (its certificate is not signed by a system CA; see --%s)", flagCAFile)
}

// requestURI is the path and query of a request URL, for messages (the base URL is in
// them already).
func requestURI(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.RequestURI()
}

// registryMessage is the registry's message of an error answer, on one line and short:
// an answer that is not the registry's may be a whole HTML page.
func registryMessage(re *sr.ResponseError) string {
	m := re.Message
	if m == "" {
		m = string(re.Raw)
	}
	m = strings.Join(strings.Fields(m), " ")
	if r := []rune(m); len(r) > 200 {
		m = string(r[:200]) + "…"
	}
	if m == "" {
		m = "no message"
	}
	if re.ErrorCode != 0 {
		m += fmt.Sprintf(" (error code %d)", re.ErrorCode)
	}
	return m
}
