package auth

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// MinStaticToken is the shortest token StaticBearer may be given: as short as a
// principal's secret may be, so a placeholder ("CHANGE-ME") never opens a door.
const MinStaticToken = minSecret

// StaticBearer is the door of a listener one shared token opens (the metrics listener's
// --metrics-token): a request passes with "Authorization: Bearer <token>", compared in
// constant time, and is otherwise answered 401 with a Bearer challenge. token gives the
// token in force, read for each request (a file may change); when it cannot, or gives
// nothing, the answer is 503: a broken setting never opens the door.
func StaticBearer(realm string, token func() (string, error), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want, err := token()
		if err != nil || len(want) < MinStaticToken {
			http.Error(w, "the token of this listener cannot be read: the node's log says why", http.StatusServiceUnavailable)
			return
		}
		h := r.Header.Get("Authorization")
		scheme, got, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
			msg := "no bearer token: send Authorization: Bearer <token> (Prometheus: authorization.credentials_file)"
			if h != "" {
				msg = "wrong token"
			}
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
