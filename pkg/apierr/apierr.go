// Package apierr decides what a client sees of an error. Mink raises its errors with a
// Kind and a public message (New, Invalid, Wrap, Postgres, ...); whatever they wrap (a
// driver's, the network's, the OS's or Kafka's error) is for the log only. Each door
// renders errors one way, here: GRPC (a status), Iceberg (the REST catalog's envelope),
// S3 (the XML error). An error that is not Mink's is classified by Classify and told as
// its kind and a request id; the door logs its text under the id (see Message).
package apierr

import (
	"fmt"
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

var kindNames = [...]string{"internal error", "invalid argument", "not found", "already exists",
	"failed precondition", "aborted", "unavailable", "unimplemented", "deadline exceeded",
	"canceled", "resource exhausted", "unauthenticated", "permission denied", "out of range", "data loss"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is an error that knows its Kind and what a client may be told of it. Build one
// with the constructors.
type Error struct {
	Kind  Kind
	Field string // InvalidArgument: the request field at fault, in proto naming ("table_id")
	// Msg is the public message: composed where the error is raised, for a client to read
	// (it names no SQL, path, address or digest).
	Msg string
	Err error // cause, if any: logged, never told (but for the Mink errors it wraps)
	// S3Code is the S3 error code when the Kind's own is not precise enough
	// (SignatureDoesNotMatch, InvalidAccessKeyId, MethodNotAllowed, ...).
	S3Code string
	// Status is the HTTP status when the Kind's own is not the one to answer (405, 412,
	// 413; S3's 400 for a malformed signature); 0: the Kind's.
	Status int
	// Size is, for OutOfRange, the size of the object the range is not within (-1:
	// unknown): a 416's Content-Range, and an ErrorInfo detail across nodes.
	Size int64
}

func (e *Error) Error() string {
	msg := e.public()
	if e.Err != nil {
		if msg == "" {
			return e.Err.Error()
		}
		return msg + ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// public is e's own public words: its field, then its message.
func (e *Error) public() string {
	if e.Field != "" {
		if e.Msg == "" {
			return e.Field
		}
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}

// Invalid is an InvalidArgument error naming the request field at fault.
func Invalid(field, format string, args ...any) error {
	return &Error{Kind: InvalidArgument, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// New is an error of kind k.
func New(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// Wrap gives err the kind k, with a public message saying what was being done. Of err,
// a client is told only what its own Mink errors say.
func Wrap(k Kind, err error, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Failed is err raised as Mink's: its public message says what failed (followed by what
// the Mink errors err wraps say), its kind is the one Classify gives err (Internal for a
// cause it cannot sort). What err says besides is for the log.
func Failed(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: Classify(err), Msg: fmt.Sprintf(format, args...), Err: err}
}

// S3Err is an error of kind k that S3 answers with error code code and HTTP status
// status (0: the kind's): what no kind says precisely (MethodNotAllowed,
// PreconditionFailed, SignatureDoesNotMatch, ...). The catalog answers status too.
func S3Err(k Kind, status int, code, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), S3Code: code, Status: status}
}

// HTTPErr is an error of kind k that the HTTP doors answer with status (405, 413: what
// no kind says).
func HTTPErr(k Kind, status int, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Status: status}
}

// UnavailableErr says a dependency ("postgres", "kafka", "node b1") cannot be reached.
func UnavailableErr(dependency string, err error) error {
	return &Error{Kind: Unavailable, Msg: dependency + " is unavailable", Err: err}
}

// Postgres is the error of a statement to Postgres that failed while doing what format
// says, which is its public message: followed by "postgres is unavailable" for an
// outage or a timeout (kind Unavailable: clients may retry), by "postgres answered an
// error" when Postgres refused the statement (the kind of its SQLSTATE), and by what
// the Mink errors err wraps say. What Postgres or the driver said is for the log.
func Postgres(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	k := Classify(err)
	switch {
	case k == Unavailable || k == DeadlineExceeded:
		return &Error{Kind: Unavailable, Msg: what + ": postgres is unavailable", Err: err}
	case pgAnswered(err):
		return &Error{Kind: k, Msg: what + ": postgres answered an error", Err: err}
	}
	return Failed(err, "%s", what)
}

// RangeErr says a requested byte range is not satisfiable within an object of size bytes
// (-1: unknown): S3 InvalidRange (416) with Content-Range "bytes */<size>", gRPC
// OUT_OF_RANGE with the size in an ErrorInfo detail.
func RangeErr(size int64, format string, args ...any) error {
	return &Error{Kind: OutOfRange, Msg: fmt.Sprintf(format, args...), Size: max(size, -1)}
}

// DataLossErr says the bytes that were recorded cannot be produced now: a file rebuilt
// from Kafka with another size or checksum than its manifest names, or offsets Kafka has
// deleted. Such a file is never served; the file server reports it and the table's
// writer replaces it within a lease round, so the answer is retryable: S3 SlowDown (503
// with Retry-After), Iceberg 503, gRPC DATA_LOSS between nodes. Only format's text is
// ever told to a client (it must name no digest, offset or key: clients match words in
// it, such as "301"); cause, with the digests, is for the log, whatever it wraps.
func DataLossErr(cause error, format string, args ...any) error {
	e := &Error{Kind: DataLoss, Msg: fmt.Sprintf(format, args...)}
	if cause != nil {
		e.Err = untold{cause}
	}
	return e
}

// untold is a cause no client is told of, whatever Mink errors it wraps.
type untold struct{ error }

func (u untold) Unwrap() error { return u.error }
