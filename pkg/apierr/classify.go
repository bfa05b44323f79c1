package apierr

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Classify sorts any error into a Kind: the outermost Mink error's (Error, or a gRPC
// status) wins over what the chain wraps; a driver's, the network's or the context's
// error is sorted by its type and code, never its wording.
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

// pgAnswered reports whether Postgres itself refused what err is about.
func pgAnswered(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// pgKind classifies a Postgres SQLSTATE (its class is its first two characters).
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
