package node_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/pgtest"
)

// collector is an OTLP trace receiver that keeps what it is sent.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans map[string]string // span name -> service.name
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.spans[sp.GetName()] = service
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// TestTracesExportedOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, a node's spans reach
// the collector (flushed at the latest when the node stops), named for the RPC and
// carrying the role as service.name.
func TestTracesExportedOverOTLP(t *testing.T) {
	_, url := pgtest.DB(t)
	col := &collector{spans: map[string]string{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, col)
	go gs.Serve(lis)
	defer gs.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")

	cfg, err := parse(t, lease.RoleWriter, []string{"--node-id", "tr1", "--postgres-url", url, "--kafka-brokers", "127.0.0.1:9",
		"--grpc-addr", "127.0.0.1:0", "--lease-ttl", "1500ms"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	_, conn, stop := runNode(t, cfg)
	if _, err := adminv1.NewAdminServiceClient(conn).GetStatus(context.Background(), &adminv1.GetStatusRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	found := false
	for name, service := range col.spans {
		if strings.Contains(name, "mink.admin.v1.AdminService/GetStatus") {
			found = true
			if service != "mink-writer" {
				t.Errorf("span %s from service %q, want mink-writer", name, service)
			}
		}
	}
	if !found {
		t.Fatalf("no GetStatus span exported; got %v", col.spans)
	}
}
