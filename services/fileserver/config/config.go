// Package config is the file server's own configuration: the flags mink-fileserver adds
// to every node's (pkg/node), registered here and nowhere else. It sits outside internal/
// so the deployment checks (deploy/deploytest) can read a deployment's values as the
// role does.
package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"time"

	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/node"
)

// Config is the file server's flags; it is the pkg/node RoleConfig of mink-fileserver.
type Config struct {
	CatalogAddr string        // Iceberg REST catalog
	S3Addr      string        // S3 API
	S3Endpoint  string        // the S3 URL engines are told in table loads
	CacheDir    string        // data file cache; empty: CacheDirOf's default
	CacheBytes  flagenv.Bytes // cache size
	// WarmInterval is how often it looks for newly committed files to warm (0: no
	// warming).
	WarmInterval time.Duration
	// BuildConcurrency is the most builds from Kafka at once (0: max(1, GOMAXPROCS)).
	BuildConcurrency int
	// BuildMemory bounds the finished Parquet pages that all builds from Kafka keep in
	// memory together; beyond it they wait in temporary files (pkg/parquetbuild.Pages).
	BuildMemory flagenv.Bytes
}

// DefaultBuildMemory is a file server's --build-memory unless told otherwise.
const DefaultBuildMemory = 128 << 20

// RegisterFlags adds the file server's flags to fs, with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.CatalogAddr, "catalog-addr", ":8181", "address to serve the Iceberg REST catalog on")
	fs.StringVar(&c.S3Addr, "s3-addr", ":9000", "address to serve the S3 API on")
	fs.StringVar(&c.S3Endpoint, "s3-endpoint", "", "S3 URL engines are told in table loads, when they reach this node by another name (a Service, a published port); default http://<hostname>:<s3 port>")
	fs.StringVar(&c.CacheDir, "cache-dir", "", "folder of the data file cache (default <temp dir>/mink-cache/<node id>)")
	c.CacheBytes = 10 << 30
	fs.Var(&c.CacheBytes, "cache-bytes", "size of the data file cache: 10GiB, 512MiB, ...")
	fs.DurationVar(&c.WarmInterval, "warm-interval", time.Second, "how often to look for newly committed data files this node owns, to build them into its cache before they are read (it is also told of each commit); 0: no warming")
	fs.IntVar(&c.BuildConcurrency, "build-concurrency", 0, "most builds of data and tail files from Kafka at once; more wait for a slot, and warming uses at most half (0: max(1, GOMAXPROCS))")
	c.BuildMemory = DefaultBuildMemory
	fs.Var(&c.BuildMemory, "build-memory", "most bytes of finished Parquet pages all builds from Kafka keep in memory together; beyond it they wait in temporary files in $TMPDIR (same files, bounded memory): 128MiB, 1GiB, ...")
}

// Validate checks every value and reports each bad one naming its flag.
func (c *Config) Validate() error {
	var errs []error
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, flagenv.Errorf(flagName, format, args...))
	}
	if err := node.CheckAddr(c.CatalogAddr, true); err != nil {
		bad("catalog-addr", "%q: %v", c.CatalogAddr, err)
	}
	if err := node.CheckAddr(c.S3Addr, true); err != nil {
		bad("s3-addr", "%q: %v", c.S3Addr, err)
	}
	if c.CacheDir != "" && !filepath.IsAbs(c.CacheDir) {
		bad("cache-dir", "%q is not an absolute path", c.CacheDir)
	}
	if c.CacheBytes <= 0 {
		bad("cache-bytes", "must be positive")
	}
	if c.BuildConcurrency < 0 || c.BuildConcurrency > 1<<16 {
		bad("build-concurrency", "%d is out of range (1 to 65536; 0: max(1, GOMAXPROCS))", c.BuildConcurrency)
	}
	if c.BuildMemory < 0 {
		bad("build-memory", "must not be negative")
	}
	return errors.Join(errs...)
}

// CacheDirOf is the cache folder of node nodeID: --cache-dir, else one of its own under
// the temp dir, so file servers sharing a machine keep apart.
func (c *Config) CacheDirOf(nodeID string) string {
	if c.CacheDir != "" {
		return c.CacheDir
	}
	return filepath.Join(os.TempDir(), "mink-cache", nodeID)
}

var _ node.RoleConfig = (*Config)(nil)
