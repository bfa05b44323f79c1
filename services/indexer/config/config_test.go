package config_test

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
	"github.com/minkhq/mink/services/indexer/config"
)

// parse builds an indexer's config from a command line and an environment, as its main
// does: the node's flags and the role's together.
func parse(args []string, env map[string]string) (*config.Config, error) {
	var rc config.Config
	cfg := node.Config{Role: lease.RoleIndexer, RoleConfig: &rc}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, err := cfg.Parse(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return &rc, err
}

var ok = []string{"--postgres-url", "postgres://u@127.0.0.1:5432/db", "--kafka-brokers", "k1:9092,k2:9092"}

func TestConfigNamesTheBadFlag(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string // all in the error
	}{
		{"negative max partitions", append([]string{"--max-partitions", "-1"}, ok...), nil, []string{"--max-partitions"}},
		{"max partitions from env", ok, map[string]string{"MINK_MAX_PARTITIONS": "-3"}, []string{"--max-partitions", "MINK_MAX_PARTITIONS"}},
		{"bad build memory", append([]string{"--build-memory", "lots"}, ok...), nil, []string{"-build-memory", "lots"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(c.args, c.env)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}

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
