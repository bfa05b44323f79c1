package tables_test

import (
	"errors"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/tables"
)

func TestLiveProps(t *testing.T) {
	p, err := tables.ParseProps(nil)
	if err != nil || !p.LiveLoad || p.LiveTTL != 15*time.Minute || p.LiveMaxRecords != 1_000_000 || p.LiveMaxBytes != 64<<20 || p.LiveReuse != 100*time.Millisecond {
		t.Fatalf("defaults %+v %v", p, err)
	}
	p, err = tables.ParseProps(map[string]string{tables.PropLiveLoad: "false", tables.PropLiveTTL: "2m",
		tables.PropLiveMaxRecords: "500", tables.PropLiveMaxBytes: "1048576", tables.PropLiveReuseMs: "0"})
	if err != nil || p.LiveLoad || p.LiveTTL != 2*time.Minute || p.LiveMaxRecords != 500 || p.LiveMaxBytes != 1<<20 || p.LiveReuse != 0 {
		t.Fatalf("set %+v %v", p, err)
	}
	for k, v := range map[string]string{tables.PropLiveLoad: "maybe", tables.PropLiveTTL: "10ms", tables.PropLiveMaxRecords: "0", tables.PropLiveMaxBytes: "-1",
		tables.PropLiveReuseMs: "60001"} {
		_, err := tables.ParseProps(map[string]string{k: v})
		var e *apierr.Error
		if apierr.Classify(err) != apierr.InvalidArgument || !errors.As(err, &e) || e.Field != `properties["`+k+`"]` {
			t.Errorf("%s=%s: %v, want InvalidArgument naming the property", k, v, err)
		}
	}
}

// Every property the README documents is checked when set, naming the key.
func TestEveryDocumentedPropertyIsValidated(t *testing.T) {
	bad := map[string]string{
		tables.PropRangeTargetBytes:                  "12",
		tables.PropRangeMaxAge:                       "forever",
		tables.PropCommitInterval:                    "-1s",
		tables.PropAssemblyTargetBytes:               "-1",
		tables.PropAssemblyTierFiles:                 "1",
		tables.PropMaintenanceInterval:               "0s",
		tables.PropHistoryMaxSnapshots:               "0",
		"history.expire.min-snapshots-to-keep":       "-5",
		"history.expire.max-snapshot-age-ms":         "0",
		"commit.manifest.min-count-to-merge":         "many",
		"commit.manifest.target-size-bytes":          "1",
		"commit.manifest-merge.enabled":              "yes please",
		"write.metadata.previous-versions-max":       "0",
		"write.metadata.delete-after-commit.enabled": "2",
		"mink.range.max_age":                         "10s", // a typo
	}
	for k, v := range bad {
		_, err := tables.ParseProps(map[string]string{k: v, "owner": "data-eng"})
		var e *apierr.Error
		if apierr.Classify(err) != apierr.InvalidArgument || !errors.As(err, &e) || e.Field != `properties["`+k+`"]` {
			t.Errorf("%s=%s: %v, want InvalidArgument naming the property", k, v, err)
		}
	}
	p, err := tables.ParseProps(map[string]string{tables.PropAssemblyTargetBytes: "4096", tables.PropMaintenanceInterval: "2s",
		tables.PropAssemblyTierFiles: "8", "history.expire.min-snapshots-to-keep": "3", "owner": "anyone",
		"write.metadata.delete-after-commit.enabled": "false"})
	if err != nil || p.AssemblyTargetBytes != 4096 || p.MaintenanceInterval != 2*time.Second || p.AssemblyTierFiles != 8 {
		t.Fatalf("good values: %+v %v", p, err)
	}
	// With a bad key, the good ones still count (Table.Props reads stored properties).
	p, err = tables.ParseProps(map[string]string{tables.PropRangeMaxAge: "3s", "mink.nope": "1"})
	if err == nil || p.RangeMaxAge != 3*time.Second {
		t.Fatalf("partial: %+v %v", p, err)
	}
}
