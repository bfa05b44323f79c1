// Package kafkatest runs an in-process Kafka-protocol broker (franz-go's kfake) for
// tests of code that reads Kafka, and produces records into it. Each call to New is its
// own cluster, so tests stay isolated.
package kafkatest

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is a running kfake cluster; the embedded *kfake.Cluster gives its controls
// (Compact, ApplyRetention, ...). It is closed when the test ends.
type Cluster struct {
	*kfake.Cluster
	tb      testing.TB
	brokers int
	dataDir string
	ports   []int
	addrs   []string
}

type options struct {
	brokers int
	persist bool
	kfake   []kfake.Opt
}

// Option configures New.
type Option func(*options)

// Brokers sets the number of brokers (default 3, so partitions have different leaders).
func Brokers(n int) Option { return func(o *options) { o.brokers = n } }

// Persistent keeps data in a directory of the test's, so Restart brings the cluster
// back on the same addresses with the same data.
func Persistent() Option { return func(o *options) { o.persist = true } }

// KfakeOptions passes options to kfake.NewCluster.
func KfakeOptions(opts ...kfake.Opt) Option {
	return func(o *options) { o.kfake = append(o.kfake, opts...) }
}

// New starts a cluster that lives until the end of the test.
func New(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	o := options{brokers: 3}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Cluster{tb: tb, brokers: o.brokers}
	kopts := append([]kfake.Opt{kfake.NumBrokers(o.brokers)}, o.kfake...)
	if o.persist {
		c.dataDir = tb.TempDir()
		kopts = append(kopts, kfake.DataDir(c.dataDir))
	}
	kc, err := kfake.NewCluster(kopts...)
	if err != nil {
		tb.Fatalf("kafkatest: start cluster: %v", err)
	}
	c.Cluster = kc
	c.addrs = kc.ListenAddrs()
	for _, a := range c.addrs {
		_, p, err := net.SplitHostPort(a)
		if err != nil {
			tb.Fatalf("kafkatest: listen address %q: %v", a, err)
		}
		port, _ := strconv.Atoi(p)
		c.ports = append(c.ports, port)
	}
	tb.Cleanup(func() { c.Cluster.Close() })
	return c
}

// Addrs are the brokers' host:port addresses.
func (c *Cluster) Addrs() []string { return c.addrs }

// Stop shuts the cluster down; clients see refused connections.
func (c *Cluster) Stop() { c.Cluster.Close() }

// Restart starts a stopped Persistent cluster again on the same ports and data.
func (c *Cluster) Restart(opts ...kfake.Opt) {
	c.tb.Helper()
	if c.dataDir == "" {
		c.tb.Fatal("kafkatest: Restart needs a Persistent cluster")
	}
	kopts := append([]kfake.Opt{kfake.Ports(c.ports...), kfake.DataDir(c.dataDir)}, opts...)
	kc, err := kfake.NewCluster(kopts...)
	if err != nil {
		c.tb.Fatalf("kafkatest: restart cluster: %v", err)
	}
	c.Cluster = kc
	c.tb.Cleanup(kc.Close) // Close is idempotent
}

// Client returns a franz-go client for producing or administering, closed at the end
// of the test.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.tb.Helper()
	// No KIP-714 client metrics: kgo's Close waits up to a second for a final push,
	// which a stopped or restarted test broker never takes.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs...), kgo.DisableClientMetrics()}, opts...)...)
	if err != nil {
		c.tb.Fatalf("kafkatest: client: %v", err)
	}
	c.tb.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates a topic with the given partitions and topic configs.
func (c *Cluster) CreateTopic(topic string, partitions int32, configs map[string]string) {
	c.tb.Helper()
	cfg := make(map[string]*string, len(configs))
	for k, v := range configs {
		cfg[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(c.Client()).CreateTopic(ctx, partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.tb.Fatalf("kafkatest: create topic %q: %v", topic, err)
	}
}

// Produce writes recs synchronously and returns them with partitions and offsets set.
func Produce(tb testing.TB, cl *kgo.Client, recs ...*kgo.Record) []*kgo.Record {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		tb.Fatalf("kafkatest: produce: %v", err)
	}
	return recs
}
