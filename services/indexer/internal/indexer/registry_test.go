package indexer_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/services/indexer/internal/indexer"
)

const (
	userV1 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}`
	userV2 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":["null","string"],"default":null}]}`
	userV3 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":["null","string"],"default":null},{"name":"age","type":"int","default":0}]}`
)

// startRegistryIndexer runs one indexer node whose codecs learn from reg.
func (e *env) startRegistryIndexer(t *testing.T, id string, codecs *tablecodec.Codecs) *indexer.Indexer {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ix, err := indexer.New(indexer.Options{DB: e.db, Kafka: e.kc, Codecs: codecs, Meter: noop.NewMeterProvider().Meter("test"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m, err := lease.NewManager(e.db, lease.Config{NodeID: id, Roles: []lease.Role{lease.RoleIndexer}, GRPCAddr: id, TTL: 1500 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m.OnLease(lease.KindPartition, ix.Work)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ix
}

func encodeAvro(t *testing.T, id int, text string, v any) []byte {
	schema := avro.MustParse(text)
	var serde sr.Serde
	serde.Register(id, v, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }))
	b, err := serde.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type user1 struct {
	ID int64 `avro:"id"`
}
type user2 struct {
	ID   int64   `avro:"id"`
	Name *string `avro:"name"`
}
type user3 struct {
	ID   int64   `avro:"id"`
	Name *string `avro:"name"`
	Age  int32   `avro:"age"`
}

// A new registry version mid-stream: the table evolves and the record that needs it
// starts a range of the new version; every range rebuilds byte for byte without the
// registry. A registry that cannot answer pauses the partition (saying why) rather than
// making error rows, and indexing resumes by itself.
func TestRegistryEvolutionAndOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	client, err := registry.New(registry.Config{URL: reg.URL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	codecs := tablecodec.New(e.db, client)
	id1, _, err := reg.RegisterSchema("users-value", sr.Schema{Schema: userV1})
	if err != nil {
		t.Fatal(err)
	}
	e.kafka.CreateTopic("users", 1, nil)
	spec, fields, schemas, err := codecs.FirstVersion(ctx, tableschema.Spec{Format: tableschema.FormatAvro,
		Value: &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: "users-value", Mode: tableschema.ModePrefix}})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := tables.CreateVersioned(ctx, e.db, tables.Table{Name: "users", Spec: spec,
		Properties: map[string]string{tables.PropRangeMaxAge: "300ms"}}, 1, fields, schemas)
	if err != nil {
		t.Fatal(err)
	}
	id2, _, err := reg.RegisterSchema("users-value", sr.Schema{Schema: userV2})
	if err != nil {
		t.Fatal(err)
	}
	ann := "ann"
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, &kgo.Record{Topic: "users", Value: encodeAvro(t, id1, userV1, user1{ID: int64(i)})})
	}
	for i := range 3 {
		recs = append(recs, &kgo.Record{Topic: "users", Value: encodeAvro(t, id2, userV2, user2{ID: int64(10 + i), Name: &ann})})
	}
	recs = append(recs, &kgo.Record{Topic: "users", Value: encodeAvro(t, id1, userV1, user1{ID: 99})})
	kafkatest.Produce(t, e.prod, recs...)
	ix := e.startRegistryIndexer(t, "ix1", codecs)

	indexedTo := func(end int64) func() bool {
		return func() bool {
			st, err := ranges.State(ctx, e.db, tbl.ID, 0)
			return err == nil && st.Indexed && st.IndexedEnd >= end
		}
	}
	leasetest.Eventually(t, 20*time.Second, "7 records indexed", indexedTo(7))
	rs, err := ranges.List(ctx, e.db, tbl.ID, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	rebuild := tablecodec.New(e.db, nil) // no registry: rebuilds use what Postgres holds
	for _, r := range rs {
		var s parquetbuild.Settings
		if err := json.Unmarshal(r.Settings, &s); err != nil {
			t.Fatal(err)
		}
		// Offsets 0-2 are v1 records at version 0; offset 3, the first v2 record, starts
		// a range of version 1, which also holds the later v1 record.
		switch {
		case r.End <= 3 && s.TableVersion != 0, r.Start >= 3 && s.TableVersion != 1:
			t.Errorf("range [%d, %d) at version %d", r.Start, r.End, s.TableVersion)
		case r.Start < 3 && r.End > 3:
			t.Errorf("range [%d, %d) spans the version change at offset 3", r.Start, r.End)
		}
		if r.DecodeErrors != 0 {
			t.Errorf("range [%d, %d) has %d error rows", r.Start, r.End, r.DecodeErrors)
		}
		if _, err := rangefile.Build(ctx, e.kc, rebuild, tbl, r, io.Discard); err != nil {
			t.Errorf("rebuild of [%d, %d): %v", r.Start, r.End, err)
		}
	}
	if v, err := tables.GetByID(ctx, e.db, tbl.ID); err != nil || v.Version != 1 {
		t.Fatalf("table version %d %v", v.Version, err)
	}

	// The registry stops answering; a record of a new version arrives.
	var down atomic.Bool
	down.Store(true)
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() {
			http.Error(w, `{"error_code":50001,"message":"store down"}`, http.StatusInternalServerError)
			return true
		}
		return false
	})
	id3, _, err := reg.RegisterSchema("users-value", sr.Schema{Schema: userV3})
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, e.prod, &kgo.Record{Topic: "users", Value: encodeAvro(t, id3, userV3, user3{ID: 7, Age: 41})},
		&kgo.Record{Topic: "users", Value: encodeAvro(t, id1, userV1, user1{ID: 8})})
	var why string
	leasetest.Eventually(t, 20*time.Second, "the pause recorded", func() bool {
		ps, err := ranges.Partitions(ctx, e.db, tbl.ID)
		if err != nil || len(ps) != 1 {
			return false
		}
		why = ps[0].IndexError
		return why != "" && !ps[0].IndexErrorAt.IsZero()
	})
	if !strings.Contains(why, reg.URL()) || !strings.Contains(why, "unavailable") {
		t.Errorf("index_error %q does not name the registry", why)
	}
	if p := ix.Paused(); p["default.users/0"] == "" {
		t.Errorf("status figures %v", ix.Figures())
	}
	if st, _ := ranges.State(ctx, e.db, tbl.ID, 0); st.IndexedEnd > 7 {
		t.Fatalf("indexed past the record of the unknown schema: %d", st.IndexedEnd)
	}

	down.Store(false)
	leasetest.Eventually(t, 30*time.Second, "indexing resumed", indexedTo(9))
	leasetest.Eventually(t, 10*time.Second, "the pause cleared", func() bool {
		ps, err := ranges.Partitions(ctx, e.db, tbl.ID)
		return err == nil && ps[0].IndexError == "" && len(ix.Paused()) == 0
	})
	rs, _ = ranges.List(ctx, e.db, tbl.ID, 0, 7)
	var rows, bad int64
	for _, r := range rs {
		rows += r.Records
		bad += r.DecodeErrors
	}
	if rows != 2 || bad != 0 {
		t.Fatalf("after the outage: %d rows, %d error rows", rows, bad)
	}
	if v, _ := tables.GetByID(ctx, e.db, tbl.ID); v.Version != 2 {
		t.Fatalf("table version %d after v3", v.Version)
	}
}
