package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
)

// Credentials are S3 credentials vended for one table: what a table load with
// X-Iceberg-Access-Delegation: vended-credentials hands an engine. They are derived from
// the cluster secret and carry their scope in the session token, so every file server
// verifies them without state: the session token is a signed statement (principal, table,
// expiry), the access key id names it, and the secret key is an HMAC of it.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	Expires         time.Time
	Table           string // "namespace.table"
}

// vended is the signed statement of a session token.
type vended struct {
	Principal string `json:"p"`
	Table     string `json:"t"`
	Expires   int64  `json:"e"` // unix seconds
	// Gen is the generation of the principal's secret they were vended under
	// (state.generation).
	Gen string `json:"g"`
}

const (
	vendPrefix      = "mvt1." // of a session token
	vendedKeyPrefix = "MVK"   // of a vended access key id
)

// Vend returns credentials for p to read table ns.name over S3, for the config's vended
// TTL (or less: never beyond p's own token), bound to p's secret as it is now: they
// stop working when it changes.
func (a *Authority) Vend(p *Principal, ns, name string) (Credentials, error) {
	if a == nil {
		return Credentials{}, apierr.New(apierr.FailedPrecondition, "auth is off: there are no credentials to vend")
	}
	if !p.CanRead(ns, name) || p.ID == Anonymous.ID {
		return Credentials{}, apierr.New(apierr.PermissionDenied, "principal %q may not read table %s.%s", p.ID, ns, name)
	}
	s := a.state.Load()
	pc, err := s.current(p)
	if err != nil {
		return Credentials{}, err
	}
	exp := time.Now().Add(time.Duration(s.file.VendedTTL))
	if !p.Expires.IsZero() && p.Expires.Before(exp) {
		exp = p.Expires
	}
	v := vended{Principal: p.ID, Table: ns + "." + name, Expires: exp.Unix(), Gen: s.generation(0, pc)}
	payload, _ := json.Marshal(v)
	body := base64.RawURLEncoding.EncodeToString(payload)
	token := vendPrefix + body + "." + base64.RawURLEncoding.EncodeToString(mac(s.vendKey, "token", body))
	return Credentials{AccessKeyID: accessKeyOf(token), SecretAccessKey: secretOf(s.vendKey, token),
		SessionToken: token, Expires: time.Unix(v.Expires, 0), Table: v.Table}, nil
}

func mac(key []byte, purpose, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose + "\x00" + msg))
	return m.Sum(nil)
}

// accessKeyOf is a vended credential's access key id: AWS's shape (20 upper-case
// characters), named after its session token.
func accessKeyOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return vendedKeyPrefix + base32.StdEncoding.EncodeToString(sum[:])[:17]
}

// vendedShape reports whether id has the shape of accessKeyOf's ids.
func vendedShape(id string) bool {
	rest, ok := strings.CutPrefix(id, vendedKeyPrefix)
	if !ok || len(rest) != 17 {
		return false
	}
	for _, r := range rest {
		if !(r >= 'A' && r <= 'Z' || r >= '2' && r <= '7') {
			return false
		}
	}
	return true
}

func secretOf(key []byte, token string) string {
	return base64.StdEncoding.EncodeToString(mac(key, "secret", token))[:40]
}

// S3Key finds the secret key an S3 request was signed with, from its access key id and
// session token (X-Amz-Security-Token; "" for a principal's own keys), and who signed.
// The caller then checks the signature with the secret. Errors carry the S3 code.
func (a *Authority) S3Key(accessKeyID, sessionToken string) (*Principal, string, error) {
	if a == nil {
		return Anonymous, "", nil
	}
	s := a.state.Load()
	if sessionToken == "" {
		pc, ok := s.principals[accessKeyID]
		switch {
		case !ok && vendedShape(accessKeyID):
			// S3 answers a temporary key without its session token as an unknown key;
			// the code stays S3's, the words say what is missing.
			return nil, "", s3Err("InvalidAccessKeyId",
				"the access key id %s is a vended one (from a table load), and the request carries no session token: "+
					"sign with the session token the load gave with it (X-Amz-Security-Token; AWS_SESSION_TOKEN or "+
					"aws_session_token in AWS's tools)", accessKeyID)
		case !ok:
			return nil, "", s3Err("InvalidAccessKeyId",
				"the AWS access key id you provided does not exist in our records")
		}
		p, _ := s.principal(pc.ID)
		return p, pc.Secret, nil
	}
	body, sig, ok := strings.Cut(strings.TrimPrefix(sessionToken, vendPrefix), ".")
	if !strings.HasPrefix(sessionToken, vendPrefix) || !ok {
		return nil, "", s3Err("InvalidToken", "the provided token is malformed")
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, "", s3Err("InvalidToken", "the provided token is malformed")
	}
	var key []byte
	signedWith := -1
	for i, k := range s.vendKeys {
		if subtle.ConstantTimeCompare(mac(k, "token", body), got) == 1 {
			key, signedWith = k, i
			break
		}
	}
	if key == nil {
		return nil, "", s3Err("InvalidToken", "the provided token was not issued by this cluster")
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	var v vended
	if err != nil || json.Unmarshal(raw, &v) != nil {
		return nil, "", s3Err("InvalidToken", "the provided token is malformed")
	}
	if accessKeyOf(sessionToken) != accessKeyID {
		return nil, "", s3Err("InvalidAccessKeyId", "the access key id does not belong to the session token")
	}
	if time.Now().Unix() > v.Expires {
		return nil, "", s3Err("ExpiredToken", "the provided token has expired")
	}
	p, ok := s.principal(v.Principal)
	if !ok {
		return nil, "", s3Err("InvalidToken", "the principal of the token is no longer in the auth config")
	}
	if !s.sameGeneration(signedWith, p.checked, v.Gen) {
		return nil, "", s3Err("InvalidToken",
			"the credentials were vended before their principal's secret changed: load the table again for new ones")
	}
	p.Table, p.Expires = v.Table, time.Unix(v.Expires, 0)
	return p, secretOf(key, sessionToken), nil
}
