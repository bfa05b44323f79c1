package indexer

import (
	"context"
	"errors"
	"log/slog"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tables"
)

// topicOffsets reads the partitions' offsets of the table's topic and checks that the
// topic is still the incarnation the table indexed (README, "When a topic is deleted or
// created again"). A topic deleted and created again (another Kafka topic id), or whose
// partition now ends below what was indexed, is recorded as lost with the table, under
// the lease, and indexing stops with an error saying so until an admin resets the table:
// its offsets start over, and indexing on would tile the index with another topic's
// records. A topic that does not exist is an error naming it (indexing resumes if it
// comes back as the same topic, which Kafka does not do: a new one is lost).
//
// It returns the topic's id too, which the indexer's Tailer pins (kafkasrc.Tailer.Pin):
// a topic created again while indexing runs stops the tail at once.
func (ix *Indexer) topicOffsets(ctx context.Context, l lease.Lease, ps *partition, tbl *tables.Table, st ranges.Partition, log *slog.Logger) (kafkasrc.TopicID, []kafkasrc.PartitionOffsets, error) {
	if tbl.TopicLost != "" {
		ps.topicLost.Store(true)
		return kafkasrc.TopicID{}, nil, tables.TopicLostError(*tbl, tbl.TopicLost)
	}
	id, offs, err := ix.Kafka.TopicOffsets(ctx, tbl.Topic)
	if errors.Is(err, kafkasrc.ErrUnknownTopic) {
		ps.topicLost.Store(true)
		return kafkasrc.TopicID{}, nil, apierr.Wrap(apierr.FailedPrecondition, err,
			"topic %q of table %s does not exist in Kafka: it was deleted; indexing resumes when it exists again, and a topic created anew under that name needs the table reset (minkctl table reset %s)",
			tbl.Topic, tbl.FullName(), tbl.FullName())
	}
	if err != nil {
		return kafkasrc.TopicID{}, nil, err
	}
	high := make(map[int32]int64, len(offs))
	for _, o := range offs {
		high[o.Partition] = o.HighWatermark
	}
	indexed := map[int32]int64{}
	if st.Indexed {
		indexed[l.Partition] = st.IndexedEnd
	}
	if why := tables.TopicChanged(*tbl, id.String(), high, indexed); why != "" {
		ps.topicLost.Store(true)
		if err := tables.MarkTopicLost(ctx, ix.DB, l, why); err != nil {
			return kafkasrc.TopicID{}, nil, err
		}
		log.Error("the table's topic is not the one it indexed: indexing stops until an admin resets the table", "reason", why)
		return kafkasrc.TopicID{}, nil, tables.TopicLostError(*tbl, why)
	}
	ps.topicLost.Store(false)
	if tbl.TopicID == "" && !id.IsZero() {
		if err := tables.RecordTopicID(ctx, ix.DB, l, id.String()); err != nil {
			return kafkasrc.TopicID{}, nil, err
		}
		tbl.TopicID = id.String()
	}
	return id, offs, nil
}
