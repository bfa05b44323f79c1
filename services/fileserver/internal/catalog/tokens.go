package catalog

// The OAuth2 token endpoint of the Iceberg REST spec, POST /v1/oauth/tokens, as clients
// call it:
//
//   - iceberg-go (credential "id:secret"): client_credentials, client_id and
//     client_secret in the form (golang.org/x/oauth2, AuthStyleInParams), scope=catalog;
//     again when the token expires (expires_in).
//   - PyIceberg (credential "id:secret" or a bare secret): client_credentials in the form,
//     client_id left out for a bare secret, scope=catalog; again after a 401. Its session
//     sends its old "Authorization: Bearer" along, which this endpoint ignores.
//   - Java (Spark, Trino, Flink; OAuth2Util.AuthSession): client_credentials in the form,
//     then, in the last tenth of the token's life (at most 5 min), token exchange:
//     subject_token=<its token>, subject_token_type=...:access_token, with its token as
//     Bearer. That exchange is refused here (a token never renews itself: a leaked one
//     would last for ever), so after its retries Java exchanges again with its
//     credential as HTTP Basic, which is client authentication: a new token. A session
//     given only a token (no credential) keeps it until it expires.
//   - DuckDB: client_credentials in the form with a scope of its own (ignored: a token
//     grants what its principal's role does).
//
// HTTP Basic client authentication (RFC 6749 2.3.1, id and secret form-encoded or not)
// works for both grants. Errors are the spec's OAuthError: 401 invalid_client for
// credentials that do not verify, 400 for the rest.

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
)

const (
	grantClientCredentials = "client_credentials"
	grantTokenExchange     = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccess        = "urn:ietf:params:oauth:token-type:access_token"
	tokenTypeJWT           = "urn:ietf:params:oauth:token-type:jwt"
)

// OAuthError is the spec's OAuthError.
type OAuthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// OAuthTokenResponse is the spec's OAuthTokenResponse.
type OAuthTokenResponse struct {
	AccessToken     string `json:"access_token"`
	TokenType       string `json:"token_type"`
	ExpiresIn       int64  `json:"expires_in"`
	IssuedTokenType string `json:"issued_token_type"`
}

// oauthFail answers a token request with an OAuthError.
func (c *catalog) oauthFail(w http.ResponseWriter, r *http.Request, status int, code, desc string) {
	if status == http.StatusUnauthorized {
		// The scheme clients may authenticate with here (RFC 6749 5.2).
		w.Header().Set("WWW-Authenticate", `Basic realm="mink"`)
	}
	if c.logOnce("token "+remoteHost(r), time.Minute) {
		c.log.InfoContext(r.Context(), "token request refused (logged once a minute per client address)",
			"request_id", requestID(r.Context()), "remote", remoteHost(r), "error", code, "reason", desc)
	}
	body, _ := json.Marshal(OAuthError{Error: code, Description: desc})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

func (c *catalog) tokens(w http.ResponseWriter, r *http.Request) {
	// RFC 6749 5.1: token answers are never cached.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	if c.o.Auth == nil {
		c.oauthFail(w, r, http.StatusBadRequest, "invalid_request",
			"auth is off on this Mink cluster (no --auth-config): there are no tokens; configure the client without credential or token")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		c.oauthFail(w, r, http.StatusBadRequest, "invalid_request", "the request must be a form: Content-Type application/x-www-form-urlencoded")
		return
	}
	if err := r.ParseForm(); err != nil {
		if isTooLarge(err) {
			c.tooLarge(w, r, MaxTokenBodyBytes)
			return
		}
		c.oauthFail(w, r, http.StatusBadRequest, "invalid_request", "the body is not a valid form")
		return
	}
	form := r.PostForm
	for k, v := range form {
		if len(v) > 1 {
			c.oauthFail(w, r, http.StatusBadRequest, "invalid_request", "parameter "+strconv.Quote(truncate(k, 64))+" is given more than once")
			return
		}
	}
	client, clientErr, given := c.clientAuth(r, form)
	if given && clientErr != "" {
		status, code := http.StatusUnauthorized, "invalid_client"
		if clientErr == errTwoMethods {
			status, code = http.StatusBadRequest, "invalid_request"
		}
		c.oauthFail(w, r, status, code, clientErr)
		return
	}
	var p *auth.Principal
	grant := form.Get("grant_type")
	switch grant {
	case "":
		c.oauthFail(w, r, http.StatusBadRequest, "invalid_request", "grant_type is missing: client_credentials, or "+grantTokenExchange+" to refresh a token")
		return
	case grantClientCredentials:
		if !given {
			c.oauthFail(w, r, http.StatusUnauthorized, "invalid_client", "no client credentials: send client_id and client_secret (a principal's id and secret), in the form or as HTTP Basic")
			return
		}
		p = client
	case grantTokenExchange:
		subject := form.Get("subject_token")
		switch t := form.Get("subject_token_type"); {
		case subject == "":
			c.oauthFail(w, r, http.StatusBadRequest, "invalid_request", "subject_token is missing: the token to exchange for a new one")
			return
		case t != "" && t != tokenTypeAccess && t != tokenTypeJWT:
			c.oauthFail(w, r, http.StatusBadRequest, "invalid_request", "subject_token_type must be "+tokenTypeAccess)
			return
		case form.Get("actor_token") != "":
			c.oauthFail(w, r, http.StatusBadRequest, "invalid_request", "actor tokens are not supported: Mink issues tokens for its own principals only")
			return
		}
		if t := form.Get("requested_token_type"); t != "" && t != tokenTypeAccess {
			c.oauthFail(w, r, http.StatusBadRequest, "invalid_request", "requested_token_type must be "+tokenTypeAccess)
			return
		}
		if given {
			// A client that authenticates gets a token of its own, whatever the
			// subject token (Java exchanges an expired token so, with its credential).
			p = client
			break
		}
		sp, err := c.o.Auth.Bearer(subject)
		if err != nil {
			c.oauthFail(w, r, http.StatusBadRequest, "invalid_grant", "the subject token: "+apierr.Message(err))
			return
		}
		if !sp.Expires.IsZero() {
			// An issued token: it is no credential of its own (a principal's secret,
			// which never expires, is).
			c.oauthFail(w, r, http.StatusBadRequest, "invalid_grant",
				"an access token is not exchanged for a new one: it lasts until it expires; authenticate with the client credentials for a new one (client_credentials, or this exchange with them as HTTP Basic)")
			return
		}
		p = sp
	default:
		c.oauthFail(w, r, http.StatusBadRequest, "unsupported_grant_type",
			"grant_type "+strconv.Quote(truncate(grant, 64))+" is not supported: client_credentials, or "+grantTokenExchange)
		return
	}
	token, ttl, err := c.o.Auth.Issue(p)
	if err != nil {
		c.fail(w, r, err, "")
		return
	}
	c.log.InfoContext(r.Context(), "access token issued", "request_id", requestID(r.Context()), "principal", p.ID,
		"grant_type", grant, "expires_in", ttl.String(), "remote", remoteHost(r))
	body, _ := json.Marshal(OAuthTokenResponse{AccessToken: token, TokenType: "bearer",
		ExpiresIn: int64(ttl.Seconds()), IssuedTokenType: tokenTypeAccess})
	writeBody(w, r, body)
}

const errTwoMethods = "the client authenticates twice (HTTP Basic and client_id/client_secret in the form): send one"

// clientAuth checks the client credentials of a token request: HTTP Basic or
// client_id/client_secret in the form; a bare client_secret (a credential without
// "id:") names its principal alone. given reports whether any were sent; failure, why
// they were refused (invalid_client), safe to answer.
func (c *catalog) clientAuth(r *http.Request, form url.Values) (p *auth.Principal, failure string, given bool) {
	id, secret, basic := "", "", false
	if bid, bsecret, ok := r.BasicAuth(); ok {
		id, secret, basic = bid, bsecret, true
	}
	inForm := form.Has("client_id") || form.Has("client_secret")
	switch {
	case basic && inForm:
		return nil, errTwoMethods, true
	case inForm:
		id, secret = form.Get("client_id"), form.Get("client_secret")
	case !basic:
		return nil, "", false
	}
	if secret == "" {
		return nil, "the client secret is empty", true
	}
	try := func(id, secret string) *auth.Principal {
		if id == "" {
			// A bare secret: a principal's secret verifies as a static token (one that
			// never expires; an issued token is no client credential).
			p, err := c.o.Auth.Bearer(secret)
			if err != nil || !p.Expires.IsZero() {
				return nil
			}
			return p
		}
		p, err := c.o.Auth.Secret(id, secret)
		if err != nil {
			return nil
		}
		return p
	}
	if p = try(id, secret); p == nil && basic {
		// RFC 6749 2.3.1 form-encodes both before base64; clients differ.
		uid, err1 := url.QueryUnescape(id)
		usecret, err2 := url.QueryUnescape(secret)
		if err1 == nil && err2 == nil && (uid != id || usecret != secret) {
			p = try(uid, usecret)
		}
	}
	if p == nil {
		return nil, "unknown client id or wrong secret", true
	}
	return p, "", true
}
