// Package apierr is the one place that turns errors into what a client sees. Code anywhere
// in Mink returns plain Go errors: the constructors below (sentinels too, such as
// lease.ErrLeaseLost, so that this package imports no domain package), driver errors
// (Postgres, network) or others. Classify sorts any of them into a
// transport-neutral Kind, and each transport maps a Kind once: gRPC status codes here; the
// HTTP status of the Iceberg REST catalog and the S3 API (with their error bodies) belong
// here too, beside GRPC, so no handler decides codes on its own and nothing leaks out as
// Unknown or a bare 500.
package apierr

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kind is what went wrong, as a client needs to know it.
type Kind int

const (
	Internal           Kind = iota // a bug or an unclassified failure: never the client's fault
	InvalidArgument                // the request is wrong; Error.Field names the part at fault
	NotFound                       // what the request names does not exist
	AlreadyExists                  // what the request creates exists already
	FailedPrecondition             // the request is valid but the system is not in a state to do it
	Aborted                        // lost a race (a lease changed hands); retrying may succeed
	Unavailable                    // a dependency (Postgres, Kafka, another node) cannot be reached
	Unimplemented                  // not built (yet)
	DeadlineExceeded
	Canceled
	ResourceExhausted
	Unauthenticated  // no credentials, or ones that do not verify: who is asking is unknown
	PermissionDenied // the caller is known and may not do this
	OutOfRange       // a byte range outside the object (RangeErr): Error.Size is its size
	DataLoss         // recorded bytes that can no longer be produced until a repair (DataLossErr)
)

var kindNames = [...]string{"internal", "invalid argument", "not found", "already exists",
	"failed precondition", "aborted", "unavailable", "unimplemented", "deadline exceeded",
	"canceled", "resource exhausted", "unauthenticated", "permission denied", "out of range", "data loss"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is an error that knows its Kind. Build one with the constructors.
type Error struct {
	Kind  Kind
	Field string // InvalidArgument: the request field at fault, in proto naming ("table_id")
	Msg   string
	Err   error // cause, if any
	// S3Code is the S3 error code when the Kind's own is not precise enough
	// (SignatureDoesNotMatch, InvalidAccessKeyId, RequestTimeTooSkewed, ...).
	S3Code string
	// Size is, for OutOfRange, the size of the object the range is not within (-1:
	// unknown): a 416's Content-Range, and an ErrorInfo detail across nodes.
	Size int64
}

func (e *Error) Error() string {
	msg := e.Msg
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	if e.Err != nil {
		if msg == "" {
			return e.Err.Error()
		}
		return msg + ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Invalid is an InvalidArgument error naming the request field at fault.
func Invalid(field, format string, args ...any) error {
	return &Error{Kind: InvalidArgument, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// New is an error of kind k.
func New(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// Wrap gives err the kind k, with a message saying what was being done.
func Wrap(k Kind, err error, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Err: err}
}

// S3Denied is an error of kind k (Unauthenticated or PermissionDenied) with the precise
// S3 error code code.
func S3Denied(k Kind, code, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), S3Code: code}
}

// UnavailableErr says a dependency ("postgres", "kafka", "node b1") cannot be reached.
func UnavailableErr(dependency string, err error) error {
	return &Error{Kind: Unavailable, Msg: dependency + " is unavailable", Err: err}
}

// Postgres says what failed when a statement to Postgres did: an outage or a timeout is
// Unavailable ("<what>: postgres is unavailable", what clients may retry); any other
// error keeps its kind, with what was being done in front of it.
func Postgres(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	switch Classify(err) {
	case Unavailable, DeadlineExceeded:
		return Wrap(Unavailable, err, "%s: postgres is unavailable", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Classify sorts any error into a Kind. Explicit kinds (Error, a gRPC status) win over
// what the chain wraps; then Mink's sentinels; then drivers' errors.
func Classify(err error) Kind {
	if err == nil {
		return Internal
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return fromCode(st.Code())
	}
	// A failed dial is Unavailable even when it ended with the dial's own timeout.
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return Unavailable
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return NotFound
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return Canceled
	case timedOut(err) && !dialing(err):
		// A statement or read cut by a timeout (the Postgres driver's own timeout
		// error, a read deadline of a connection), whatever error wraps it. A dial that
		// timed out is an outage: nothing answered at all.
		return DeadlineExceeded
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgKind(pgErr.Code)
	}
	if unreachable(err) {
		return Unavailable
	}
	return Internal
}

// pgKind classifies a Postgres SQLSTATE.
func pgKind(code string) Kind {
	switch {
	case code == "23505": // unique_violation
		return AlreadyExists
	case code == "23503": // foreign_key_violation: what it refers to is gone
		return FailedPrecondition
	case strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"): // data exception, integrity
		return InvalidArgument
	case code == "40001", code == "40P01": // serialization failure, deadlock
		return Aborted
	case strings.HasPrefix(code, "08"), code == "57P01", code == "57P02", code == "57P03", strings.HasPrefix(code, "53"):
		// connection exception, shutdown, cannot connect now, insufficient resources
		return Unavailable
	case code == "57014": // query_canceled (statement timeout)
		return DeadlineExceeded
	}
	return Internal
}

// timedOut reports whether err says a timeout cut it: pgconn's timeout error or a
// network error whose Timeout is true.
func timedOut(err error) bool {
	var ne net.Error
	return pgconn.Timeout(err) || (errors.As(err, &ne) && ne.Timeout())
}

// dialing reports whether err is a failed dial.
func dialing(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// unreachable reports whether err says a dependency could not be reached at all, as the
// Postgres driver, a Kafka client or a dialer say it: by the errors' types and sentinels,
// never their wording.
func unreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &oe), errors.As(err, &ne):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, net.ErrClosed):
		return true
	case errors.Is(err, puddle.ErrClosedPool), errors.Is(err, pgconn.ErrConnClosed):
		// A closed pool (a node shutting down), a connection the driver already closed.
		return true
	}
	return false
}

var toCode = map[Kind]codes.Code{
	Internal: codes.Internal, InvalidArgument: codes.InvalidArgument, NotFound: codes.NotFound,
	AlreadyExists: codes.AlreadyExists, FailedPrecondition: codes.FailedPrecondition,
	Aborted: codes.Aborted, Unavailable: codes.Unavailable, Unimplemented: codes.Unimplemented,
	DeadlineExceeded: codes.DeadlineExceeded, Canceled: codes.Canceled,
	ResourceExhausted: codes.ResourceExhausted, Unauthenticated: codes.Unauthenticated,
	PermissionDenied: codes.PermissionDenied, OutOfRange: codes.OutOfRange, DataLoss: codes.DataLoss,
}

func fromCode(c codes.Code) Kind {
	for k, code := range toCode {
		if code == c {
			return k
		}
	}
	return Internal
}

// Code is the gRPC code of err.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	return toCode[Classify(err)]
}

// GRPC turns err into the status error a gRPC handler returns. A status error (an answer
// forwarded from another node) passes through unchanged; an InvalidArgument carries a
// BadRequest detail naming the field, for clients that read details.
func GRPC(err error) error {
	if err == nil {
		return nil
	}
	var cut *cutStatus
	if errors.As(err, &cut) {
		return cut
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return st.Err()
	}
	k := Classify(err)
	// An internal error's whole text stays in the status: the interceptors log it and
	// tell the client only a request id (redactInternal).
	msg, wasCut := err.Error(), false
	if k != Internal {
		msg, wasCut = public(err)
	}
	var id string
	if wasCut {
		id = RequestID()
		msg += " (request id " + id + ": the node's log has the cause)"
	}
	st := status.New(toCode[k], Truncate(msg))
	var e *Error
	if k == OutOfRange && errors.As(err, &e) && e.Size >= 0 {
		st = withRangeSize(st, e.Size)
	}
	if k == InvalidArgument && errors.As(err, &e) && e.Field != "" {
		br := &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: e.Field, Description: e.Msg},
		}}
		if d, derr := st.WithDetails(br); derr == nil {
			st = d
		}
	}
	if wasCut {
		return &cutStatus{st: st, cause: err, id: id}
	}
	return st.Err()
}

// cutStatus is a status whose message leaves out the words of its cause's driver,
// network or OS errors; the interceptors log the cause under the request id the message
// names. It is a status error as gRPC sees it.
type cutStatus struct {
	st    *status.Status
	cause error
	id    string
}

func (e *cutStatus) Error() string              { return e.st.Err().Error() }
func (e *cutStatus) GRPCStatus() *status.Status { return e.st }

// public is what a client may be told of err: its text (a status from another node: that
// node's message), cut where the first error of a driver, the network or the OS begins
// (SQL, SQLSTATEs, addresses, paths; Mink's messages wrap them as "what Mink was doing:
// their text"), and whether anything was cut. Nothing cut away leaves the kind's name.
func public(err error) (string, bool) {
	var e *Error
	msg := text(err) // a DataLoss error: its own message, never its cause
	if !errors.As(err, &e) {
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			msg = st.Message()
		}
	}
	wasCut := false
	for _, fe := range foreignErrors(err) {
		if text := fe.Error(); text != "" {
			if i := strings.Index(msg, text); i >= 0 {
				msg, wasCut = msg[:i], true
			}
		}
	}
	if !wasCut {
		return msg, false
	}
	if msg = strings.TrimRight(msg, " :;,"); msg == "" {
		msg = Classify(err).String()
	}
	return msg, true
}

// foreignPkgs are the packages whose errors' words stay in the log: the Postgres and
// Kafka drivers, the network, the OS, crypto.
var foreignPkgs = []string{"github.com/jackc/", "github.com/twmb/", "net", "os", "io/fs", "syscall", "crypto/"}

// foreignErrors are the errors in err's chain that come from a driver, the network or
// the OS rather than from Mink: the outermost of each branch.
func foreignErrors(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			if foreign(e) {
				out = append(out, e)
				return
			}
			switch u := e.(type) {
			case interface{ Unwrap() []error }:
				for _, c := range u.Unwrap() {
					walk(c)
				}
				return
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			default:
				return
			}
		}
	}
	walk(err)
	return out
}

func foreign(err error) bool {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := t.PkgPath()
	for _, p := range foreignPkgs {
		if pkg == p || strings.HasPrefix(pkg, p) && (strings.HasSuffix(p, "/") || strings.HasPrefix(pkg, p+"/")) {
			return true
		}
	}
	return false
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

// HTTPStatus is the HTTP status of err for the HTTP APIs (Iceberg REST, S3); their error
// bodies are built from it and the Kind beside this function.
func HTTPStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	return toHTTP[Classify(err)]
}

// UnaryServerInterceptor maps every error a unary handler returns through GRPC, so no
// handler's error leaves as Unknown whatever it forgot; an internal error's text (SQL,
// paths, a driver's words) goes to log under a request id, and the client is told only
// the id (nil log: slog.Default).
func UnaryServerInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if err != nil {
			return nil, redactInternal(log, info.FullMethod, GRPC(err))
		}
		return resp, nil
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func StreamServerInterceptor(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		err := GRPC(h(srv, ss))
		if err == nil {
			return nil
		}
		return redactInternal(log, info.FullMethod, err)
	}
}

// redactInternal keeps an Internal or Unknown status's text out of the answer: it is
// logged with a request id, which the answer names. Other codes are the client's own
// business (what is invalid, missing or down) and pass as they are, but for the words
// of drivers GRPC cut from them, which are logged here under the id it gave.
func redactInternal(log *slog.Logger, method string, err error) error {
	if log == nil {
		log = slog.Default()
	}
	var cut *cutStatus
	if errors.As(err, &cut) {
		log.Warn("request failed; what its cause said is not told to the client", "method", method,
			"request_id", cut.id, "code", cut.st.Code().String(), "error", cut.cause.Error())
		return cut.st.Err()
	}
	st, _ := status.FromError(err)
	if c := st.Code(); c != codes.Internal && c != codes.Unknown {
		return err
	}
	if strings.HasPrefix(st.Message(), "internal error (request id ") {
		return err // redacted already, by the node that answered a forwarded call
	}
	id := RequestID()
	log.Error("internal error", "method", method, "request_id", id, "error", st.Message())
	return status.Errorf(st.Code(), "internal error (request id %s): the node's log says what failed", id)
}

// RequestID is a fresh id naming one request in the logs and in what its client is told.
func RequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
