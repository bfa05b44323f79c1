// Command mink-writer runs a writer node: it holds the writer lease of each table it prefers most and
// does that table's commits, assembly, statistics, expiry and collection.
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
	"github.com/minkhq/mink/services/writer/internal/writer"
)

const name = "mink-writer"

func main() {
	cfg := node.Config{Role: lease.RoleWriter, Setup: func(d node.Deps) (node.Parts, error) {
		w, err := writer.New(d.DB, d.Kafka, d.Meter, d.Logger)
		if err != nil {
			return node.Parts{}, err
		}
		return node.Parts{Workers: map[lease.Kind]lease.Worker{lease.KindWriter: w.Work}}, nil
	}}
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
