package node

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
)

// Main is a role process's main: flags with their MINK_* twins, validation, JSON logs, and
// Run until the first SIGTERM or SIGINT, which stops the node in order; a second one calls
// exit(1) at once. It returns the exit code: 0 after a clean stop, 2 for bad flags, 1
// when the node failed. cfg carries the role, its RoleConfig and its Setup; flags fill
// the rest.
func Main(name string, cfg Config, args []string, exit func(int)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed once, below
	src, err := cfg.Parse(fs, args, os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fmt.Printf("Usage of %s (every flag also reads MINK_<FLAG>, e.g. MINK_LEASE_TTL):\n", name)
		fs.PrintDefaults()
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	cfg.Logger = log
	n, err := New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, src.Explain(err))
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		log.Info("stop signal: shutting down; a second signal exits at once", "signal", sig.String())
		cancel()
		if sig, ok = <-sigs; ok {
			log.Warn("second stop signal: exiting now", "signal", sig.String())
			exit(1)
		}
	}()
	if err := n.Run(ctx); err != nil {
		return 1 // Run has logged why
	}
	return 0
}
