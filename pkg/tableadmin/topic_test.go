package tableadmin_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
)

// DescribeTable says whether the table's topic is still the one it indexed: a deleted
// topic is named with the cause (not only high watermarks of -1), a topic created again
// (another Kafka topic id, or a partition ending below the indexed offsets) is named with
// what to do; ResetTable starts the table over with the topic's new id and keeps its
// definition, and is refused while the topic does not exist.
func TestDescribeNamesTheTopicsState(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("events", 2, nil)
	created := f.create(&adminv1.CreateTableRequest{Name: "events", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON, Columns: []*adminv1.Column{{Name: "id", Type: "long"}},
		Properties: map[string]string{"owner": "data-eng"}})
	if created.GetTopicId() == "" {
		t.Fatalf("CreateTable recorded no topic id: %v", created)
	}
	if d := f.describe("events"); d.GetTopicState() != adminv1.TopicState_TOPIC_STATE_OK || d.GetTopicError() != "" {
		t.Errorf("a fresh table: %v %q", d.GetTopicState(), d.GetTopicError())
	}

	adm := kadm.NewClient(f.kafka.Client())
	if _, err := adm.DeleteTopics(f.ctx, "events"); err != nil {
		t.Fatal(err)
	}
	d := f.describe("events")
	if d.GetTopicState() != adminv1.TopicState_TOPIC_STATE_DELETED || !strings.Contains(d.GetTopicError(), `topic "events" does not exist in Kafka: it was deleted`) {
		t.Errorf("deleted topic: %v %q", d.GetTopicState(), d.GetTopicError())
	}
	if _, err := f.svc.ResetTable(f.ctx, &adminv1.ResetTableRequest{Name: "events"}); apierr.Classify(err) != apierr.FailedPrecondition ||
		!strings.Contains(err.Error(), `topic "events" does not exist`) {
		t.Errorf("reset with no topic: %v", err)
	}

	f.kafka.CreateTopic("events", 2, nil)
	kafkatest.Produce(t, f.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())), &kgo.Record{Topic: "events", Partition: 0, Value: []byte(`{"id":1}`)})
	d = f.describe("events")
	if d.GetTopicState() != adminv1.TopicState_TOPIC_STATE_RECREATED || !strings.Contains(d.GetTopicError(), "deleted and created again") ||
		!strings.Contains(d.GetTopicError(), "minkctl table reset default.events") {
		t.Errorf("topic created again: %v %q", d.GetTopicState(), d.GetTopicError())
	}
	if d.GetPartitions()[0].GetHighWatermark() != 1 {
		t.Errorf("partitions: %v", d.GetPartitions())
	}

	reset, err := f.svc.ResetTable(f.ctx, &adminv1.ResetTableRequest{Name: "events"})
	if err != nil {
		t.Fatal(err)
	}
	tbl := reset.GetTable()
	if tbl.GetId() == created.GetId() || tbl.GetTopicId() == created.GetTopicId() || tbl.GetTopicId() == "" ||
		tbl.GetProperties()["owner"] != "data-eng" || columns(tbl)["id"] != "long" || tbl.GetPartitions() != 2 {
		t.Errorf("reset table %v (was %v)", tbl, created)
	}
	if d := f.describe("events"); d.GetTopicState() != adminv1.TopicState_TOPIC_STATE_OK || d.GetTable().GetId() != tbl.GetId() {
		t.Errorf("after the reset: %v %q", d.GetTopicState(), d.GetTopicError())
	}

	// A partition that ends below what was indexed tells a topic created again (or
	// truncated) even where ids say nothing.
	if _, err := f.db.Exec(f.ctx, `UPDATE mink_partitions SET first_offset = 0, indexed_end = 5 WHERE table_id = $1 AND partition = 1`, tbl.GetId()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(f.ctx, `UPDATE mink_tables SET topic_id = NULL WHERE id = $1`, tbl.GetId()); err != nil {
		t.Fatal(err)
	}
	if d := f.describe("events"); d.GetTopicState() != adminv1.TopicState_TOPIC_STATE_RECREATED ||
		!strings.Contains(d.GetTopicError(), `topic "events" partition 1 ends at offset 0, below offset 5 that the table indexed`) {
		t.Errorf("truncated partition: %v %q", d.GetTopicState(), d.GetTopicError())
	}
}
