package admin_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	filev1 "github.com/minkhq/mink/gen/mink/file/v1"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/history"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/tableadmin"
	"github.com/minkhq/mink/pkg/tablecodec"
)

const (
	authClusterSecret = "0123456789abcdef0123456789abcdef-cluster"
	authReaderSecret  = "etl-secret-0123456789"
	authAdminSecret   = "ops-secret-0123456789"
)

// authConfig is the cluster's auth config: etl reads shop.*, ops is admin. With
// etlAdmin, etl is an admin: a node that has not reloaded the config yet, mid-rollout.
func authConfig(t *testing.T, etlAdmin bool) *auth.Authority {
	t.Helper()
	etl := auth.PrincipalConfig{ID: "etl", Secret: authReaderSecret, Role: auth.RoleReader, Tables: []string{"shop.*"}}
	if etlAdmin {
		etl = auth.PrincipalConfig{ID: "etl", Secret: authReaderSecret, Role: auth.RoleAdmin}
	}
	a, err := auth.New(&auth.File{ClusterSecret: authClusterSecret, Principals: []auth.PrincipalConfig{
		etl, {ID: "ops", Secret: authAdminSecret, Role: auth.RoleAdmin},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fileService answers every read with who it was served to: a stand-in for the file
// server's, to show who gets through the door.
type fileService struct {
	filev1.UnimplementedFileServiceServer
	node string
}

func (f fileService) ReadFile(_ *filev1.ReadFileRequest, s grpc.ServerStreamingServer[filev1.ReadFileResponse]) error {
	return s.Send(&filev1.ReadFileResponse{Part: &filev1.ReadFileResponse_Info{Info: &filev1.FileInfo{
		ServedBy: f.node + " for " + auth.FromContext(s.Context()).ID}}})
}

// authClient is a connection to a node with the calls a client makes.
type authClient struct {
	admin adminv1.AdminServiceClient
	files filev1.FileServiceClient
}

func dialNode(t *testing.T, addr string, opts ...grpc.DialOption) authClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return authClient{admin: adminv1.NewAdminServiceClient(conn), files: filev1.NewFileServiceClient(conn)}
}

// as is ctx with a bearer token, as grpcurl -H 'authorization: Bearer …' sends it.
func as(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

// clusterState is what a refused call must leave as it was: the tables, their leases and
// the index, as rows of text.
func clusterState(t *testing.T, db *pgxpool.Pool) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT id, namespace, name, topic, partitions, properties::text FROM mink_tables ORDER BY id`,
		`SELECT kind, table_id, partition, coalesce(holder, ''), epoch FROM mink_leases ORDER BY table_id, kind, partition`,
		`SELECT table_id, partition FROM mink_partitions ORDER BY table_id, partition`,
		`SELECT count(*) FROM mink_ranges`,
		`SELECT count(*) FROM mink_data_files`,
		`SELECT node_id, draining FROM mink_members ORDER BY node_id`,
	} {
		rows, err := db.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestAuthAdminAPI: nodes with the cluster's auth config. A reader lists and describes
// (only its tables) but cannot create, drop, alter or drain, directly or through another
// node; an admin can; no token or a bad one is Unauthenticated; a forwarded call is
// authorized by its target as its original caller; the file service takes peers only.
// Every refused call leaves the tables, leases and index as they were.
func TestAuthAdminAPI(t *testing.T) {
	db := migrated(t)
	noLeaks(t)
	kc := kafkatest.New(t, kafkatest.Brokers(1))
	kc.CreateTopic("orders", 2, nil)
	kc.CreateTopic("hidden", 1, nil)
	kafka, err := kafkasrc.New(kc.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	svc := &tableadmin.Service{DB: db, Kafka: kafka, Codecs: tablecodec.New(db, nil)}
	cfg := authConfig(t, false)

	a := startNodeWith(t, db, "a", lease.RoleFileServer, nodeOptions{tables: svc, auth: cfg, files: fileService{node: "a"}})
	// b's history has records of both tables.
	reg := prometheus.NewRegistry()
	recs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mink_indexer_records_total"}, []string{"table"})
	reg.MustRegister(recs)
	recs.WithLabelValues("shop.orders").Add(3)
	recs.WithLabelValues("default.hidden").Add(4)
	hist := history.New(reg, history.Sources, 0, 0)
	hist.Sample(time.Now())
	b := startNodeWith(t, db, "b", lease.RoleIndexer, nodeOptions{tables: svc, auth: cfg, files: fileService{node: "b"}, history: hist})
	// stale: etl is still an admin in its config (a reload not yet applied); its door
	// lets etl's drain through, b's refuses it.
	stale := startNodeWith(t, db, "stale", lease.RoleFileServer, nodeOptions{tables: svc, auth: authConfig(t, true)})
	// open: a node with auth off, forwarding whatever it is sent.
	open := startNodeWith(t, db, "open", lease.RoleFileServer, nodeOptions{tables: svc})
	ca, cStale, cOpen := dialNode(t, a.addr), dialNode(t, stale.addr), dialNode(t, open.addr)
	reader, admin, nobody := as(authReaderSecret), as(authAdminSecret), context.Background()

	// The admin creates two tables; the reader may read only shop.orders.
	for _, req := range []*adminv1.CreateTableRequest{
		{Namespace: "shop", Name: "orders", Topic: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW},
		{Namespace: "default", Name: "hidden", Topic: "hidden", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW},
	} {
		if _, err := ca.admin.CreateTable(admin, req); err != nil {
			t.Fatalf("admin creates %s.%s: %v", req.GetNamespace(), req.GetName(), err)
		}
	}
	await.For(t, 10*time.Second, "b to hold the 3 partition leases", func() (int, bool) {
		n := 0
		for _, l := range b.mgr.Held() {
			if l.Kind == lease.KindPartition {
				n++
			}
		}
		return n, n == 3
	})

	// The reader reads: status (which says auth is on), nodes, leases, its tables.
	for _, node := range []string{"", "b"} {
		st, err := ca.admin.GetStatus(reader, &adminv1.GetStatusRequest{Node: node})
		if err != nil || !st.GetAuthEnabled() {
			t.Errorf("reader's GetStatus(node=%q): %v %v", node, st, err)
		}
		if _, err := ca.admin.ListNodes(reader, &adminv1.ListNodesRequest{Node: node}); err != nil {
			t.Errorf("reader's ListNodes(node=%q): %v", node, err)
		}
		// Only its tables' leases: shop.orders's writer lease and its two partitions'.
		if ls, err := ca.admin.ListLeases(reader, &adminv1.ListLeasesRequest{Node: node}); err != nil || len(ls.GetLeases()) != 3 {
			t.Errorf("reader's ListLeases(node=%q): %v %v", node, ls, err)
		}
		lt, err := ca.admin.ListTables(reader, &adminv1.ListTablesRequest{Node: node})
		if err != nil || len(lt.GetTables()) != 1 || lt.GetTables()[0].GetName() != "orders" {
			t.Errorf("reader's ListTables(node=%q): %v %v", node, lt, err)
		}
		if d, err := ca.admin.DescribeTable(reader, &adminv1.DescribeTableRequest{Node: node, Namespace: "shop", Name: "orders"}); err != nil || len(d.GetPartitions()) != 2 {
			t.Errorf("reader's DescribeTable(node=%q) of shop.orders: %v %v", node, d, err)
		}
	}
	// GetHistory of b, through a: the reader gets its table's series only.
	for who, want := range map[context.Context][]string{reader: {"shop.orders"}, admin: {"default.hidden", "shop.orders"}} {
		h, err := ca.admin.GetHistory(who, &adminv1.GetHistoryRequest{Node: "b"})
		var got []string
		for _, s := range h.GetSeries() {
			got = append(got, s.GetTable())
		}
		if err != nil || h.GetNodeId() != "b" || !slices.Equal(got, want) {
			t.Errorf("GetHistory of b: %v %v, want the series of %v", got, err, want)
		}
	}
	if lt, err := ca.admin.ListTables(admin, &adminv1.ListTablesRequest{}); err != nil || len(lt.GetTables()) != 2 {
		t.Errorf("admin's ListTables: %v %v", lt, err)
	}
	if st, err := cOpen.admin.GetStatus(nobody, &adminv1.GetStatusRequest{}); err != nil || st.GetAuthEnabled() {
		t.Errorf("GetStatus of the node with auth off: %v %v", st, err)
	}

	before := clusterState(t, db)
	refused := []struct {
		name string
		call func() error
		code codes.Code
		want []string
	}{
		{"no token", func() error { _, err := ca.admin.GetStatus(nobody, &adminv1.GetStatusRequest{}); return err },
			codes.Unauthenticated, []string{"authorization: Bearer"}},
		{"no token, drop", func() error {
			_, err := ca.admin.DropTable(nobody, &adminv1.DropTableRequest{Namespace: "shop", Name: "orders"})
			return err
		}, codes.Unauthenticated, []string{"DropTable", "authorization: Bearer"}},
		{"wrong secret", func() error {
			_, err := ca.admin.ListNodes(as("not-anyones-secret-at-all"), &adminv1.ListNodesRequest{})
			return err
		},
			codes.Unauthenticated, []string{"bearer token"}},
		{"reader describes another table", func() error {
			_, err := ca.admin.DescribeTable(reader, &adminv1.DescribeTableRequest{Name: "hidden"})
			return err
		}, codes.PermissionDenied, []string{`"etl"`, "default.hidden"}},
		{"reader describes another table, forwarded", func() error {
			_, err := ca.admin.DescribeTable(reader, &adminv1.DescribeTableRequest{Node: "b", Name: "hidden"})
			return err
		}, codes.PermissionDenied, []string{`"etl"`, "default.hidden"}},
		{"reader creates", func() error {
			_, err := ca.admin.CreateTable(reader, &adminv1.CreateTableRequest{Namespace: "shop", Name: "more", Topic: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW})
			return err
		}, codes.PermissionDenied, []string{`"etl"`, "CreateTable", "role admin"}},
		{"reader drops", func() error {
			_, err := ca.admin.DropTable(reader, &adminv1.DropTableRequest{Namespace: "shop", Name: "orders"})
			return err
		}, codes.PermissionDenied, []string{`"etl"`, "DropTable", "role admin"}},
		{"reader drops, forwarded", func() error {
			_, err := ca.admin.DropTable(reader, &adminv1.DropTableRequest{Node: "b", Namespace: "shop", Name: "orders"})
			return err
		}, codes.PermissionDenied, []string{"DropTable", "role admin"}},
		{"reader alters", func() error {
			_, err := ca.admin.AlterTable(reader, &adminv1.AlterTableRequest{Namespace: "shop", Name: "orders", SetProperties: map[string]string{"x": "y"}})
			return err
		}, codes.PermissionDenied, []string{"AlterTable", "role admin"}},
		{"reader drains b", func() error { _, err := ca.admin.DrainNode(reader, &adminv1.DrainNodeRequest{Node: "b"}); return err },
			codes.PermissionDenied, []string{`"etl"`, "DrainNode", "role admin"}},
		{"reader drains a", func() error { _, err := ca.admin.DrainNode(reader, &adminv1.DrainNodeRequest{Node: "a"}); return err },
			codes.PermissionDenied, []string{"DrainNode"}},
		{"reader undrains b", func() error {
			_, err := ca.admin.UndrainNode(reader, &adminv1.UndrainNodeRequest{Node: "b"})
			return err
		},
			codes.PermissionDenied, []string{"UndrainNode"}},
		// The forwarding node lets these through (its config says etl is an admin, or it
		// has auth off): the target authorizes the original caller with its own config.
		{"reader drains b through a node that thinks it an admin", func() error {
			_, err := cStale.admin.DrainNode(reader, &adminv1.DrainNodeRequest{Node: "b"})
			return err
		}, codes.PermissionDenied, []string{`"etl"`, "role reader", "DrainNode"}},
		{"reader drops through a node that thinks it an admin", func() error {
			_, err := cStale.admin.DropTable(reader, &adminv1.DropTableRequest{Node: "b", Namespace: "shop", Name: "orders"})
			return err
		}, codes.PermissionDenied, []string{`"etl"`, "role reader", "DropTable"}},
		{"reader drains b through a node with auth off", func() error {
			_, err := cOpen.admin.DrainNode(reader, &adminv1.DrainNodeRequest{Node: "b"})
			return err
		}, codes.PermissionDenied, []string{`"etl"`, "DrainNode"}},
		{"no token drains b through a node with auth off", func() error {
			_, err := cOpen.admin.DrainNode(nobody, &adminv1.DrainNodeRequest{Node: "b"})
			return err
		}, codes.Unauthenticated, []string{"DrainNode", "authorization: Bearer"}},
		// The file service: peers only.
		{"admin reads a file", func() error { return readFile(ca.files, admin) },
			codes.PermissionDenied, []string{"internal service: cluster nodes only"}},
		{"reader reads a file", func() error { return readFile(ca.files, reader) },
			codes.PermissionDenied, []string{"internal service: cluster nodes only"}},
		{"no token reads a file", func() error { return readFile(ca.files, nobody) },
			codes.Unauthenticated, []string{"cluster nodes only", auth.MetadataPeer}},
		{"a foreign cluster's peer reads a file", func() error {
			foreign, err := auth.New(&auth.File{ClusterSecret: strings.Repeat("f", 40)})
			if err != nil {
				t.Fatal(err)
			}
			c := dialNode(t, a.addr, grpc.WithPerRPCCredentials(auth.NewPeerCredentials(foreign, "intruder")))
			return readFile(c.files, nobody)
		}, codes.Unauthenticated, []string{"peer token", "not signed by this cluster"}},
		{"a peer calls the admin API with its token alone", func() error {
			c := dialNode(t, a.addr, grpc.WithPerRPCCredentials(auth.NewPeerCredentials(cfg, "a")))
			_, err := c.admin.DrainNode(nobody, &adminv1.DrainNodeRequest{Node: "b"})
			return err
		}, codes.Unauthenticated, []string{"principal's credentials"}},
	}
	for _, c := range refused {
		err := c.call()
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %v", c.name, err, c.code)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(status.Convert(err).Message(), w) {
				t.Errorf("%s: message %q does not mention %q", c.name, status.Convert(err).Message(), w)
			}
		}
	}
	if b.mgr.Draining() || a.mgr.Draining() {
		t.Fatal("a refused drain drained a node")
	}
	if after := clusterState(t, db); after != before {
		t.Errorf("refused calls changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// A peer reads files; so does anyone when auth is off.
	peer := dialNode(t, a.addr, grpc.WithPerRPCCredentials(auth.NewPeerCredentials(cfg, "b")))
	if by, err := servedBy(peer.files, nobody); err != nil || by != "a for node:b" {
		t.Errorf("peer's read: %q %v", by, err)
	}

	// The admin drains b through a: the call reaches b as ops's.
	dr, err := ca.admin.DrainNode(admin, &adminv1.DrainNodeRequest{Node: "b"})
	if err != nil || !dr.GetDraining() || dr.GetNodeId() != "b" || len(dr.GetLeases()) != 0 {
		t.Fatalf("admin's DrainNode(b) through a: %v %v", dr, err)
	}
	if _, err := ca.admin.UndrainNode(admin, &adminv1.UndrainNodeRequest{Node: "b"}); err != nil || b.mgr.Draining() {
		t.Fatalf("admin's UndrainNode(b) through a: %v", err)
	}
	if _, err := ca.admin.DropTable(admin, &adminv1.DropTableRequest{Node: "b", Name: "hidden"}); err != nil {
		t.Fatalf("admin's DropTable through a: %v", err)
	}
	if lt, err := ca.admin.ListTables(admin, &adminv1.ListTablesRequest{}); err != nil || len(lt.GetTables()) != 1 {
		t.Errorf("tables after the admin's drop: %v %v", lt, err)
	}
}

func readFile(c filev1.FileServiceClient, ctx context.Context) error {
	_, err := servedBy(c, ctx)
	return err
}

func servedBy(c filev1.FileServiceClient, ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := c.ReadFile(ctx, &filev1.ReadFileRequest{Key: "shop/orders/data/x.parquet", InfoOnly: true})
	if err != nil {
		return "", err
	}
	var by string
	for {
		m, err := s.Recv()
		if err == io.EOF {
			return by, nil
		}
		if err != nil {
			return "", err
		}
		by = m.GetInfo().GetServedBy()
	}
}
