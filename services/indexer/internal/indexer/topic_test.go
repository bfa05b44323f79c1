package indexer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/indexer/internal/indexer"
)

// A topic deleted and created again under an indexed table, with more records than were
// indexed (so only its Kafka topic id tells it from the old one): the indexer records the
// table's topic as lost, stops (paused, saying why; the topic_lost gauge at 1), and
// indexes nothing of the new topic into the old index. Reset starts the table over from
// the new topic's first offset.
func TestTopicCreatedAgainStopsIndexing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tbl := e.createTable(t, "reborn", 1, nil)
	e.produce(t, "reborn", 0, jsonEvents(0, 40)...)
	r := sdkmetric.NewManualReader()
	_, ix := e.startIndexerOpts(t, "idx", indexer.Options{Meter: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)).Meter("test")}, nil)
	e.checkTiling(t, tbl, 0)
	first, err := tables.Get(ctx, e.db, "", "reborn")
	if err != nil || first.TopicID == "" {
		t.Fatalf("the indexer recorded no topic id: %+v %v", first, err)
	}

	adm := kadm.NewClient(e.kafka.Client())
	if _, err := adm.DeleteTopics(ctx, "reborn"); err != nil {
		t.Fatal(err)
	}
	e.kafka.CreateTopic("reborn", 1, nil)
	e.prod = e.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())) // one that never knew the old topic's id
	e.produce(t, "reborn", 0, jsonEvents(1000, 60)...)
	lost := await.For(t, 20*time.Second, "the table's topic to be recorded as lost", func() (tables.Table, bool) {
		got, err := tables.Get(ctx, e.db, "", "reborn")
		return got, err == nil && got.TopicLost != ""
	})
	if !strings.Contains(lost.TopicLost, `topic "reborn" was deleted and created again`) || lost.TopicLostAt.IsZero() {
		t.Errorf("recorded why: %q at %v", lost.TopicLost, lost.TopicLostAt)
	}
	await.True(t, 20*time.Second, "the topic_lost and paused gauges of partition 0 at 1", func() bool {
		l, p := gauges(t, r, "mink.indexer.topic_lost", "default.reborn"), gauges(t, r, "mink.indexer.paused", "default.reborn")
		return l[0] == 1 && p[0] == 1
	})
	if why := ix.Paused()["default.reborn/0"]; !strings.Contains(why, "deleted and created again") || !strings.Contains(why, "reset") {
		t.Errorf("paused because %q; want the topic named, and the reset", why)
	}
	st, err := ranges.State(ctx, e.db, tbl.ID, 0)
	if err != nil || st.IndexedEnd != 40 {
		t.Errorf("the old index ends at %d (%v), want 40: nothing of the new topic in it", st.IndexedEnd, err)
	}

	id, n, err := e.kc.Topic(ctx, "reborn")
	if err != nil {
		t.Fatal(err)
	}
	reset, err := tables.Reset(ctx, e.db, "", "reborn", id.String(), n)
	if err != nil {
		t.Fatal(err)
	}
	e.checkTiling(t, reset, 0)
	await.True(t, 20*time.Second, "the topic_lost gauge at 0 for the reset table", func() bool {
		l := gauges(t, r, "mink.indexer.topic_lost", "default.reborn")
		return len(l) == 1 && l[0] == 0
	})
}

// A deleted topic pauses indexing with a reason naming it.
func TestDeletedTopicIsNamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tbl := e.createTable(t, "vanished", 1, nil)
	e.produce(t, "vanished", 0, jsonEvents(0, 10)...)
	_, ix := e.startIndexerOpts(t, "idx", indexer.Options{}, nil)
	e.checkTiling(t, tbl, 0)
	if _, err := kadm.NewClient(e.kafka.Client()).DeleteTopics(ctx, "vanished"); err != nil {
		t.Fatal(err)
	}
	why := await.For(t, 30*time.Second, "indexing to pause naming the deleted topic", func() (string, bool) {
		why := ix.Paused()["default.vanished/0"]
		return why, strings.Contains(why, `topic "vanished" of table default.vanished does not exist in Kafka`)
	})
	if !strings.Contains(why, "deleted") {
		t.Errorf("paused because %q", why)
	}
}
