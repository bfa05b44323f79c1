// Command mink-fileserver runs a file-server node: it holds no lease and serves the Iceberg REST catalog
// and the S3 API, with owner-forwarded, cached and verified builds of data files.
package main

import (
	"cmp"
	"context"
	"os"

	"github.com/minkhq/mink/pkg/httplimit"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/node"
	"github.com/minkhq/mink/services/fileserver/config"
	"github.com/minkhq/mink/services/fileserver/internal/fileserver"
)

func main() {
	var rc config.Config
	cfg := node.Config{Role: lease.RoleFileServer, RoleConfig: &rc}
	cfg.Setup = func(d node.Deps) (node.Parts, error) {
		srv, err := fileserver.New(fileserver.Options{NodeID: d.NodeID, DB: d.DB, Kafka: d.Kafka, Codecs: d.Codecs,
			CatalogAddr: rc.CatalogAddr, S3Addr: rc.S3Addr, S3Endpoint: rc.S3Endpoint, Auth: d.Auth,
			CacheDir: rc.CacheDirOf(d.NodeID), CacheBytes: int64(rc.CacheBytes), ShutdownTimeout: d.Config.ShutdownTimeout,
			WarmInterval:     cmp.Or(rc.WarmInterval, -1), // the flag's 0 is off; the option's is its default
			BuildConcurrency: rc.BuildConcurrency,
			BuildMemory:      cmp.Or(int64(rc.BuildMemory), -1), // the flag's 0 is none in memory; the option's is its default
			TLS:              d.TLS, HTTPLimits: httplimit.Limits{MaxConnections: d.Config.MaxConnections},
			DialOptions:   d.DialOptions,
			MeterProvider: d.MeterProvider, TracerProvider: d.TracerProvider, Propagator: d.Propagator, Logger: d.Logger})
		if err != nil {
			return node.Parts{}, err
		}
		return node.Parts{Register: srv.RegisterGRPC, Actors: []func(context.Context) error{srv.Run},
			Addrs: srv.Addrs(), Figures: srv.Figures}, nil
	}
	os.Exit(node.Main("mink-fileserver", cfg, os.Args[1:], os.Exit))
}
