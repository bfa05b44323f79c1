// Package bench is Mink's benchmark harness (issue 10): each measurement runs beside a
// baseline in the same run, on the same data and the same machine, and is reported as a
// ratio to it, so that a noisy or slow machine moves both and the ratio stays meaningful.
//
// What runs where:
//   - Postgres is a private throwaway cluster (pkg/pgtest) unless a URL is given; each
//     measurement gets a fresh database.
//   - Kafka is franz-go's kfake in this process unless brokers are given.
//   - Mink's roles run as real processes of their released binaries (mink-indexer,
//     mink-writer, mink-fileserver), built once per run, exactly as an operator runs them.
//   - The Schema Registry of items 9 and 10 is franz-go's srfake in this process.
//   - Baselines and the in-process parts of Mink (pkg/rangefile builds, the coordination
//     simulation, item 11's assembly planner over simulated time) run in this process.
//
// The harness is a main package (bench/cmd/minkbench) and never runs under go test: the
// tests here check the report's arithmetic and rendering, that the bare loops of the
// Schema Registry items decode the rows Mink's decoders do, and item 11 over five
// simulated minutes; they start nothing.
package bench
