package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	filev1 "github.com/minkhq/mink/gen/mink/file/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/filecache"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

// measureEnv is file servers over one table whose topic has records, each store
// serving its file service behind the gRPC door pkg/node installs (auth on), and
// dialing the others with its peer token, as pkg/node's DialOptions make it.
type measureEnv struct {
	t      *testing.T
	ctx    context.Context
	db     *pgxpool.Pool
	auth   *auth.Authority
	table  tables.Table
	stores map[string]*Store
	addrs  map[string]string
	files  map[string][]byte // the bytes of each file commitRange recorded, by key
}

const (
	measureTTL      = 2 * time.Minute // the table's mink.live.ttl
	measureMaxBytes = 50              // the table's mink.live.max-bytes (records are 9 bytes)
	measureRecords  = 10
)

func newMeasureEnv(t *testing.T, ids ...string) *measureEnv {
	t.Helper()
	return newMeasureEnvOver(t, func(db pg.DB) pg.DB { return db }, ids...)
}

// newMeasureEnvOver is newMeasureEnv with the stores' database seen through wrap.
func newMeasureEnvOver(t *testing.T, wrap func(pg.DB) pg.DB, ids ...string) *measureEnv {
	t.Helper()
	ctx := context.Background()
	db, _ := pgtest.DB(t)
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	kc := kafkatest.New(t, kafkatest.Brokers(1))
	kc.CreateTopic("clicks", 1, nil)
	prod := kc.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	t.Cleanup(prod.Close)
	var recs []*kgo.Record
	for i := range measureRecords {
		recs = append(recs, &kgo.Record{Topic: "clicks", Partition: 0, Value: fmt.Appendf(nil, `{"id": %d}`, i)}) // 9 or 10 bytes
	}
	kafkatest.Produce(t, prod, recs...)
	kafka, err := kafkasrc.New(kc.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	table, err := tables.Create(ctx, db, tables.Table{Namespace: "default", Name: "clicks", Topic: "clicks",
		Spec:       tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "id", Type: "long"}}},
		Properties: map[string]string{tables.PropLiveTTL: measureTTL.String(), tables.PropLiveMaxBytes: fmt.Sprint(measureMaxBytes)}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(&auth.File{ClusterSecret: "0123456789abcdef0123456789abcdef-cluster",
		Principals: []auth.PrincipalConfig{{ID: "ops", Secret: "ops-secret-0123456789", Role: auth.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	e := &measureEnv{t: t, ctx: ctx, db: db, auth: a, table: table, stores: map[string]*Store{}, addrs: map[string]string{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, id := range ids {
		cache, err := filecache.Open(t.TempDir(), 64<<20, log)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Options{NodeID: id, DB: wrap(db), Kafka: kafka, Codecs: tablecodec.New(db, nil), Cache: cache, Logger: log,
			DialOptions: []grpc.DialOption{grpc.WithPerRPCCredentials(auth.NewPeerCredentials(a, id))}})
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer(grpc.ChainUnaryInterceptor(apierr.UnaryServerInterceptor(nil), a.UnaryServerInterceptor()),
			grpc.ChainStreamInterceptor(apierr.StreamServerInterceptor(nil), a.StreamServerInterceptor()))
		s.Register(gs)
		done := make(chan struct{})
		go func() { defer close(done); gs.Serve(lis) }()
		t.Cleanup(func() { gs.Stop(); <-done; s.Close() })
		e.stores[id], e.addrs[id] = s, lis.Addr().String()
		if _, err := db.Exec(ctx, `INSERT INTO mink_members (node_id, incarnation, roles, grpc_addr, started_at, renewed_at, expires_at)
			VALUES ($1, gen_random_uuid(), '{fileserver}', $2, now(), now(), now() + interval '1h')`, id, lis.Addr().String()); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range e.stores {
		if err := s.RefreshMembers(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// measureOver calls the file service of node id as a client does: with opts' credentials.
func (e *measureEnv) measureOver(id string, ctx context.Context, req *filev1.ReadFileRequest, opts ...grpc.DialOption) (Measured, error) {
	e.t.Helper()
	conn, err := grpc.NewClient(e.addrs[id], append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	stream, err := filev1.NewFileServiceClient(conn).ReadFile(ctx, req)
	if err != nil {
		return Measured{}, err
	}
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	if !errors.Is(err, io.EOF) {
		return Measured{}, err
	}
	tr := stream.Trailer()
	m := Measured{Key: first(tr, mdMeasuredKey), Cut: first(tr, mdMeasuredCut)}
	fmt.Sscan(first(tr, mdMeasuredEnd), &m.End)
	fmt.Sscan(first(tr, mdMeasuredRead), &m.Read)
	return m, nil
}

func first(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

// expiresIn is how long from now the row of key expires, by the database's clock.
func (e *measureEnv) expiresIn(key string) time.Duration {
	e.t.Helper()
	var secs float64
	if err := e.db.QueryRow(e.ctx, `SELECT EXTRACT(EPOCH FROM expires_at - now())::float8 FROM mink_data_files WHERE key = $1`, key).Scan(&secs); err != nil {
		e.t.Fatalf("expiry of %s: %v", key, err)
	}
	return time.Duration(secs * float64(time.Second))
}

func (e *measureEnv) dataFiles() int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRow(e.ctx, `SELECT count(*) FROM mink_data_files`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *measureEnv) boundedExpiry(what, key string) {
	e.t.Helper()
	if d := e.expiresIn(key); d <= 0 || d > measureTTL+5*time.Second {
		e.t.Errorf("%s: the row of %s expires in %v, want within the table's mink.live.ttl (%v)", what, key, d, measureTTL)
	}
}

// TestMeasureBoundedByTheTable: a peer's measure asking for any TTL (the year 2126,
// math.MaxInt64 milliseconds, which once wrapped to an expiry in the past) or any budget
// gets the table's bounds; a row left with a far-future expiry is brought back within
// them by the next measure; a measure without a positive TTL or budget is refused.
func TestMeasureBoundedByTheTable(t *testing.T) {
	t.Parallel()
	e := newMeasureEnv(t, "fs-1")
	peer := grpc.WithPerRPCCredentials(auth.NewPeerCredentials(e.auth, "fs-2"))
	span := func(end int64) string { return TailIdentity("default", "clicks", 0, 0, end) }
	until2126 := time.Until(time.Date(2126, 1, 1, 0, 0, 0, 0, time.UTC)).Milliseconds()

	for i, ttl := range []int64{math.MaxInt64, until2126} {
		id := span(int64(measureRecords - i)) // a span of its own for each, so each is built
		m, err := e.measureOver("fs-1", e.ctx, &filev1.ReadFileRequest{Key: id,
			Measure: &filev1.MeasureSpec{MaxBytes: math.MaxInt64, TtlMs: ttl}}, peer)
		if err != nil {
			t.Fatalf("measure of %s with ttl %d ms: %v", id, ttl, err)
		}
		// The budget is the table's 50 bytes, not the MaxInt64 asked: the build is cut.
		if m.Key == "" || m.Cut != CutBytes || m.Read > measureMaxBytes || m.End >= int64(measureRecords-i) {
			t.Errorf("measure with ttl %d ms: %+v, want a file cut at the table's %d bytes", ttl, m, measureMaxBytes)
		}
		e.boundedExpiry(fmt.Sprintf("ttl %d ms", ttl), m.Key)
	}

	// A row with an expiry in 2126 (as measures left them before they were bounded) is
	// bounded again when the span is measured again.
	m, err := e.measureOver("fs-1", e.ctx, &filev1.ReadFileRequest{Key: span(measureRecords),
		Measure: &filev1.MeasureSpec{MaxBytes: 1, TtlMs: 1000}}, peer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(e.ctx, `UPDATE mink_data_files SET expires_at = '2126-01-01' WHERE key = $1`, m.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := e.measureOver("fs-1", e.ctx, &filev1.ReadFileRequest{Key: span(measureRecords),
		Measure: &filev1.MeasureSpec{MaxBytes: 1, TtlMs: math.MaxInt64}}, peer); err != nil {
		t.Fatal(err)
	}
	e.boundedExpiry("a 2126 row measured again", m.Key)
	// A shorter TTL asked is what it gets (a later expiry already set is kept).
	m, err = e.measureOver("fs-1", e.ctx, &filev1.ReadFileRequest{Key: span(2),
		Measure: &filev1.MeasureSpec{MaxBytes: 1000, TtlMs: 30_000}}, peer)
	if err != nil {
		t.Fatal(err)
	}
	if d := e.expiresIn(m.Key); d <= 20*time.Second || d > 35*time.Second {
		t.Errorf("a 30s measure expires in %v", d)
	}

	// A tail's row is a live load's; once a commit names it, it stays committed (listed)
	// when a load measures it again, with an expiry that keeps it for that load.
	live := func(key string) bool {
		var l bool
		if err := e.db.QueryRow(e.ctx, `SELECT live FROM mink_data_files WHERE key = $1`, key).Scan(&l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	if !live(m.Key) {
		t.Errorf("a measured tail %s is not marked as a live load's", m.Key)
	}
	if _, err := e.db.Exec(e.ctx, `UPDATE mink_data_files SET expires_at = NULL, live = false WHERE key = $1`, m.Key); err != nil { // the writer's commit
		t.Fatal(err)
	}
	if _, err := e.measureOver("fs-1", e.ctx, &filev1.ReadFileRequest{Key: span(2),
		Measure: &filev1.MeasureSpec{MaxBytes: 1000, TtlMs: 30_000}}, peer); err != nil {
		t.Fatal(err)
	}
	if live(m.Key) || e.expiresIn(m.Key) <= 0 {
		t.Errorf("a committed file measured again: live %v, expires in %v; want committed, kept for the load", live(m.Key), e.expiresIn(m.Key))
	}

	// Refused, and nothing recorded.
	before := e.dataFiles()
	for name, c := range map[string]struct {
		req   *filev1.ReadFileRequest
		code  codes.Code
		field string
	}{
		"zero ttl":           {&filev1.ReadFileRequest{Key: span(3), Measure: &filev1.MeasureSpec{MaxBytes: 10}}, codes.InvalidArgument, "measure.ttl_ms"},
		"negative ttl":       {&filev1.ReadFileRequest{Key: span(3), Measure: &filev1.MeasureSpec{MaxBytes: 10, TtlMs: math.MinInt64}}, codes.InvalidArgument, "measure.ttl_ms"},
		"zero budget":        {&filev1.ReadFileRequest{Key: span(3), Measure: &filev1.MeasureSpec{TtlMs: 1000}}, codes.InvalidArgument, "measure.max_bytes"},
		"negative budget":    {&filev1.ReadFileRequest{Key: span(3), Measure: &filev1.MeasureSpec{MaxBytes: -1, TtlMs: 1000}}, codes.InvalidArgument, "measure.max_bytes"},
		"a range":            {&filev1.ReadFileRequest{Key: span(3), Range: &filev1.ByteRange{First: 1}, Measure: &filev1.MeasureSpec{MaxBytes: 10, TtlMs: 1000}}, codes.InvalidArgument, "range"},
		"not a span":         {&filev1.ReadFileRequest{Key: "default/clicks/metadata/x.json", Measure: &filev1.MeasureSpec{MaxBytes: 10, TtlMs: 1000}}, codes.InvalidArgument, "key"},
		"an unknown table":   {&filev1.ReadFileRequest{Key: TailIdentity("default", "nope", 0, 0, 3), Measure: &filev1.MeasureSpec{MaxBytes: 10, TtlMs: 1000}}, codes.NotFound, ""},
		"more than its span": {&filev1.ReadFileRequest{Key: span(1 << 40), Measure: &filev1.MeasureSpec{MaxBytes: 10, TtlMs: 1000}}, codes.InvalidArgument, "key"},
	} {
		_, err := e.measureOver("fs-1", e.ctx, c.req, peer)
		if status.Code(err) != c.code || !strings.Contains(status.Convert(err).Message(), c.field) {
			t.Errorf("%s: %v, want %v naming %q", name, err, c.code, c.field)
		}
	}
	// Clients are not peers: even an admin's token is refused at the door.
	admin := metadata.AppendToOutgoingContext(e.ctx, "authorization", "Bearer ops-secret-0123456789")
	_, err = e.measureOver("fs-1", admin, &filev1.ReadFileRequest{Key: span(3), Measure: &filev1.MeasureSpec{MaxBytes: 10, TtlMs: 1000}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("an admin's measure: %v, want PermissionDenied", err)
	}
	_, err = e.measureOver("fs-1", e.ctx, &filev1.ReadFileRequest{Key: span(3), Measure: &filev1.MeasureSpec{MaxBytes: 10, TtlMs: 1000}})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("a measure without credentials: %v, want Unauthenticated", err)
	}
	// A node of an older version asks in headers: refused unsigned, so it measures the
	// span itself (as when an owner is unreachable) rather than fail its load.
	legacy := metadata.AppendToOutgoingContext(e.ctx, mdLegacyMeasureMaxBytes, "9223372036854775807", mdLegacyMeasureTTL, "9223372036854775807")
	conn, err := grpc.NewClient(e.addrs["fs-1"], grpc.WithTransportCredentials(insecure.NewCredentials()), peer)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := filev1.NewFileServiceClient(conn).ReadFile(legacy, &filev1.ReadFileRequest{Key: span(3), InfoOnly: true})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented || !strings.Contains(status.Convert(err).Message(), "upgrade") || len(stream.Trailer().Get(mdServedBy)) != 0 {
		t.Errorf("a measure in headers: %v (trailer %v), want Unimplemented, unsigned", err, stream.Trailer())
	}
	if after := e.dataFiles(); after != before {
		t.Errorf("refused measures recorded %d rows", after-before)
	}
}

// TestMeasureForwardedBounded: a node's own Measure asking for a century is bounded
// before it leaves (and again at the owner), and reaches the owner through its door
// with the node's peer token.
func TestMeasureForwardedBounded(t *testing.T) {
	t.Parallel()
	e := newMeasureEnv(t, "fs-1", "fs-2")
	for end := int64(2); end <= measureRecords; end++ {
		id := TailIdentity("default", "clicks", 0, 0, end)
		owner, _ := e.stores["fs-1"].members.ownerOf(id)
		var from string
		for n := range e.stores {
			if n != owner {
				from = n
			}
		}
		m, err := e.stores[from].Measure(e.ctx, MeasureRequest{Table: e.table, Partition: 0, Start: 0, End: end,
			MaxBytes: math.MaxInt64, TTL: 100 * 365 * 24 * time.Hour})
		if err != nil {
			t.Fatalf("measure [0, %d) from %s: %v", end, from, err)
		}
		if m.Key == "" || m.Read > measureMaxBytes {
			t.Errorf("measure [0, %d): %+v, want at most the table's %d bytes", end, m, measureMaxBytes)
		}
		e.boundedExpiry(fmt.Sprintf("measure [0, %d) from %s", end, from), m.Key)
		// Built by the owner, reached through its door (not measured here after a refusal).
		if !e.stores[owner].o.Cache.Contains(m.Key) || e.stores[from].Stats().Fallbacks != 0 {
			t.Errorf("measure [0, %d) from %s: not built by its owner %s (fallbacks %d)", end, from, owner, e.stores[from].Stats().Fallbacks)
		}
		if st := e.stores[from].Stats(); st.Forwarded > 0 && st.TailBuilds == 0 {
			return // one forwarded measure is the point; the rest are the same
		}
	}
	t.Fatal("no span was owned by the other node")
}
