// Package fileserver is the file-server role: the Iceberg REST catalog and the S3 API on
// their own listeners, and the internal file service on the node's gRPC server, over one
// read path (files) with one disk cache. The role's process (pkg/node) runs the gRPC
// server and the node's membership; this package adds what only file servers do.
package fileserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/filecache"
	"github.com/minkhq/mink/pkg/httplimit"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/services/fileserver/internal/catalog"
	"github.com/minkhq/mink/services/fileserver/internal/files"
	"github.com/minkhq/mink/services/fileserver/internal/live"
	"github.com/minkhq/mink/services/fileserver/internal/s3api"
)

// Options configure a Server.
type Options struct {
	NodeID string // this node's id, as registered in the members table
	DB     pg.DB  // the cluster's Postgres (a *pgxpool.Pool)
	Kafka  *kafkasrc.Client
	Codecs *tablecodec.Codecs // decoders of tables' files; nil: over DB, without a registry

	CatalogAddr string // listen address of the Iceberg REST catalog (":8181")
	S3Addr      string // listen address of the S3 API (":9000")
	// S3Endpoint is the URL engines reach this node's S3 API at, handed out in table
	// loads; empty: http://<this host>:<S3 port> (or the S3 listen address when it
	// names a host). Set it when clients reach the node through another name (a
	// Kubernetes Service, a published Docker port).
	S3Endpoint string
	Region     string // the S3 region engines are told; default us-east-1
	// Auth verifies the S3 API's signatures and who may read which table (and the
	// catalog's credentials); nil: auth off, every request is anonymous.
	Auth *auth.Authority

	// TLS is the server TLS config of the catalog and S3 listeners (pkg/node's
	// Deps.TLS); nil: plain HTTP. With it the default S3Endpoint is https://.
	TLS *tls.Config
	// HTTPLimits bound both HTTP servers (timeouts, header size, open connections);
	// zero fields take httplimit's defaults.
	HTTPLimits httplimit.Limits

	CacheDir   string // the disk cache's folder
	CacheBytes int64  // its bound

	// ShutdownTimeout is how long in-flight HTTP requests may run on after Run's ctx
	// ends (default 10s).
	ShutdownTimeout time.Duration
	// MemberRefresh is how often the member list is read (default 1s).
	MemberRefresh time.Duration
	// LookupTimeout bounds each Postgres read of a request (default 5s).
	LookupTimeout time.Duration
	// ProblemTTL is how long a file that cannot be rebuilt is refused without retrying
	// (default 1m).
	ProblemTTL time.Duration
	// WarmInterval is how often newly committed files are looked for and built into the
	// owner's cache before anyone reads them (files.Options.WarmInterval; default 1s,
	// negative: no warming).
	WarmInterval time.Duration
	// BuildConcurrency bounds the builds from Kafka that run at once, and BuildMemory
	// the finished Parquet pages they keep in memory together (files.Options; defaults
	// max(1, GOMAXPROCS) and files.DefaultBuildMemory; BuildMemory negative: none).
	BuildConcurrency int
	BuildMemory      int64
	// LiveTimeout bounds the live part of a table load: Kafka's offsets and the tail's
	// builds (default 30s).
	LiveTimeout time.Duration
	// PlanBatchFiles is how many file scan tasks one answer of server-side planning
	// holds (default 1000).
	PlanBatchFiles int

	// DialOptions are the node's options for calls to other nodes (pkg/node's
	// Deps.DialOptions: telemetry, the node's peer token, TLS), used for forwarded reads
	// and measures; nil: telemetry only (an otelgrpc client handler of the providers
	// below), which another file server with auth on refuses.
	DialOptions []grpc.DialOption

	// Telemetry; nil: the otel globals.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	Logger         *slog.Logger
}

// Server is one file server's own part. New binds its listeners and opens its cache;
// RegisterGRPC adds the file service to the node's gRPC server; Run serves.
type Server struct {
	o          Options
	log        *slog.Logger
	store      *files.Store
	live       *live.Loader
	cache      *filecache.Cache
	catalogLis net.Listener
	s3Lis      net.Listener
	s3Endpoint string
	catalog    http.Handler
	s3         http.Handler

	handlers sync.WaitGroup // HTTP handlers running: Run waits for every one
	runOnce  sync.Once
}

// New validates o, binds both listeners (so a taken port fails at start, and ":0"
// resolves before the S3 endpoint is advertised), and opens the cache, adopting the
// files a previous run left there. Run must follow, to close them.
func New(o Options) (_ *Server, err error) {
	if o.NodeID == "" || o.DB == nil || o.Kafka == nil {
		return nil, errors.New("fileserver: NodeID, DB and Kafka are required")
	}
	if o.CacheDir == "" || o.CacheBytes <= 0 {
		return nil, errors.New("fileserver: CacheDir and a positive CacheBytes are required")
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 10 * time.Second
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.Propagator == nil {
		o.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{o: o, log: o.Logger} // the node's: it carries "node" already

	if s.catalogLis, err = net.Listen("tcp", o.CatalogAddr); err != nil {
		return nil, fmt.Errorf("fileserver: catalog address: %w", err)
	}
	defer func() {
		if err != nil {
			s.catalogLis.Close()
		}
	}()
	if s.s3Lis, err = net.Listen("tcp", o.S3Addr); err != nil {
		return nil, fmt.Errorf("fileserver: S3 address: %w", err)
	}
	defer func() {
		if err != nil {
			s.s3Lis.Close()
		}
	}()
	s.s3Endpoint = o.S3Endpoint
	if s.s3Endpoint == "" {
		scheme := "http://"
		if o.TLS != nil {
			scheme = "https://"
		}
		s.s3Endpoint = scheme + advertised(s.s3Lis.Addr())
	}

	if s.cache, err = filecache.Open(o.CacheDir, o.CacheBytes, s.log); err != nil {
		return nil, fmt.Errorf("fileserver: cache: %w", err)
	}
	meter := o.MeterProvider.Meter("github.com/minkhq/mink/services/fileserver")
	otelOpts := []otelgrpc.Option{otelgrpc.WithMeterProvider(o.MeterProvider),
		otelgrpc.WithTracerProvider(o.TracerProvider), otelgrpc.WithPropagators(o.Propagator)}
	if o.Codecs == nil {
		o.Codecs = tablecodec.New(o.DB, nil)
	}
	dialOpts := o.DialOptions
	if dialOpts == nil {
		dialOpts = []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelOpts...))}
	}
	// One cache of upsert key hashes for delete files and live loads alike.
	keys := rangefile.NewKeyCache(0)
	if err := keys.Observe(meter, "mink.fileserver"); err != nil {
		return nil, err
	}
	s.store, err = files.New(files.Options{Codecs: o.Codecs, Keys: keys,
		NodeID: o.NodeID, DB: o.DB, Kafka: o.Kafka, Cache: s.cache,
		DialOptions:   dialOpts,
		MemberRefresh: o.MemberRefresh, LookupTimeout: o.LookupTimeout, ProblemTTL: o.ProblemTTL,
		WarmInterval: o.WarmInterval, BuildConcurrency: o.BuildConcurrency, BuildMemory: o.BuildMemory,
		Meter: meter, Logger: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	s.live, err = live.New(live.Options{DB: o.DB, Kafka: o.Kafka, Files: s.store, Codecs: o.Codecs, Keys: keys,
		LookupTimeout: o.LookupTimeout, Meter: meter, Logger: s.log})
	if err != nil {
		return nil, err
	}
	cat, err := catalog.New(catalog.Options{DB: o.DB, FileIO: catalog.S3Config(s.s3Endpoint, o.Region),
		LookupTimeout: o.LookupTimeout, Live: s.live, LiveTimeout: o.LiveTimeout, Auth: o.Auth,
		PlanBatchFiles: o.PlanBatchFiles, Logger: s.log})
	if err != nil {
		return nil, err
	}
	s3h, err := s3api.New(s3api.Options{Files: s.store, Auth: o.Auth, Region: o.Region, Meter: meter, Logger: s.log})
	if err != nil {
		return nil, err
	}
	// otelhttp starts each request's trace (or continues the client's), so the gRPC
	// call of a forwarded read is a child of the S3 request it serves.
	httpOpts := []otelhttp.Option{otelhttp.WithMeterProvider(o.MeterProvider),
		otelhttp.WithTracerProvider(o.TracerProvider), otelhttp.WithPropagators(o.Propagator)}
	s.catalog = otelhttp.NewHandler(cat, "iceberg-rest", append(httpOpts, catalogLabels())...)
	s.s3 = otelhttp.NewHandler(s3h, "s3", append(httpOpts, doorLabel("s3"), otelhttp.WithSpanNameFormatter(
		func(_ string, r *http.Request) string { return "s3 " + r.Method }))...)
	return s, nil
}

// doorLabel names the listener in its HTTP metrics (door="catalog" or "s3"): their
// ports differ from node to node, the door does not.
func doorLabel(door string) otelhttp.Option {
	attrs := []attribute.KeyValue{attribute.String("door", door)}
	//lint:ignore SA1019 a Labeler needs a middleware per door for the same attribute; kept until otelhttp removes this
	return otelhttp.WithMetricAttributesFn(func(*http.Request) []attribute.KeyValue { return attrs })
}

// catalogLabels are the catalog's doorLabel, and op="load_table" on table loads (GET
// .../namespaces/{ns}/tables/{table}): the loads a node's history charts (pkg/history).
func catalogLabels() otelhttp.Option {
	door := attribute.String("door", "catalog")
	plain, load := []attribute.KeyValue{door}, []attribute.KeyValue{door, attribute.String("op", "load_table")}
	//lint:ignore SA1019 as doorLabel's
	return otelhttp.WithMetricAttributesFn(func(r *http.Request) []attribute.KeyValue {
		parts := strings.Split(strings.TrimSuffix(r.URL.Path, "/"), "/")
		if r.Method == http.MethodGet && len(parts) >= 4 && parts[len(parts)-2] == "tables" && parts[len(parts)-4] == "namespaces" {
			return load
		}
		return plain
	})
}

// CatalogAddr and S3Addr are the bound listen addresses; S3Endpoint is the URL table
// loads hand to engines.
func (s *Server) CatalogAddr() net.Addr { return s.catalogLis.Addr() }
func (s *Server) S3Addr() net.Addr      { return s.s3Lis.Addr() }
func (s *Server) S3Endpoint() string    { return s.s3Endpoint }

// Stats are the read path's counters, and the cache's figures.
func (s *Server) Stats() (files.Stats, filecache.Stats) { return s.store.Stats(), s.cache.Stats() }

// LiveStats are the live loads' counters.
func (s *Server) LiveStats() live.Stats { return s.live.Stats() }

// Figures are the file server's figures for the admin API's GetStatus.
func (s *Server) Figures() map[string]string {
	st, cs := s.Stats()
	ls := s.live.Stats()
	rate := "n/a"
	if n := st.CacheHits + st.CacheMisses; n > 0 {
		rate = strconv.FormatFloat(float64(st.CacheHits)/float64(n), 'f', 3, 64)
	}
	return map[string]string{
		"catalog_addr": s.catalogLis.Addr().String(), "s3_endpoint": s.s3Endpoint,
		"cache_dir": s.o.CacheDir, "cache_files": strconv.Itoa(cs.Files),
		"cache_bytes": strconv.FormatInt(cs.Bytes, 10), "cache_bytes_limit": strconv.FormatInt(cs.Max, 10),
		"cache_hit_rate": rate, "builds": strconv.FormatInt(st.Builds, 10),
		"builds_running": strconv.FormatInt(s.store.BuildStats().Running, 10),
		"build_failures": strconv.FormatInt(st.BuildFailures, 10), "forwarded_reads": strconv.FormatInt(st.Forwarded, 10),
		"files_reported": strconv.FormatInt(st.Reported, 10), "files_warmed": strconv.FormatInt(s.store.WarmStats().Warmed, 10),
		"live_loads": strconv.FormatInt(ls.Loads, 10), "live_loads_reused": strconv.FormatInt(ls.Reused, 10),
		"live_load_failures": strconv.FormatInt(ls.Failed, 10), "tail_builds": strconv.FormatInt(st.TailBuilds, 10),
	}
}

// Owner returns the node that owns key now, and whether it is this one.
func (s *Server) Owner(key string) (node string, self bool) { return s.store.Owner(key) }

// Members are the file servers this node knows of now (the last list read), with their
// gRPC addresses.
func (s *Server) Members() map[string]string { return s.store.Members() }

// Addrs are the addresses to advertise in the members table ("catalog", "s3").
func (s *Server) Addrs() map[string]string {
	return map[string]string{"catalog": advertised(s.catalogLis.Addr()), "s3": s.s3Endpoint}
}

// RegisterGRPC adds mink.file.v1.FileService to the node's gRPC server, which must carry
// the otelgrpc server handler and apierr's interceptors as pkg/node's does.
func (s *Server) RegisterGRPC(gs *grpc.Server) { s.store.Register(gs) }

// Run serves the catalog and the S3 API, and keeps the member list fresh, until ctx ends
// or a listener fails. It then stops taking requests, lets those in flight finish within
// ShutdownTimeout (then cuts them), stops builds, closes connections to other nodes, and
// returns once every goroutine it started has ended. Call it once; stop the node's gRPC
// server after it returns, as forwarded reads into this node need the store until then.
func (s *Server) Run(ctx context.Context) error {
	err := errors.New("fileserver: Run called twice")
	s.runOnce.Do(func() { err = s.run(ctx) })
	return err
}

// catalogWriteTimeout bounds a catalog answer, from its request's header to its last
// byte: well above LiveTimeout's default, and a table's metadata is written in far less.
const catalogWriteTimeout = 2 * time.Minute

func (s *Server) run(ctx context.Context) error {
	defer s.catalogLis.Close()
	defer s.s3Lis.Close()
	// Every request's context ends when this does: after the shutdown deadline, so
	// handlers waiting on a build or a forwarded stream stop too.
	reqBase, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	// Both servers keep the node's limits (httplimit). The catalog's answers are small
	// and its slowest handler (a live load) is bounded by LiveTimeout: catalogWriteTimeout
	// covers any of them. S3 has no WriteTimeout: its GET handler moves the write
	// deadline per chunk it sends, so a large download is cut only when the client
	// stops taking bytes, never for being long.
	newServer := func(h http.Handler, writeTimeout time.Duration) *http.Server {
		srv := s.o.HTTPLimits.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.handlers.Add(1)
			defer s.handlers.Done()
			h.ServeHTTP(w, r)
		}), s.o.TLS, writeTimeout, s.log)
		srv.BaseContext = func(net.Listener) context.Context { return reqBase }
		return srv
	}
	catalogSrv, s3Srv := newServer(s.catalog, catalogWriteTimeout), newServer(s.s3, 0)
	s.log.Info("file server serving", "catalog_addr", s.catalogLis.Addr().String(),
		"s3_addr", s.s3Lis.Addr().String(), "s3_endpoint", s.s3Endpoint, "cache_dir", s.o.CacheDir,
		"cache_bytes", s.o.CacheBytes, "cached_files", s.cache.Stats().Files)

	g, gctx := errgroup.WithContext(ctx)
	// The first member list is read before serving, so the first requests go to their
	// owners; if Postgres is down this node serves what it has until it answers.
	s.store.RefreshMembers(gctx)
	g.Go(func() error { s.store.Run(gctx); return nil })
	serve := func(name string, run func() error) {
		g.Go(func() error {
			if err := run(); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("fileserver: serve %s: %w", name, err)
			}
			return nil
		})
	}
	serve("catalog", func() error { return s.o.HTTPLimits.Serve(catalogSrv, s.catalogLis) })
	// S3 XML errors for what net/http refuses before any handler (GET /mink/%ZZ): the
	// wrapper sees each connection's plaintext, above TLS.
	serve("S3", func() error {
		return s.o.HTTPLimits.ServeAbove(s3Srv, s.s3Lis, func(l net.Listener) net.Listener { return s3api.Listener(l, s.log) })
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), s.o.ShutdownTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, srv := range []*http.Server{catalogSrv, s3Srv} {
			wg.Go(func() {
				if err := srv.Shutdown(sctx); err != nil {
					s.log.Warn("requests outlived the shutdown timeout; cutting them", "shutdown_timeout", s.o.ShutdownTimeout.String())
					cancelReqs()
					srv.Close()
				}
			})
		}
		wg.Wait()
		return nil
	})
	err := g.Wait()
	cancelReqs()
	s.handlers.Wait()
	s.live.Close()
	if cerr := s.store.Close(); cerr != nil {
		s.log.Warn("closing connections to other file servers", "error", cerr)
	}
	if err != nil {
		s.log.Error("file server stopped", "error", err)
	} else {
		s.log.Info("file server stopped")
	}
	return err
}

// advertised is how others reach a listener: its own address, or this host's name with
// its port when it listens on every interface.
func advertised(a net.Addr) string {
	ta := a.(*net.TCPAddr)
	if ta.IP == nil || ta.IP.IsUnspecified() {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		return net.JoinHostPort(h, strconv.Itoa(ta.Port))
	}
	return ta.String()
}
