package auth

// Parsing of AWS Signature Version 4 as S3 takes it, in its two forms: the
// Authorization header and the presigned URL's query parameters. Each parses into the
// same typed values (credential, scope, signed headers, signature, date); sigv4.go
// checks them against the request. Errors carry S3's codes and, where S3 has one, its
// wording.
//
// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html
// https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
)

// SigV4 constants.
const (
	sigV4Algorithm = "AWS4-HMAC-SHA256"
	sigV4Request   = "aws4_request" // the scope's terminator
	sigV4Service   = "s3"
	iso8601Basic   = "20060102T150405Z" // X-Amz-Date
	yyyymmdd       = "20060102"         // a scope's date

	// S3MaxSkew is how far the time a request was signed at may be from the server's
	// clock, either way, as S3 allows (header form; a presigned URL has its expiry).
	S3MaxSkew = 15 * time.Minute
	// S3MaxPresignExpiry is the longest X-Amz-Expires: a week, as S3.
	S3MaxPresignExpiry = 7 * 24 * time.Hour

	emptySHA256     = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	unsignedPayload = "UNSIGNED-PAYLOAD"
)

// Query parameters of a presigned URL.
const (
	amzAlgorithm     = "X-Amz-Algorithm"
	amzCredential    = "X-Amz-Credential"
	amzDate          = "X-Amz-Date"
	amzExpires       = "X-Amz-Expires"
	amzSignedHeaders = "X-Amz-SignedHeaders"
	amzSignature     = "X-Amz-Signature"
	amzSecurityToken = "X-Amz-Security-Token"
	amzContentSHA256 = "X-Amz-Content-Sha256"
)

// S3 error codes the checks give, beyond AccessDenied.
const (
	codeAccessDenied          = "AccessDenied"
	codeHeaderMalformed       = "AuthorizationHeaderMalformed"      // 400
	codeQueryParametersError  = "AuthorizationQueryParametersError" // 400
	codeSignatureDoesNotMatch = "SignatureDoesNotMatch"
	codeTimeTooSkewed         = "RequestTimeTooSkewed"
	codeInvalidArgument       = "InvalidArgument"           // 400
	codeInvalidRequest        = "InvalidRequest"            // 400
	codeContentSHA256Mismatch = "XAmzContentSHA256Mismatch" // 400
	codeInvalidURI            = "InvalidURI"                // 400
)

// S3Status is the HTTP status S3 answers an error code of VerifyS3 with: 403 as the
// errors' kind says, but 400 for the ones that are a malformed request rather than a
// refusal.
func S3Status(code string) int {
	switch code {
	case codeHeaderMalformed, codeQueryParametersError, codeInvalidArgument, codeInvalidRequest,
		codeContentSHA256Mismatch, codeInvalidURI, "InvalidToken", "ExpiredToken":
		return http.StatusBadRequest
	}
	return http.StatusForbidden
}

// s3Err is an authentication failure with S3 code code, answered with its status.
func s3Err(code, format string, args ...any) error {
	return apierr.S3Err(apierr.Unauthenticated, S3Status(code), code, format, args...)
}

// sigScope is a credential's scope: "20130524/us-east-1/s3/aws4_request".
type sigScope struct {
	date    string // YYYYMMDD, as given
	region  string
	service string
	request string
}

func (s sigScope) String() string {
	return s.date + "/" + s.region + "/" + s.service + "/" + s.request
}

// sigCredential is "<access key id>/<scope>".
type sigCredential struct {
	accessKey string
	scope     sigScope
}

// sigV4 is a request's signature, parsed from either form.
type sigV4 struct {
	presigned     bool
	credential    sigCredential
	signedHeaders []string // lower-case, sorted
	signature     string
	// Presigned only: X-Amz-Date and X-Amz-Expires (the header form's date is the
	// request's X-Amz-Date or Date header, read when checked).
	date    time.Time
	expires time.Duration
}

// malformed is the error of a signature that does not parse, in the wording of its form.
func malformed(presigned bool, format string, args ...any) error {
	if presigned {
		return s3Err(codeQueryParametersError, format, args...)
	}
	return s3Err(codeHeaderMalformed, "The authorization header is malformed; "+format, args...)
}

// parseCredential parses "<access key id>/YYYYMMDD/<region>/s3/aws4_request". The key
// is everything before the last four parts, as S3 does (a key may hold a slash).
func parseCredential(s string, presigned bool) (sigCredential, error) {
	where := "the Credential is mal-formed; "
	if presigned {
		where = "Error parsing the X-Amz-Credential parameter; "
	}
	parts := strings.Split(s, "/")
	if len(parts) < 5 {
		return sigCredential{}, malformed(presigned, "%sexpecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".", where)
	}
	n := len(parts)
	c := sigCredential{accessKey: strings.Join(parts[:n-4], "/"),
		scope: sigScope{date: parts[n-4], region: parts[n-3], service: parts[n-2], request: parts[n-1]}}
	switch _, err := time.Parse(yyyymmdd, c.scope.date); {
	case c.accessKey == "":
		return sigCredential{}, malformed(presigned, "%sthe access key id is empty.", where)
	case err != nil:
		return sigCredential{}, malformed(presigned, "%sincorrect date format %q. This date format is \"YYYYMMDD\".", where, c.scope.date)
	case c.scope.region == "":
		return sigCredential{}, malformed(presigned, "%sthe region is empty.", where)
	case c.scope.service != sigV4Service:
		return sigCredential{}, malformed(presigned, "%sincorrect service %q. This endpoint belongs to %q.", where, c.scope.service, sigV4Service)
	case c.scope.request != sigV4Request:
		return sigCredential{}, malformed(presigned, "%sincorrect terminal %q. This endpoint uses %q.", where, c.scope.request, sigV4Request)
	}
	return c, nil
}

// parseSignedHeaders parses "host;range;x-amz-date": names lower-cased and sorted, as
// the canonical request lists them.
func parseSignedHeaders(s string, presigned bool) ([]string, error) {
	if s == "" {
		return nil, malformed(presigned, "SignedHeaders is empty.")
	}
	var out []string
	seen := map[string]bool{}
	for h := range strings.SplitSeq(s, ";") {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			return nil, malformed(presigned, "SignedHeaders %q has an empty header name.", s)
		}
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out, nil
}

// parseAuthorizationHeader parses
//
//	AWS4-HMAC-SHA256 Credential=<key>/<scope>, SignedHeaders=<h1;h2>, Signature=<hex>
//
// with its three fields in any order, with or without spaces after the commas.
func parseAuthorizationHeader(h string) (sigV4, error) {
	algo, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	switch {
	case algo == "AWS":
		return sigV4{}, s3Err(codeAccessDenied, "Access Denied: AWS Signature Version 2 is not supported; sign requests with Signature Version 4 (%s)", sigV4Algorithm)
	case algo != sigV4Algorithm:
		return sigV4{}, s3Err(codeAccessDenied, "Access Denied: the Authorization header is not AWS Signature Version 4 (%s)", sigV4Algorithm)
	}
	fields := map[string]string{}
	for f := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		switch k {
		case "Credential", "SignedHeaders", "Signature":
		default:
			ok = false
		}
		if _, dup := fields[k]; !ok || dup {
			return sigV4{}, malformed(false, "the authorization header requires three components: Credential, SignedHeaders, and Signature.")
		}
		fields[k] = v
	}
	if len(fields) != 3 {
		return sigV4{}, malformed(false, "the authorization header requires three components: Credential, SignedHeaders, and Signature.")
	}
	cred, err := parseCredential(fields["Credential"], false)
	if err != nil {
		return sigV4{}, err
	}
	signed, err := parseSignedHeaders(fields["SignedHeaders"], false)
	if err != nil {
		return sigV4{}, err
	}
	if fields["Signature"] == "" {
		return sigV4{}, malformed(false, "the Signature is empty.")
	}
	return sigV4{credential: cred, signedHeaders: signed, signature: fields["Signature"]}, nil
}

// parsePresigned parses a presigned URL's query parameters.
func parsePresigned(q url.Values) (sigV4, error) {
	for _, k := range []string{amzAlgorithm, amzCredential, amzSignature, amzDate, amzSignedHeaders, amzExpires} {
		if len(q[k]) != 1 {
			return sigV4{}, s3Err(codeQueryParametersError, "Query-string authentication version 4 requires the X-Amz-Algorithm, "+
				"X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters, each once.")
		}
	}
	if q.Get(amzAlgorithm) != sigV4Algorithm {
		return sigV4{}, s3Err(codeQueryParametersError, "X-Amz-Algorithm only supports %q", sigV4Algorithm)
	}
	date, err := time.Parse(iso8601Basic, q.Get(amzDate))
	if err != nil {
		return sigV4{}, s3Err(codeQueryParametersError, "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	secs, err := strconv.ParseInt(q.Get(amzExpires), 10, 64)
	switch {
	case err != nil:
		return sigV4{}, s3Err(codeQueryParametersError, "X-Amz-Expires should be a number")
	case secs < 0:
		return sigV4{}, s3Err(codeQueryParametersError, "X-Amz-Expires must be non-negative")
	case secs > int64(S3MaxPresignExpiry/time.Second):
		return sigV4{}, s3Err(codeQueryParametersError, "X-Amz-Expires must be less than a week (in seconds) that is %d", int64(S3MaxPresignExpiry/time.Second))
	}
	cred, err := parseCredential(q.Get(amzCredential), true)
	if err != nil {
		return sigV4{}, err
	}
	if cred.scope.date != date.Format(yyyymmdd) {
		return sigV4{}, s3Err(codeQueryParametersError, "Invalid credential date %q. This date is not the same as X-Amz-Date: %q.",
			cred.scope.date, date.Format(yyyymmdd))
	}
	signed, err := parseSignedHeaders(q.Get(amzSignedHeaders), true)
	if err != nil {
		return sigV4{}, err
	}
	if q.Get(amzSignature) == "" {
		return sigV4{}, s3Err(codeQueryParametersError, "X-Amz-Signature is empty")
	}
	return sigV4{presigned: true, credential: cred, signedHeaders: signed, signature: q.Get(amzSignature),
		date: date, expires: time.Duration(secs) * time.Second}, nil
}

// requestTime is the header form's signing time: X-Amz-Date, else Date.
func requestTime(r *http.Request) (time.Time, error) {
	bad := s3Err(codeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
	if v := r.Header.Get(amzDate); v != "" {
		t, err := time.Parse(iso8601Basic, v)
		if err != nil {
			return time.Time{}, bad
		}
		return t, nil
	}
	if v := r.Header.Get("Date"); v != "" {
		t, err := http.ParseTime(v)
		if err != nil {
			return time.Time{}, bad
		}
		return t.UTC(), nil
	}
	return time.Time{}, bad
}

// checkPayloadHash checks an x-amz-content-sha256 value: UNSIGNED-PAYLOAD, a streaming
// mode, or a SHA-256 in hex, which for a request without a body must be the empty
// string's. A body is never read here (Mink's S3 API reads none): a hash of a body the
// request has is the handler's to check, should it ever read one.
func checkPayloadHash(v string, r *http.Request) error {
	switch {
	case v == unsignedPayload, strings.HasPrefix(v, "STREAMING-"):
		return nil
	case !isHexSHA256(v):
		return s3Err(codeInvalidArgument, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING- mode, or a valid sha256 value.")
	case r.ContentLength == 0 && len(r.TransferEncoding) == 0 && !strings.EqualFold(v, emptySHA256):
		return s3Err(codeContentSHA256Mismatch, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}
