// Command minkbench runs Mink's benchmarks beside their baselines (issue 10) and writes
// the results table into docs/benchmarks.md. Sizes are flags; the defaults finish within
// 10 minutes on 2 cores.
//
//	go run ./bench/cmd/minkbench                      # everything, into docs/benchmarks.md
//	go run ./bench/cmd/minkbench -items 1,2 -out -    # indexing and builds, to stdout
//	go run ./bench/cmd/minkbench -items 9,10          # Avro and Protobuf indexing; other results kept
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minkhq/mink/bench"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "minkbench:", err)
		os.Exit(1)
	}
}

type intList []int

func (l *intList) String() string {
	var s []string
	for _, n := range *l {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not a comma-separated list of numbers", v)
		}
		*l = append(*l, n)
	}
	return nil
}

func run(args []string) error {
	c := bench.DefaultConfig()
	var (
		out, pgURL, brokers, binDir, work string
		verbose, replace                  bool
	)
	fs := flag.NewFlagSet("minkbench", flag.ContinueOnError)
	fs.StringVar(&out, "out", "docs/benchmarks.md", `Markdown file to write the results into (between its minkbench markers), "-" for stdout`)
	fs.Var((*intList)(&c.Items), "items", "items to run, comma-separated (1 indexing, 2 builds, 3 cached reads, 4 table loads, 5 freshness, 6 scans, 7 coordination, 8 failover, "+
		"9 indexing Avro, 10 indexing Protobuf, 11 small files, 12 unknown keys, 13 memory, 14 concurrent live loads, 15 upsert beside append, 16 indexer memory at scale); a run of some items keeps the other items' results in -out")
	fs.StringVar(&pgURL, "postgres-url", "", "admin URL of a Postgres to use (default: a private throwaway cluster)")
	fs.StringVar(&brokers, "kafka-brokers", "", "comma-separated Kafka brokers to use (default: kfake in this process)")
	fs.StringVar(&binDir, "bin-dir", "", "folder with prebuilt mink-indexer, mink-writer, mink-fileserver (default: build them)")
	fs.StringVar(&work, "work", "", "folder for logs, binaries and CPU profiles (default: a temporary folder)")
	fs.StringVar(&c.ProfileDir, "profile-dir", "", "folder for CPU profiles (default: <work>/profiles)")
	fs.StringVar(&c.Compression, "compression", c.Compression, "producer compression of the benchmark topics: none, snappy, lz4, zstd")
	fs.IntVar(&c.Reps, "reps", c.Reps, "repetitions of each measurement; the best is reported")
	fs.IntVar(&c.OneRecords, "one-records", c.OneRecords, "records in the one-partition topic (items 1, 2, 3, 6)")
	fs.IntVar(&c.Partitions, "partitions", c.Partitions, "partitions of the all-partitions topic (item 1)")
	fs.IntVar(&c.PartitionRecords, "partition-records", c.PartitionRecords, "records per partition of the all-partitions topic (item 1)")
	fs.IntVar(&c.AvroRecords, "avro-records", c.AvroRecords, "records in the Avro topic (item 9)")
	fs.IntVar(&c.ProtoRecords, "proto-records", c.ProtoRecords, "records in the Protobuf topic (item 10)")
	fs.Var((*intList)(&c.Procs), "procs", "indexer process counts for all partitions (item 1)")
	fs.Int64Var(&c.RangeBytes, "range-bytes", c.RangeBytes, "mink.range.target-bytes of the benchmark tables")
	fs.DurationVar(&c.RangeMaxAge, "range-max-age", c.RangeMaxAge, "mink.range.max-age of the benchmark tables")
	fs.DurationVar(&c.IndexTTL, "index-ttl", c.IndexTTL, "lease_ttl of the indexing processes (items 1, 2, 9, 10)")
	fs.Var((*intList)(&c.FS.LoadFiles), "load-files", "data file counts of the table-load tables (item 4)")
	fs.IntVar(&c.FS.Loads, "loads", c.FS.Loads, "table loads timed per table (item 4)")
	fs.Int64Var(&c.FS.TailBytes, "tail-bytes", c.FS.TailBytes, "bytes of unindexed tail for the live load (item 4)")
	fs.IntVar(&c.FS.Reads, "reads", c.FS.Reads, "GETs timed per path (item 3)")
	fs.IntVar(&c.FS.FreshSamples, "fresh-samples", c.FS.FreshSamples, "records timed from produce to visible (item 5)")
	fs.Var((*intList)(&c.CoordNodes), "coord-nodes", "simulated node counts (item 7)")
	fs.IntVar(&c.CoordTables, "coord-tables", c.CoordTables, "tables of the coordination simulation (item 7)")
	fs.IntVar(&c.CoordPartitions, "coord-partitions", c.CoordPartitions, "partitions per table of the coordination simulation (item 7)")
	fs.IntVar(&c.CoordSteadyPasses, "coord-steady-passes", c.CoordSteadyPasses, "steady passes (one round of every node) measured at least (item 7)")
	fs.IntVar(&c.CoordSteadyRounds, "coord-steady-rounds", c.CoordSteadyRounds, "node rounds measured in the steady state at least: more passes for small clusters (item 7)")
	fs.IntVar(&c.CoordCheckPartitions, "coord-check-partitions", c.CoordCheckPartitions, "partitions of one more steady run at the smallest cluster size, to compare with -coord-partitions; 0 skips it (item 7)")
	fs.IntVar(&c.FailoverTrials, "failover-trials", c.FailoverTrials, "SIGKILLs (item 8)")
	fs.DurationVar(&c.FailoverTTL, "failover-ttl", c.FailoverTTL, "lease_ttl of the failover processes (item 8; the seed's default is 30s)")
	fs.IntVar(&c.FailoverPartitions, "failover-partitions", c.FailoverPartitions, "partitions of the failover topic (item 8)")
	fs.DurationVar(&c.FailoverMaxAge, "failover-range-max-age", c.FailoverMaxAge, "mink.range.max-age of the failover table (item 8)")
	fs.Var((*intList)(&c.AssemblyMinutes), "assembly-minutes", "simulated minutes of the demo table at its default rate, comma-separated (item 11)")
	fs.IntVar(&c.Live.Clients, "live-clients", c.Live.Clients, "concurrent clients of the live-load burst (item 14)")
	fs.DurationVar(&c.Live.Duration, "live-duration", c.Live.Duration, "how long the live-load burst lasts (item 14)")
	fs.IntVar(&c.Live.Rate, "live-rate", c.Live.Rate, "records per second produced during the live-load burst (item 14)")
	fs.DurationVar(&c.Live.Steady, "live-steady", c.Live.Steady, "how long the paced live-load run lasts, each client loading every -live-every (item 14; 0: not run; the issue's goal: 5m)")
	fs.DurationVar(&c.Live.Every, "live-every", c.Live.Every, "how often each client of the paced live-load run loads (item 14)")
	fs.IntVar(&c.Upsert.Records, "upsert-records", c.Upsert.Records, "records of the keyed topic, over its partitions (item 15)")
	fs.IntVar(&c.Upsert.Keys, "upsert-keys", c.Upsert.Keys, "distinct keys of the keyed topic (item 15)")
	fs.Var((*intList)(&c.Scale.Leases), "scale-leases", "partition leases of one indexer, one run each (item 16; the issue's goal: 10000)")
	fs.IntVar(&c.Scale.Records, "scale-records", c.Scale.Records, "records produced to each partition before it is indexed (item 16)")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "bound on the whole run")
	fs.BoolVar(&replace, "replace", false, "rewrite -out's whole generated section, even when -items leaves out items whose results it holds (default: keep them)")
	fs.BoolVar(&verbose, "v", false, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var bl []string
	if brokers != "" {
		bl = strings.Split(brokers, ",")
	}
	env, err := bench.NewEnv(ctx, bench.EnvConfig{PostgresURL: pgURL, KafkaBrokers: bl, BinDir: binDir, Work: work, Log: log})
	if err != nil {
		return err
	}
	defer env.Close()
	start := time.Now()
	r := bench.Run(ctx, env, c)
	r.Command = "go run ./bench/cmd/minkbench " + strings.Join(args, " ")
	r.Replace = replace
	log.Info("done", "took", time.Since(start).Round(time.Second), "work", env.Work)
	if out == "-" {
		fmt.Print(r.Markdown())
		return nil
	}
	if err := r.WriteDoc(out); err != nil {
		fmt.Print(r.Markdown()) // the results are not lost
		return err
	}
	fmt.Fprintf(os.Stderr, "minkbench: wrote %s (%s; logs and profiles in %s)\n", out, time.Since(start).Round(time.Second), env.Work)
	return nil
}
