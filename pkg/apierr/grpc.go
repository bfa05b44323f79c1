package apierr

// The gRPC door: GRPC renders an error as a status, the interceptors render every
// handler's error through it and log what the status does not tell.

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

const (
	// domain is the ErrorInfo domain of every status GRPC renders: it marks the message
	// as told by the policy, so a node forwarding it passes it on as it is.
	domain      = "mink"
	reasonRange = "RANGE_NOT_SATISFIABLE"
	// ErrorInfo metadata: the public message, the request id the cause is logged under
	// (when it is), an OutOfRange object's size.
	metaMessage   = "message"
	metaRequestID = "request_id"
	metaSize      = "size"
)

// GRPC renders err as the status a gRPC handler returns: its kind's code; its message
// as Message says, naming a request id when something is not told; an ErrorInfo of
// domain "mink" (with the object's size for OUT_OF_RANGE) and, for an InvalidArgument
// naming its field, a BadRequest detail. A status another node rendered passes through
// unchanged. What the status does not tell is logged by the interceptors, under the id.
func GRPC(err error) error {
	if err == nil {
		return nil
	}
	var r *renderedErr
	if errors.As(err, &r) {
		return r
	}
	t := tell(err)
	if t.peer != nil {
		return t.peer.Err()
	}
	var id string
	if t.logged {
		id = RequestID()
	}
	st := status.New(toCode[t.kind], t.text(id))
	// The metadata keep the public words and the id apart, for the door of a node this
	// status is forwarded to (an S3 message names no id: its RequestId element does).
	info := &errdetails.ErrorInfo{Domain: domain, Reason: strings.ToUpper(strings.ReplaceAll(t.kind.String(), " ", "_")),
		Metadata: map[string]string{metaMessage: t.msg}}
	if t.logged {
		info.Metadata[metaRequestID] = id
	}
	if n, ok := rangeSize(err); ok && t.kind == OutOfRange {
		info.Reason, info.Metadata[metaSize] = reasonRange, strconv.FormatInt(n, 10)
	}
	details := []protoadapt.MessageV1{info}
	if e := withField(err); t.kind == InvalidArgument && e != nil {
		details = append(details, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: e.Field, Description: e.Msg},
		}})
	}
	if d, derr := st.WithDetails(details...); derr == nil {
		st = d
	}
	if t.logged {
		return &renderedErr{st: st, cause: err, id: id}
	}
	return st.Err()
}

// rendered is the ErrorInfo of st when GRPC rendered it, here or on another node.
func rendered(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == domain {
			return info
		}
	}
	return nil
}

// renderedErr is a status whose message names a request id: the interceptors log its
// cause under the id. It is a status error as gRPC sees it.
type renderedErr struct {
	st    *status.Status
	cause error
	id    string
}

func (e *renderedErr) Error() string              { return e.st.Err().Error() }
func (e *renderedErr) GRPCStatus() *status.Status { return e.st }

// UnaryServerInterceptor renders every error a unary handler returns through GRPC, so
// no handler's error leaves as Unknown whatever it forgot, and logs what the answer does
// not tell under its request id (nil log: slog.Default).
func UnaryServerInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if err != nil {
			return nil, GRPCLogged(ctx, log, info.FullMethod, err)
		}
		return resp, nil
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func StreamServerInterceptor(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return GRPCLogged(ss.Context(), log, info.FullMethod, h(srv, ss))
	}
}

// GRPCLogged is GRPC(err), having logged what the status does not tell under its
// request id (nil log: slog.Default): the interceptors' door, and that of an answer that
// carries a status in a form of its own (the console's JSON).
func GRPCLogged(ctx context.Context, log *slog.Logger, method string, err error) error {
	return logged(ctx, log, method, GRPC(err))
}

// logged logs the cause of a rendered status under its request id and returns the
// status; a status that names no request id is returned as it is.
func logged(ctx context.Context, log *slog.Logger, method string, err error) error {
	var r *renderedErr
	if !errors.As(err, &r) {
		return err
	}
	if log == nil {
		log = slog.Default()
	}
	level := slog.LevelWarn
	if r.st.Code() == codes.Internal {
		level = slog.LevelError
	}
	log.Log(ctx, level, "request failed; its client is told the kind and this request id", "method", method,
		"request_id", r.id, "code", r.st.Code().String(), "error", r.cause.Error())
	return r.st.Err()
}
