package apierr

// The HTTP doors: Iceberg renders an error as the REST catalog's JSON envelope, S3 as
// the S3 API's XML error, each from the error's Kind and what Message tells.

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

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
			n, err := strconv.ParseInt(info.GetMetadata()[metaSize], 10, 64)
			return n, err == nil && n >= 0
		}
	}
	return 0, false
}

// outermost is the Mink error that gives err its kind, if any.
func outermost(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// withField is the outermost Mink error in err's chain that names a request field.
func withField(err error) *Error {
	e := outermost(err)
	for e != nil && e.Field == "" {
		e = outermost(e.Err)
	}
	return e
}

var toHTTP = map[Kind]int{
	Internal: http.StatusInternalServerError, InvalidArgument: http.StatusBadRequest,
	NotFound: http.StatusNotFound, AlreadyExists: http.StatusConflict,
	FailedPrecondition: http.StatusConflict, Aborted: http.StatusConflict,
	Unavailable: http.StatusServiceUnavailable, Unimplemented: http.StatusNotImplemented,
	DeadlineExceeded: http.StatusGatewayTimeout, Canceled: 499, // client closed request
	ResourceExhausted: http.StatusTooManyRequests, Unauthenticated: http.StatusUnauthorized,
	PermissionDenied: http.StatusForbidden, OutOfRange: http.StatusRequestedRangeNotSatisfiable,
	DataLoss: http.StatusServiceUnavailable,
}

// HTTPStatus is the HTTP status of err's kind.
func HTTPStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	return toHTTP[Classify(err)]
}

// IcebergErrorModel is the Iceberg REST spec's ErrorModel.
type IcebergErrorModel struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
	// Logged: the message names the request id, and the door logs the error under it.
	Logged bool `json:"-"`
}

// IcebergErrorResponse is the body of every Iceberg REST error: {"error": {...}}.
type IcebergErrorResponse struct {
	Error IcebergErrorModel `json:"error"`
}

// icebergTypes are the exception types of the statuses an Error may ask for.
var icebergTypes = map[int]string{
	http.StatusMethodNotAllowed:      "MethodNotAllowedException",
	http.StatusRequestEntityTooLarge: "RequestTooLargeException",
}

// Iceberg renders err as the Iceberg REST catalog's error. notFound is the exception type
// of a NotFound error in this request (NoSuchTableException, ...; "": NotFoundException);
// id is the request's id, which the message names when the error is Logged.
func Iceberg(err error, notFound, id string) IcebergErrorModel {
	if notFound == "" {
		notFound = "NotFoundException"
	}
	t := tell(err)
	code, typ := http.StatusInternalServerError, "ServiceFailureException"
	switch t.kind {
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
	if e := outermost(err); e != nil && icebergTypes[e.Status] != "" {
		code, typ = e.Status, icebergTypes[e.Status]
	}
	return IcebergErrorModel{Message: t.text(id), Type: typ, Code: code, Logged: t.logged}
}

// WriteIceberg answers an Iceberg REST request with m in the spec's envelope. A 503
// says when to retry. HEAD answers carry the status only.
func WriteIceberg(w http.ResponseWriter, r *http.Request, m IcebergErrorModel) {
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
	// Logged: the message names the request id, and the door logs the error under it.
	Logged bool `xml:"-"`
}

// S3Elements is an error that adds elements of its own to its S3 error (a signature
// that does not match: what the server signed, for the client to compare).
type S3Elements interface {
	error
	S3Elements(*S3Error)
}

// S3 renders err as the S3 API's error, for the request id (the caller fills in bucket,
// key and resource).
//
// A file whose rebuilt bytes differ from the record (DataLossErr) is a 503 SlowDown, as
// S3 answers a read it cannot serve now: the table's writer replaces the file within a
// lease round, and S3 clients retry SlowDown (aws-sdk-go-v2 counts it as throttling).
func S3(err error, id string) S3Error {
	t := tell(err)
	e := S3Error{Status: http.StatusInternalServerError, Code: "InternalError", Message: t.s3Text(), RequestID: id, Logged: t.logged}
	switch t.kind {
	case OutOfRange:
		e.Status, e.Code = http.StatusRequestedRangeNotSatisfiable, "InvalidRange"
		if n, ok := rangeSize(err); ok {
			e.ContentRange = "bytes */" + strconv.FormatInt(n, 10)
		}
	case InvalidArgument:
		e.Status, e.Code = http.StatusBadRequest, "InvalidArgument"
		if ae := withField(err); ae != nil {
			e.ArgumentName = ae.Field
		}
	case NotFound:
		e.Status, e.Code = http.StatusNotFound, "NoSuchKey"
	case Unavailable, DeadlineExceeded, Aborted, FailedPrecondition:
		e.Status, e.Code = http.StatusServiceUnavailable, "ServiceUnavailable"
	case ResourceExhausted, DataLoss:
		e.Status, e.Code = http.StatusServiceUnavailable, "SlowDown"
	case Unimplemented:
		e.Status, e.Code = http.StatusNotImplemented, "NotImplemented"
	case Canceled:
		e.Status, e.Code = 499, "RequestCanceled"
	case Unauthenticated, PermissionDenied:
		// S3 answers 403 for both: an unsigned or badly signed request is AccessDenied,
		// or the precise code the check gave.
		e.Status, e.Code = http.StatusForbidden, "AccessDenied"
	}
	if ae := outermost(err); ae != nil {
		if ae.S3Code != "" {
			e.Code = ae.S3Code
		}
		if ae.Status != 0 {
			e.Status = ae.Status
		}
	}
	var more S3Elements
	if errors.As(err, &more) {
		more.S3Elements(&e)
	}
	return e
}

// XML is e's body.
func (e S3Error) XML() []byte {
	body, _ := xml.Marshal(e)
	return append([]byte(xml.Header), body...)
}

// WriteS3 answers an S3 request with e as XML. A HEAD answer has no body, as with S3;
// the code also goes in X-Mink-Error-Code so a failed HEAD can still be told apart.
func WriteS3(w http.ResponseWriter, r *http.Request, e S3Error) {
	body := e.XML()
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
