// Package bench is Mink's benchmark harness (issue 10): each measurement runs beside a
// baseline in the same run, on the same data and the same machine, and is reported as a
// ratio to it, so that a noisy or slow machine moves both and the ratio stays meaningful.
//
// The harness is a main package (bench/cmd/minkbench) and never runs under go test: the
// tests here check the report's arithmetic and rendering, that the bare loops of the
// Schema Registry items decode the rows Mink's decoders do, and item 11 over five
// simulated minutes; they start nothing.
//
// Design notes: docs/design/bench.md.
package bench
