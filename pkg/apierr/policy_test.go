package apierr_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/minkhq/mink/pkg/apierr"
)

// TestOnePolicyAtEveryDoor: one error tells the same words at every door, gRPC, the
// Iceberg envelope and S3 XML, here and through another node: a public message as it
// was raised; of a cause that is not Mink's (SQL or a path formatted into a text, a
// digest), nothing, whatever its words, and the answer names the request id the cause
// is logged under.
func TestOnePolicyAtEveryDoor(t *testing.T) {
	key := "default/orders/data/f.parquet"
	digest := strings.Repeat("3a01", 16)
	for _, c := range []struct {
		name   string
		err    error
		words  string   // the public message
		hidden string   // "": nothing hidden; else what the log has of the cause
		leaks  []string // what no answer says
	}{
		{"SQL formatted into a text", fmt.Errorf("load table: %v",
			`ERROR: relation "mink_tables" does not exist (SQLSTATE 42P01): SELECT metadata_key FROM mink_tables WHERE id = $1`),
			"internal error", "SELECT metadata_key", []string{"SELECT", "mink_tables", "SQLSTATE", "load table"}},
		{"a path under Mink's words", apierr.Wrap(apierr.Unavailable,
			fmt.Errorf("rename /var/lib/mink/cache/3f/3f2a.part: %v", syscall.ENOSPC), "cannot build %s now", key),
			"cannot build " + key + " now", "/var/lib/mink/cache/3f/3f2a.part", []string{"/var/lib", "3f2a", "no space"}},
		{"a digest under data loss", fmt.Errorf("serve %s: %w", key, apierr.DataLossErr(fmt.Errorf("recorded sha256 %s", digest),
			"the file cannot be served now; retry")),
			"the file cannot be served now; retry", digest, []string{digest, "sha256", key}},
		{"public, as raised", apierr.New(apierr.NotFound, "table default.orders does not exist"),
			"table default.orders does not exist", "", nil},
		{"a field at fault", apierr.Invalid("table_id", "must be >= 0 (got %d)", -1), "table_id: must be >= 0 (got -1)", "", nil},
		{"Mink's words about Mink's cause", apierr.Wrap(apierr.Unavailable, apierr.UnavailableErr("kafka", fmt.Errorf("dial tcp 10.9.9.9:9092: %w", syscall.ECONNREFUSED)),
			"cannot build %s", key), "cannot build " + key + ": kafka is unavailable", "10.9.9.9:9092", []string{"10.9.9.9", "dial", "refused"}},
	} {
		var logs strings.Builder
		h := apierr.UnaryServerInterceptor(slog.New(slog.NewTextHandler(&logs, nil)))
		_, forwarded := h(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/m"}, func(context.Context, any) (any, error) {
			return nil, c.err
		})
		grpcMsg := status.Convert(forwarded).Message()
		answers := map[string]string{"grpc": grpcMsg}
		for from, err := range map[string]error{"": c.err, ", forwarded": forwarded} {
			ice, s3 := apierr.Iceberg(err, "", "R1"), apierr.S3(err, "R1")
			answers["iceberg"+from], answers["s3"+from] = ice.Message, s3.Message
			if ice.Logged != (c.hidden != "") || s3.Logged != (c.hidden != "") || s3.RequestID != "R1" {
				t.Errorf("%s%s: logged: iceberg %v, s3 %v (request id %q)", c.name, from, ice.Logged, s3.Logged, s3.RequestID)
			}
		}
		for door, msg := range answers {
			switch {
			case c.hidden == "" && msg != c.words:
				t.Errorf("%s: %s tells %q, want %q", c.name, door, msg, c.words)
			case c.hidden != "" && strings.HasPrefix(door, "s3") && msg != c.words+" (the file server's log has the cause under this answer's RequestId)":
				t.Errorf("%s: %s tells %q, want %q and where the cause is", c.name, door, msg, c.words)
			case c.hidden != "" && strings.HasPrefix(door, "iceberg") && msg != c.words+" (request id R1: the node's log has the cause)":
				t.Errorf("%s: %s tells %q, want %q and the request id", c.name, door, msg, c.words)
			}
			for _, w := range c.leaks {
				if strings.Contains(msg, w) {
					t.Errorf("%s: %s says %q: %q", c.name, door, w, msg)
				}
			}
		}
		if c.hidden == "" {
			if logs.Len() != 0 {
				t.Errorf("%s: logged with nothing hidden: %s", c.name, logs.String())
			}
			continue
		}
		// gRPC names the id in its message; the log has the cause under it.
		m := regexp.MustCompile(`^(.*) \(request id ([0-9A-F]{16}): the node's log has the cause\)$`).FindStringSubmatch(grpcMsg)
		if m == nil || m[1] != c.words {
			t.Errorf("%s: gRPC tells %q, want %q and a request id", c.name, grpcMsg, c.words)
			continue
		}
		if line := logs.String(); !strings.Contains(line, "request_id="+m[2]) || !strings.Contains(line, c.hidden) {
			t.Errorf("%s: the log lacks %q under request id %s:\n%s", c.name, c.hidden, m[2], line)
		}
	}
}

// TestRequestIDs: every door's request ids come from RequestID: 16 upper-case hex
// digits, never "301" (gocloud.dev's s3blob, which iceberg-go reads through, takes a
// failed request whose error text holds it for a missing bucket and gives up on it;
// about one random id in 300 holds it).
func TestRequestIDs(t *testing.T) {
	seen := map[string]bool{}
	shape := regexp.MustCompile(`^[0-9A-F]{16}$`)
	for range 20_000 {
		id := apierr.RequestID()
		if strings.Contains(id, "301") || !shape.MatchString(id) || seen[id] {
			t.Fatalf("request id %q", id)
		}
		seen[id] = true
	}
}
