// Package chaos injects the failures of the seed's failure table into a cluster of real
// role processes and checks the stated effect and its bound, then that the table view is
// still exact. Faults are injected, never waited for (test/cluster holds the cluster and
// the faults; this suite keeps its scenarios):
//
//   - processes: SIGKILL, SIGSTOP/SIGCONT, SIGTERM, restart with the same node id;
//   - Postgres: stopped, killed and restarted for everyone (pgtest), or cut, delayed,
//     slowed, reset or refused for one node alone through that node's own TCP proxy
//     (toxiproxy, in-process): each node reaches Postgres only through its proxy;
//   - Kafka: stopped and restarted for everyone (kfake, persistent). A TCP proxy per node
//     cannot cut Kafka for one node: a Kafka client only bootstraps through the address it
//     is given and then connects to the address the broker advertises, which bypasses
//     the proxy. "Kafka is unreachable" is therefore modelled, as in the seed's failure
//     row, for the whole cluster.
//
// After each scenario the checker (checker_test.go) settles the cluster and compares the
// index, and once the writer and the file server are wired into their role mains, every
// table as iceberg-go reads it through the REST catalog, with what Kafka holds.
package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/test/cluster"
)

func TestMain(m *testing.M) {
	// toxiproxy's toxics log through zerolog's global logger: keep them quiet.
	zerolog.SetGlobalLevel(zerolog.Disabled)
	before := goleak.IgnoreCurrent() // what runs before any test
	code := cluster.Run(m)
	if code == 0 {
		// Nothing a test started may outlive it: processes are reaped by their
		// cleanups, goroutines (proxies, Kafka clients, pools) are checked here.
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(before,
			// HTTP keep-alive connections of iceberg-go's S3 and REST clients
			// close on their own idle timeout.
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			// toxiproxy v2.5.0: a toxic's stub can block forever sending into the
			// next stub when a toxic is removed (a timeout toxic's Cleanup closes
			// its stub and RemoveToxic returns without rewiring the one before) or
			// when the far end of a link closes while data is in flight. The stuck
			// stub holds nothing else; the proxies' accept loops and links are still
			// checked.
			goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
			goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*LatencyToxic).Pipe"),
			goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*BandwidthToxic).Pipe"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: goroutines left behind: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// chaosCluster is a test/cluster cluster as every scenario here runs it: a private
// Postgres (scenarios stop, kill and restart it) reached by each node through its own
// proxy, Kafka with one broker, and the checker's Kafka reader.
type chaosCluster struct {
	*cluster.Cluster
	kc *kafkasrc.Client // the checker's reader
}

// newCluster starts a cluster with lease_ttl 2s (unless opts say otherwise) and
// --shutdown-timeout 3s.
func newCluster(t *testing.T, opts ...cluster.Option) *chaosCluster {
	t.Helper()
	c := &chaosCluster{Cluster: cluster.New(t, append([]cluster.Option{cluster.LeaseTTL(2 * time.Second),
		cluster.ShutdownTimeout(3 * time.Second), cluster.PrivatePostgres(), cluster.PostgresProxies()}, opts...)...)}
	var err error
	if c.kc, err = kafkasrc.New(c.Kafka.Addrs(), kafkasrc.WithTimeout(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kc.Close)
	return c
}

// ---------------------------------------------------------------------------------
// Tables and records

// createTable makes a topic and a JSON table over it through the admin API of node via,
// with short range and commit intervals so tests see ranges and snapshots quickly.
func (c *chaosCluster) createTable(via *cluster.Node, name string, partitions int32) int64 {
	c.T.Helper()
	c.Kafka.CreateTopic(name, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := via.Admin().CreateTable(ctx, &adminv1.CreateTableRequest{Name: name, Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		Columns:    []*adminv1.Column{{Name: "id", Type: "long", Required: true}, {Name: "item", Type: "string"}},
		Properties: map[string]string{"mink.range.max-age": "300ms", "mink.commit.interval": "500ms"}})
	if err != nil {
		c.T.Fatalf("create table %s: %v", name, err)
	}
	if got := resp.GetTable().GetPartitions(); got != partitions {
		c.T.Fatalf("table %s has %d partitions, topic %d", name, got, partitions)
	}
	return resp.GetTable().GetId()
}

// producer writes records to every partition of some topics until stopped; while Kafka
// is down its writes fail and it keeps trying. Kafka itself is the truth the checker
// compares with, so a write whose outcome is unknown is harmless.
type producer struct {
	stop   chan struct{}
	done   chan struct{}
	sent   atomic.Int64 // acknowledged records
	failed atomic.Int64 // produce calls that failed
	paused atomic.Bool
}

func (c *chaosCluster) produce(every time.Duration, topics map[string]int32) *producer {
	cl := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(3*time.Second),
		kgo.ProduceRequestTimeout(2*time.Second))
	pr := &producer{stop: make(chan struct{}), done: make(chan struct{})}
	names := make([]string, 0, len(topics))
	for name := range topics {
		names = append(names, name)
	}
	slices.Sort(names)
	go func() {
		defer close(pr.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-pr.stop:
				return
			case <-tick.C:
			}
			if pr.paused.Load() {
				continue
			}
			var recs []*kgo.Record
			for _, name := range names {
				for p := int32(0); p < topics[name]; p++ {
					recs = append(recs, &kgo.Record{Topic: name, Partition: p, Key: []byte(strconv.Itoa(n)),
						Value: fmt.Appendf(nil, `{"id":%d,"item":"thing %d","tag":"tag %d","note":"note %d"}`, n, n, n, n)})
					n++
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			res := cl.ProduceSync(ctx, recs...)
			cancel()
			for _, r := range res {
				if r.Err == nil {
					pr.sent.Add(1)
				}
			}
			if res.FirstErr() != nil {
				pr.failed.Add(1)
			}
		}
	}()
	c.T.Cleanup(pr.halt)
	return pr
}

// halt stops the producer and waits for it; it may be called again.
func (pr *producer) halt() {
	select {
	case <-pr.stop:
	default:
		close(pr.stop)
	}
	<-pr.done
}

// rangeRow is one stored range.
type rangeRow struct {
	partition  int32
	start, end int64
	epoch      int64
	records    int64
	errors     int64
	created    time.Time
}

func (c *chaosCluster) ranges(table int64) []rangeRow {
	c.T.Helper()
	rows, err := c.DB.Query(context.Background(), `SELECT partition, start_offset, end_offset, epoch, record_count,
			decode_errors, created_at FROM mink_ranges WHERE table_id = $1 ORDER BY partition, start_offset`, table)
	if err != nil {
		c.T.Fatal(err)
	}
	defer rows.Close()
	var out []rangeRow
	for rows.Next() {
		var r rangeRow
		if err := rows.Scan(&r.partition, &r.start, &r.end, &r.epoch, &r.records, &r.errors, &r.created); err != nil {
			c.T.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		c.T.Fatal(err)
	}
	return out
}

// rangesPerPartition counts a table's ranges by partition.
func (c *chaosCluster) rangesPerPartition(table int64) map[int32]int {
	out := map[int32]int{}
	for _, r := range c.ranges(table) {
		out[r.partition]++
	}
	return out
}

// waitFor is cluster.WaitFor.
func waitFor[T any](t testing.TB, timeout time.Duration, what string, cond func() (T, bool)) T {
	t.Helper()
	return cluster.WaitFor(t, timeout, what, cond)
}
