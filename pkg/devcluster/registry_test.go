package devcluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/minkhq/mink/pkg/registry"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startTestRegistry(t *testing.T, dir string, port int) (*embeddedRegistry, *sr.Client) {
	t.Helper()
	e, err := startRegistry(dir, port, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	cl, err := srClient(registry.Config{URL: e.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return e, cl
}

// The embedded registry keeps its schemas across restarts with the same ids and
// versions, soft deletes included, and never hands out an id twice.
func TestEmbeddedRegistryPersists(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	port := freePort(t)
	e, cl := startTestRegistry(t, dir, port)
	if e.URL() != "http://"+Addr(port) {
		t.Errorf("URL %s, want it on port %d", e.URL(), port)
	}
	addr := sr.Schema{Schema: `{"type":"record","name":"Address","namespace":"x","fields":[{"name":"city","type":"string"}]}`}
	user := sr.Schema{Schema: `{"type":"record","name":"User","namespace":"x","fields":[{"name":"home","type":"x.Address"}]}`,
		References: []sr.SchemaReference{{Name: "x.Address", Subject: "address", Version: 1}}}
	register := func(subject string, s sr.Schema) sr.SubjectSchema {
		t.Helper()
		ss, err := cl.CreateSchema(ctx, subject, s)
		if err != nil {
			t.Fatalf("register under %s: %v", subject, err)
		}
		return ss
	}
	a1 := register("address", addr)
	u1 := register("user-value", user)
	a1again := register("other", addr) // the same schema, a second subject: the same id
	v1 := register("demo_avro-value", sr.Schema{Schema: AvroSchemaV1})
	v2 := register("demo_avro-value", sr.Schema{Schema: AvroSchemaV2})
	if a1again.ID != a1.ID {
		t.Fatalf("a schema under two subjects got ids %d and %d", a1.ID, a1again.ID)
	}
	if err := cl.DeleteSchema(ctx, "demo_avro-value", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RegistryFile)); err != nil {
		t.Fatalf("nothing saved: %v", err)
	}
	e.Close()

	e, cl = startTestRegistry(t, dir, port)
	if e.n != 5 {
		t.Errorf("restored %d schemas, want 5", e.n)
	}
	for _, want := range []sr.SubjectSchema{a1, u1, a1again, v2} {
		got, err := cl.SchemaByVersion(ctx, want.Subject, want.Version)
		if err != nil || got.ID != want.ID || got.Schema.Schema != want.Schema.Schema || len(got.References) != len(want.References) {
			t.Errorf("%s version %d after a restart: %+v, %v; want id %d", want.Subject, want.Version, got, err, want.ID)
		}
	}
	// A soft-deleted version is gone from its subject but its id still resolves, as
	// records written with it need.
	if _, err := cl.SchemaByVersion(ctx, "demo_avro-value", 1); err == nil {
		t.Error("the soft-deleted version 1 is back after a restart")
	}
	if s, err := cl.SchemaByID(ctx, v1.ID); err != nil || s.Schema != AvroSchemaV1 {
		t.Errorf("schema id %d of the soft-deleted version: %+v, %v", v1.ID, s, err)
	}
	if vs, err := cl.SubjectVersions(ctx, "demo_avro-value"); err != nil || len(vs) != 1 || vs[0] != 2 {
		t.Errorf("versions of demo_avro-value after a restart: %v, %v", vs, err)
	}
	n := register("fresh", sr.Schema{Schema: `{"type":"string"}`})
	if n.ID <= v2.ID {
		t.Errorf("a new schema after a restart got id %d, at or below the last one before it (%d)", n.ID, v2.ID)
	}
	e.Close()

	// A file it cannot read stops the start with its path, rather than an empty registry
	// that would give the kept records' ids to other schemas.
	os.WriteFile(filepath.Join(dir, RegistryFile), []byte("{not json"), 0o644)
	if _, err := startRegistry(dir, port, discard()); err == nil {
		t.Error("started on a corrupt schemas file")
	}
}

// A connection that never sends a request (an HTTP client's spare dial) does not hold
// up the stop.
func TestEmbeddedRegistryStopsPromptly(t *testing.T) {
	e, err := startRegistry(t.TempDir(), freePort(t), discard())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Serve accepts connections in the order they came: once a request on a later
	// connection is answered, the unused one has been accepted.
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(e.URL() + "/subjects")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	start := time.Now()
	if err := e.Close(); err != nil || time.Since(start) > 3*time.Second {
		t.Errorf("Close with an unused connection open: %v after %v", err, time.Since(start))
	}
}

// The Avro demo registers version 1 once, evolves after its ids pass the threshold, and
// a second run finds both versions instead of registering them again.
func TestAvroDemoEvolvesOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	port := freePort(t)
	_, cl := startTestRegistry(t, dir, port)
	const subject = "demo_avro-value"
	a := newAvroDemo(cl, subject, 3, discard(), t.Logf)
	if err := a.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	id1, id2 := a.SchemaIDs()
	if id1 == 0 || id2 != 0 {
		t.Fatalf("after prepare: ids %d, %d; want version 1 only", id1, id2)
	}
	for id := int64(1); id <= 5; id++ {
		rec, err := a.record(ctx, "demo_avro", id)
		if err != nil {
			t.Fatal(err)
		}
		sid, _, err := a.serde.DecodeID(rec.Value)
		_, id2 = a.SchemaIDs()
		want := id1
		if id > 3 {
			want = id2
		}
		if err != nil || sid != want || want == 0 {
			t.Errorf("order %d written with schema id %d (%v), want %d", id, sid, err, want)
		}
		if got := a.orderID(rec.Value); got != id {
			t.Errorf("orderID of order %d = %d", id, got)
		}
		if string(rec.Key) != NewOrder(id, timeZero).Customer {
			t.Errorf("order %d keyed %q", id, rec.Key)
		}
	}
	vs, err := cl.SubjectVersions(ctx, subject)
	if err != nil || len(vs) != 2 {
		t.Fatalf("versions %v, %v; want 1 and 2", vs, err)
	}

	b := newAvroDemo(cl, subject, 3, discard(), t.Logf)
	if err := b.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if g1, g2 := b.SchemaIDs(); g1 != id1 || g2 != id2 {
		t.Errorf("a second run found ids %d, %d; want %d, %d", g1, g2, id1, id2)
	}
	if vs, _ := cl.SubjectVersions(ctx, subject); len(vs) != 2 {
		t.Errorf("a second run registered again: versions %v", vs)
	}
	// Evolved already: even order 1 of a run is written with version 2.
	rec, _ := b.record(ctx, "demo_avro", 1)
	if sid, _, _ := b.serde.DecodeID(rec.Value); sid != id2 {
		t.Errorf("after the evolution, a new run writes schema id %d, want %d", sid, id2)
	}
	if b.orderID([]byte("not avro")) != 0 {
		t.Error("orderID of a stranger's record is not 0")
	}
}

// A registry that cannot be reached is an error of prepare, not a hang or a panic.
func TestAvroDemoWithoutRegistry(t *testing.T) {
	cl, err := srClient(registry.Config{URL: "http://" + Addr(freePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	err = newAvroDemo(cl, "demo_avro-value", 3, discard(), t.Logf).prepare(context.Background())
	var re *sr.ResponseError
	if err == nil || errors.As(err, &re) {
		t.Errorf("prepare against nothing: %v", err)
	}
}
