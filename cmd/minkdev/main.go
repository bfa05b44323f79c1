// Command minkdev runs a whole Mink cluster on this machine (make dev): a private
// PostgreSQL, an embedded Kafka broker and an embedded Schema Registry (port 8081) under
// .tmp/dev, two indexers, a writer and two file servers as separate processes, and two
// demo topics with a steady stream each: JSON events as the table default.demo, and Avro
// orders (subject demo_avro-value) as default.demo_avro, whose schema gains a field after
// --demo-avro-evolve-after orders.
//
// Design notes: docs/design/minkdev.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/minkhq/mink/pkg/devcluster"
	"github.com/minkhq/mink/pkg/flagenv"
)

const name = "minkdev"

func main() {
	var cfg devcluster.Config
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed once, below
	cfg.RegisterFlags(fs)
	src, err := flagenv.Parse(fs, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fmt.Printf("Usage of %s (every flag also reads MINK_<FLAG>, e.g. MINK_POSTGRES_URL):\n", name)
		fs.PrintDefaults()
		os.Exit(0)
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, src.Explain(err))
		os.Exit(2)
	}

	// The first signal stops the cluster in order; a second one cuts the wait short.
	ctx, cancel := context.WithCancel(context.Background())
	force := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		// One Ctrl-C can arrive twice (a signal to the process and to its group, as
		// timeout(1) sends): only a signal a moment later is a second request.
		first := time.Now()
		for range sigs {
			if time.Since(first) > time.Second {
				fmt.Fprintln(os.Stderr, name+": second signal: killing the roles")
				close(force)
				return
			}
		}
	}()
	if err := devcluster.Run(ctx, cfg, os.Stdout, force); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, src.Explain(err))
		os.Exit(1)
	}
}
