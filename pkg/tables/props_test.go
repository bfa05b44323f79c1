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
	if err != nil || !p.LiveLoad || p.LiveTTL != 15*time.Minute || p.LiveMaxRecords != 1_000_000 || p.LiveMaxBytes != 64<<20 {
		t.Fatalf("defaults %+v %v", p, err)
	}
	p, err = tables.ParseProps(map[string]string{tables.PropLiveLoad: "false", tables.PropLiveTTL: "2m",
		tables.PropLiveMaxRecords: "500", tables.PropLiveMaxBytes: "1048576"})
	if err != nil || p.LiveLoad || p.LiveTTL != 2*time.Minute || p.LiveMaxRecords != 500 || p.LiveMaxBytes != 1<<20 {
		t.Fatalf("set %+v %v", p, err)
	}
	for k, v := range map[string]string{tables.PropLiveLoad: "maybe", tables.PropLiveTTL: "10ms", tables.PropLiveMaxRecords: "0", tables.PropLiveMaxBytes: "-1"} {
		_, err := tables.ParseProps(map[string]string{k: v})
		var e *apierr.Error
		if apierr.Classify(err) != apierr.InvalidArgument || !errors.As(err, &e) || e.Field != `properties["`+k+`"]` {
			t.Errorf("%s=%s: %v, want InvalidArgument naming the property", k, v, err)
		}
	}
}
