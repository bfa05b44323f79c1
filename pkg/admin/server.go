// Package admin serves mink.admin.v1.AdminService on every node: this node's status, the
// cluster's members and leases, draining, and table administration through Tables. A
// request whose `node` names another node is forwarded to it (see forward.go) with the
// caller's credentials, so the target authorizes the original caller; handlers here only
// translate between proto and the lease library and return domain errors, which apierr
// maps to gRPC codes. Who may call what is decided at the node's gRPC door (pkg/auth),
// before a handler runs; table-level checks are the Tables implementation's.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/history"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/peers"
	"github.com/minkhq/mink/pkg/pg"
)

// Tables is table administration, implemented by the tables package (issue 4). It gets
// requests meant for this node (forwarding is done) and returns domain errors.
type Tables interface {
	CreateTable(context.Context, *adminv1.CreateTableRequest) (*adminv1.CreateTableResponse, error)
	DropTable(context.Context, *adminv1.DropTableRequest) (*adminv1.DropTableResponse, error)
	ListTables(context.Context, *adminv1.ListTablesRequest) (*adminv1.ListTablesResponse, error)
	DescribeTable(context.Context, *adminv1.DescribeTableRequest) (*adminv1.DescribeTableResponse, error)
	AlterTable(context.Context, *adminv1.AlterTableRequest) (*adminv1.AlterTableResponse, error)
	ResetTable(context.Context, *adminv1.ResetTableRequest) (*adminv1.ResetTableResponse, error)
}

// Topics is Kafka topic administration (pkg/tableadmin): making the topic a table is
// made of. It gets requests meant for this node and returns domain errors.
type Topics interface {
	CreateTopic(context.Context, *adminv1.CreateTopicRequest) (*adminv1.CreateTopicResponse, error)
	ListTopics(context.Context, *adminv1.ListTopicsRequest) (*adminv1.ListTopicsResponse, error)
}

// Options builds a Server.
type Options struct {
	Leases *lease.Manager // this node's membership and leases
	DB     pg.DB          // the cluster's Postgres
	Tables Tables         // nil: table RPCs answer Unimplemented
	Topics Topics         // nil: topic RPCs answer Unimplemented
	// Figures are the role-specific figures GetStatus reports (nil: none).
	Figures func() map[string]string
	// History is the node's ring of samples GetHistory reports (nil: none).
	History *history.Ring
	// DialOptions are added to every forwarding connection: pkg/node's (telemetry
	// handlers, the node's peer token, TLS when configured).
	DialOptions []grpc.DialOption
	// ForwardTimeout bounds a forwarded call whose caller set no deadline (default 30s).
	ForwardTimeout time.Duration
	Meter          metric.Meter // nil: no metrics
	Logger         *slog.Logger
}

// Server is the AdminService of one node.
type Server struct {
	adminv1.UnimplementedAdminServiceServer
	self    string
	leases  *lease.Manager
	db      pg.DB
	tables  Tables
	topics  Topics
	figures func() map[string]string
	history *history.Ring
	log     *slog.Logger
	peers   *peers.Pool

	forwardTimeout time.Duration
	forwarded      metric.Int64Counter
}

// New builds the server. Close it after the gRPC server has stopped, to close the
// forwarding connections.
func New(o Options) (*Server, error) {
	if o.Leases == nil || o.DB == nil {
		return nil, errors.New("admin: Leases and DB are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Meter == nil {
		o.Meter = noop.NewMeterProvider().Meter("")
	}
	if o.ForwardTimeout <= 0 {
		o.ForwardTimeout = 30 * time.Second
	}
	fwd, err := o.Meter.Int64Counter("mink.admin.forwarded",
		metric.WithDescription("Admin requests forwarded to the node they name, by method, target node and result code."),
		metric.WithUnit("{request}"))
	if err != nil {
		return nil, fmt.Errorf("admin: metrics: %w", err)
	}
	self := o.Leases.Config().NodeID
	return &Server{
		self:           self,
		leases:         o.Leases,
		db:             o.DB,
		tables:         o.Tables,
		topics:         o.Topics,
		figures:        o.Figures,
		history:        o.History,
		log:            o.Logger,
		peers:          peers.New(o.DialOptions...),
		forwardTimeout: o.ForwardTimeout,
		forwarded:      fwd,
	}, nil
}

// Register adds the service to g.
func (s *Server) Register(g grpc.ServiceRegistrar) { adminv1.RegisterAdminServiceServer(g, s) }

// Close closes the connections used to forward requests.
func (s *Server) Close() error { return s.peers.Close() }

func (s *Server) GetStatus(ctx context.Context, req *adminv1.GetStatusRequest) (*adminv1.GetStatusResponse, error) {
	return serve(s, ctx, adminv1.AdminService_GetStatus_FullMethodName, req, s.getStatus)
}

func (s *Server) ListNodes(ctx context.Context, req *adminv1.ListNodesRequest) (*adminv1.ListNodesResponse, error) {
	return serve(s, ctx, adminv1.AdminService_ListNodes_FullMethodName, req, s.listNodes)
}

func (s *Server) ListLeases(ctx context.Context, req *adminv1.ListLeasesRequest) (*adminv1.ListLeasesResponse, error) {
	return serve(s, ctx, adminv1.AdminService_ListLeases_FullMethodName, req, s.listLeases)
}

func (s *Server) DrainNode(ctx context.Context, req *adminv1.DrainNodeRequest) (*adminv1.DrainNodeResponse, error) {
	if req.GetNode() == "" {
		return nil, apierr.GRPC(apierr.Invalid("node", "required: name the node to drain"))
	}
	return serve(s, ctx, adminv1.AdminService_DrainNode_FullMethodName, req, s.drainNode)
}

func (s *Server) UndrainNode(ctx context.Context, req *adminv1.UndrainNodeRequest) (*adminv1.UndrainNodeResponse, error) {
	if req.GetNode() == "" {
		return nil, apierr.GRPC(apierr.Invalid("node", "required: name the node to undrain"))
	}
	return serve(s, ctx, adminv1.AdminService_UndrainNode_FullMethodName, req, s.undrainNode)
}

func (s *Server) CreateTable(ctx context.Context, req *adminv1.CreateTableRequest) (*adminv1.CreateTableResponse, error) {
	return serve(s, ctx, adminv1.AdminService_CreateTable_FullMethodName, req,
		func(ctx context.Context, req *adminv1.CreateTableRequest) (*adminv1.CreateTableResponse, error) {
			if s.tables == nil {
				return nil, errNoTables
			}
			return s.tables.CreateTable(ctx, req)
		})
}

func (s *Server) DropTable(ctx context.Context, req *adminv1.DropTableRequest) (*adminv1.DropTableResponse, error) {
	return serve(s, ctx, adminv1.AdminService_DropTable_FullMethodName, req,
		func(ctx context.Context, req *adminv1.DropTableRequest) (*adminv1.DropTableResponse, error) {
			if s.tables == nil {
				return nil, errNoTables
			}
			return s.tables.DropTable(ctx, req)
		})
}

func (s *Server) ResetTable(ctx context.Context, req *adminv1.ResetTableRequest) (*adminv1.ResetTableResponse, error) {
	return serve(s, ctx, adminv1.AdminService_ResetTable_FullMethodName, req,
		func(ctx context.Context, req *adminv1.ResetTableRequest) (*adminv1.ResetTableResponse, error) {
			if s.tables == nil {
				return nil, errNoTables
			}
			return s.tables.ResetTable(ctx, req)
		})
}

func (s *Server) ListTables(ctx context.Context, req *adminv1.ListTablesRequest) (*adminv1.ListTablesResponse, error) {
	return serve(s, ctx, adminv1.AdminService_ListTables_FullMethodName, req,
		func(ctx context.Context, req *adminv1.ListTablesRequest) (*adminv1.ListTablesResponse, error) {
			if s.tables == nil {
				return nil, errNoTables
			}
			return s.tables.ListTables(ctx, req)
		})
}

func (s *Server) DescribeTable(ctx context.Context, req *adminv1.DescribeTableRequest) (*adminv1.DescribeTableResponse, error) {
	return serve(s, ctx, adminv1.AdminService_DescribeTable_FullMethodName, req,
		func(ctx context.Context, req *adminv1.DescribeTableRequest) (*adminv1.DescribeTableResponse, error) {
			if s.tables == nil {
				return nil, errNoTables
			}
			return s.tables.DescribeTable(ctx, req)
		})
}

func (s *Server) AlterTable(ctx context.Context, req *adminv1.AlterTableRequest) (*adminv1.AlterTableResponse, error) {
	return serve(s, ctx, adminv1.AdminService_AlterTable_FullMethodName, req,
		func(ctx context.Context, req *adminv1.AlterTableRequest) (*adminv1.AlterTableResponse, error) {
			if s.tables == nil {
				return nil, errNoTables
			}
			return s.tables.AlterTable(ctx, req)
		})
}

func (s *Server) CreateTopic(ctx context.Context, req *adminv1.CreateTopicRequest) (*adminv1.CreateTopicResponse, error) {
	return serve(s, ctx, adminv1.AdminService_CreateTopic_FullMethodName, req,
		func(ctx context.Context, req *adminv1.CreateTopicRequest) (*adminv1.CreateTopicResponse, error) {
			if s.topics == nil {
				return nil, errNoTopics
			}
			return s.topics.CreateTopic(ctx, req)
		})
}

func (s *Server) ListTopics(ctx context.Context, req *adminv1.ListTopicsRequest) (*adminv1.ListTopicsResponse, error) {
	return serve(s, ctx, adminv1.AdminService_ListTopics_FullMethodName, req,
		func(ctx context.Context, req *adminv1.ListTopicsRequest) (*adminv1.ListTopicsResponse, error) {
			if s.topics == nil {
				return nil, errNoTopics
			}
			return s.topics.ListTopics(ctx, req)
		})
}

func (s *Server) GetHistory(ctx context.Context, req *adminv1.GetHistoryRequest) (*adminv1.GetHistoryResponse, error) {
	return serve(s, ctx, adminv1.AdminService_GetHistory_FullMethodName, req, s.getHistory)
}

// errNoTables, errNoTopics: a node built without table administration (tests of the
// lease API).
var (
	errNoTables = apierr.New(apierr.Unimplemented, "this node serves no table administration")
	errNoTopics = apierr.New(apierr.Unimplemented, "this node serves no topic administration")
)

func (s *Server) getStatus(ctx context.Context, _ *adminv1.GetStatusRequest) (*adminv1.GetStatusResponse, error) {
	m := s.leases
	cfg := m.Config()
	st := m.Stats()
	resp := &adminv1.GetStatusResponse{
		NodeId:    cfg.NodeID,
		Roles:     rolesPB(cfg.Roles),
		Version:   cfg.Version,
		StartedAt: timePB(m.StartedAt()),
		GrpcAddr:  cfg.GRPCAddr,
		Addrs:     cfg.Addrs,
		Draining:  m.Draining(),
		Acting:    m.Acting(),
		LeaseTtl:  durationpb.New(cfg.TTL),
		// What this node's gRPC door found: a forwarded GetStatus reports the target's.
		AuthEnabled: auth.EnabledIn(ctx),
		LeaseStats: &adminv1.LeaseStats{
			Rounds: st.Rounds, FailedRounds: st.Failed, Statements: st.Statements,
			Acquired: st.Acquired, Released: st.Released, Lost: st.Lost,
			RowsRead: st.RowsRead, RowsWritten: st.RowsWritten,
		},
	}
	if err := m.LastError(); err != nil {
		resp.LastError = apierr.Message(err)
	}
	p := auth.FromContext(ctx)
	for _, l := range m.Held() {
		if canSee(p, l.TableName) {
			resp.Leases = append(resp.Leases, leasePB(l.Scope, l.TableName, l.Holder, l.Epoch, l.Expires))
		}
	}
	if s.figures != nil {
		resp.Figures = s.figures()
	}
	return resp, nil
}

// getHistory is the node's samples: a reader sees its tables' series and the node's own.
func (s *Server) getHistory(ctx context.Context, _ *adminv1.GetHistoryRequest) (*adminv1.GetHistoryResponse, error) {
	resp := &adminv1.GetHistoryResponse{NodeId: s.self}
	if s.history == nil {
		return resp, nil
	}
	resp.Interval = durationpb.New(s.history.Interval())
	p := auth.FromContext(ctx)
	for _, h := range s.history.Snapshot(func(table string) bool { return canSee(p, table) }) {
		out := &adminv1.Series{Name: h.Name, Table: h.Table, Values: h.Values}
		for _, t := range h.Times {
			out.Times = append(out.Times, timestamppb.New(t))
		}
		resp.Series = append(resp.Series, out)
	}
	return resp, nil
}

func (s *Server) listNodes(ctx context.Context, _ *adminv1.ListNodesRequest) (*adminv1.ListNodesResponse, error) {
	members, err := lease.ListMembers(ctx, s.db)
	if err != nil {
		return nil, apierr.Postgres(err, "list nodes")
	}
	resp := &adminv1.ListNodesResponse{}
	for _, m := range members {
		resp.Nodes = append(resp.Nodes, nodePB(m))
	}
	return resp, nil
}

func (s *Server) listLeases(ctx context.Context, req *adminv1.ListLeasesRequest) (*adminv1.ListLeasesResponse, error) {
	if req.GetTableId() < 0 {
		return nil, apierr.Invalid("table_id", "must be a table id, or 0 for every table (got %d)", req.GetTableId())
	}
	infos, err := lease.ListLeases(ctx, s.db, req.GetTableId())
	if err != nil {
		return nil, apierr.Postgres(err, "list leases")
	}
	resp := &adminv1.ListLeasesResponse{}
	p := auth.FromContext(ctx)
	for _, i := range infos {
		if canSee(p, i.TableName) {
			resp.Leases = append(resp.Leases, leasePB(i.Scope, i.TableName, i.Holder, i.Epoch, i.Expires))
		}
	}
	return resp, nil
}

// canSee reports whether principal p may see the leases of table "namespace.name": a
// reader sees only its tables' (their names are what it may read).
func canSee(p *auth.Principal, table string) bool {
	ns, name, _ := strings.Cut(table, ".")
	return p.CanRead(ns, name)
}

// drainNode drains this node and waits, within the call's deadline and one lease_ttl,
// until it holds no lease, so an operator can start maintenance when it returns empty.
func (s *Server) drainNode(ctx context.Context, _ *adminv1.DrainNodeRequest) (*adminv1.DrainNodeResponse, error) {
	s.leases.SetDraining(true)
	s.log.InfoContext(ctx, "draining: releasing every lease and taking none")
	// Answer once a round begun after the flag has released the leases in Postgres, so
	// the caller can rely on them being free (a round already under way may not have).
	ctx, cancel := context.WithTimeout(ctx, s.leases.Config().TTL)
	defer cancel()
	if err := s.leases.AwaitRound(ctx); err != nil {
		s.log.WarnContext(ctx, "drain: no round completed in time; leases are released at the next one", "error", err)
	}
	resp := &adminv1.DrainNodeResponse{NodeId: s.self, Draining: s.leases.Draining()}
	for _, l := range s.leases.Held() {
		resp.Leases = append(resp.Leases, leasePB(l.Scope, l.TableName, l.Holder, l.Epoch, l.Expires))
	}
	return resp, nil
}

func (s *Server) undrainNode(ctx context.Context, _ *adminv1.UndrainNodeRequest) (*adminv1.UndrainNodeResponse, error) {
	s.leases.SetDraining(false)
	s.log.InfoContext(ctx, "undrained: taking a share of leases again")
	return &adminv1.UndrainNodeResponse{NodeId: s.self, Draining: s.leases.Draining()}, nil
}

// --- proto conversions ---

var rolePB = map[lease.Role]adminv1.Role{
	lease.RoleIndexer: adminv1.Role_ROLE_INDEXER, lease.RoleWriter: adminv1.Role_ROLE_WRITER,
	lease.RoleFileServer: adminv1.Role_ROLE_FILESERVER,
}

func rolesPB(rs []lease.Role) []adminv1.Role {
	out := make([]adminv1.Role, 0, len(rs))
	for _, r := range rs {
		out = append(out, rolePB[r]) // an unknown role shows as ROLE_UNSPECIFIED
	}
	return out
}

var kindPB = map[lease.Kind]adminv1.LeaseKind{
	lease.KindPartition: adminv1.LeaseKind_LEASE_KIND_PARTITION, lease.KindWriter: adminv1.LeaseKind_LEASE_KIND_WRITER,
}

func leasePB(s lease.Scope, table, holder string, epoch int64, expires time.Time) *adminv1.Lease {
	return &adminv1.Lease{
		Kind: kindPB[s.Kind], TableId: s.Table, TableName: table, Partition: s.Partition,
		Holder: holder, Epoch: epoch, ExpiresAt: timePB(expires),
	}
}

func nodePB(m lease.Member) *adminv1.Node {
	return &adminv1.Node{
		NodeId: m.NodeID, Roles: rolesPB(m.Roles), GrpcAddr: m.GRPCAddr, Addrs: m.Addrs,
		Version: m.Version, Draining: m.Draining, StartedAt: timePB(m.StartedAt),
		RenewedAt: timePB(m.RenewedAt), ExpiresAt: timePB(m.ExpiresAt),
	}
}

// timePB leaves a zero time unset, so "never" is not shown as 1970 or year 1.
func timePB(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
