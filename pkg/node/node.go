// Package node is what every role process shares: its configuration, its membership and
// leases, its gRPC server (admin, health, reflection) and its telemetry, run as one
// lifecycle. A role's main builds a Config, calls New and runs it until a signal.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/admin"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/console"
	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/history"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/tableadmin"
	"github.com/minkhq/mink/pkg/tablecodec"
)

// Node is one role process, with its listeners bound.
type Node struct {
	cfg        Config
	log        *slog.Logger
	id         string
	advertise  string
	grpcLis    net.Listener
	metricsLis net.Listener // nil when metrics are off
	consoleLis net.Listener // nil when the console is off
}

// New validates cfg and binds the listeners, so a taken port fails at start and ":0"
// resolves to the port other nodes are told. Run must follow, to close them.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Version == "" {
		cfg.Version = Version()
	}
	n := &Node{cfg: cfg}
	var err error
	if n.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, &flagenv.FlagError{Flag: "grpc-addr", Err: err}
	}
	if cfg.MetricsAddr != "" {
		if n.metricsLis, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			n.grpcLis.Close()
			return nil, &flagenv.FlagError{Flag: "metrics-addr", Err: err}
		}
	}
	if cfg.ConsoleAddr != "" {
		if n.consoleLis, err = net.Listen("tcp", cfg.ConsoleAddr); err != nil {
			n.grpcLis.Close()
			if n.metricsLis != nil {
				n.metricsLis.Close()
			}
			return nil, &flagenv.FlagError{Flag: "console-addr", Err: err}
		}
	}
	port := n.grpcLis.Addr().(*net.TCPAddr).Port
	n.id = cfg.NodeID
	if n.id == "" {
		n.id = sanitizeID(hostname()) + "-" + strconv.Itoa(port)
	}
	n.advertise = cfg.AdvertiseAddr
	if n.advertise == "" {
		n.advertise = advertised(n.grpcLis.Addr())
	}
	n.log = cfg.Logger
	if n.log == nil {
		n.log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	}
	n.log = n.log.With("role", string(cfg.Role))
	return n, nil
}

// ID is the node's id; GRPCAddr and MetricsAddr are the bound listen addresses
// (MetricsAddr is nil when metrics are off).
func (n *Node) ID() string            { return n.id }
func (n *Node) GRPCAddr() net.Addr    { return n.grpcLis.Addr() }
func (n *Node) AdvertiseAddr() string { return n.advertise }
func (n *Node) MetricsAddr() net.Addr {
	if n.metricsLis == nil {
		return nil
	}
	return n.metricsLis.Addr()
}

// ConsoleAddr is the console's bound listen address; nil when it is off.
func (n *Node) ConsoleAddr() net.Addr {
	if n.consoleLis == nil {
		return nil
	}
	return n.consoleLis.Addr()
}

// Run serves until ctx ends, then shuts down in order: health NOT_SERVING, leases
// released and the member row deleted, in-flight requests finished within
// --shutdown-timeout, then everything closed. Each listener and loop is one actor: if one
// fails, all stop, and Run returns the first error. Nothing it started outlives it.
func (n *Node) Run(ctx context.Context) error {
	defer n.grpcLis.Close()
	if n.metricsLis != nil {
		defer n.metricsLis.Close()
	}
	if n.consoleLis != nil {
		defer n.consoleLis.Close()
	}
	log := n.log.With("node", n.id)
	cfg := n.cfg

	// Telemetry: a private registry and providers, so several nodes can share a process
	// (tests) without mixing their figures.
	res := resource.NewSchemaless(
		attribute.String("service.name", "mink-"+string(cfg.Role)),
		attribute.String("service.instance.id", n.id),
		attribute.String("service.version", cfg.Version))
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return fmt.Errorf("node: metrics exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	defer mp.Shutdown(context.WithoutCancel(ctx))
	// Spans are made and propagated (a forwarded request is one trace across two nodes),
	// and exported over OTLP when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT names a collector.
	var texp sdktrace.SpanExporter
	if otlpConfigured() {
		// The standard OTEL_EXPORTER_OTLP_* variables say where and how; the exporter
		// connects lazily, so a collector that is down costs nothing but dropped spans.
		if texp, err = otlptracegrpc.New(ctx); err != nil {
			return fmt.Errorf("node: OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
		}
	}
	tp := newTracerProvider(res, texp)
	defer func() {
		// Flush what is batched, but never let a dead collector hold up the exit.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		tp.Shutdown(sctx)
	}()
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	otelOpts := []otelgrpc.Option{
		otelgrpc.WithMeterProvider(mp), otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(prop),
	}
	meter := mp.Meter("github.com/minkhq/mink/pkg/node")

	// pgxpool connects lazily: a node may start before Postgres and wait for it.
	dbURL, err := cfg.DatabaseURL()
	if err != nil {
		return err
	}
	pc, err := pgxpool.ParseConfig(dbURL.Reveal())
	if err != nil {
		return err // DatabaseURL checked it
	}
	// A transaction left idle for a whole lease_ttl (its process paused or cut off inside
	// a fenced write) is ended by Postgres: the lease row it locks, which takeover waits
	// for, is not held past that.
	if _, set := pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set && cfg.LeaseTTL > 0 {
		pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(cfg.LeaseTTL.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("node: postgres %s: %s", flagenv.RedactURL(dbURL.Reveal()), scrubPassword(err.Error(), dbURL.Reveal()))
	}
	defer pool.Close()
	// The lease rounds get connections of their own: a heartbeat queued behind the role's
	// statements (an indexer starting thousands of partitions at once) past lease_ttl
	// would lose every lease, and the partitions restart and queue again (issue 32).
	lc := pc.Copy()
	lc.MaxConns, lc.MinConns = leaseConns, 0
	leasePool, err := pgxpool.NewWithConfig(ctx, lc)
	if err != nil {
		return fmt.Errorf("node: postgres %s: %s", flagenv.RedactURL(dbURL.Reveal()), scrubPassword(err.Error(), dbURL.Reveal()))
	}
	defer leasePool.Close()

	// The Kafka client connects lazily too: roles wait out an unreachable Kafka.
	kc, err := kafkasrc.New(cfg.KafkaBrokers)
	if err != nil {
		return &flagenv.FlagError{Flag: "kafka-brokers", Err: err}
	}
	defer kc.Close()
	schemaReg, err := registry.New(cfg.Registry, registry.WithLogger(log))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	defer schemaReg.Close()
	codecs := tablecodec.New(pool, schemaReg)
	authority, err := auth.Load(cfg.AuthConfig, log)
	if err != nil {
		return &flagenv.FlagError{Flag: "auth-config", Err: err}
	}
	if authority == nil {
		log.Warn("AUTH IS OFF: no --auth-config (MINK_AUTH_CONFIG), so anyone who reaches this node may read every table, create and drop tables, and drain nodes; run it only on a private network")
	} else {
		log.Info("auth is on", "auth_config", cfg.AuthConfig, "principals", authority.Principals())
	}
	transport, err := newTransport(cfg, log)
	if err != nil {
		return err
	}
	dialOpts := append([]grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelOpts...))},
		peerDialOptions(authority, n.id, transport)...)
	var parts Parts
	if cfg.Setup != nil {
		if parts, err = cfg.Setup(Deps{Config: n.cfg, NodeID: n.id, AdvertiseAddr: n.advertise, DB: pool, Kafka: kc,
			Registry: schemaReg, Codecs: codecs, Auth: authority, TLS: transport.ServerTLS(),
			Meter: mp.Meter("github.com/minkhq/mink/" + string(cfg.Role)), Logger: log, DialOptions: dialOpts,
			MeterProvider: mp, TracerProvider: tp, Propagator: prop}); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}

	addrs := map[string]string{}
	for k, v := range parts.Addrs {
		addrs[k] = v
	}
	if n.metricsLis != nil {
		addrs["metrics"] = advertised(n.metricsLis.Addr())
	}
	if n.consoleLis != nil {
		addrs["console"] = advertised(n.consoleLis.Addr())
	}
	mgr, err := lease.NewManager(leasePool, lease.Config{
		NodeID: n.id, Roles: []lease.Role{cfg.Role}, GRPCAddr: n.advertise, Addrs: addrs,
		Version: cfg.Version, TTL: cfg.LeaseTTL, MaxPartitions: parts.MaxPartitions, Logger: n.log,
	})
	if err != nil {
		return err
	}
	var kinds []lease.Kind // the kinds of lease the role works under
	for _, workers := range []map[lease.Kind]lease.Worker{cfg.Workers, parts.Workers} {
		for kind, w := range workers {
			mgr.OnLease(kind, w)
			kinds = append(kinds, kind)
		}
	}
	adminSvc := &tableadmin.Service{DB: pool, Kafka: kc, Codecs: codecs}
	var tablesSvc admin.Tables = adminSvc
	if cfg.Tables != nil {
		tablesSvc = cfg.Tables
	}
	if err := leaseMetrics(meter, mgr); err != nil {
		return fmt.Errorf("node: metrics: %w", err)
	}
	// The node's own figures of the last minutes, from its metrics: what GetHistory
	// answers and the console charts.
	hist := history.New(reg, history.Sources, 0, 0)
	adm, err := admin.New(admin.Options{
		Leases: mgr, DB: pool, Tables: tablesSvc, Topics: adminSvc, Figures: figures(mgr, kinds, parts.MaxPartitions, parts.Figures), Meter: meter, Logger: log,
		DialOptions: dialOpts, History: hist,
	})
	if err != nil {
		return err
	}
	defer adm.Close()

	hs := health.NewServer()
	// NewServer starts SERVING; a node is not ready until it has registered.
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	// Errors are mapped last, so the auth interceptors' errors are mapped too. The
	// console's gateway calls the admin API through the same door.
	door := chainUnary(apierr.UnaryServerInterceptor(log), authUnaryInterceptor(authority))
	gs := grpc.NewServer(append([]grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelOpts...)),
		grpc.UnaryInterceptor(door),
		grpc.ChainStreamInterceptor(apierr.StreamServerInterceptor(log), authStreamInterceptor(authority)),
	}, transport.grpcServerOptions()...)...)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	adm.Register(gs)
	if parts.Register != nil {
		parts.Register(gs)
	}

	var metricsSrv *http.Server
	if n.metricsLis != nil {
		mux := http.NewServeMux()
		var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		if cfg.MetricsToken != "" || cfg.MetricsTokenFile != "" {
			// The metrics name every table: only a scraper with the token reads them.
			tok := &metricsToken{static: cfg.MetricsToken.Reveal(), path: cfg.MetricsTokenFile, log: log}
			h = auth.StaticBearer("mink metrics", tok.get, h)
		}
		mux.Handle("/metrics", h)
		metricsSrv = transport.httpServer(mux, log)
	}
	var consoleSrv *http.Server
	if n.consoleLis != nil {
		var catalogTLS func() *tls.Config // nil: plain HTTP
		if transport.client != nil {
			catalogTLS = transport.catalogTLS
		}
		con, err := console.New(console.Options{NodeID: n.id, Service: &adminv1.AdminService_ServiceDesc, Impl: adm,
			Interceptor: door, Auth: authority, TLS: transport.server != nil, CatalogTLS: catalogTLS, Logger: log})
		if err != nil {
			return fmt.Errorf("node: console: %w", err)
		}
		consoleSrv = transport.limits.Server(con, transport.ServerTLS(), console.WriteTimeout, log)
	}

	log.Info("starting", "grpc_addr", n.grpcLis.Addr().String(), "advertise_addr", n.advertise,
		"metrics_addr", addrs["metrics"], "console_addr", addrs["console"], "lease_ttl", cfg.LeaseTTL.String(), "version", cfg.Version,
		"postgres", flagenv.RedactURL(dbURL.Reveal()))

	g, gctx := errgroup.WithContext(ctx)
	// The lease actor has its own context: shutdown ends it only after health has gone
	// NOT_SERVING, and waits for it to release every lease before stopping gRPC.
	leaseCtx, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLeases()
	leasesDone := make(chan struct{})
	g.Go(func() error {
		defer close(leasesDone)
		return n.runLeases(leaseCtx, log, pool, mgr)
	})
	// Role actors (the file server's HTTP listeners, say) stop after the leases are
	// released and before gRPC drains.
	actorCtx, stopActors := context.WithCancel(context.WithoutCancel(ctx))
	defer stopActors()
	for _, run := range parts.Actors {
		g.Go(func() error {
			err := run(actorCtx)
			if err == nil && gctx.Err() == nil && actorCtx.Err() == nil {
				err = errors.New("node: a role actor stopped early")
			}
			return err
		})
	}
	if authority != nil {
		// Reloads on SIGHUP and when the file changes (a rotated Kubernetes Secret).
		g.Go(func() error { authority.Watch(actorCtx, 2*time.Second); return nil })
	}
	transport.watch(actorCtx, g)
	g.Go(func() error { schemaReg.WatchCA(actorCtx, certReloadInterval); return nil })
	g.Go(func() error { releaseMemoryAfterBursts(actorCtx, memCheckEvery); return nil })
	g.Go(func() error { hist.Run(actorCtx); return nil })
	g.Go(func() error {
		if err := gs.Serve(transport.listener(n.grpcLis)); err != nil {
			return fmt.Errorf("node: serve gRPC: %w", err)
		}
		return nil
	})
	if metricsSrv != nil {
		g.Go(func() error {
			if err := transport.serveHTTP(metricsSrv, n.metricsLis); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("node: serve metrics: %w", err)
			}
			return nil
		})
	}
	if consoleSrv != nil {
		g.Go(func() error {
			if err := transport.serveHTTP(consoleSrv, n.consoleLis); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("node: serve the console: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		// Ready once registered: the node is a member and takes its share of leases.
		// (Acting, not StartedAt: the lease library sets StartedAt before its
		// registration commits.)
		for {
			changed := mgr.Changed()
			if mgr.Acting() {
				break
			}
			select {
			case <-gctx.Done():
				return nil
			case <-changed:
			}
		}
		hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING) // a no-op after Shutdown
		log.Info("registered; serving")
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		log.Info("stopping: health NOT_SERVING, releasing leases, then draining requests")
		hs.Shutdown()
		stopLeases()
		<-leasesDone
		stopActors()
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		t := time.NewTimer(cfg.ShutdownTimeout)
		defer t.Stop()
		select {
		case <-stopped:
		case <-t.C:
			log.Warn("in-flight requests outlived --shutdown-timeout; stopping them", "shutdown_timeout", cfg.ShutdownTimeout.String())
			gs.Stop()
			<-stopped
		}
		for _, srv := range []*http.Server{metricsSrv, consoleSrv} {
			if srv == nil {
				continue
			}
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := srv.Shutdown(sctx); err != nil {
				srv.Close()
			}
			cancel()
		}
		return nil
	})
	err = g.Wait()
	if err != nil {
		log.Error("stopped", "error", err)
	} else {
		log.Info("stopped")
	}
	return err
}

// otlpConfigured reports whether the environment names an OTLP collector for traces.
// newTracerProvider exports spans to exp. Without an exporter no span is recorded (what
// nothing reads costs a few percent of every request's CPU), but every span still has
// its trace: a request's trace id goes on to the nodes it calls, and a caller's comes in.
func newTracerProvider(res *resource.Resource, exp sdktrace.SpanExporter) *sdktrace.TracerProvider {
	if exp == nil {
		return sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	return sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp))
}

func otlpConfigured() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// leaseConns bounds the lease manager's own connections: its rounds run one statement
// at a time, and a node leaving releases while the last round ends.
const leaseConns = 2

// runLeases applies the schema, then runs the node's membership and lease rounds until
// ctx ends. Postgres being unreachable at start is waited out, as the seed asks of an
// outage; any other migration failure (a newer schema, no permission) stops the node.
func (n *Node) runLeases(ctx context.Context, log *slog.Logger, pool *pgxpool.Pool, mgr *lease.Manager) error {
	for {
		err := pgschema.Migrate(ctx, pool)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if apierr.Classify(err) != apierr.Unavailable {
			return fmt.Errorf("node: %w", err)
		}
		log.Warn("postgres unavailable; retrying the schema migration", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(n.cfg.LeaseTTL / 3):
		}
	}
	if err := mgr.Run(ctx); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}

// figures are the node's figures of GetStatus: its lease counts, then the role's own.
func figures(mgr *lease.Manager, kinds []lease.Kind, maxPartitions int, role func() map[string]string) func() map[string]string {
	return func() map[string]string {
		out := leaseFigures(mgr, kinds, maxPartitions)
		if role != nil {
			for k, v := range role() {
				if out == nil {
					out = map[string]string{}
				}
				out[k] = v
			}
		}
		return out
	}
}

// leaseFigures count the leases the node holds of each kind it works under or holds
// ("partition_leases"), with the cap on partition leases beside their count.
func leaseFigures(mgr *lease.Manager, kinds []lease.Kind, maxPartitions int) map[string]string {
	count := map[lease.Kind]int{}
	for _, k := range kinds {
		count[k] = 0
	}
	for _, l := range mgr.Held() {
		count[l.Kind]++
	}
	if len(count) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, c := range count {
		out[string(k)+"_leases"] = strconv.Itoa(c)
	}
	if _, ok := count[lease.KindPartition]; ok {
		out["max_partitions"] = "none"
		if maxPartitions > 0 {
			out["max_partitions"] = strconv.Itoa(maxPartitions)
		}
	}
	return out
}

// leaseMetrics exports the lease manager's counters, read when /metrics is scraped.
func leaseMetrics(meter metric.Meter, mgr *lease.Manager) error {
	rounds, err1 := meter.Int64ObservableCounter("mink.lease.rounds",
		metric.WithDescription("Lease rounds run, by result (ok, failed)."), metric.WithUnit("{round}"))
	stmts, err2 := meter.Int64ObservableCounter("mink.lease.statements",
		metric.WithDescription("SQL statements sent for membership and leases."), metric.WithUnit("{statement}"))
	leaseRows, err7 := meter.Int64ObservableCounter("mink.lease.rows",
		metric.WithDescription("Rows the membership and lease statements read (returned) and wrote, by direction."), metric.WithUnit("{row}"))
	changes, err3 := meter.Int64ObservableCounter("mink.lease.changes",
		metric.WithDescription("Leases acquired, released and lost, by change."), metric.WithUnit("{lease}"))
	held, err4 := meter.Int64ObservableGauge("mink.lease.held",
		metric.WithDescription("Leases held and acted under now, by kind."), metric.WithUnit("{lease}"))
	acting, err5 := meter.Int64ObservableGauge("mink.node.acting",
		metric.WithDescription("1 while the node renewed recently enough to act under its leases."))
	draining, err6 := meter.Int64ObservableGauge("mink.node.draining",
		metric.WithDescription("1 while the node is draining."))
	free, err8 := meter.Int64ObservableGauge("mink.lease.free",
		metric.WithDescription("Leases no live node holds, by kind and table, as of this node's last lease round: partitions nobody indexes, tables nobody commits. Every node reports the same figures."),
		metric.WithUnit("{lease}"))
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7, err8); err != nil {
		return err
	}
	b := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	_, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := mgr.Stats()
		o.ObserveInt64(rounds, st.Rounds, metric.WithAttributes(attribute.String("result", "ok")))
		o.ObserveInt64(rounds, st.Failed, metric.WithAttributes(attribute.String("result", "failed")))
		o.ObserveInt64(stmts, st.Statements)
		o.ObserveInt64(leaseRows, st.RowsRead, metric.WithAttributes(attribute.String("direction", "read")))
		o.ObserveInt64(leaseRows, st.RowsWritten, metric.WithAttributes(attribute.String("direction", "written")))
		o.ObserveInt64(changes, st.Acquired, metric.WithAttributes(attribute.String("change", "acquired")))
		o.ObserveInt64(changes, st.Released, metric.WithAttributes(attribute.String("change", "released")))
		o.ObserveInt64(changes, st.Lost, metric.WithAttributes(attribute.String("change", "lost")))
		count := map[lease.Kind]int64{lease.KindPartition: 0, lease.KindWriter: 0}
		for _, l := range mgr.Held() {
			count[l.Kind]++
		}
		for k, c := range count {
			o.ObserveInt64(held, c, metric.WithAttributes(attribute.String("kind", string(k))))
		}
		o.ObserveInt64(acting, b(mgr.Acting()))
		o.ObserveInt64(draining, b(mgr.Draining()))
		for _, f := range mgr.Free() {
			o.ObserveInt64(free, int64(f.Free), metric.WithAttributes(
				attribute.String("kind", string(f.Kind)), attribute.String("table", f.TableName)))
		}
		return nil
	}, rounds, stmts, leaseRows, changes, held, acting, draining, free)
	return err
}

// advertised is how other nodes reach a listener: its own address, or this host's name
// with its port when it listens on every interface.
func advertised(a net.Addr) string {
	ta := a.(*net.TCPAddr)
	if ta.IP == nil || ta.IP.IsUnspecified() {
		return net.JoinHostPort(hostname(), strconv.Itoa(ta.Port))
	}
	return ta.String()
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

var notIDChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func sanitizeID(s string) string {
	s = notIDChars.ReplaceAllString(s, "-")
	if len(s) > 100 {
		s = s[:100]
	}
	return s
}

// Version is the binary's version from its build info: the module version of a release
// build, else the VCS revision, else "dev".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
