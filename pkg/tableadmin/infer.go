package tableadmin

import (
	"context"
	"errors"
	"fmt"

	"github.com/minkhq/mink/pkg/jsoninfer"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/record"
)

// The sample an inferred table's first columns come from (README, "Tables without a
// declared schema"): the first sampleRecords records Kafka holds in each partition, up
// to its last stable offset, at most sampleTotal in all, partitions in order.
const (
	sampleRecords = 100
	sampleTotal   = 1000
)

// errSampleFull ends a partition's read once the sample is full.
var errSampleFull = errors.New("sample full")

// sample reads the records an inferred table's first version is grown from.
func (s *Service) sample(ctx context.Context, topic string) ([]jsoninfer.Sample, error) {
	offs, err := s.Kafka.Offsets(ctx, topic)
	if err != nil {
		return nil, kafkaErr(err)
	}
	var out []jsoninfer.Sample
	for _, o := range offs {
		if len(out) >= sampleTotal {
			break
		}
		end := min(o.LastStable, o.LogStart+sampleRecords)
		if end <= o.LogStart {
			continue
		}
		limit := min(sampleRecords, sampleTotal-len(out))
		n := 0
		err := s.Kafka.ReadRange(ctx, topic, o.Partition, o.LogStart, end, func(r record.Record) error {
			if r.Value != nil {
				out = append(out, jsoninfer.Sample{Value: r.Value, Since: fmt.Sprintf("partition %d offset %d", r.Partition, r.Offset)})
			}
			if n++; n >= limit {
				return errSampleFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errSampleFull) && !errors.Is(err, kafkasrc.ErrOffsetsGone) {
			return nil, kafkaErr(err)
		}
	}
	return out, nil
}
