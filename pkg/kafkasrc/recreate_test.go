package kafkasrc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
)

// A topic deleted and created again has another TopicID, and a Tailer pinned to the old
// one stops with ErrTopicChanged instead of reading the new topic's records at the old
// offsets, even where the new topic has records at them.
func TestTopicCreatedAgain(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Brokers(1))
	const topic = "reborn"
	c.CreateTopic(topic, 1, nil)
	p := producer(c)
	for i := range 10 {
		kafkatest.Produce(t, p, variedRecord(topic, 0, i))
	}
	cl := newClient(t, c, kafkasrc.WithTimeout(2*time.Second), kafkasrc.WithPollWait(100*time.Millisecond))
	ctx := ctxFor(t, 20*time.Second)
	id, offs, err := cl.TopicOffsets(ctx, topic)
	if err != nil || id.IsZero() || id.String() == "" || offs[0].HighWatermark != 10 {
		t.Fatalf("TopicOffsets: %v %v %v", id, offs, err)
	}
	if id2, n, err := cl.Topic(ctx, topic); err != nil || id2 != id || n != 1 {
		t.Fatalf("Topic: %v %d %v", id2, n, err)
	}
	tl := kafkasrc.NewTailer(cl, topic, 0, 0)
	defer tl.Close()
	tl.Pin(id)
	tail(t, tl, 10)

	if _, err := kadm.NewClient(c.Client()).DeleteTopics(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.TopicOffsets(ctx, topic); !errors.Is(err, kafkasrc.ErrUnknownTopic) {
		t.Fatalf("TopicOffsets of a deleted topic: %v, want ErrUnknownTopic", err)
	}
	c.CreateTopic(topic, 1, nil)
	p2 := producer(c) // one that never knew the old topic's id
	for i := range 30 {
		kafkatest.Produce(t, p2, variedRecord(topic, 0, 100+i))
	}
	id3, _, err := cl.TopicOffsets(ctx, topic)
	if err != nil || id3 == id || id3.IsZero() {
		t.Fatalf("the topic created again has id %v (was %v): %v", id3, id, err)
	}
	recs, next, err := tl.Poll(ctx)
	if !errors.Is(err, kafkasrc.ErrTopicChanged) || len(recs) != 0 || next != 10 {
		t.Fatalf("Poll of a pinned tailer after the topic was created again: %d records, next %d, %v; want ErrTopicChanged at 10", len(recs), next, err)
	}
	// Unpinned, the same position reads the new topic: what pinning prevents.
	free := kafkasrc.NewTailer(cl, topic, 0, 10)
	defer free.Close()
	if recs, _, err := free.Poll(ctx); err != nil || len(recs) == 0 || recs[0].Offset != 10 {
		t.Fatalf("an unpinned tailer at 10: %d records, %v", len(recs), err)
	}
}
