package fileserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/tables"
)

// A topic deleted and created again under a table, with more records than the table
// indexed (so offsets alone do not tell): loads answer an error naming the topic and the
// reset, never the old topic's rows as the table's nor the new topic's as its tail; the
// same once the indexer has recorded the loss, also for a table whose loads never read
// Kafka (mink.live-load=false). A deleted topic fails live loads naming it.
func TestLoadsOfATopicCreatedAgain(t *testing.T) {
	le := newLiveEnv(t, noReuse, false)
	n := le.startNodes(1)[0]
	id, _, err := le.kc.Topic(le.ctx, le.name)
	if err != nil {
		t.Fatal(err)
	}
	// What CreateTable records.
	if _, err := le.db.Exec(le.ctx, `UPDATE mink_tables SET topic_id = $2 WHERE id = $1`, le.table.ID, id.String()); err != nil {
		t.Fatal(err)
	}
	le.table.TopicID = id.String()
	le.produce(20)
	le.index(1 << 62)
	le.commit()
	if got := le.mustScan(n); len(got.rows) != 2*20 {
		t.Fatalf("before: %d rows, want 40", len(got.rows))
	}
	refused := func(when, want string) {
		t.Helper()
		resp, body := get(t, http.MethodGet, le.loadURL(n), nil)
		if resp.StatusCode != http.StatusConflict {
			t.Errorf("%s: load answered %s, want 409: %s", when, resp.Status, body)
			return
		}
		if msg := icebergError(t, body).Message; !strings.Contains(msg, want) || !strings.Contains(msg, "minkctl table reset default.clicks") {
			t.Errorf("%s: load refused with %q; want %q and the reset", when, msg, want)
		}
		if _, err := le.scanLive(n); err == nil {
			t.Errorf("%s: iceberg-go loaded and scanned the table", when)
		}
	}

	adm := kadm.NewClient(le.kafka.Client())
	if _, err := adm.DeleteTopics(le.ctx, le.name); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, http.MethodGet, le.loadURL(n), nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(icebergError(t, body).Message, `its topic "clicks" does not exist in Kafka: it was deleted`) {
		t.Errorf("a deleted topic: load answered %s %s", resp.Status, body)
	}

	le.kafka.CreateTopic(le.name, livePartitions, nil)
	le.prod = le.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)) // one that never knew the old topic's id
	t.Cleanup(le.prod.Close)
	le.produce(30)
	refused("topic created again", `topic "clicks" was deleted and created again`)

	// Recorded by the indexer (under a partition lease), and for a table whose loads
	// never read Kafka.
	if err := tables.SetProperties(le.ctx, le.db, le.table.ID, map[string]string{tables.PropLiveLoad: "false"}); err != nil {
		t.Fatal(err)
	}
	if err := tables.MarkTopicLost(le.ctx, le.db, le.leases[0], `topic "clicks" was deleted and created again (recorded)`); err != nil {
		t.Fatal(err)
	}
	refused("recorded lost, live loads off", "(recorded)")
	resp, _ = get(t, http.MethodHead, le.loadURL(n), nil)
	if resp.StatusCode == http.StatusNoContent {
		t.Errorf("HEAD of the table says a load would answer")
	}
}
