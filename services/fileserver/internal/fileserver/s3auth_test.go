package fileserver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/minkhq/mink/pkg/auth"
)

const (
	saEtlSecret   = "s3-etl-secret-0123456789"
	saSalesSecret = "s3-sales-secret-0123456789"
	saOpsSecret   = "s3-ops-secret-0123456789"
)

// saAuthority: etl reads default.*, sales reads sales.*, ops is an admin.
func saAuthority(t testing.TB) *auth.Authority {
	t.Helper()
	a, err := auth.New(&auth.File{ClusterSecret: "s3-test-cluster-secret-0123456789abcdef", Principals: []auth.PrincipalConfig{
		{ID: "etl", Secret: saEtlSecret, Role: auth.RoleReader, Tables: []string{"default.*"}},
		{ID: "sales", Secret: saSalesSecret, Role: auth.RoleReader, Tables: []string{"sales.*"}},
		{ID: "ops", Secret: saOpsSecret, Role: auth.RoleAdmin},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// saSigner is aws-sdk-go-v2's signer (as its S3 client makes it) signing at a time off
// by skew: a client whose clock is wrong.
type saSigner struct {
	skew time.Duration
	s    *v4.Signer
}

func newSASigner(skew time.Duration) saSigner {
	return saSigner{skew, v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })}
}

func (k saSigner) SignHTTP(ctx context.Context, c aws.Credentials, r *http.Request, payload, service, region string, at time.Time, o ...func(*v4.SignerOptions)) error {
	return k.s.SignHTTP(ctx, c, r, payload, service, region, at.Add(k.skew), o...)
}

func (k saSigner) PresignHTTP(ctx context.Context, c aws.Credentials, r *http.Request, payload, service, region string, at time.Time, o ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return k.s.PresignHTTP(ctx, c, r, payload, service, region, at.Add(k.skew), o...)
}

// saTamper is an HTTP client that changes the last digit of the signature it sends.
type saTamper struct{}

func (saTamper) Do(r *http.Request) (*http.Response, error) {
	h := r.Header.Get("Authorization")
	if h != "" {
		last := "0"
		if strings.HasSuffix(h, "0") {
			last = "1"
		}
		r.Header.Set("Authorization", h[:len(h)-1]+last)
	}
	return http.DefaultClient.Do(r)
}

// saClient is aws-sdk-go-v2's S3 client of n, path-style as engines set it up for Mink,
// without retries (a refusal is final).
func saClient(n *node, creds aws.CredentialsProvider, opts ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(n.s3), UsePathStyle: true,
		Credentials: creds, RetryMaxAttempts: 1,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired}, opts...)
}

func saKeys(id, secret, token string) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(id, secret, token)
}

func saVended(c auth.Credentials) aws.CredentialsProvider {
	return saKeys(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
}

// saCode is an S3 client error's code and HTTP status.
func saCode(err error) (string, int) {
	var ae smithy.APIError
	var re *smithyhttp.ResponseError
	code, status := "", 0
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// saState is what a request could change: the index, the problems table, the cache,
// the read path's counters.
type saState struct {
	dataFiles, problems int64
	cacheFiles          int
	cacheBytes          int64
	misses, builds      int64
}

func (e *env) saState(n *node) saState {
	e.t.Helper()
	var s saState
	if err := e.db.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM mink_data_files), (SELECT count(*) FROM mink_file_problems)`).
		Scan(&s.dataFiles, &s.problems); err != nil {
		e.t.Fatal(err)
	}
	st, cs := n.srv.Stats()
	s.cacheFiles, s.cacheBytes, s.misses, s.builds = cs.Files, cs.Bytes, st.CacheMisses, st.Builds
	return s
}

// TestS3Auth: with auth on, aws-sdk-go-v2's S3 client and presigner read files with a
// principal's keys and with vended credentials; every wrong signature, key, clock,
// expiry and table fails with S3's code, and changes nothing.
func TestS3Auth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := saAuthority(t)
	n := e.startNode("fs-a", nodeOptions{auth: a})
	e.waitMembers([]*node{n})
	ctx := e.ctx
	f, g := e.files[0], e.files[1] // f is read; g is only ever refused, until the end
	bucket := aws.String("mink")

	etl, err := a.Secret("etl", saEtlSecret)
	if err != nil {
		t.Fatal(err)
	}
	vendOrders, err := a.Vend(etl, "default", "orders")
	if err != nil {
		t.Fatal(err)
	}
	vendRefunds, err := a.Vend(etl, "default", "refunds")
	if err != nil {
		t.Fatal(err)
	}
	lapsed := *etl
	lapsed.Expires = time.Now().Add(-time.Minute)
	vendExpired, err := a.Vend(&lapsed, "default", "orders")
	if err != nil {
		t.Fatal(err)
	}
	etlKeys := saKeys("etl", saEtlSecret, "")

	before := e.saState(n)
	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			client *s3.Client
			key    string
			code   string
			status int
		}{
			{"wrong secret", saClient(n, saKeys("etl", saOpsSecret, "")), g.key, "SignatureDoesNotMatch", 403},
			{"unknown key", saClient(n, saKeys("AKIAIOSFODNN7EXAMPLE", saEtlSecret, "")), g.key, "InvalidAccessKeyId", 403},
			{"no signature", saClient(n, aws.AnonymousCredentials{}), g.key, "AccessDenied", 403},
			{"clock 20 minutes behind", saClient(n, etlKeys, func(o *s3.Options) { o.HTTPSignerV4 = newSASigner(-20 * time.Minute) }), g.key, "RequestTimeTooSkewed", 403},
			{"clock 20 minutes ahead", saClient(n, etlKeys, func(o *s3.Options) { o.HTTPSignerV4 = newSASigner(20 * time.Minute) }), g.key, "RequestTimeTooSkewed", 403},
			{"a date of 2001", saClient(n, etlKeys, func(o *s3.Options) {
				o.HTTPSignerV4 = newSASigner(time.Until(time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC)))
			}), g.key, "RequestTimeTooSkewed", 403},
			{"tampered signature", saClient(n, etlKeys, func(o *s3.Options) { o.HTTPClient = saTamper{} }), g.key, "SignatureDoesNotMatch", 403},
			{"vended for another table", saClient(n, saVended(vendRefunds)), g.key, "AccessDenied", 403},
			{"vended, another table's prefix", saClient(n, saVended(vendOrders)), "default/refunds/" + strings.TrimPrefix(g.key, "default/orders/"), "AccessDenied", 403},
			{"vended, expired", saClient(n, saVended(vendExpired)), g.key, "ExpiredToken", 400},
			{"vended, the token of other credentials", saClient(n, saKeys(vendOrders.AccessKeyID, vendOrders.SecretAccessKey, vendRefunds.SessionToken)), g.key, "InvalidAccessKeyId", 403},
			{"a reader outside its tables", saClient(n, saKeys("sales", saSalesSecret, "")), g.key, "AccessDenied", 403},
		} {
			_, err := c.client.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(c.key)})
			if code, status := saCode(err); code != c.code || status != c.status {
				t.Errorf("GetObject, %s: %v (code %q, status %d), want %s %d", c.name, err, code, status, c.code, c.status)
			}
			_, err = c.client.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(c.key), Range: aws.String("bytes=0-9")})
			if code, _ := saCode(err); code != c.code {
				t.Errorf("GetObject with a range, %s: %v, want %s", c.name, err, c.code)
			}
			// HEAD answers carry no body, so no code: the status says it.
			_, err = c.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(c.key)})
			if _, status := saCode(err); status != c.status {
				t.Errorf("HeadObject, %s: %v, want %d", c.name, err, c.status)
			}
		}
		// Subresources are not GetObject, whoever asks.
		_, err := saClient(n, etlKeys).GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: bucket, Key: aws.String(g.key)})
		if code, status := saCode(err); code != "NotImplemented" || status != 501 {
			t.Errorf("GetObjectAcl: %v", err)
		}
		_, err = saClient(n, etlKeys).GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: bucket, Key: aws.String(g.key)})
		if code, _ := saCode(err); code != "NotImplemented" {
			t.Errorf("GetObjectTagging: %v", err)
		}

		// Presigned URLs, fetched with plain net/http as a browser or curl would.
		presign := func(creds aws.CredentialsProvider, skew, expires time.Duration) string {
			t.Helper()
			pc := s3.NewPresignClient(saClient(n, creds), func(o *s3.PresignOptions) {
				o.Presigner = newSASigner(skew)
				o.Expires = expires
			})
			req, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(g.key)})
			if err != nil {
				t.Fatal(err)
			}
			return req.URL
		}
		valid := presign(etlKeys, 0, time.Hour)
		sig := valid[strings.LastIndex(valid, "=")+1:]
		for _, c := range []struct{ name, url, code, msg string }{
			{"expired", presign(etlKeys, -2*time.Hour, time.Hour), "AccessDenied", "Request has expired"},
			{"a date of 2001", presign(etlKeys, time.Until(time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC)), time.Hour), "AccessDenied", "Request has expired"},
			{"expired, vended", presign(saVended(vendOrders), -2*time.Hour, time.Hour), "AccessDenied", "Request has expired"},
			{"tampered signature", strings.Replace(valid, sig, strings.Repeat("0", len(sig)), 1), "SignatureDoesNotMatch", ""},
			{"tampered key", strings.Replace(valid, "_kafka_partition%3D0", "_kafka_partition%3D1", 1), "SignatureDoesNotMatch", ""},
			{"longer than it was signed for", strings.Replace(valid, "X-Amz-Expires=3600", "X-Amz-Expires=7200", 1), "SignatureDoesNotMatch", ""},
			{"over a week", strings.Replace(valid, "X-Amz-Expires=3600", "X-Amz-Expires=604801", 1), "AuthorizationQueryParametersError", "week"},
			{"wrong secret", presign(saKeys("etl", saOpsSecret, ""), 0, time.Hour), "SignatureDoesNotMatch", ""},
			{"a reader outside its tables", presign(saKeys("sales", saSalesSecret, ""), 0, time.Hour), "AccessDenied", "may not read table default.orders"},
			{"vended for another table", presign(saVended(vendRefunds), 0, time.Hour), "AccessDenied", "default.refunds"},
		} {
			if c.url == valid {
				t.Fatalf("%s: the URL did not change", c.name)
			}
			resp, body := get(t, "GET", c.url, nil)
			if se := s3Error(t, body); resp.StatusCode != 403 && resp.StatusCode != 400 || se.Code != c.code || !strings.Contains(se.Message, c.msg) ||
				se.RequestID == "" || se.RequestID != resp.Header.Get("X-Amz-Request-Id") {
				t.Errorf("presigned, %s: %d %+v, want %s %q", c.name, resp.StatusCode, se, c.code, c.msg)
			}
		}
		// Plain requests, unsigned.
		for _, c := range []struct{ method, url string }{
			{"GET", objectURL(n, g.key)}, {"PUT", objectURL(n, g.key)}, {"GET", objectURL(n, g.key) + "?acl"}, {"HEAD", n.s3 + "/mink"},
		} {
			resp, body := get(t, c.method, c.url, nil)
			if resp.StatusCode != 403 || c.method != "HEAD" && s3Error(t, body).Code != "AccessDenied" {
				t.Errorf("%s %s: %d %s", c.method, c.url, resp.StatusCode, body)
			}
		}
		// A request line net/http refuses before any handler (no Go client sends it).
		conn, err := net.Dial("tcp", strings.TrimPrefix(n.s3, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "GET /mink/%ZZ HTTP/1.1\r\nHost: mink\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if se := s3Error(t, body); resp.StatusCode != 400 || se.Code != "InvalidURI" || se.RequestID == "" {
			t.Errorf("GET /mink/%%ZZ: %d %s", resp.StatusCode, body)
		}
	})
	if after := e.saState(n); after != before {
		t.Fatalf("refused requests changed something: before %+v, after %+v", before, after)
	}

	t.Run("allowed", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			creds aws.CredentialsProvider
		}{
			{"a reader's keys", etlKeys},
			{"an admin's keys", saKeys("ops", saOpsSecret, "")},
			{"vended credentials", saVended(vendOrders)},
		} {
			cl := saClient(n, c.creds)
			out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(f.key)})
			if err != nil {
				t.Fatalf("GetObject, %s: %v", c.name, err)
			}
			body, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil || !bytes.Equal(body, f.bytes) || aws.ToString(out.ETag) == "" {
				t.Errorf("GetObject, %s: %d bytes of %d, %v", c.name, len(body), len(f.bytes), err)
			}
			out, err = cl.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(f.key), Range: aws.String("bytes=4-19")})
			if err != nil {
				t.Fatalf("GetObject with a range, %s: %v", c.name, err)
			}
			body, _ = io.ReadAll(out.Body)
			out.Body.Close()
			if !bytes.Equal(body, f.bytes[4:20]) || aws.ToString(out.ContentRange) == "" {
				t.Errorf("GetObject with a range, %s: %q, range %q", c.name, body, aws.ToString(out.ContentRange))
			}
			head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(f.key)})
			if err != nil || aws.ToInt64(head.ContentLength) != int64(len(f.bytes)) {
				t.Errorf("HeadObject, %s: %v", c.name, err)
			}
			if _, err := cl.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: bucket}); err != nil {
				t.Errorf("HeadBucket, %s: %v", c.name, err)
			}
		}
		// The SDK's presigner: the URL alone reads the file with plain net/http, and a
		// signed Range header with it reads the range.
		for _, creds := range []aws.CredentialsProvider{etlKeys, saVended(vendOrders)} {
			pc := s3.NewPresignClient(saClient(n, creds))
			req, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(g.key)})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Get(req.URL)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Equal(body, g.bytes) {
				t.Errorf("presigned GET: %d, %d bytes: %.300s", resp.StatusCode, len(body), body)
			}
			req, err = pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(g.key), Range: aws.String("bytes=0-9")})
			if err != nil {
				t.Fatal(err)
			}
			hr, _ := http.NewRequest(req.Method, req.URL, nil)
			for k, v := range req.SignedHeader {
				if k != "Host" {
					hr.Header[k] = v
				}
			}
			resp, err = http.DefaultClient.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 206 || !bytes.Equal(body, g.bytes[:10]) {
				t.Errorf("presigned GET with a signed range: %d %q", resp.StatusCode, body)
			}
		}
	})
}
