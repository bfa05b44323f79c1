package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node/nodetest"
	"github.com/minkhq/mink/services/fileserver/config"
)

// parse builds the role's config from a command line and an environment, as its main
// does: the node's flags and the role's together.
func parse(args []string, env map[string]string) (*config.Config, error) {
	var rc config.Config
	_, err := nodetest.Parse(lease.RoleFileServer, &rc, args, env)
	return &rc, err
}

var ok = nodetest.Required

func TestConfigNamesTheBadFlag(t *testing.T) {
	nodetest.RefusedAll(t, func(args []string, env map[string]string) error { _, err := parse(args, env); return err }, []nodetest.Case{
		{Name: "bad cache bytes", Args: append([]string{"--cache-bytes", "12XB"}, ok...), Want: []string{"-cache-bytes"}},
		{Name: "relative cache dir", Args: ok, Env: map[string]string{"MINK_CACHE_DIR": "cache"}, Want: []string{"--cache-dir", "MINK_CACHE_DIR"}},
		{Name: "zero cache bytes", Args: append([]string{"--cache-bytes", "0"}, ok...), Want: []string{"--cache-bytes", "positive"}},
		{Name: "bad catalog addr", Args: append([]string{"--catalog-addr", "8181"}, ok...), Want: []string{"--catalog-addr", `"8181"`}},
		{Name: "bad s3 addr from env", Args: ok, Env: map[string]string{"MINK_S3_ADDR": "host:x"}, Want: []string{"--s3-addr", "MINK_S3_ADDR"}},
		{Name: "negative build concurrency", Args: append([]string{"--build-concurrency", "-1"}, ok...), Want: []string{"--build-concurrency", "out of range"}},
		{Name: "bad build memory from env", Args: ok, Env: map[string]string{"MINK_BUILD_MEMORY": "lots"}, Want: []string{"build-memory", "MINK_BUILD_MEMORY"}},
		{Name: "node and role flags together", Args: []string{"--kafka-brokers", "k:1", "--cache-dir", "rel"}, Want: []string{"--postgres-url", "--cache-dir"}},
	})

	t.Run("defaults and env twins", func(t *testing.T) {
		rc, err := parse(ok, map[string]string{"MINK_CACHE_BYTES": "1GiB"})
		if err != nil {
			t.Fatal(err)
		}
		if rc.CatalogAddr != ":8181" || rc.S3Addr != ":9000" || rc.CacheBytes != 1<<30 || rc.WarmInterval.String() != "1s" ||
			rc.BuildConcurrency != 0 || rc.BuildMemory != config.DefaultBuildMemory {
			t.Errorf("defaults: %+v", rc)
		}
	})
}

// TestCacheDirOf: without --cache-dir each node has a folder of its own under the temp
// dir; with it, the folder given.
func TestCacheDirOf(t *testing.T) {
	rc, err := parse(ok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rc.CacheDirOf("fs-1"), filepath.Join(os.TempDir(), "mink-cache", "fs-1"); got != want {
		t.Errorf("default cache dir %q, want %q", got, want)
	}
	rc, err = parse(append([]string{"--cache-dir", "/var/cache/mink"}, ok...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := rc.CacheDirOf("fs-1"); got != "/var/cache/mink" {
		t.Errorf("cache dir %q, want /var/cache/mink", got)
	}
}
