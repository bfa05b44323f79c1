package auth

// Verification of AWS Signature Version 4 on S3 requests, as S3 does it: the canonical
// request (method, URI, query, headers, signed header names, payload hash), the string
// to sign (algorithm, time, scope, the canonical request's hash), the signing key (the
// secret through date, region, service and "aws4_request"), and a constant-time
// comparison of the signatures. aws-sdk-go-v2's signer (aws/signer/v4, with S3's
// DisableURIPathEscaping) is the reference this matches.
//
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
)

// VerifyS3 checks the AWS Signature Version 4 of an S3 request, in the Authorization
// header or in a presigned URL's query, and returns who signed it: a principal by its
// own keys (access key id = principal id, secret = its secret), or by vended credentials
// (the session token in X-Amz-Security-Token, header or query; the principal then has
// Table set). A nil Authority is auth off: every request is Anonymous.
//
// The request body is never read. Errors are apierr errors of kind Unauthenticated whose
// S3Code is S3's code, and Status S3's HTTP status for it (S3Status):
//
//   - AccessDenied: no signature at all, another scheme (Signature Version 2, a bearer
//     token), no valid Date or X-Amz-Date, host or an x-amz-* header not signed, a
//     presigned URL past its expiry ("Request has expired") or not valid yet;
//   - InvalidAccessKeyId, InvalidToken, ExpiredToken: from S3Key;
//   - SignatureDoesNotMatch: the signature is not the one the secret gives; the error
//     is a *SignatureMismatch, with the string to sign and canonical request;
//   - RequestTimeTooSkewed: a header-signed request more than S3MaxSkew from now;
//   - AuthorizationHeaderMalformed, AuthorizationQueryParametersError (400): a
//     signature that does not parse, a scope whose service is not s3, whose terminator
//     is not aws4_request or whose date is not the request's, X-Amz-Expires beyond a
//     week;
//   - InvalidArgument (400): both an Authorization header and query authentication, or
//     a bad x-amz-content-sha256; InvalidRequest (400): no x-amz-content-sha256 on a
//     header-signed request; XAmzContentSHA256Mismatch (400): a hash that is not the
//     empty body's on a request without one; InvalidURI (400): a query that does not
//     decode.
//
// The region of the credential's scope is not checked: it only has to be the one the
// client signed with, as with MinIO when no region is configured.
func (a *Authority) VerifyS3(r *http.Request) (*Principal, error) {
	if a == nil {
		return Anonymous, nil
	}
	return a.verifyS3(r, time.Now())
}

func (a *Authority) verifyS3(r *http.Request, now time.Time) (*Principal, error) {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, s3Err(codeInvalidURI, "Couldn't parse the specified URI: the query string is not validly percent-encoded.")
	}
	authz := r.Header.Values("Authorization")
	presigned := query.Has(amzAlgorithm) || query.Has(amzCredential) || query.Has(amzSignature)
	v2query := query.Has("AWSAccessKeyId") || (query.Has("Signature") && query.Has("Expires"))
	var sig sigV4
	switch {
	case len(authz) > 0 && (presigned || v2query):
		return nil, s3Err(codeInvalidArgument, "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, "+
			"Signature query string parameter or the Authorization header should be specified")
	case len(authz) > 1:
		return nil, malformed(false, "the request has more than one Authorization header.")
	case len(authz) == 1:
		sig, err = parseAuthorizationHeader(authz[0])
	case presigned:
		sig, err = parsePresigned(query)
	case v2query:
		return nil, s3Err(codeAccessDenied, "Access Denied: Signature Version 2 presigned URLs are not supported; presign with Signature Version 4 (%s)", sigV4Algorithm)
	default:
		return nil, s3Err(codeAccessDenied, "Access Denied: the request is not signed; sign it with AWS Signature Version 4 "+
			"(a principal's id and secret as access key id and secret key, or vended credentials)")
	}
	if err != nil {
		return nil, err
	}
	if !slices.Contains(sig.signedHeaders, "host") {
		return nil, s3Err(codeAccessDenied, "There were headers present in the request which were not signed: host must be signed")
	}

	var signedAt time.Time
	var payload, token string
	if sig.presigned {
		signedAt = sig.date
		if now.Before(signedAt.Add(-S3MaxSkew)) {
			return nil, s3Err(codeAccessDenied, "Request is not valid yet")
		}
		if now.After(signedAt.Add(sig.expires)) {
			return nil, s3Err(codeAccessDenied, "Request has expired")
		}
		payload = unsignedPayload
		if v := query.Get(amzContentSHA256); v != "" {
			payload = v
		} else if v := r.Header.Get(amzContentSHA256); v != "" {
			payload = v
		}
		if err := checkPayloadHash(payload, r); err != nil {
			return nil, err
		}
		token = query.Get(amzSecurityToken)
		if token == "" {
			token = r.Header.Get(amzSecurityToken)
		}
	} else {
		if signedAt, err = requestTime(r); err != nil {
			return nil, err
		}
		if d := signedAt.Format(yyyymmdd); sig.credential.scope.date != d {
			return nil, malformed(false, "Invalid credential date %q. This date is not the same as X-Amz-Date: %q.", sig.credential.scope.date, d)
		}
		payload = r.Header.Get(amzContentSHA256)
		if payload == "" {
			return nil, s3Err(codeInvalidRequest, "Missing required header for this request: x-amz-content-sha256")
		}
		if err := checkPayloadHash(payload, r); err != nil {
			return nil, err
		}
		if names := unsignedAmzHeaders(r.Header, sig.signedHeaders); len(names) > 0 {
			return nil, s3Err(codeAccessDenied, "There were headers present in the request which were not signed: %s", strings.Join(names, ", "))
		}
		if skew := now.Sub(signedAt); skew > S3MaxSkew || skew < -S3MaxSkew {
			return nil, s3Err(codeTimeTooSkewed, "The difference between the request time and the server's time is too large: "+
				"signed at %s, the server's time is %s (at most %v apart)",
				signedAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), S3MaxSkew)
		}
		token = r.Header.Get(amzSecurityToken)
		if token == "" {
			token = query.Get(amzSecurityToken)
		}
	}

	p, secret, err := a.S3Key(sig.credential.accessKey, token)
	if err != nil {
		return nil, err
	}
	key := a.keys.get(secret, sig.credential.scope)
	headers := canonicalHeaders(r, sig.signedHeaders)
	signedNames := strings.Join(sig.signedHeaders, ";")
	match := 0
	var first, firstSTS string
	// One canonical request as a rule. Two when the request's own escaping of its path
	// differs from S3's (a client that signed "%2F" or an unescaped "!" as it sent
	// it), or when sorting the query by its encoded and by its decoded names differs
	// (only with non-ASCII names: botocore sorts encoded, aws-sdk-go-v2 decoded). Each
	// is a signature of this request by the secret's holder.
	for _, uri := range canonicalURIs(r.URL) {
		for _, q := range canonicalQueries(query, sig.presigned) {
			cr := strings.Join([]string{r.Method, uri, q, headers, signedNames, payload}, "\n")
			sts := stringToSign(signedAt, sig.credential.scope, cr)
			got := hex.EncodeToString(hmacSHA256(key, sts))
			match |= subtle.ConstantTimeCompare([]byte(got), []byte(sig.signature))
			if first == "" {
				first, firstSTS = cr, sts
			}
		}
	}
	if match != 1 {
		if a.log != nil {
			a.log.Debug("s3 signature does not match", "access_key_id", sig.credential.accessKey,
				"canonical_request", first, "string_to_sign", firstSTS)
		}
		return nil, &SignatureMismatch{AccessKeyID: sig.credential.accessKey, SignatureProvided: sig.signature,
			StringToSign: firstSTS, CanonicalRequest: first,
			err: s3Err(codeSignatureDoesNotMatch, "The request signature we calculated does not match the signature you provided. "+
				"Check your key and signing method.")}
	}
	return p, nil
}

// SignatureMismatch is a SignatureDoesNotMatch with what S3 answers along with it: the
// string to sign and the canonical request the server made of the request, so that a
// client can compare its signer's with them. Both are made of the request alone (what
// the client sent and signed); nothing secret is in them.
type SignatureMismatch struct {
	AccessKeyID       string
	SignatureProvided string
	StringToSign      string
	CanonicalRequest  string
	err               error
}

func (e *SignatureMismatch) Error() string { return e.err.Error() }
func (e *SignatureMismatch) Unwrap() error { return e.err }

// S3Elements adds what S3 answers with a SignatureDoesNotMatch to its error body.
func (e *SignatureMismatch) S3Elements(s *apierr.S3Error) {
	s.AWSAccessKeyID, s.SignatureProvided = e.AccessKeyID, e.SignatureProvided
	s.StringToSign, s.CanonicalRequest = e.StringToSign, e.CanonicalRequest
}

// unsignedAmzHeaders are the x-amz-* headers of h that signed does not list: S3 wants
// every one signed on a header-signed request.
func unsignedAmzHeaders(h http.Header, signed []string) []string {
	var out []string
	for k := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") && !slices.Contains(signed, lk) {
			out = append(out, lk)
		}
	}
	sort.Strings(out)
	return out
}

// canonicalHeaders is the canonical request's headers part: each signed header as
// "name:value\n", its values trimmed, inner runs of spaces folded to one, several values
// joined by commas. A signed header the request lacks has an empty value, as with S3.
func canonicalHeaders(r *http.Request, signed []string) string {
	byName := make(map[string][]string, len(r.Header))
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		byName[lk] = append(byName[lk], vs...)
	}
	var b strings.Builder
	for _, h := range signed {
		vals := byName[h]
		switch {
		case h == "host":
			// net/http moves Host out of the header map.
			vals = []string{r.Host}
		case len(vals) == 0 && h == "transfer-encoding":
			vals = []string{strings.Join(r.TransferEncoding, ",")}
		}
		b.WriteString(h)
		b.WriteByte(':')
		for i, v := range vals {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strings.TrimSpace(foldSpaces(v)))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// foldSpaces turns each run of spaces in s into one.
func foldSpaces(s string) string {
	if !strings.Contains(s, "  ") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := range len(s) {
		c := s[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(c)
	}
	return b.String()
}

// canonicalURIs are the canonical URIs of u: S3's (the decoded path with each byte but
// the unreserved ones and "/" percent-encoded once; S3 does not double-encode or
// normalize), then the path as the request escaped it when that differs.
func canonicalURIs(u *url.URL) []string {
	s3 := awsEscape(u.Path, true)
	if s3 == "" {
		s3 = "/"
	}
	sent := u.EscapedPath()
	if sent == "" {
		sent = "/"
	}
	if sent != s3 {
		return []string{s3, sent}
	}
	return []string{s3}
}

// canonicalQueries are the canonical query strings of q (without X-Amz-Signature when
// presigned): every name=value pair encoded, sorted by name, then value, joined by "&";
// sorted by the encoded pairs as AWS specifies, then, when that differs, by the decoded
// ones as aws-sdk-go-v2 does.
func canonicalQueries(q url.Values, presigned bool) []string {
	type pair struct{ k, v, ek, ev string }
	var pairs []pair
	for k, vs := range q {
		if presigned && k == amzSignature {
			continue
		}
		for _, v := range vs {
			pairs = append(pairs, pair{k, v, awsEscape(k, false), awsEscape(v, false)})
		}
	}
	join := func() string {
		var b strings.Builder
		for i, p := range pairs {
			if i > 0 {
				b.WriteByte('&')
			}
			b.WriteString(p.ek)
			b.WriteByte('=')
			b.WriteString(p.ev)
		}
		return b.String()
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].ek != pairs[j].ek {
			return pairs[i].ek < pairs[j].ek
		}
		return pairs[i].ev < pairs[j].ev
	})
	encoded := join()
	sort.SliceStable(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	if decoded := join(); decoded != encoded {
		return []string{encoded, decoded}
	}
	return []string{encoded}
}

// awsEscape percent-encodes every byte of s but the unreserved characters (A-Z a-z 0-9
// - _ . ~) and, when keepSlash, "/", with upper-case hex: AWS's URI encoding.
func awsEscape(s string, keepSlash bool) string {
	const hexUpper = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := range len(s) {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', keepSlash && c == '/':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexUpper[c>>4])
			b.WriteByte(hexUpper[c&15])
		}
	}
	return b.String()
}

// stringToSign is "AWS4-HMAC-SHA256\n<time>\n<scope>\n<hex sha256 of the canonical
// request>".
func stringToSign(t time.Time, scope sigScope, canonicalRequest string) string {
	sum := sha256.Sum256([]byte(canonicalRequest))
	return sigV4Algorithm + "\n" + t.UTC().Format(iso8601Basic) + "\n" + scope.String() + "\n" + hex.EncodeToString(sum[:])
}

// signingKeys remembers the signing keys derived lately: a client signs every request of
// a day with the same key, and a Parquet reader sends a GET per column chunk, so deriving
// it (four HMACs, about a third of a header-signed request's verification) once per
// secret and scope is enough. Only the derivation is remembered: every request's
// signature is still computed and compared. Entries are keyed by the secret itself, so a
// changed secret or a vended one never meets a key of another; the map is emptied when
// it reaches maxSigningKeys (vended credentials each have their own secret).
type signingKeys struct {
	mu   sync.Mutex
	keys map[signingKeyID][]byte
}

type signingKeyID struct {
	secret string
	scope  sigScope
}

const maxSigningKeys = 1024

func (c *signingKeys) get(secret string, scope sigScope) []byte {
	id := signingKeyID{secret, scope}
	c.mu.Lock()
	k, ok := c.keys[id]
	c.mu.Unlock()
	if ok {
		return k
	}
	k = signingKey(secret, scope)
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxSigningKeys {
		c.keys = make(map[signingKeyID][]byte)
	}
	c.keys[id] = k
	c.mu.Unlock()
	return k
}

// signingKey is HMAC("AWS4"+secret, date) → region → service → "aws4_request".
func signingKey(secret string, scope sigScope) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), scope.date)
	k = hmacSHA256(k, scope.region)
	k = hmacSHA256(k, scope.service)
	return hmacSHA256(k, scope.request)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}
