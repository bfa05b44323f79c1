// Command mink-indexer runs an indexer node: it takes its share of the partition leases of every table
// (the seed's sharing rules) and indexes each partition it holds into offset ranges.
package main

import (
	"os"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
	"github.com/minkhq/mink/services/indexer/config"
	"github.com/minkhq/mink/services/indexer/internal/indexer"
)

func main() {
	var rc config.Config
	cfg := node.Config{Role: lease.RoleIndexer, RoleConfig: &rc, Setup: func(d node.Deps) (node.Parts, error) {
		ix, err := indexer.New(indexer.Options{DB: d.DB, Kafka: d.Kafka, Codecs: d.Codecs, Meter: d.Meter, Logger: d.Logger,
			BuildMemory: int64(rc.BuildMemory)})
		if err != nil {
			return node.Parts{}, err
		}
		return node.Parts{Workers: map[lease.Kind]lease.Worker{lease.KindPartition: ix.Work}, Figures: ix.Figures,
			MaxPartitions: rc.MaxPartitions}, nil
	}}
	os.Exit(node.Main("mink-indexer", cfg, os.Args[1:], os.Exit))
}
