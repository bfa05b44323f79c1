package apierr_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/lease"
)

// failedDial is a real failed dial to Postgres as user to database db: nothing listens
// at the address, which it returns with the error.
func failedDial(t *testing.T, user, db string) (string, error) {
	t.Helper()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := pgx.Connect(ctx, "postgres://"+user+"@"+addr+"/"+db+"?connect_timeout=2")
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	return addr, err
}

func TestCodes(t *testing.T) {
	addr, dialErr := failedDial(t, "u", "db")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	remote := apierr.GRPC(apierr.New(apierr.PermissionDenied, "from another node"))
	// A real closed pool: what a node shutting down answers a request still in flight.
	pool, err := pgxpool.New(ctx, "postgres://u@"+addr+"/db")
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	_, closedErr := pool.Exec(ctx, "SELECT 1")
	if closedErr == nil {
		t.Fatal("a closed pool ran a statement")
	}

	// A real read that timed out: a server that accepts and never answers.
	quiet, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	conn, err := net.Dial("tcp", quiet.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, readErr := conn.Read(make([]byte, 1))
	if readErr == nil {
		t.Fatal("a read from a silent server returned")
	}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}

	cases := []struct {
		name string
		err  error
		code codes.Code
		http int
	}{
		{"invalid", apierr.Invalid("table_id", "must be >= 0"), codes.InvalidArgument, 400},
		{"wrapped invalid", fmt.Errorf("create: %w", apierr.Invalid("name", "required")), codes.InvalidArgument, 400},
		{"not found", apierr.New(apierr.NotFound, "table x"), codes.NotFound, 404},
		{"no such member", fmt.Errorf("look up: %w", lease.ErrNoSuchMember), codes.NotFound, 404},
		{"lease lost", fmt.Errorf("store: %w", lease.ErrLeaseLost), codes.Aborted, 409},
		{"unique violation", &pgconn.PgError{Code: "23505"}, codes.AlreadyExists, 409},
		{"check violation", &pgconn.PgError{Code: "23514"}, codes.InvalidArgument, 400},
		{"postgres shutting down", &pgconn.PgError{Code: "57P01"}, codes.Unavailable, 503},
		{"postgres unreachable", fmt.Errorf("list nodes: %w", dialErr), codes.Unavailable, 503},
		{"kafka unreachable", apierr.UnavailableErr("kafka", errors.New("no broker")), codes.Unavailable, 503},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded, 504},
		{"unimplemented", apierr.New(apierr.Unimplemented, "later"), codes.Unimplemented, 501},
		{"status passes through", remote, codes.PermissionDenied, 403},
		{"unclassified", errors.New("boom"), codes.Internal, 500},
		{"closed pool", fmt.Errorf("lookup: %w", closedErr), codes.Unavailable, 503},
		{"closed conn", fmt.Errorf("query: %w", pgconn.ErrConnClosed), codes.Unavailable, 503},
		{"closed socket", fmt.Errorf("read: %w", net.ErrClosed), codes.Unavailable, 503},
		{"read timed out", fmt.Errorf("query: %w", readErr), codes.DeadlineExceeded, 504},
		{"dial timed out", fmt.Errorf("connect: %w", dialTimeout), codes.Unavailable, 503},
		{"left the cluster", fmt.Errorf("heartbeat: %w", lease.ErrLeft), codes.Aborted, 409},
		// Classified by type, not wording: words alone are no outage.
		{"outage in words only", errors.New("closed pool: conn closed, failed to connect"), codes.Internal, 500},
		{"range", apierr.RangeErr(10, "range bytes=20- is not satisfiable"), codes.OutOfRange, 416},
		{"data loss", apierr.DataLossErr(errors.New("sha256 differs"), "file k"), codes.DataLoss, 503},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := apierr.GRPC(c.err)
			if status.Code(got) != c.code {
				t.Errorf("GRPC code %v, want %v (%v)", status.Code(got), c.code, got)
			}
			if status.Code(got) == codes.Unknown {
				t.Error("leaked as Unknown")
			}
			if h := apierr.HTTPStatus(c.err); h != c.http {
				t.Errorf("HTTP status %d, want %d", h, c.http)
			}
		})
	}
	if got := apierr.GRPC(remote); got.Error() != remote.Error() {
		t.Errorf("a status error changed on its way through: %v", got)
	}
	// A status no node rendered (gRPC's own, of a call that failed on its way) keeps its
	// code, not its words.
	transport := status.Error(codes.Unavailable, "connection error: desc = transport: dial tcp 10.1.2.3:7070: connect: connection refused")
	if got := status.Convert(apierr.GRPC(transport)); got.Code() != codes.Unavailable || strings.Contains(got.Message(), "10.1.2.3") {
		t.Errorf("gRPC's own status: %v", got)
	}
	if apierr.GRPC(nil) != nil || apierr.HTTPStatus(nil) != http.StatusOK {
		t.Error("nil is not OK")
	}
}

func TestInvalidNamesTheField(t *testing.T) {
	err := apierr.GRPC(apierr.Wrap(apierr.InvalidArgument, apierr.Invalid("table_id", "must be >= 0 (got %d)", -1), "list leases"))
	st := status.Convert(err)
	if st.Message() != "list leases: table_id: must be >= 0 (got -1)" {
		t.Errorf("message %q", st.Message())
	}
	var field string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			field = br.GetFieldViolations()[0].GetField()
		}
	}
	if field != "table_id" {
		t.Errorf("BadRequest field %q, want table_id", field)
	}
}

// Long messages are cut at one place, with what was left out said, in every transport.
func TestLongMessagesTruncated(t *testing.T) {
	long := apierr.Invalid("name", "%s", strings.Repeat("é", 3000))
	for name, msg := range map[string]string{
		"grpc":    status.Convert(apierr.GRPC(long)).Message(),
		"iceberg": apierr.Iceberg(long, "", "R").Message,
		"s3":      apierr.S3(long, "R").Message,
	} {
		if len(msg) > apierr.MaxMessage+40 || !strings.Contains(msg, "bytes more)") || !utf8.ValidString(msg) {
			t.Errorf("%s: %d bytes, valid UTF-8 %v: %.80q...", name, len(msg), utf8.ValidString(msg), msg)
		}
	}
	if short := "name: too short"; apierr.Truncate(short) != short {
		t.Errorf("a short message changed: %q", apierr.Truncate(short))
	}
}

// TestDriverWordsStayInTheLog: what Postgres says of a value it refuses (SQLSTATE, its
// wording) and what a failed connection names (user, database, address) reach no
// client, by gRPC, the Iceberg envelope or S3 XML: the answer keeps Mink's words and the
// kind, names a request id, and the log has the cause under that id.
func TestDriverWordsStayInTheLog(t *testing.T) {
	pgErr := &pgconn.PgError{Severity: "ERROR", Code: "22021", Message: `invalid byte sequence for encoding "UTF8": 0x00`}
	addr, dialErr := failedDial(t, "mink_prod", "secretdb")
	for _, c := range []struct {
		name          string
		err           error
		code          codes.Code
		words, logged string
	}{
		{"a refused value", apierr.Postgres(pgErr, "look up node %q", "indexer-2\x00"), codes.InvalidArgument, `look up node "indexer-2\x00": postgres answered an error`, "SQLSTATE 22021"},
		{"an outage", apierr.Postgres(dialErr, "list tables"), codes.Unavailable, "list tables: postgres is unavailable", "user=mink_prod"},
		{"wrapped twice", apierr.Wrap(apierr.InvalidArgument, fmt.Errorf("store: %w", pgErr), "alter table %s", "t"), codes.InvalidArgument, "alter table t (request id", "SQLSTATE 22021"},
		// Not raised as Mink's: the kind of the driver's error, its words all left out.
		{"a driver's error as it is", fmt.Errorf("look up node: %w", pgErr), codes.InvalidArgument, "invalid argument (request id", "SQLSTATE 22021"},
		{"a bug", errors.New("boom at /var/lib/mink"), codes.Internal, "internal error (request id", "/var/lib/mink"},
	} {
		var logs strings.Builder
		h := apierr.UnaryServerInterceptor(slog.New(slog.NewTextHandler(&logs, nil)))
		_, got := h(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/m"}, func(context.Context, any) (any, error) {
			return nil, apierr.GRPC(c.err)
		})
		st := status.Convert(got)
		msg := st.Message()
		if st.Code() != c.code || !strings.HasPrefix(msg, c.words) {
			t.Errorf("%s: %v %q, want %v beginning %q", c.name, st.Code(), msg, c.code, c.words)
		}
		for _, body := range []string{msg, apierr.Iceberg(c.err, "", "R").Message, apierr.S3(c.err, "R").Message} {
			for _, w := range []string{"SQLSTATE", "ERROR:", "invalid byte sequence", "22021", "mink_prod", "secretdb", addr, "dial", "boom", "/var/lib"} {
				if strings.Contains(body, w) {
					t.Errorf("%s: the answer says %q: %s", c.name, w, body)
				}
			}
		}
		id, ok := strings.CutPrefix(msg[strings.Index(msg, "(request id ")+1:], "request id ")
		id, _, _ = strings.Cut(id, ":")
		if !ok || id == "" || !strings.Contains(logs.String(), "request_id="+id) || !strings.Contains(logs.String(), c.logged) {
			t.Errorf("%s: the log does not hold the cause under the answer's request id %q:\n%s", c.name, id, logs.String())
		}
	}
}
