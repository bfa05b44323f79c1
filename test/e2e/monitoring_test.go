package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/deploy/monitoring"
	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/test/cluster"
)

// prometheusMade are series Prometheus makes itself, and the labels it gives every
// scraped one: no role exports them.
var (
	prometheusMade   = []string{"up"}
	prometheusLabels = []string{"job", "instance"}
)

// exported is what the roles' /metrics had: per series name (a histogram's _bucket,
// _sum and _count), the label names some series of it had, and which nodes had it.
type exported map[string]*exportedSeries

type exportedSeries struct {
	labels map[string]bool
	nodes  map[string]bool
}

func (ex exported) add(node, name string, labels []*dto.LabelPair, extra ...string) {
	s := ex[name]
	if s == nil {
		s = &exportedSeries{labels: map[string]bool{}, nodes: map[string]bool{}}
		ex[name] = s
	}
	s.nodes[node] = true
	for _, l := range labels {
		s.labels[l.GetName()] = true
	}
	for _, l := range extra {
		s.labels[l] = true
	}
}

// families reads a node's /metrics as Prometheus would (text format).
func families(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape %s: %s", addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	return fams
}

// metricsAddrs are the live nodes' metrics addresses, as their member rows advertise them.
func metricsAddrs(t *testing.T, c *cluster.Cluster, via string) map[string]string {
	t.Helper()
	nodes, err := c.Node(via).Admin().ListNodes(context.Background(), &adminv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes.GetNodes() {
		if out[n.GetNodeId()] = n.GetAddrs()["metrics"]; out[n.GetNodeId()] == "" {
			t.Fatalf("%s advertises no metrics address", n.GetNodeId())
		}
	}
	return out
}

// scrapeAll scrapes every live node.
func scrapeAll(t *testing.T, c *cluster.Cluster, via string) exported {
	t.Helper()
	ex := exported{}
	for node, addr := range metricsAddrs(t, c, via) {
		for name, f := range families(t, addr) {
			for _, m := range f.GetMetric() {
				switch f.GetType() {
				case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
					ex.add(node, name+"_bucket", m.GetLabel(), "le")
					ex.add(node, name+"_sum", m.GetLabel())
					ex.add(node, name+"_count", m.GetLabel())
				case dto.MetricType_SUMMARY:
					ex.add(node, name, m.GetLabel(), "quantile")
					ex.add(node, name+"_sum", m.GetLabel())
					ex.add(node, name+"_count", m.GetLabel())
				default:
					ex.add(node, name, m.GetLabel())
				}
			}
		}
	}
	return ex
}

// committed is how many records the writer says it committed to table (its
// mink_writer_records_committed_total), or -1 before it reports the table.
func committed(t *testing.T, c *cluster.Cluster, writer, table string) int64 {
	t.Helper()
	for _, m := range families(t, metricsAddrs(t, c, writer)[writer])["mink_writer_records_committed_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "table" && l.GetValue() == table {
				return int64(m.GetCounter().GetValue())
			}
		}
	}
	return -1
}

// TestDashboardAndAlertsNameExportedMetrics runs a small cluster through a little of
// everything (indexing, a lease handoff, commits, table loads and S3 reads through two
// file servers, forwarded reads, and with Kafka stopped a build that fails and 503s),
// then scrapes every role. Every metric the Grafana dashboard and the alerting rules
// name must be exported by some role, and every label they match on or group by must be
// one some series of those metrics has: a renamed metric or label fails here, naming the
// file and the panel or alert, instead of leaving a panel empty or an alert silent.
func TestDashboardAndAlertsNameExportedMetrics(t *testing.T) {
	root := cluster.RepoRoot()
	dash, err := monitoring.LoadDashboard(root)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := monitoring.LoadRules(root)
	if err != nil {
		t.Fatal(err)
	}
	queries := append(dash.Queries(), rules.Queries()...)
	if len(queries) < 20 {
		t.Fatalf("%d queries in %s and %s; the files did not load", len(queries), monitoring.DashboardFile, monitoring.RulesFile)
	}

	const ttl = 3 * time.Second
	c := newCluster(t, ttl)
	c.Kafka.CreateTopic("events", 4, nil)
	c.Kafka.CreateTopic("cold", 1, nil)
	c.Start("indexer", "idx-1")
	c.Start("writer", "wr-1")
	var s3, catalogs []string
	for _, id := range []string{"fs-1", "fs-2"} {
		n := c.Start("fileserver", id)
		urls := waitFor(t, 20*time.Second, id+" to advertise its catalog and S3", func() ([2]string, bool) {
			cat, s3, err := n.Endpoints()
			return [2]string{cat, s3}, err == nil
		})
		catalogs, s3 = append(catalogs, urls[0]), append(s3, urls[1])
	}
	ctx := context.Background()
	ids := map[string]int64{}
	for _, name := range []string{"events", "cold"} {
		resp, err := c.Node("idx-1").Admin().CreateTable(ctx, &adminv1.CreateTableRequest{Name: name, Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
			Properties: map[string]string{"mink.range.max-age": "300ms", "mink.commit.interval": "300ms"}})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = resp.GetTable().GetId()
	}
	prod := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(topic string, partitions, n int) {
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: fmt.Appendf(nil, "record %d", i)})
		}
		kafkatest.Produce(t, prod, recs...)
	}
	produce("events", 4, 200)
	produce("cold", 1, 20)
	waitFor(t, 30*time.Second, "idx-1 to hold the 4 partitions of events", func() (cluster.Shares, bool) {
		s := c.Shares(ids["events"])
		return s, s.Partitions["idx-1"] == 4
	})
	// A second indexer: idx-1 hands partitions over (released, acquired).
	c.Start("indexer", "idx-2")
	waitFor(t, 30*time.Second, "idx-2 to take its share of events", func() (cluster.Shares, bool) {
		s := c.Shares(ids["events"])
		return s, s.Partitions["idx-2"] == 2
	})
	produce("events", 4, 100)
	for name, n := range map[string]int64{"events": 300, "cold": 20} {
		waitFor(t, 30*time.Second, fmt.Sprintf("wr-1 to commit all %d records of %s", n, name), func() (int64, bool) {
			got := committed(t, c, "wr-1", "default."+name)
			return got, got == n
		})
	}
	// Loads and reads through both file servers: half the files are the other's (forwarded).
	for _, cat := range catalogs {
		if s := regScanTable(t, cat, "events"); len(s.rows) != 300 || len(s.dups) > 0 {
			t.Fatalf("scan of events through %s: %d rows, %d read twice; want 300 once each", cat, len(s.rows), len(s.dups))
		}
	}

	// A load with a live tail (nothing of the table is committed: ranges are cut after an
	// hour) makes a load snapshot, and times it.
	c.Kafka.CreateTopic("tail", 1, nil)
	if _, err := c.Node("idx-1").Admin().CreateTable(ctx, &adminv1.CreateTableRequest{Name: "tail", Format: adminv1.RecordFormat_RECORD_FORMAT_RAW,
		Properties: map[string]string{"mink.range.max-age": "1h", "mink.commit.interval": "300ms"}}); err != nil {
		t.Fatal(err)
	}
	produce("tail", 1, 10)
	waitFor(t, 30*time.Second, "the writer to store the first metadata of tail", func() (string, bool) {
		_, err := regLoad(ctx, catalogs[0], "tail")
		return fmt.Sprint(err), err == nil
	})
	if s := regScanTable(t, catalogs[0], "tail"); len(s.rows) != 10 || len(s.dups) > 0 {
		t.Fatalf("scan of the live tail through %s: %d rows, %d read twice; want 10 once each", catalogs[0], len(s.rows), len(s.dups))
	}

	// Kafka stops: a file of cold, read by nobody yet, cannot be built, and its read is a 503.
	var coldKey string
	if err := c.DB.QueryRow(ctx, `SELECT key FROM mink_data_files WHERE table_id = $1 AND expires_at IS NULL LIMIT 1`, ids["cold"]).Scan(&coldKey); err != nil {
		t.Fatal(err)
	}
	c.StopKafka()
	hc := &http.Client{Timeout: time.Minute}
	resp, err := hc.Get(s3[0] + "/" + layout.Bucket + "/" + coldKey)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("S3 GET of an uncached file with Kafka stopped: %s, want 503", resp.Status)
	}

	ex := exported{}
	// The owner counts the failed build as it answers; the scrape may come first.
	waitFor(t, 10*time.Second, "the failed build to be counted", func() (string, bool) {
		ex = scrapeAll(t, c, "wr-1")
		s := ex["mink_fileserver_build_failures_total"]
		return fmt.Sprint(s), s != nil
	})
	var names []string
	for n := range ex {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("exported: %s", strings.Join(names, " "))

	uses := map[string][]string{} // metric -> the queries naming it
	for _, q := range queries {
		e, err := q.Parse()
		if err != nil {
			t.Error(err)
			continue
		}
		sels, groups := monitoring.Uses(e)
		for _, s := range sels {
			uses[s.Metric] = append(uses[s.Metric], q.String())
			if slices.Contains(prometheusMade, s.Metric) {
				continue
			}
			got := ex[s.Metric]
			if got == nil {
				t.Errorf("%s: names %s, which no role exports", q, s.Metric)
				continue
			}
			for _, l := range append(s.Labels, q.Labels...) {
				if !got.labels[l] && !slices.Contains(prometheusLabels, l) {
					t.Errorf("%s: matches %s on label %q, which it does not have (it has %v)", q, s.Metric, l, sortedLabels(got.labels))
				}
			}
		}
		for _, g := range groups {
			for _, l := range g.Labels {
				if slices.Contains(prometheusLabels, l) || l == "le" {
					continue
				}
				found, seen := false, false // seen: some metric under it is exported (else that is the error)
				for _, m := range g.Metrics {
					seen = seen || ex[m] != nil
					found = found || slices.Contains(prometheusMade, m) || (ex[m] != nil && ex[m].labels[l])
				}
				if seen && !found {
					t.Errorf("%s: groups by %q, a label none of %v has", q, l, g.Metrics)
				}
			}
		}
	}
	// Each role's own figures come from that role.
	for metric, node := range map[string]string{"mink_indexer_lag": "idx-", "mink_writer_commit_duration_seconds_bucket": "wr-",
		"http_server_request_duration_seconds_bucket": "fs-", "mink_lease_free": "fs-"} {
		s := ex[metric]
		if s == nil || !slices.ContainsFunc(sortedLabels(s.nodes), func(n string) bool { return strings.HasPrefix(n, node) }) {
			t.Errorf("%s: not exported by a %s* node", metric, node)
		}
	}
	t.Logf("%d queries name %d metrics", len(queries), len(uses))
	checkSecondsBuckets(t, c, "wr-1")
}

// checkSecondsBuckets fails for a histogram in seconds whose buckets are OpenTelemetry's
// defaults (0 to 10,000, made for milliseconds): every observation would land in the
// first bucket or two, and a dashboard's quantiles would mean nothing.
func checkSecondsBuckets(t *testing.T, c *cluster.Cluster, via string) {
	t.Helper()
	const most = 600.0 // seconds: no duration Mink times is longer
	checked := 0
	for node, addr := range metricsAddrs(t, c, via) {
		for name, f := range families(t, addr) {
			if f.GetType() != dto.MetricType_HISTOGRAM || !strings.HasSuffix(name, "_seconds") {
				continue
			}
			for _, m := range f.GetMetric() {
				checked++
				for _, b := range m.GetHistogram().GetBucket() {
					if le := b.GetUpperBound(); le > most && !math.IsInf(le, 1) {
						t.Errorf("%s on %s: a bucket bound of %g s; its buckets are for milliseconds (set metric.WithExplicitBucketBoundaries)", name, node, le)
						break
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no histogram in seconds exported; the check of their buckets checked nothing")
	}
}

func sortedLabels(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
