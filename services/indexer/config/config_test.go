package config_test

import (
	"testing"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node/nodetest"
	"github.com/minkhq/mink/services/indexer/config"
)

// parse builds the role's config from a command line and an environment, as its main
// does: the node's flags and the role's together.
func parse(args []string, env map[string]string) (*config.Config, error) {
	var rc config.Config
	_, err := nodetest.Parse(lease.RoleIndexer, &rc, args, env)
	return &rc, err
}

var ok = nodetest.Required

func TestConfigNamesTheBadFlag(t *testing.T) {
	nodetest.RefusedAll(t, func(args []string, env map[string]string) error { _, err := parse(args, env); return err }, []nodetest.Case{
		{Name: "negative max partitions", Args: append([]string{"--max-partitions", "-1"}, ok...), Want: []string{"--max-partitions"}},
		{Name: "max partitions from env", Args: ok, Env: map[string]string{"MINK_MAX_PARTITIONS": "-3"}, Want: []string{"--max-partitions", "MINK_MAX_PARTITIONS"}},
		{Name: "bad build memory", Args: append([]string{"--build-memory", "lots"}, ok...), Want: []string{"-build-memory", "lots"}},
	})

	t.Run("defaults and env twins", func(t *testing.T) {
		rc, err := parse(ok, map[string]string{"MINK_MAX_PARTITIONS": "7"})
		if err != nil {
			t.Fatal(err)
		}
		if rc.MaxPartitions != 7 || rc.BuildMemory != config.DefaultBuildMemory {
			t.Errorf("defaults: %+v", rc)
		}
	})
}
