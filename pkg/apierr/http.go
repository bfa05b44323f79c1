package apierr

// The HTTP APIs' error bodies: the Iceberg REST catalog's JSON envelope and the S3 API's
// XML errors, each decided here from the error's Kind (and the two gRPC-coded errors
// below), so that a handler only says what kind of thing was not found.

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

const (
	domain      = "mink"
	reasonRange = "RANGE_NOT_SATISFIABLE"
)

// RangeErr says a requested byte range is not satisfiable within an object of size bytes
// (-1: unknown): S3 InvalidRange (416) with Content-Range "bytes */<size>", gRPC
// OUT_OF_RANGE with the size in an ErrorInfo detail.
func RangeErr(size int64, format string, args ...any) error {
	return &Error{Kind: OutOfRange, Msg: fmt.Sprintf(format, args...), Size: max(size, -1)}
}

// withRangeSize adds the object size to an OutOfRange status, for the 416 another node
// answers with it.
func withRangeSize(st *status.Status, size int64) *status.Status {
	info := &errdetails.ErrorInfo{Reason: reasonRange, Domain: domain,
		Metadata: map[string]string{"size": strconv.FormatInt(size, 10)}}
	if d, err := st.WithDetails(info); err == nil {
		return d
	}
	return st
}

// rangeSize is the object size an OutOfRange error carries, here or from another node.
func rangeSize(err error) (int64, bool) {
	var e *Error
	if errors.As(err, &e) && e.Kind == OutOfRange {
		return e.Size, e.Size >= 0
	}
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reasonRange && info.GetDomain() == domain {
			n, err := strconv.ParseInt(info.GetMetadata()["size"], 10, 64)
			return n, err == nil && n >= 0
		}
	}
	return 0, false
}

// DataLossErr says the bytes that were recorded cannot be produced now: a file rebuilt
// from Kafka with another size or checksum than its manifest names, or offsets Kafka has
// deleted. Such a file is never served; the file server reports it and the table's
// writer replaces it within a lease round, so the answer is retryable: S3 SlowDown (503
// with Retry-After), Iceberg 503, gRPC DATA_LOSS between nodes. Only format's text is
// ever told to a client (it must name no digest, offset or key: clients match words in
// it, such as "301"); cause, with the digests, is for the log.
func DataLossErr(cause error, format string, args ...any) error {
	return &Error{Kind: DataLoss, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// text is err's text for a client: a DataLoss error's own message without its cause.
func text(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Kind == DataLoss {
		return e.Msg
	}
	return err.Error()
}

// message is what a client is told, truncated: for a status from another node, its
// message only; never the words of a driver, the network or the OS (public).
func message(err error) string {
	msg, _ := public(err)
	return Truncate(msg)
}

// MaxMessage is the longest message a client is told; the rest goes to the log only.
const MaxMessage = 2048

// Truncate cuts a message to MaxMessage bytes (at a rune boundary), saying how much
// was left out: a long chain of causes or a huge bad value must not become a huge answer.
func Truncate(msg string) string {
	if len(msg) <= MaxMessage {
		return msg
	}
	cut := MaxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes more)", msg[:cut], len(msg)-cut)
}

// IcebergErrorModel is the Iceberg REST spec's ErrorModel.
type IcebergErrorModel struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
}

// IcebergErrorResponse is the body of every Iceberg REST error: {"error": {...}}.
type IcebergErrorResponse struct {
	Error IcebergErrorModel `json:"error"`
}

// Iceberg is the Iceberg REST error of err. notFound is the exception type of a NotFound
// error in this request (NoSuchTableException, NoSuchNamespaceException, ...).
func Iceberg(err error, notFound string) IcebergErrorModel {
	if notFound == "" {
		notFound = "NotFoundException"
	}
	code, typ := http.StatusInternalServerError, "ServiceFailureException"
	switch Classify(err) {
	case InvalidArgument, OutOfRange:
		code, typ = http.StatusBadRequest, "BadRequestException"
	case NotFound:
		code, typ = http.StatusNotFound, notFound
	case AlreadyExists:
		code, typ = http.StatusConflict, "AlreadyExistsException"
	case FailedPrecondition, Aborted:
		code, typ = http.StatusConflict, "CommitFailedException"
	case Unavailable, DeadlineExceeded, DataLoss:
		// A dependency is down or too slow, or a file is being repaired: retry later,
		// unlike a 500.
		code, typ = http.StatusServiceUnavailable, "ServiceUnavailableException"
	case Unimplemented:
		// The spec's UnsupportedOperationResponse (Java's server maps
		// UnsupportedOperationException to it, for every endpoint).
		code, typ = http.StatusNotAcceptable, "UnsupportedOperationException"
	case ResourceExhausted:
		code, typ = http.StatusTooManyRequests, "TooManyRequestsException"
	case Canceled:
		code, typ = 499, "ClientClosedRequestException"
	case Unauthenticated:
		code, typ = http.StatusUnauthorized, "NotAuthorizedException"
	case PermissionDenied:
		code, typ = http.StatusForbidden, "ForbiddenException"
	}
	return IcebergErrorModel{Message: message(err), Type: typ, Code: code}
}

// WriteIceberg answers an Iceberg REST request with err in the spec's envelope. A 503
// says when to retry. HEAD answers carry the status only.
func WriteIceberg(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	WriteIcebergModel(w, r, Iceberg(err, notFound))
}

// WriteIcebergModel answers with an error the handler built itself (405, unknown route).
func WriteIcebergModel(w http.ResponseWriter, r *http.Request, m IcebergErrorModel) {
	body, _ := json.Marshal(IcebergErrorResponse{Error: m})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if m.Code == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(m.Code)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// S3Error is an S3 error response: the XML body and its HTTP status.
type S3Error struct {
	XMLName xml.Name `xml:"Error"`
	Code    string   `xml:"Code"`
	Message string   `xml:"Message"`
	// What S3 says with a SignatureDoesNotMatch, in its order: the client's own access
	// key id and signature, and the string to sign and canonical request the server
	// made of the request (also as hex bytes), for the client to compare with its own.
	AWSAccessKeyID        string `xml:"AWSAccessKeyId,omitempty"`
	StringToSign          string `xml:"StringToSign,omitempty"`
	SignatureProvided     string `xml:"SignatureProvided,omitempty"`
	StringToSignBytes     string `xml:"StringToSignBytes,omitempty"`
	CanonicalRequest      string `xml:"CanonicalRequest,omitempty"`
	CanonicalRequestBytes string `xml:"CanonicalRequestBytes,omitempty"`
	BucketName            string `xml:"BucketName,omitempty"`
	Key                   string `xml:"Key,omitempty"`
	Resource              string `xml:"Resource,omitempty"`
	RequestID             string `xml:"RequestId,omitempty"`
	// ArgumentName and ArgumentValue name the request parameter at fault in an
	// InvalidArgument, as S3 does.
	ArgumentName  string `xml:"ArgumentName,omitempty"`
	ArgumentValue string `xml:"ArgumentValue,omitempty"`
	Status        int    `xml:"-"`
	// ContentRange is the header of a 416: "bytes */<size>".
	ContentRange string `xml:"-"`
}

// S3 is the S3 error of err (the caller fills in bucket, key, resource and request id).
//
// A file whose rebuilt bytes differ from the record (DataLossErr) is a 503 SlowDown, as
// S3 answers a read it cannot serve now: the table's writer replaces the file within a
// lease round, and S3 clients retry SlowDown (aws-sdk-go-v2 counts it as throttling).
func S3(err error) S3Error {
	e := S3Error{Status: http.StatusInternalServerError, Code: "InternalError", Message: message(err)}
	switch Classify(err) {
	case OutOfRange:
		e.Status, e.Code = http.StatusRequestedRangeNotSatisfiable, "InvalidRange"
		if n, ok := rangeSize(err); ok {
			e.ContentRange = "bytes */" + strconv.FormatInt(n, 10)
		}
	case InvalidArgument:
		e.Status, e.Code = http.StatusBadRequest, "InvalidArgument"
		var ae *Error
		if errors.As(err, &ae) {
			e.ArgumentName = ae.Field
		}
	case NotFound:
		e.Status, e.Code = http.StatusNotFound, "NoSuchKey"
	case Unavailable, DeadlineExceeded, Aborted:
		e.Status, e.Code = http.StatusServiceUnavailable, "ServiceUnavailable"
	case ResourceExhausted, DataLoss:
		e.Status, e.Code = http.StatusServiceUnavailable, "SlowDown"
	case Unimplemented:
		e.Status, e.Code = http.StatusNotImplemented, "NotImplemented"
	case Canceled:
		e.Status, e.Code = 499, "RequestCanceled"
	case FailedPrecondition:
		e.Status, e.Code = http.StatusServiceUnavailable, "ServiceUnavailable"
	case Unauthenticated, PermissionDenied:
		// S3 answers 403 for both: an unsigned or badly signed request is AccessDenied,
		// or the precise code the check gave.
		e.Status, e.Code = http.StatusForbidden, "AccessDenied"
		var ae *Error
		if errors.As(err, &ae) && ae.S3Code != "" {
			e.Code = ae.S3Code
		}
	}
	return e
}

// WriteS3 answers an S3 request with e as XML. A HEAD answer has no body, as with S3;
// the code also goes in X-Mink-Error-Code so a failed HEAD can still be told apart.
func WriteS3(w http.ResponseWriter, r *http.Request, e S3Error) {
	body, _ := xml.Marshal(e)
	body = append([]byte(xml.Header), body...)
	h := w.Header()
	h.Del("Content-Range")
	if e.ContentRange != "" {
		h.Set("Content-Range", e.ContentRange)
	}
	h.Del("ETag")
	h.Del("Last-Modified")
	h.Set("Content-Type", "application/xml")
	h.Set("X-Mink-Error-Code", e.Code)
	if e.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	if r.Method == http.MethodHead {
		h.Del("Content-Length")
		w.WriteHeader(e.Status)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	w.Write(body)
}
