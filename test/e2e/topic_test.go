package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
)

// TestTopicCreatedAgain: a table's topic is deleted and created again, with other and
// more records, under a running cluster. Loads never answer the old topic's rows as the
// table's (nor the new topic's as its tail); DescribeTable, minkctl table describe and the
// indexer's mink_indexer_topic_lost say what happened and what to do; the documented
// recovery, minkctl table reset, makes the table index the new topic from its first
// offset, and a scan then returns exactly its records.
func TestTopicCreatedAgain(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	c := newCluster(t, ttl)
	c.Kafka.CreateTopic("clicks", 2, nil)
	c.Start("indexer", "idx-a")
	c.Start("writer", "wr-1")
	catalog := ctlFileServer(t, c, "fs-1")
	a := c.Member("idx-a").Addr()
	ctl := func(args ...string) (string, string, int) {
		t.Helper()
		return minkctl(t, nil, append([]string{"--addr", a}, args...)...)
	}
	if _, errOut, code := ctl("table", "create", "clicks", "--format", "raw",
		"--property", "mink.range.max-age=200ms", "--property", "mink.commit.interval=200ms"); code != 0 {
		t.Fatalf("table create: %s", errOut)
	}
	produce := func(prefix string, n int) {
		prod := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())) // a client that knows the topic as it is now
		defer prod.Close()
		for p := range int32(2) {
			var recs []*kgo.Record
			for i := range n {
				recs = append(recs, &kgo.Record{Topic: "clicks", Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", prefix, p, i)})
			}
			kafkatest.Produce(t, prod, recs...)
		}
	}
	// scan is minkctl scan's rows (their values), or its error.
	scan := func() ([]string, string, int) {
		out, errOut, code := minkctl(t, nil, "scan", "clicks", "--catalog", catalog, "--columns", "value", "--limit", "0", "-o", "json")
		var values []string
		for line := range strings.Lines(out) {
			var r struct{ Value string }
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("scan row %q: %v", line, err)
			}
			b, _ := base64.StdEncoding.DecodeString(r.Value)
			values = append(values, string(b))
		}
		return values, errOut, code
	}
	produce("old", 100)
	waitFor(t, 30*time.Second, "the 200 records of the first topic to be scanned", func() (int, bool) {
		v, _, code := scan()
		return len(v), code == 0 && len(v) == 200
	})

	adm := kadm.NewClient(c.Kafka.Client())
	if _, err := adm.DeleteTopics(context.Background(), "clicks"); err != nil {
		t.Fatal(err)
	}
	c.Kafka.CreateTopic("clicks", 2, nil)
	produce("new", 130) // more than was indexed: offsets alone do not tell the topics apart
	admin := c.Member("idx-a").Admin()
	// Until the indexer records it, and after: no load answers rows.
	d := waitFor(t, 30*time.Second, "the indexer to record that the topic was created again", func() (*adminv1.DescribeTableResponse, bool) {
		values, errOut, code := scan()
		if code == 0 || len(values) > 0 {
			t.Fatalf("a scan after the topic was created again answered %d rows (exit %d; first %q)", len(values), code, values[:min(1, len(values))])
		}
		if !strings.Contains(errOut, "deleted and created again") && !strings.Contains(errOut, "does not exist in Kafka") {
			t.Errorf("the scan failed without saying why: %s", errOut)
		}
		d, err := admin.DescribeTable(context.Background(), &adminv1.DescribeTableRequest{Name: "clicks"})
		return d, err == nil && d.GetTopicErrorSince() != nil
	})
	if d.GetTopicState() != adminv1.TopicState_TOPIC_STATE_RECREATED || !strings.Contains(d.GetTopicError(), `topic "clicks" was deleted and created again`) {
		t.Errorf("DescribeTable: %v %q", d.GetTopicState(), d.GetTopicError())
	}
	out, errOut, code := ctl("table", "describe", "clicks")
	if code != 0 || !strings.Contains(out, "TOPIC STATE") || !strings.Contains(out, "RECREATED since") ||
		!strings.Contains(out, "minkctl table reset default.clicks") {
		t.Errorf("minkctl table describe (exit %d, %s):\n%s", code, errOut, out)
	}
	waitFor(t, 20*time.Second, "mink_indexer_topic_lost at 1 for both partitions", func() (string, bool) {
		fams := families(t, metricsAddrs(t, c, "idx-a")["idx-a"])
		f := fams["mink_indexer_topic_lost"]
		lost := 0
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == "default.clicks" && m.GetGauge().GetValue() == 1 {
					lost++
				}
			}
		}
		return fmt.Sprint(f), lost == 2
	})

	// The recovery the README documents.
	out, errOut, code = ctl("table", "reset", "clicks")
	if code != 0 || !strings.Contains(out, "reset clicks") {
		t.Fatalf("minkctl table reset (exit %d): %s %s", code, out, errOut)
	}
	values := waitFor(t, 40*time.Second, "the 260 records of the new topic to be scanned", func() ([]string, bool) {
		v, _, code := scan()
		return v, code == 0 && len(v) == 260
	})
	for _, v := range values {
		if !strings.HasPrefix(v, "new-") {
			t.Fatalf("after the reset a scan returned %q, of the old topic", v)
		}
	}
	if d, err := admin.DescribeTable(context.Background(), &adminv1.DescribeTableRequest{Name: "clicks"}); err != nil ||
		d.GetTopicState() != adminv1.TopicState_TOPIC_STATE_OK {
		t.Errorf("after the reset: %v %v", d.GetTopicState(), err)
	}
}
