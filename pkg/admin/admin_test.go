package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	filev1 "github.com/minkhq/mink/gen/mink/file/v1"
	"github.com/minkhq/mink/pkg/admin"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/history"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

// testNode is one node in process: a real lease manager and a real gRPC server with the
// admin service on a loopback port.
type testNode struct {
	id       string
	addr     string
	mgr      *lease.Manager
	accepted *atomic.Int64 // connections the gRPC server accepted
	client   adminv1.AdminServiceClient
}

// countingListener counts accepted connections, to show forwarding reuses one.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func startNode(t *testing.T, db *pgxpool.Pool, id string, role lease.Role, tables admin.Tables) *testNode {
	t.Helper()
	return startNodeWith(t, db, id, role, nodeOptions{tables: tables})
}

// nodeOptions are what a test node may have beyond its lease manager and admin service.
type nodeOptions struct {
	tables admin.Tables
	// auth is the node's gRPC door as pkg/node installs it (nil: auth off, every call
	// Anonymous), and its forwarding connections carry the node's peer token.
	auth *auth.Authority
	// files is a file service to serve beside the admin service (nil: none).
	files filev1.FileServiceServer
	// history is what GetHistory answers (nil: no samples).
	history *history.Ring
}

func startNodeWith(t *testing.T, db *pgxpool.Pool, id string, role lease.Role, o nodeOptions) *testNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{id: id, addr: lis.Addr().String(), accepted: &atomic.Int64{}}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	n.mgr, err = lease.NewManager(db, lease.Config{NodeID: id, Roles: []lease.Role{role}, GRPCAddr: n.addr, TTL: 1500 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	var dialOpts []grpc.DialOption
	if o.auth != nil {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(auth.NewPeerCredentials(o.auth, id)))
	}
	srv, err := admin.New(admin.Options{Leases: n.mgr, DB: db, Tables: o.tables, Logger: log, ForwardTimeout: 3 * time.Second,
		DialOptions: dialOpts, History: o.history})
	if err != nil {
		t.Fatal(err)
	}
	unary := []grpc.UnaryServerInterceptor{apierr.UnaryServerInterceptor(nil)}
	stream := []grpc.StreamServerInterceptor{apierr.StreamServerInterceptor(nil)}
	// The door, as pkg/node always chains it (errors are mapped last, the door's too);
	// with auth off it lets every call in as Anonymous.
	unary = append(unary, o.auth.UnaryServerInterceptor())
	stream = append(stream, o.auth.StreamServerInterceptor())
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
	srv.Register(gs)
	if o.files != nil {
		filev1.RegisterFileServiceServer(gs, o.files)
	}
	ctx, cancel := context.WithCancel(context.Background())
	leaseDone := make(chan struct{})
	go func() { defer close(leaseDone); n.mgr.Run(ctx) }()
	serveDone := make(chan struct{})
	go func() { defer close(serveDone); gs.Serve(countingListener{lis, n.accepted}) }()
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	n.client = adminv1.NewAdminServiceClient(conn)
	t.Cleanup(func() {
		conn.Close()
		cancel()
		<-leaseDone
		gs.Stop()
		<-serveDone
		srv.Close()
	})
	await.For(t, 10*time.Second, id+" to register", func() (bool, bool) { return true, !n.mgr.StartedAt().IsZero() })
	return n
}

func migrated(t *testing.T) *pgxpool.Pool {
	t.Helper()
	db, _ := pgtest.DB(t)
	if err := pgschema.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestForwarding(t *testing.T) {
	db := migrated(t)
	noLeaks(t)
	a := startNode(t, db, "a", lease.RoleFileServer, nil)
	b := startNode(t, db, "b", lease.RoleWriter, nil)
	ctx := context.Background()

	for _, target := range []string{"", "a"} {
		st, err := a.client.GetStatus(ctx, &adminv1.GetStatusRequest{Node: target})
		if err != nil || st.GetNodeId() != "a" {
			t.Errorf("GetStatus(node=%q) on a: %v %v", target, st, err)
		}
	}
	acceptedBefore := b.accepted.Load()
	for range 5 {
		st, err := a.client.GetStatus(ctx, &adminv1.GetStatusRequest{Node: "b"})
		if err != nil || st.GetNodeId() != "b" || st.GetRoles()[0] != adminv1.Role_ROLE_WRITER {
			t.Fatalf("GetStatus(node=b) through a: %v %v", st, err)
		}
	}
	// a dialed b once and reused that connection for every forwarded request.
	if got := b.accepted.Load() - acceptedBefore; got != 1 {
		t.Errorf("b accepted %d connections for 5 forwarded requests, want 1", got)
	}

	nodes, err := a.client.ListNodes(ctx, &adminv1.ListNodesRequest{Node: "b"})
	if err != nil || len(nodes.GetNodes()) != 2 || nodes.GetNodes()[1].GetGrpcAddr() != b.addr {
		t.Errorf("ListNodes through a: %v %v", nodes, err)
	}

	// b's own error comes back unchanged, details and all.
	_, errB := b.client.ListLeases(ctx, &adminv1.ListLeasesRequest{TableId: -1})
	_, errAB := a.client.ListLeases(ctx, &adminv1.ListLeasesRequest{Node: "b", TableId: -1})
	if status.Code(errAB) != codes.InvalidArgument || status.Convert(errAB).Message() != status.Convert(errB).Message() {
		t.Errorf("forwarded bad request: %v, direct: %v", errAB, errB)
	}
	if f := badField(errAB); f != "table_id" {
		t.Errorf("forwarded error's BadRequest field %q, want table_id", f)
	}
}

func TestNodeErrors(t *testing.T) {
	db := migrated(t)
	noLeaks(t)
	a := startNode(t, db, "a", lease.RoleFileServer, nil)
	b := startNode(t, db, "b", lease.RoleFileServer, nil)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// A crashed node: registered, but its row expired by the database clock. The next
	// round of a or b deletes such a row (the seed's janitor), so it is written again just
	// before each try, and a try the janitor won (NotFound) is tried again.
	crashed := func() {
		exec(`INSERT INTO mink_members (node_id, incarnation, roles, grpc_addr, started_at, renewed_at, expires_at)
			VALUES ('dead', gen_random_uuid(), '{writer}', '127.0.0.1:1', now() - interval '10s', now() - interval '5s', now() - interval '1s')
			ON CONFLICT (node_id) DO UPDATE SET expires_at = EXCLUDED.expires_at`)
	}
	// A live row whose address nothing listens on.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	exec(`INSERT INTO mink_members (node_id, incarnation, roles, grpc_addr, started_at, renewed_at, expires_at)
		VALUES ('gone', gen_random_uuid(), '{writer}', $1, now(), now(), now() + interval '1h')`, closedAddr)
	// A live row advertising b's address: the request reaches the wrong node.
	exec(`INSERT INTO mink_members (node_id, incarnation, roles, grpc_addr, started_at, renewed_at, expires_at)
		VALUES ('stale', gen_random_uuid(), '{writer}', $1, now(), now(), now() + interval '1h')`, b.addr)

	cases := []struct {
		name string
		call func() error
		code codes.Code
		want []string
	}{
		{"unknown node", func() error {
			_, err := a.client.GetStatus(ctx, &adminv1.GetStatusRequest{Node: "nope"})
			return err
		}, codes.NotFound, []string{`"nope"`}},
		{"dead node", func() error {
			for try := 1; ; try++ {
				crashed()
				_, err := a.client.ListNodes(ctx, &adminv1.ListNodesRequest{Node: "dead"})
				if status.Code(err) != codes.NotFound || try == 20 {
					return err
				}
			}
		}, codes.Unavailable, []string{`"dead"`, "not live"}},
		{"unreachable node", func() error {
			_, err := a.client.GetStatus(ctx, &adminv1.GetStatusRequest{Node: "gone"})
			return err
		}, codes.Unavailable, []string{`"gone"`, closedAddr, "unreachable"}},
		{"stale address", func() error {
			_, err := a.client.GetStatus(ctx, &adminv1.GetStatusRequest{Node: "stale"})
			return err
		}, codes.Unavailable, []string{`"stale"`, `"b"`, "stale"}},
		{"negative table id", func() error {
			_, err := a.client.ListLeases(ctx, &adminv1.ListLeasesRequest{TableId: -3})
			return err
		}, codes.InvalidArgument, []string{"table_id", "-3"}},
		{"drain without node", func() error {
			_, err := a.client.DrainNode(ctx, &adminv1.DrainNodeRequest{})
			return err
		}, codes.InvalidArgument, []string{"node"}},
		{"undrain without node", func() error {
			_, err := a.client.UndrainNode(ctx, &adminv1.UndrainNodeRequest{})
			return err
		}, codes.InvalidArgument, []string{"node"}},
		{"drain unknown node", func() error {
			_, err := a.client.DrainNode(ctx, &adminv1.DrainNodeRequest{Node: "nope"})
			return err
		}, codes.NotFound, []string{`"nope"`}},
		{"tables not served", func() error {
			_, err := a.client.CreateTable(ctx, &adminv1.CreateTableRequest{Name: "events"})
			return err
		}, codes.Unimplemented, []string{"no table administration"}},
		{"tables not served, forwarded", func() error {
			_, err := a.client.DescribeTable(ctx, &adminv1.DescribeTableRequest{Node: "b", Name: "events"})
			return err
		}, codes.Unimplemented, []string{"no table administration"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if status.Code(err) != c.code {
				t.Fatalf("got %v, want %v", err, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(status.Convert(err).Message(), w) {
					t.Errorf("message %q does not mention %s", status.Convert(err).Message(), w)
				}
			}
		})
	}
	if f := badField(func() error { _, err := a.client.ListLeases(ctx, &adminv1.ListLeasesRequest{TableId: -3}); return err }()); f != "table_id" {
		t.Errorf("BadRequest field %q, want table_id", f)
	}
}

// TestDrainThroughAnotherNode drains b by a request sent to a: b releases every lease
// before the call returns and takes its share again after UndrainNode.
func TestDrainThroughAnotherNode(t *testing.T) {
	db := migrated(t)
	noLeaks(t)
	a := startNode(t, db, "a", lease.RoleFileServer, nil)
	startNode(t, db, "b", lease.RoleIndexer, nil)
	ctx := context.Background()
	table := leasetest.Table(t, db, "t", 3)
	heldByB := func() int {
		ls, err := a.client.ListLeases(ctx, &adminv1.ListLeasesRequest{TableId: table})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range ls.GetLeases() {
			if l.GetHolder() == "b" {
				n++
			}
		}
		return n
	}
	await.For(t, 10*time.Second, "b to hold 3 leases", func() (int, bool) { n := heldByB(); return n, n == 3 })

	dr, err := a.client.DrainNode(ctx, &adminv1.DrainNodeRequest{Node: "b"})
	if err != nil || dr.GetNodeId() != "b" || !dr.GetDraining() || len(dr.GetLeases()) != 0 {
		t.Fatalf("DrainNode(b) through a: %v %v", dr, err)
	}
	if n := heldByB(); n != 0 {
		t.Errorf("b still holds %d leases after the drain returned", n)
	}
	nodes, err := a.client.ListNodes(ctx, &adminv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.GetNodes() {
		if n.GetNodeId() == "b" && !n.GetDraining() {
			t.Error("ListNodes does not show b draining")
		}
	}
	if _, err := a.client.UndrainNode(ctx, &adminv1.UndrainNodeRequest{Node: "b"}); err != nil {
		t.Fatal(err)
	}
	await.For(t, 10*time.Second, "b to take its leases back", func() (int, bool) { n := heldByB(); return n, n == 3 })
}

// tables is a real (if small) Tables: it answers from what it is given, to show the
// admin server hands table requests to it and maps its domain errors.
type tables struct{}

func (tables) CreateTable(_ context.Context, r *adminv1.CreateTableRequest) (*adminv1.CreateTableResponse, error) {
	if r.GetName() == "" {
		return nil, apierr.Invalid("name", "required")
	}
	return nil, apierr.New(apierr.AlreadyExists, "table default.%s already exists", r.GetName())
}
func (tables) DropTable(context.Context, *adminv1.DropTableRequest) (*adminv1.DropTableResponse, error) {
	return nil, errors.New("boom")
}
func (tables) ListTables(context.Context, *adminv1.ListTablesRequest) (*adminv1.ListTablesResponse, error) {
	return &adminv1.ListTablesResponse{Tables: []*adminv1.Table{{Name: "events"}}}, nil
}
func (tables) DescribeTable(context.Context, *adminv1.DescribeTableRequest) (*adminv1.DescribeTableResponse, error) {
	return &adminv1.DescribeTableResponse{}, nil
}
func (tables) AlterTable(_ context.Context, r *adminv1.AlterTableRequest) (*adminv1.AlterTableResponse, error) {
	return nil, apierr.Invalid("changes[0]", "widen %q: string cannot become long", r.GetName())
}

func (tables) ResetTable(_ context.Context, r *adminv1.ResetTableRequest) (*adminv1.ResetTableResponse, error) {
	return &adminv1.ResetTableResponse{Table: &adminv1.Table{Name: r.GetName()}}, nil
}

func TestTablesErrorsMapped(t *testing.T) {
	db := migrated(t)
	noLeaks(t)
	a := startNode(t, db, "a", lease.RoleFileServer, nil)
	startNode(t, db, "b", lease.RoleFileServer, tables{})
	ctx := context.Background()
	lt, err := a.client.ListTables(ctx, &adminv1.ListTablesRequest{Node: "b"})
	if err != nil || lt.GetTables()[0].GetName() != "events" {
		t.Errorf("ListTables through a: %v %v", lt, err)
	}
	_, err = a.client.CreateTable(ctx, &adminv1.CreateTableRequest{Node: "b"})
	if status.Code(err) != codes.InvalidArgument || badField(err) != "name" {
		t.Errorf("CreateTable without name: %v", err)
	}
	_, err = a.client.CreateTable(ctx, &adminv1.CreateTableRequest{Node: "b", Name: "events"})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("CreateTable of an existing table: %v", err)
	}
	_, err = a.client.AlterTable(ctx, &adminv1.AlterTableRequest{Node: "b", Name: "events"})
	if status.Code(err) != codes.InvalidArgument || badField(err) != "changes[0]" {
		t.Errorf("AlterTable forwarded: %v", err)
	}
	_, err = a.client.DropTable(ctx, &adminv1.DropTableRequest{Node: "b", Name: "events"})
	// An unclassified error is Internal, never Unknown, and its text (SQL, paths) stays in
	// the log of the node that failed: the client gets a request id.
	if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "request id") {
		t.Errorf("DropTable: %v", err)
	}
}

// noLeaks checks, after the test's later cleanups (its nodes) have run, that no goroutine
// it started is left.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func badField(err error) string {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}
