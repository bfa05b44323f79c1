package auth

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/encoding/httpbinding"

	"github.com/minkhq/mink/pkg/apierr"
)

// AWS's published example credentials.
const (
	exampleKey    = "AKIAIOSFODNN7EXAMPLE"
	exampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

func sigAuthority(t testing.TB) *Authority {
	t.Helper()
	f := testFile()
	f.Principals = append(f.Principals, PrincipalConfig{ID: exampleKey, Secret: exampleSecret, Role: RoleAdmin})
	a, err := New(f)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// s3Code is the S3 code of err ("" when it has none).
func s3Code(err error) string {
	var e *apierr.Error
	if errors.As(err, &e) {
		return e.S3Code
	}
	return ""
}

// TestSigV4AWSExamples: the worked examples of Amazon S3's API reference
// (sig-v4-header-based-auth and sigv4-query-string-auth), verified at their time.
func TestSigV4AWSExamples(t *testing.T) {
	a := sigAuthority(t)
	at := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	const host = "examplebucket.s3.amazonaws.com"
	auth := func(signed, sig string) string {
		return "AWS4-HMAC-SHA256 Credential=" + exampleKey + "/20130524/us-east-1/s3/aws4_request,SignedHeaders=" +
			signed + ",Signature=" + sig
	}
	for _, c := range []struct {
		name, method, target, body string
		header                     map[string]string
	}{
		{"GET Object", "GET", "/test.txt", "", map[string]string{
			"Range": "bytes=0-9", "x-amz-content-sha256": emptySHA256, "x-amz-date": "20130524T000000Z",
			"Authorization": auth("host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")}},
		{"PUT Object", "PUT", "/test$file.text", "Welcome to Amazon S3.", map[string]string{
			"Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-date": "20130524T000000Z", "x-amz-storage-class": "REDUCED_REDUNDANCY",
			"x-amz-content-sha256": "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
			"Authorization":        auth("date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class", "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")}},
		{"GET Bucket Lifecycle", "GET", "/?lifecycle", "", map[string]string{
			"x-amz-content-sha256": emptySHA256, "x-amz-date": "20130524T000000Z",
			"Authorization": auth("host;x-amz-content-sha256;x-amz-date", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")}},
		{"GET Bucket (List Objects)", "GET", "/?max-keys=2&prefix=J", "", map[string]string{
			"x-amz-content-sha256": emptySHA256, "x-amz-date": "20130524T000000Z",
			"Authorization": auth("host;x-amz-content-sha256;x-amz-date", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")}},
		{"presigned GET Object", "GET", "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" + exampleKey +
			"%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host" +
			"&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			newReq := func() *http.Request {
				r := httptest.NewRequest(c.method, "http://"+host+c.target, strings.NewReader(c.body))
				for k, v := range c.header {
					r.Header.Set(k, v)
				}
				return r
			}
			p, err := a.verifyS3(newReq(), at.Add(time.Minute))
			if err != nil || p.ID != exampleKey {
				t.Fatalf("verify: %v %v", p, err)
			}
			// One byte changed anywhere signed is another request.
			r := newReq()
			r.Host = "otherbucket.s3.amazonaws.com"
			if _, err := a.verifyS3(r, at.Add(time.Minute)); s3Code(err) != "SignatureDoesNotMatch" {
				t.Errorf("another host: %v", err)
			}
			r = newReq()
			r.Method = "DELETE"
			if _, err := a.verifyS3(r, at.Add(time.Minute)); s3Code(err) != "SignatureDoesNotMatch" {
				t.Errorf("another method: %v", err)
			}
		})
	}
}

// TestSignatureMismatchShowsWhatWasSigned: a signature that does not match carries the
// canonical request and string to sign of the request, as AWS's worked example
// (GET Object) publishes them, so a signer can be compared with them.
func TestSignatureMismatchShowsWhatWasSigned(t *testing.T) {
	a := sigAuthority(t)
	at := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	r := httptest.NewRequest("GET", "http://examplebucket.s3.amazonaws.com/test.txt", nil)
	r.Header.Set("Range", "bytes=0-9")
	r.Header.Set("x-amz-content-sha256", emptySHA256)
	r.Header.Set("x-amz-date", "20130524T000000Z")
	const wrongSig = "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb40" // the example's, last digit changed
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+exampleKey+"/20130524/us-east-1/s3/aws4_request,"+
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="+wrongSig)
	_, err := a.verifyS3(r, at.Add(time.Minute))
	var sm *SignatureMismatch
	if !errors.As(err, &sm) || s3Code(err) != codeSignatureDoesNotMatch {
		t.Fatalf("%v (%T), want a *SignatureMismatch", err, err)
	}
	canonical := "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n" +
		"x-amz-content-sha256:" + emptySHA256 + "\nx-amz-date:20130524T000000Z\n\n" +
		"host;range;x-amz-content-sha256;x-amz-date\n" + emptySHA256
	toSign := "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n" +
		"7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"
	if sm.CanonicalRequest != canonical || sm.StringToSign != toSign || sm.SignatureProvided != wrongSig || sm.AccessKeyID != exampleKey {
		t.Errorf("got %+v\nwant canonical request %q\nstring to sign %q", sm, canonical, toSign)
	}
}

// recorder is an HTTP server whose handler verifies each request it gets, as the S3
// API does: what net/http makes of the bytes on the wire is what is verified.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	p    *Principal
	err  error
	seen *http.Request
}

func newRecorder(t *testing.T, a *Authority, now func() time.Time) *recorder {
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.verifyS3(r, now())
		rec.mu.Lock()
		rec.p, rec.err, rec.seen = p, err, r
		rec.mu.Unlock()
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) do(t *testing.T, r *http.Request) (*Principal, error) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.p, rec.err
}

// newSigner is aws-sdk-go-v2's signer as its S3 client sets it up. One per signature:
// a signer caches signing keys by access key id and day, not by secret, so a reused one
// would sign with another secret's key.
func newSigner() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
}

// s3Request is a request for key (escaped as aws-sdk-go-v2's S3 client does) with query.
func s3Request(t testing.TB, base, method, key, rawQuery string) *http.Request {
	t.Helper()
	u := base + "/mink/" + httpbinding.EscapePath(key, false)
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	r, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func sign(t testing.TB, r *http.Request, creds aws.Credentials, payload, region string, at time.Time) {
	t.Helper()
	r.Header.Set("X-Amz-Content-Sha256", payload)
	if err := newSigner().SignHTTP(context.Background(), creds, r, payload, "s3", region, at); err != nil {
		t.Fatal(err)
	}
}

func presign(t *testing.T, r *http.Request, creds aws.Credentials, expires time.Duration, at time.Time) *http.Request {
	t.Helper()
	q := r.URL.Query()
	q.Set("X-Amz-Expires", strconv.Itoa(int(expires/time.Second)))
	r.URL.RawQuery = q.Encode()
	u, hdr, err := newSigner().PresignHTTP(context.Background(), creds, r, unsignedPayload, "s3", "us-east-1", at)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := http.NewRequest(r.Method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k != "Host" {
			pr.Header[k] = v
		}
	}
	return pr
}

// TestSigV4SDKSigner: requests signed by aws-sdk-go-v2's signer, header and presigned,
// with the principal's keys and with vended credentials, over keys, queries and headers
// that canonicalization gets wrong first, verify.
func TestSigV4SDKSigner(t *testing.T) {
	a := sigAuthority(t)
	rec := newRecorder(t, a, time.Now)
	etl, _ := a.Secret("etl", etlSecret)
	vended, err := a.Vend(etl, "default", "demo")
	if err != nil {
		t.Fatal(err)
	}
	static := aws.Credentials{AccessKeyID: "etl", SecretAccessKey: etlSecret}
	vendedCreds := aws.Credentials{AccessKeyID: vended.AccessKeyID, SecretAccessKey: vended.SecretAccessKey, SessionToken: vended.SessionToken}

	keys := []string{
		"default/demo/data/_kafka_partition=0/00000000000000000000-00000000000000000015-0123456789abcdef.parquet",
		"default/demo/metadata/v1-6c6f0b3e.metadata.json",
		"default/demo/a b+c!$&'()*,;=:@~%.txt",
		"default/demo/ünïcødé/日本語.json",
		"default/demo/x//y/",
		"default/demo/%2F%41",
	}
	queries := []string{"", "x-id=GetObject", "versionId=null&x-id=GetObject",
		"response-content-disposition=" + url.QueryEscape(`attachment; filename="a b.txt"`) + "&response-content-type=text%2Fplain",
		"empty=&a=2&a=1", "%C3%A9=1&z=2&Z=3"}
	now := time.Now()
	for _, key := range keys {
		for _, q := range queries {
			for _, payload := range []string{unsignedPayload, emptySHA256} {
				r := s3Request(t, rec.URL, "GET", key, q)
				r.Header.Set("Range", "bytes=0-9")
				r.Header.Set("X-Amz-Meta-Spaces", "  a   b  c ")
				r.Header.Add("X-Amz-Meta-Twice", "one")
				r.Header.Add("X-Amz-Meta-Twice", "two")
				sign(t, r, static, payload, "us-east-1", now)
				if p, err := rec.do(t, r); err != nil || p.ID != "etl" || p.Table != "" {
					t.Errorf("header-signed %q ?%s (%s): %v %v", key, q, payload, p, err)
				}
				// The SDK escapes as S3 does: one canonical URI, and one query
				// order but where only the non-ASCII name makes them differ.
				if n := len(canonicalURIs(rec.seen.URL)); n != 1 {
					t.Errorf("%q: %d canonical URIs", key, n)
				}
				if n := len(canonicalQueries(rec.seen.URL.Query(), false)); n != 1 && !strings.Contains(q, "%C3") {
					t.Errorf("?%s: %d canonical queries", q, n)
				}
			}
			r := s3Request(t, rec.URL, "HEAD", key, q)
			sign(t, r, vendedCreds, unsignedPayload, "eu-west-1", now)
			if p, err := rec.do(t, r); err != nil || p.ID != "etl" || p.Table != "default.demo" {
				t.Errorf("vended, header-signed %q ?%s: %v %v", key, q, p, err)
			}
			for _, creds := range []aws.Credentials{static, vendedCreds} {
				pr := presign(t, s3Request(t, rec.URL, "GET", key, q), creds, time.Hour, now)
				if p, err := rec.do(t, pr); err != nil || p.ID != "etl" {
					t.Errorf("presigned %q ?%s by %s: %v %v", key, q, creds.AccessKeyID, p, err)
				}
			}
		}
	}
	// A client that signs its path as it sends it ("!" unescaped, as Go sends it),
	// not as S3 escapes it, still verifies: it signed this request.
	r, _ := http.NewRequest("GET", rec.URL+"/mink/default/demo/a!b", nil)
	sign(t, r, static, emptySHA256, "us-east-1", now)
	if _, err := rec.do(t, r); err != nil {
		t.Errorf("path signed as sent: %v", err)
	}
	if got := rec.seen.URL.EscapedPath(); got != "/mink/default/demo/a!b" {
		t.Errorf("the request went as %q", got)
	}
}

// TestSigV4Failures: each way a signature fails has S3's code.
func TestSigV4Failures(t *testing.T) {
	a := sigAuthority(t)
	rec := newRecorder(t, a, time.Now)
	now := time.Now()
	key := "default/demo/data/f.parquet"
	static := aws.Credentials{AccessKeyID: "etl", SecretAccessKey: etlSecret}
	etl, _ := a.Secret("etl", etlSecret)
	vended, _ := a.Vend(etl, "default", "demo")
	signed := func(creds aws.Credentials, at time.Time) *http.Request {
		r := s3Request(t, rec.URL, "GET", key, "x-id=GetObject")
		sign(t, r, creds, emptySHA256, "us-east-1", at)
		return r
	}
	edit := func(r *http.Request, f func(*http.Request)) *http.Request { f(r); return r }
	setAuth := func(old, new string) func(*http.Request) {
		return func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), old, new, 1))
		}
	}
	presigned := func(creds aws.Credentials, expires time.Duration, at time.Time) *http.Request {
		return presign(t, s3Request(t, rec.URL, "GET", key, ""), creds, expires, at)
	}
	setQuery := func(k, v string) func(*http.Request) {
		return func(r *http.Request) {
			q := r.URL.Query()
			q.Set(k, v)
			r.URL.RawQuery = q.Encode()
		}
	}
	tamper := func(r *http.Request) {
		h := r.Header.Get("Authorization")
		last := h[len(h)-1]
		r.Header.Set("Authorization", h[:len(h)-1]+map[bool]string{true: "1", false: "0"}[last == '0'])
	}
	cases := []struct {
		name string
		r    *http.Request
		code string
		msg  string
	}{
		{"no signature", s3Request(t, rec.URL, "GET", key, ""), "AccessDenied", "not signed"},
		{"a bearer token", edit(s3Request(t, rec.URL, "GET", key, ""), func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+etlSecret) }), "AccessDenied", "not AWS Signature Version 4"},
		{"signature version 2", edit(s3Request(t, rec.URL, "GET", key, ""), func(r *http.Request) { r.Header.Set("Authorization", "AWS etl:c2lnbmF0dXJl") }), "AccessDenied", "Version 2"},
		{"signature version 2, presigned", s3Request(t, rec.URL, "GET", key, "AWSAccessKeyId=etl&Expires=9999999999&Signature=x"), "AccessDenied", "Version 2"},
		{"garbled", edit(s3Request(t, rec.URL, "GET", key, ""), func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 garbage") }), "AuthorizationHeaderMalformed", "three components"},
		{"no Signature field", edit(signed(static, now), func(r *http.Request) {
			h := r.Header.Get("Authorization")
			r.Header.Set("Authorization", h[:strings.Index(h, ", Signature=")])
		}), "AuthorizationHeaderMalformed", "three components"},
		{"a short credential", edit(signed(static, now), setAuth("Credential=etl/", "Credential=")), "AuthorizationHeaderMalformed", "mal-formed"},
		{"wrong secret", signed(aws.Credentials{AccessKeyID: "etl", SecretAccessKey: opsSecret}, now), "SignatureDoesNotMatch", "does not match"},
		{"unknown key", signed(aws.Credentials{AccessKeyID: "AKIAUNKNOWN", SecretAccessKey: etlSecret}, now), "InvalidAccessKeyId", "does not exist"},
		{"tampered signature", edit(signed(static, now), tamper), "SignatureDoesNotMatch", ""},
		{"tampered header", edit(signed(static, now), func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", unsignedPayload) }), "SignatureDoesNotMatch", ""},
		{"tampered path", edit(signed(static, now), func(r *http.Request) { r.URL.Path += "x"; r.URL.RawPath = "" }), "SignatureDoesNotMatch", ""},
		{"tampered query", edit(signed(static, now), setQuery("x-id", "PutObject")), "SignatureDoesNotMatch", ""},
		{"20 minutes behind", signed(static, now.Add(-20*time.Minute)), "RequestTimeTooSkewed", "too large"},
		{"20 minutes ahead", signed(static, now.Add(20*time.Minute)), "RequestTimeTooSkewed", "too large"},
		{"a date of 2001", signed(static, time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC)), "RequestTimeTooSkewed", "2001-09-09"},
		{"no date", edit(signed(static, now), func(r *http.Request) { r.Header.Del("X-Amz-Date") }), "AccessDenied", "valid Date or x-amz-date"},
		{"a bad date", edit(signed(static, now), func(r *http.Request) { r.Header.Set("X-Amz-Date", "yesterday") }), "AccessDenied", "valid Date or x-amz-date"},
		{"scope date is not X-Amz-Date's", edit(signed(static, now), setAuth("/"+now.UTC().Format(yyyymmdd)+"/", "/20010909/")), "AuthorizationHeaderMalformed", "not the same as X-Amz-Date"},
		{"service iam", edit(signed(static, now), setAuth("/s3/aws4_request", "/iam/aws4_request")), "AuthorizationHeaderMalformed", `incorrect service "iam"`},
		{"terminator", edit(signed(static, now), setAuth("/aws4_request", "/aws4_reqest")), "AuthorizationHeaderMalformed", "incorrect terminal"},
		{"host not signed", edit(signed(static, now), setAuth("SignedHeaders=host;", "SignedHeaders=")), "AccessDenied", "host must be signed"},
		{"an unsigned x-amz header", edit(signed(static, now), func(r *http.Request) { r.Header.Set("X-Amz-Meta-Extra", "1") }), "AccessDenied", "x-amz-meta-extra"},
		{"no x-amz-content-sha256", edit(s3Request(t, rec.URL, "GET", key, ""), func(r *http.Request) {
			newSigner().SignHTTP(context.Background(), static, r, emptySHA256, "s3", "us-east-1", now)
		}), "InvalidRequest", "x-amz-content-sha256"},
		{"a bad x-amz-content-sha256", edit(s3Request(t, rec.URL, "GET", key, ""), func(r *http.Request) { sign(t, r, static, "abc", "us-east-1", now) }), "InvalidArgument", "x-amz-content-sha256"},
		{"a hash of a body it has not", edit(s3Request(t, rec.URL, "GET", key, ""), func(r *http.Request) { sign(t, r, static, strings.Repeat("ab", 32), "us-east-1", now) }), "XAmzContentSHA256Mismatch", ""},
		{"both forms", edit(presigned(static, time.Hour, now), func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 x") }), "InvalidArgument", "Only one auth mechanism"},
		{"two Authorization headers", edit(signed(static, now), func(r *http.Request) { r.Header.Add("Authorization", r.Header.Get("Authorization")) }), "AuthorizationHeaderMalformed", "more than one"},
		{"a query that does not decode", edit(signed(static, now), func(r *http.Request) { r.URL.RawQuery = "a=%ZZ" }), "InvalidURI", ""},
		{"vended, tampered token", edit(s3Request(t, rec.URL, "GET", key, ""), func(r *http.Request) {
			sign(t, r, aws.Credentials{AccessKeyID: vended.AccessKeyID, SecretAccessKey: vended.SecretAccessKey, SessionToken: vended.SessionToken + "x"}, emptySHA256, "us-east-1", now)
		}), "InvalidToken", ""},
		{"vended, no token", signed(aws.Credentials{AccessKeyID: vended.AccessKeyID, SecretAccessKey: vended.SecretAccessKey}, now), "InvalidAccessKeyId", "no session token"},
		{"vended, wrong secret", signed(aws.Credentials{AccessKeyID: vended.AccessKeyID, SecretAccessKey: etlSecret, SessionToken: vended.SessionToken}, now), "SignatureDoesNotMatch", ""},

		{"presigned, expired", presigned(static, time.Hour, now.Add(-61*time.Minute)), "AccessDenied", "Request has expired"},
		{"presigned, a date of 2001", presigned(static, time.Hour, time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC)), "AccessDenied", "Request has expired"},
		{"presigned, not valid yet", presigned(static, time.Hour, now.Add(time.Hour)), "AccessDenied", "not valid yet"},
		{"presigned, over a week", presigned(static, S3MaxPresignExpiry+time.Second, now), "AuthorizationQueryParametersError", "less than a week"},
		{"presigned, expires not a number", edit(presigned(static, time.Hour, now), setQuery("X-Amz-Expires", "soon")), "AuthorizationQueryParametersError", "number"},
		{"presigned, expires negative", edit(presigned(static, time.Hour, now), setQuery("X-Amz-Expires", "-1")), "AuthorizationQueryParametersError", "non-negative"},
		{"presigned, longer expiry", edit(presigned(static, time.Hour, now), setQuery("X-Amz-Expires", "7200")), "SignatureDoesNotMatch", ""},
		{"presigned, tampered signature", edit(presigned(static, time.Hour, now), func(r *http.Request) {
			s := r.URL.Query().Get("X-Amz-Signature")
			setQuery("X-Amz-Signature", strings.Repeat("0", len(s)))(r)
		}), "SignatureDoesNotMatch", ""},
		{"presigned, wrong secret", presigned(aws.Credentials{AccessKeyID: "etl", SecretAccessKey: opsSecret}, time.Hour, now), "SignatureDoesNotMatch", ""},
		{"presigned, unknown key", presigned(aws.Credentials{AccessKeyID: "nobody", SecretAccessKey: etlSecret}, time.Hour, now), "InvalidAccessKeyId", ""},
		{"presigned, service iam", edit(presigned(static, time.Hour, now), func(r *http.Request) {
			setQuery("X-Amz-Credential", strings.Replace(r.URL.Query().Get("X-Amz-Credential"), "/s3/", "/iam/", 1))(r)
		}), "AuthorizationQueryParametersError", `incorrect service "iam"`},
		{"presigned, scope date", edit(presigned(static, time.Hour, now), func(r *http.Request) {
			setQuery("X-Amz-Credential", strings.Replace(r.URL.Query().Get("X-Amz-Credential"), now.UTC().Format(yyyymmdd), "20010909", 1))(r)
		}), "AuthorizationQueryParametersError", "not the same as X-Amz-Date"},
		{"presigned, algorithm", edit(presigned(static, time.Hour, now), setQuery("X-Amz-Algorithm", "AWS4-HMAC-SHA1")), "AuthorizationQueryParametersError", "only supports"},
		{"presigned, no signature", edit(presigned(static, time.Hour, now), func(r *http.Request) {
			q := r.URL.Query()
			q.Del("X-Amz-Signature")
			r.URL.RawQuery = q.Encode()
		}), "AuthorizationQueryParametersError", "requires"},
		{"presigned, a bad date", edit(presigned(static, time.Hour, now), setQuery("X-Amz-Date", "2013-05-24")), "AuthorizationQueryParametersError", "ISO8601"},
	}
	for _, c := range cases {
		p, err := rec.do(t, c.r)
		if err == nil || s3Code(err) != c.code || !strings.Contains(err.Error(), c.msg) || apierr.Classify(err) != apierr.Unauthenticated {
			t.Errorf("%s: %v, %v (code %q), want %s %q", c.name, p, err, s3Code(err), c.code, c.msg)
			continue
		}
		for _, secret := range []string{etlSecret, opsSecret, clusterSecret, vended.SecretAccessKey} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error quotes a secret: %v", c.name, err)
			}
		}
	}

	// Auth off: everyone is anonymous, whatever they send.
	var off *Authority
	if p, err := off.VerifyS3(s3Request(t, rec.URL, "GET", key, "")); err != nil || p != Anonymous {
		t.Errorf("auth off: %v %v", p, err)
	}
	// S3's statuses of the codes.
	for code, want := range map[string]int{"AccessDenied": 403, "SignatureDoesNotMatch": 403, "InvalidAccessKeyId": 403,
		"RequestTimeTooSkewed": 403, "AuthorizationHeaderMalformed": 400, "AuthorizationQueryParametersError": 400,
		"InvalidToken": 400, "ExpiredToken": 400, "InvalidArgument": 400, "XAmzContentSHA256Mismatch": 400} {
		if got := S3Status(code); got != want {
			t.Errorf("S3Status(%s) = %d, want %d", code, got, want)
		}
	}
}

func TestAWSEscape(t *testing.T) {
	for in, want := range map[string]string{
		"/mink/a b/c+d": "/mink/a%20b/c%2Bd", "/~-_.": "/~-_.", "/é": "/%C3%A9", "/%2F": "/%252F", "": "",
		"/!*'();:@&=+$,?#[]": "/%21%2A%27%28%29%3B%3A%40%26%3D%2B%24%2C%3F%23%5B%5D",
	} {
		if got := awsEscape(in, true); got != want {
			t.Errorf("awsEscape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := awsEscape("a/b", false); got != "a%2Fb" {
		t.Errorf("a query value's slash: %q", got)
	}
	if got := foldSpaces("  a   b c  "); got != " a b c " {
		t.Errorf("foldSpaces: %q", got)
	}
}

// BenchmarkVerifyS3 is the per-request cost of auth on an S3 GET (a Parquet reader sends
// one per column chunk): a header-signed request by a principal's keys and by vended
// credentials, and, apart, the derivation of the signing key that each one includes.
func BenchmarkVerifyS3(b *testing.B) {
	a := sigAuthority(b)
	etl, _ := a.Secret("etl", etlSecret)
	vended, err := a.Vend(etl, "default", "demo")
	if err != nil {
		b.Fatal(err)
	}
	at := time.Now()
	key := "default/demo/data/_kafka_partition=0/00000000000000000000-00000000000000000015-0123456789abcdef.parquet"
	for _, c := range []struct {
		name  string
		creds aws.Credentials
	}{
		{"static", aws.Credentials{AccessKeyID: "etl", SecretAccessKey: etlSecret}},
		{"vended", aws.Credentials{AccessKeyID: vended.AccessKeyID, SecretAccessKey: vended.SecretAccessKey, SessionToken: vended.SessionToken}},
	} {
		r := s3Request(b, "http://127.0.0.1:9000", "GET", key, "x-id=GetObject")
		r.Header.Set("Range", "bytes=0-4095")
		sign(b, r, c.creds, unsignedPayload, "us-east-1", at)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := a.verifyS3(r, at); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("signing-key", func(b *testing.B) {
		scope := sigScope{date: at.UTC().Format(yyyymmdd), region: "us-east-1", service: "s3", request: "aws4_request"}
		for b.Loop() {
			signingKey(etlSecret, scope)
		}
	})
}

// A remembered signing key saves its derivation only: once a request by a secret has
// verified, a request signed with another secret for the same access key and day, or
// with its signature changed, still fails, and the keys remembered stay bounded.
func TestSigningKeysVerifyEveryRequest(t *testing.T) {
	a := sigAuthority(t)
	at := time.Now()
	key := "default/demo/data/_kafka_partition=0/00000000000000000000-00000000000000000015-0123456789abcdef.parquet"
	req := func(secret string) *http.Request {
		r := s3Request(t, "http://127.0.0.1:9000", "GET", key, "")
		sign(t, r, aws.Credentials{AccessKeyID: "etl", SecretAccessKey: secret}, unsignedPayload, "us-east-1", at)
		return r
	}
	for range 2 { // the second time, from the remembered key
		if _, err := a.verifyS3(req(etlSecret), at); err != nil {
			t.Fatalf("signed by the secret: %v", err)
		}
	}
	if _, err := a.verifyS3(req(etlSecret+"x"), at); s3Code(err) != codeSignatureDoesNotMatch {
		t.Errorf("signed by another secret: %v, want %s", err, codeSignatureDoesNotMatch)
	}
	r := req(etlSecret)
	authz := r.Header.Get("Authorization")
	last := authz[len(authz)-1]
	flip := byte('0')
	if last == '0' {
		flip = '1'
	}
	r.Header.Set("Authorization", authz[:len(authz)-1]+string(flip))
	if _, err := a.verifyS3(r, at); s3Code(err) != codeSignatureDoesNotMatch {
		t.Errorf("signature changed: %v, want %s", err, codeSignatureDoesNotMatch)
	}
	scope := sigScope{date: at.UTC().Format(yyyymmdd), region: "us-east-1", service: "s3", request: "aws4_request"}
	for i := range maxSigningKeys + 10 {
		s := strconv.Itoa(i)
		if got, want := a.keys.get(s, scope), signingKey(s, scope); !bytes.Equal(got, want) {
			t.Fatalf("remembered key of %q differs from its derivation", s)
		}
	}
	if n := len(a.keys.keys); n > maxSigningKeys {
		t.Errorf("%d signing keys remembered, more than %d", n, maxSigningKeys)
	}
}
