// Command mink-fileserver runs a file-server node: it holds no lease and serves the Iceberg REST catalog
// and the S3 API, with owner-forwarded, cached and verified builds of data files.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
	"github.com/minkhq/mink/services/fileserver/internal/fileserver"
)

const name = "mink-fileserver"

func main() {
	cfg := node.Config{Role: lease.RoleFileServer}
	cfg.Setup = func(d node.Deps) (node.Parts, error) {
		srv, err := fileserver.New(fileserver.Options{NodeID: d.NodeID, DB: d.DB, Kafka: d.Kafka,
			CatalogAddr: cfg.CatalogAddr, S3Addr: cfg.S3Addr, S3Endpoint: cfg.S3Endpoint,
			CacheDir: d.CacheDir, CacheBytes: int64(cfg.CacheBytes), ShutdownTimeout: cfg.ShutdownTimeout,
			MeterProvider: d.MeterProvider, TracerProvider: d.TracerProvider, Propagator: d.Propagator, Logger: d.Logger})
		if err != nil {
			return node.Parts{}, err
		}
		return node.Parts{Register: srv.RegisterGRPC, Actors: []func(context.Context) error{srv.Run},
			Addrs: srv.Addrs(), Figures: srv.Figures}, nil
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed once, below
	cfg.RegisterFlags(fs)
	src, err := flagenv.Parse(fs, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fmt.Printf("Usage of %s (every flag also reads MINK_<FLAG>, e.g. MINK_LEASE_TTL):\n", name)
		fs.PrintDefaults()
		os.Exit(0)
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, src.Explain(err))
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	cfg.Logger = log
	n, err := node.New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, src.Explain(err))
		os.Exit(1)
	}

	// The first SIGTERM or SIGINT stops the node in order; a second one exits at once.
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	go func() {
		log.Info("stop signal: shutting down; a second signal exits at once", "signal", (<-sigs).String())
		cancel()
		log.Warn("second stop signal: exiting now", "signal", (<-sigs).String())
		os.Exit(1)
	}()
	if err := n.Run(ctx); err != nil {
		os.Exit(1) // Run has logged why
	}
}
