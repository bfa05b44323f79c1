package cluster

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/apache/iceberg-go/catalog/rest"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// Leak matches what a client must never be told of a file it cannot have now: a digest
// (16 hex digits or more, as keys hold them), a path or key ("/"), "sha256".
var Leak = regexp.MustCompile(`[0-9a-f]{16}|/|sha256`)

// Retryable says whether err, as iceberg-go returns it from a table load or a scan
// through Mink, is an answer clients retry, and what it is: the catalog's 503, or S3's
// 503 with Retry-After, SlowDown (a file the writer repairs: its message names no key,
// offset or digest) or ServiceUnavailable (a dependency away).
func Retryable(err error) (string, bool) {
	var re *awshttp.ResponseError
	var ae smithy.APIError
	if errors.As(err, &re) && errors.As(err, &ae) {
		code, msg := ae.ErrorCode(), ae.ErrorMessage()
		ok := re.HTTPStatusCode() == http.StatusServiceUnavailable && re.Response.Header.Get("Retry-After") != "" &&
			(code == "SlowDown" && !Leak.MatchString(msg) || code == "ServiceUnavailable")
		return fmt.Sprintf("S3 %d %s %q, Retry-After %q", re.HTTPStatusCode(), code, msg, re.Response.Header.Get("Retry-After")), ok
	}
	if errors.Is(err, rest.ErrServiceUnavailable) {
		return "catalog 503", true
	}
	return err.Error(), false
}
