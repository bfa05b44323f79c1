// Package e2e runs the role binaries and minkctl as real processes against a private
// Postgres: what an operator runs is what is tested. The cluster, its processes and the
// binaries (built once per run) are test/cluster's; this suite keeps its scenarios.
package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/test/cluster"
)

var grpcurl string // "" when absent

func TestMain(m *testing.M) {
	grpcurl = cluster.Tool("grpcurl")
	cluster.Main(m, "./cmd/minkctl")
}

// newCluster is a cluster whose nodes have lease_ttl ttl, on a fresh database of the
// shared Postgres server.
func newCluster(t *testing.T, ttl time.Duration) *cluster.Cluster {
	return cluster.New(t, cluster.LeaseTTL(ttl))
}

// addTable creates a topic and registers it as a raw table, with its index and lease
// rows, straight in Postgres.
func addTable(c *cluster.Cluster, name string, partitions int32) int64 {
	c.T.Helper()
	c.Kafka.CreateTopic(name, partitions, nil)
	t, err := tables.Create(context.Background(), c.DB, tables.Table{Name: name, Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, partitions)
	if err != nil {
		c.T.Fatal(err)
	}
	return t.ID
}

// waitFor is cluster.WaitFor.
func waitFor[T any](t testing.TB, timeout time.Duration, what string, cond func() (T, bool)) T {
	t.Helper()
	return cluster.WaitFor(t, timeout, what, cond)
}
