// Command mink-writer runs a writer node: it holds the writer lease of each table it prefers most and
// does that table's commits, assembly, statistics, expiry and collection.
package main

import (
	"context"
	"os"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
	"github.com/minkhq/mink/services/writer/internal/writer"
)

func main() {
	cfg := node.Config{Role: lease.RoleWriter, Setup: func(d node.Deps) (node.Parts, error) {
		w, err := writer.New(writer.Options{DB: d.DB, Kafka: d.Kafka, Codecs: d.Codecs, Meter: d.Meter, Logger: d.Logger})
		if err != nil {
			return node.Parts{}, err
		}
		return node.Parts{Workers: map[lease.Kind]lease.Worker{lease.KindWriter: w.Work},
			Actors: []func(context.Context) error{w.WatchProblems}}, nil
	}}
	os.Exit(node.Main("mink-writer", cfg, os.Args[1:], os.Exit))
}
