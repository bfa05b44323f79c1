package config_test

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
	"github.com/minkhq/mink/services/fileserver/config"
)

// parse builds a file server's config from a command line and an environment, as its
// main does: the node's flags and the role's together.
func parse(args []string, env map[string]string) (*config.Config, error) {
	var rc config.Config
	cfg := node.Config{Role: lease.RoleFileServer, RoleConfig: &rc}
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
		{"bad cache bytes", append([]string{"--cache-bytes", "12XB"}, ok...), nil, []string{"-cache-bytes"}},
		{"relative cache dir", ok, map[string]string{"MINK_CACHE_DIR": "cache"}, []string{"--cache-dir", "MINK_CACHE_DIR"}},
		{"zero cache bytes", append([]string{"--cache-bytes", "0"}, ok...), nil, []string{"--cache-bytes", "positive"}},
		{"bad catalog addr", append([]string{"--catalog-addr", "8181"}, ok...), nil, []string{"--catalog-addr", `"8181"`}},
		{"bad s3 addr from env", ok, map[string]string{"MINK_S3_ADDR": "host:x"}, []string{"--s3-addr", "MINK_S3_ADDR"}},
		{"node and role flags together", []string{"--kafka-brokers", "k:1", "--cache-dir", "rel"}, nil, []string{"--postgres-url", "--cache-dir"}},
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
		rc, err := parse(ok, map[string]string{"MINK_CACHE_BYTES": "1GiB"})
		if err != nil {
			t.Fatal(err)
		}
		if rc.CatalogAddr != ":8181" || rc.S3Addr != ":9000" || rc.CacheBytes != 1<<30 || rc.WarmInterval.String() != "1s" {
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
