package writer

import (
	"time"

	"github.com/minkhq/mink/pkg/tables"
)

// Table properties the writer reads: tables.PropCommitInterval,
// PropAssemblyTargetBytes, PropAssemblyTierFiles and PropMaintenanceInterval (validated
// by tables.ParseProps), and Iceberg's own history.expire.* and commit.manifest.* (read
// by pkg/icebergmeta).
const (
	PropAssemblyTargetBytes = tables.PropAssemblyTargetBytes
	PropAssemblyTierFiles   = tables.PropAssemblyTierFiles
	PropMaintenanceInterval = tables.PropMaintenanceInterval
)

// config is a table's writer settings.
type config struct {
	commitInterval time.Duration
	maintenance    time.Duration
	assemblyTarget int64
	assemblyTier   int
}

// configOf reads t's writer settings. Properties are validated when set (CreateTable,
// AlterTable); one that is somehow bad keeps its default and is reported.
func configOf(t tables.Table) (config, []error) {
	p, err := tables.ParseProps(t.Properties)
	var bad []error
	if err != nil {
		bad = append(bad, err)
	}
	return config{commitInterval: p.CommitInterval, maintenance: p.MaintenanceInterval,
		assemblyTarget: p.AssemblyTargetBytes, assemblyTier: p.AssemblyTierFiles}, bad
}
