package apierr_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkhq/mink/pkg/apierr"
)

func TestHTTPMappings(t *testing.T) {
	pgDown := apierr.UnavailableErr("postgres", errors.New("connection refused"))
	cases := []struct {
		name     string
		err      error
		iceCode  int
		iceType  string
		s3Status int
		s3Code   string
	}{
		{"not found", apierr.New(apierr.NotFound, "table x does not exist"), 404, "NoSuchTableException", 404, "NoSuchKey"},
		{"invalid", apierr.Invalid("key", "bad"), 400, "BadRequestException", 400, "InvalidArgument"},
		{"postgres down", pgDown, 503, "ServiceUnavailableException", 503, "ServiceUnavailable"},
		{"wrapped unavailable", fmt.Errorf("load: %w", pgDown), 503, "ServiceUnavailableException", 503, "ServiceUnavailable"},
		{"busy", apierr.New(apierr.ResourceExhausted, "no space"), 429, "TooManyRequestsException", 503, "SlowDown"},
		{"range", apierr.RangeErr(9, "range bytes=9- is not satisfiable"), 400, "BadRequestException", 416, "InvalidRange"},
		{"wrapped range", fmt.Errorf("read: %w", apierr.RangeErr(-1, "no")), 400, "BadRequestException", 416, "InvalidRange"},
		{"data loss", apierr.DataLossErr(errors.New("sha256 differs"), "file k cannot be served"), 503, "ServiceUnavailableException", 503, "SlowDown"},
		{"unimplemented", apierr.New(apierr.Unimplemented, "later"), 406, "UnsupportedOperationException", 501, "NotImplemented"},
		{"bug", errors.New("boom"), 500, "ServiceFailureException", 500, "InternalError"},
		// Answers forwarded from another node keep their meaning.
		{"remote not found", status.Error(codes.NotFound, "no file k"), 404, "NoSuchTableException", 404, "NoSuchKey"},
		{"remote unavailable", status.Error(codes.Unavailable, "kafka is unavailable"), 503, "ServiceUnavailableException", 503, "ServiceUnavailable"},
		{"remote range", status.Error(codes.OutOfRange, "not satisfiable"), 400, "BadRequestException", 416, "InvalidRange"},
		{"remote data loss", status.Error(codes.DataLoss, "differs"), 503, "ServiceUnavailableException", 503, "SlowDown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ie := apierr.Iceberg(c.err, "NoSuchTableException", "R")
			if ie.Code != c.iceCode || ie.Type != c.iceType || ie.Message == "" {
				t.Errorf("Iceberg = %+v, want %d %s", ie, c.iceCode, c.iceType)
			}
			se := apierr.S3(c.err, "R")
			if se.Status != c.s3Status || se.Code != c.s3Code || se.Message == "" {
				t.Errorf("S3 = %+v, want %d %s", se, c.s3Status, c.s3Code)
			}
		})
	}
	// A forwarded status shows its message alone, not "rpc error: code = ...".
	if m := apierr.S3(apierr.GRPC(apierr.New(apierr.Unavailable, "kafka is unavailable")), "R").Message; m != "kafka is unavailable" {
		t.Errorf("message of a forwarded error: %q", m)
	}
	// The gRPC-coded errors keep their codes through GRPC, so they cross nodes.
	if got := status.Code(apierr.GRPC(fmt.Errorf("x: %w", apierr.RangeErr(-1, "no")))); got != codes.OutOfRange {
		t.Errorf("GRPC(range) = %v", got)
	}
	// A 416 says the object's size (Content-Range: bytes */<size>), here and from another
	// node; a range error of unknown size says none.
	for name, err := range map[string]error{
		"local":   fmt.Errorf("read: %w", apierr.RangeErr(1234, "no")),
		"forward": apierr.GRPC(fmt.Errorf("read: %w", apierr.RangeErr(1234, "no"))),
	} {
		if e := apierr.S3(err, "R"); e.Status != 416 || e.ContentRange != "bytes */1234" {
			t.Errorf("%s range error: %+v", name, e)
		}
	}
	if e := apierr.S3(apierr.RangeErr(-1, "no"), "R"); e.ContentRange != "" {
		t.Errorf("range error of unknown size: Content-Range %q", e.ContentRange)
	}
	if e := apierr.S3(apierr.Invalid("max-keys", "not a number"), "R"); e.ArgumentName != "max-keys" || !strings.Contains(e.Message, "max-keys") {
		t.Errorf("invalid argument: %+v", e)
	}
	if got := status.Code(apierr.GRPC(apierr.DataLossErr(nil, "gone"))); got != codes.DataLoss {
		t.Errorf("GRPC(data loss) = %v", got)
	}
}

// A file the writer is replacing answers what clients retry, and tells them none of its
// cause: digests and offsets stay in the log, here and through another node. (An S3
// library matching "301" in a message took a digest that held it for a missing bucket.)
func TestDataLossIsRetryableAndSaysNoCause(t *testing.T) {
	cause := fmt.Errorf("rebuilt as 1301 bytes sha256 %s, recorded sha256 %s", strings.Repeat("3a01", 16), strings.Repeat("b3", 32))
	err := fmt.Errorf("build: %w", apierr.DataLossErr(cause, "the file cannot be served now; retry"))
	for name, e := range map[string]error{"local": err, "forwarded": apierr.GRPC(err)} {
		s3 := apierr.S3(e, "R1")
		ice := apierr.Iceberg(e, "", "R1")
		if s3.Status != 503 || s3.Code != "SlowDown" || ice.Code != 503 || ice.Type != "ServiceUnavailableException" || apierr.HTTPStatus(e) != 503 {
			t.Errorf("%s: S3 %+v, Iceberg %+v, HTTP %d", name, s3, ice, apierr.HTTPStatus(e))
		}
		// The cause is logged under the request id the answer names: the envelope in its
		// message, S3 in RequestId only (its message holds no number a client could match).
		if !strings.HasPrefix(ice.Message, "the file cannot be served now; retry (request id R1") {
			t.Errorf("%s: the catalog tells %q", name, ice.Message)
		}
		if !strings.HasPrefix(s3.Message, "the file cannot be served now; retry") || strings.ContainsAny(s3.Message, "0123456789") || s3.RequestID != "R1" {
			t.Errorf("%s: S3 tells %q (request id %q)", name, s3.Message, s3.RequestID)
		}
		for _, m := range []string{s3.Message, ice.Message} {
			if strings.Contains(m, "sha256") || strings.Contains(m, "301") {
				t.Errorf("%s: a client is told %q", name, m)
			}
		}
	}
	rec := httptest.NewRecorder()
	apierr.WriteS3(rec, httptest.NewRequest("GET", "/mink/k", nil), apierr.S3(err, "R1"))
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || strings.Contains(rec.Body.String(), "sha256") {
		t.Errorf("S3 answer: %d, Retry-After %q: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	rec = httptest.NewRecorder()
	apierr.WriteIceberg(rec, httptest.NewRequest("GET", "/v1/namespaces/x/tables/y", nil), apierr.Iceberg(err, "", "R1"))
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || strings.Contains(rec.Body.String(), "sha256") {
		t.Errorf("Iceberg answer: %d, Retry-After %q: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}

func TestWriteBodies(t *testing.T) {
	rec := httptest.NewRecorder()
	apierr.WriteIceberg(rec, httptest.NewRequest("GET", "/v1/namespaces/x/tables/y", nil),
		apierr.Iceberg(apierr.UnavailableErr("postgres", errors.New("refused")), "NoSuchTableException", "R1"))
	var env apierr.IcebergErrorResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != 503 || env.Error.Code != 503 ||
		env.Error.Type != "ServiceUnavailableException" || rec.Header().Get("Content-Type") != "application/json" ||
		rec.Header().Get("Retry-After") == "" {
		t.Errorf("iceberg body: %d %s %v", rec.Code, rec.Body, err)
	}

	rec = httptest.NewRecorder()
	e := apierr.S3(apierr.New(apierr.NotFound, "no file k"), "R1")
	e.Key, e.BucketName = "k", "mink"
	apierr.WriteS3(rec, httptest.NewRequest("GET", "/mink/k", nil), e)
	var got apierr.S3Error
	if err := xml.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 404 || got.Code != "NoSuchKey" || got.Key != "k" ||
		got.RequestID != "R1" || rec.Header().Get("Content-Type") != "application/xml" {
		t.Errorf("s3 body: %d %s %v", rec.Code, rec.Body, err)
	}

	rec = httptest.NewRecorder()
	apierr.WriteS3(rec, httptest.NewRequest("HEAD", "/mink/k", nil), e)
	if rec.Code != http.StatusNotFound || rec.Body.Len() != 0 || rec.Header().Get("X-Mink-Error-Code") != "NoSuchKey" {
		t.Errorf("s3 HEAD: %d %q", rec.Code, rec.Body)
	}

	// A 416 replaces the Content-Range a handler set with the unsatisfied one.
	for _, method := range []string{"GET", "HEAD"} {
		rec = httptest.NewRecorder()
		rec.Header().Set("Content-Range", "bytes 0-9/100")
		apierr.WriteS3(rec, httptest.NewRequest(method, "/mink/k", nil), apierr.S3(apierr.RangeErr(100, "bytes=200- is not satisfiable"), "R1"))
		if rec.Code != 416 || rec.Header().Get("Content-Range") != "bytes */100" {
			t.Errorf("s3 %s 416: %d, Content-Range %q", method, rec.Code, rec.Header().Get("Content-Range"))
		}
	}
	rec = httptest.NewRecorder()
	e = apierr.S3(apierr.Invalid("max-keys", "not an integer"), "R1")
	e.ArgumentValue = "ten"
	apierr.WriteS3(rec, httptest.NewRequest("GET", "/mink?max-keys=ten", nil), e)
	if err := xml.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.ArgumentName != "max-keys" || got.ArgumentValue != "ten" ||
		!bytes.Contains(rec.Body.Bytes(), []byte("<ArgumentName>max-keys</ArgumentName>")) {
		t.Errorf("s3 InvalidArgument body: %s %v", rec.Body, err)
	}
}
