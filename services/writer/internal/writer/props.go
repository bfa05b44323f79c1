package writer

import (
	"fmt"
	"strconv"
	"time"

	"github.com/minkhq/mink/pkg/tables"
)

// Table properties the writer reads, besides tables.PropCommitInterval and Iceberg's own
// history.expire.* and commit.manifest.* (read by pkg/icebergmeta).
const (
	// PropAssemblyTargetBytes is the size assembly merges small files towards.
	PropAssemblyTargetBytes = "mink.assembly.target-bytes"
	// PropMaintenanceInterval is how often the writer reads Kafka's log start offsets
	// and runs expiry, assembly and collection.
	PropMaintenanceInterval = "mink.maintenance.interval"
)

// Defaults of the writer's properties.
const (
	DefaultAssemblyTargetBytes = 128 << 20
	DefaultMaintenanceInterval = time.Minute
)

// config is a table's writer settings.
type config struct {
	commitInterval time.Duration
	maintenance    time.Duration
	assemblyTarget int64
}

// configOf reads t's writer settings; a bad value of the writer's own keys (not
// validated at table creation) falls back to its default and is reported.
func configOf(t tables.Table) (config, []error) {
	c := config{
		commitInterval: t.Props().CommitInterval,
		maintenance:    DefaultMaintenanceInterval,
		assemblyTarget: DefaultAssemblyTargetBytes,
	}
	var bad []error
	if v, ok := t.Properties[PropAssemblyTargetBytes]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1024 || n > 1<<34 {
			bad = append(bad, fmt.Errorf("properties[%q]: want a byte count from 1024 to 17179869184, got %q", PropAssemblyTargetBytes, v))
		} else {
			c.assemblyTarget = n
		}
	}
	if v, ok := t.Properties[PropMaintenanceInterval]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Millisecond || d > 24*time.Hour {
			bad = append(bad, fmt.Errorf("properties[%q]: want a duration from 10ms to 24h, got %q", PropMaintenanceInterval, v))
		} else {
			c.maintenance = d
		}
	}
	return c, bad
}
