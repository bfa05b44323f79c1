package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"

	"github.com/minkhq/mink/pkg/apierr"
)

// processCSRFKey signs CSRF tokens when auth is off: there is no cluster secret, so a
// token holds on the node that made it only.
var processCSRFKey = func() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}()

// CSRFToken is the anti-forgery token of a browser session whose cookie holds session
// (the console's): a keyed hash of it that only the cluster's nodes can make, so a page
// that can make the browser send the cookie (another site) or holds another session's
// token cannot produce this session's.
func (a *Authority) CSRFToken(session string) string {
	return csrfOf(a.csrfKeys()[0], session)
}

// CheckCSRF is nil when token is session's CSRF token (under the cluster secret or a
// previous one), else a PermissionDenied error.
func (a *Authority) CheckCSRF(session, token string) error {
	if session != "" && token != "" {
		for _, k := range a.csrfKeys() {
			if hmac.Equal([]byte(csrfOf(k, session)), []byte(token)) {
				return nil
			}
		}
	}
	return permissionDenied("the request carries no valid CSRF token for its session: reload the console")
}

func (a *Authority) csrfKeys() [][]byte {
	if a == nil {
		return [][]byte{processCSRFKey}
	}
	s := a.state.Load()
	keys := make([][]byte, 0, len(s.verifyKeys))
	for _, sec := range append([]string{s.file.ClusterSecret}, s.file.PreviousClusterSecrets...) {
		keys = append(keys, derive(sec, "csrf/v1"))
	}
	return keys
}

func csrfOf(key []byte, session string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func permissionDenied(format string, args ...any) error {
	return apierr.New(apierr.PermissionDenied, format, args...)
}
