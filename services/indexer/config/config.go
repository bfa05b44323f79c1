// Package config is the indexer's own configuration: the flags mink-indexer adds to
// every node's (pkg/node), registered here and nowhere else. It sits outside internal/ so
// the deployment checks (deploy/deploytest) can read a deployment's values as the role does.
package config

import (
	"errors"
	"flag"

	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/node"
)

// DefaultBuildMemory is an indexer's --build-memory unless told otherwise.
const DefaultBuildMemory = 128 << 20

// Config is the indexer's flags; it is the pkg/node RoleConfig of mink-indexer.
type Config struct {
	MaxPartitions int // most partition leases the node takes (0: no cap)
	// BuildMemory bounds the finished Parquet pages that an indexer's range builds keep
	// in memory, all partitions together; beyond it they wait in temporary files
	// (pkg/parquetbuild.Pages).
	BuildMemory flagenv.Bytes
}

// RegisterFlags adds the indexer's flags to fs, with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.MaxPartitions, "max-partitions", 0, "most partition leases this node holds (0: no cap)")
	c.BuildMemory = DefaultBuildMemory
	fs.Var(&c.BuildMemory, "build-memory", "most bytes of finished Parquet pages the range builds of all partitions keep in memory; beyond it they wait in temporary files in $TMPDIR (same files, bounded memory): 128MiB, 1GiB, ...")
}

// Validate checks every value and reports each bad one naming its flag.
func (c *Config) Validate() error {
	var errs []error
	if c.BuildMemory < 0 {
		errs = append(errs, flagenv.Errorf("build-memory", "must not be negative"))
	}
	if c.MaxPartitions < 0 {
		errs = append(errs, flagenv.Errorf("max-partitions", "%d is negative (0 means no cap)", c.MaxPartitions))
	}
	return errors.Join(errs...)
}

var _ node.RoleConfig = (*Config)(nil)
