package kafkasrc

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic administration: what a user needs before a topic can be a table. Reads never
// create topics (see topic); only CreateTopic does.

var (
	// ErrTopicExists: CreateTopic found the topic there already.
	ErrTopicExists = errors.New("kafkasrc: topic exists")
	// ErrTopicRefused: the brokers refused the topic as asked (its name, partition
	// count or replication factor); errors.As finds the *kerr.Error saying which, and
	// the error's text has the brokers' own message.
	ErrTopicRefused = errors.New("kafkasrc: topic refused")
)

// TopicInfo is one topic: its name and partition count.
type TopicInfo struct {
	Name       string
	Partitions int32
}

// CreateTopic creates topic with the given partitions and replication factor (-1 for
// either: the brokers' default), and returns its partition count.
func (c *Client) CreateTopic(ctx context.Context, topic string, partitions int32, replicationFactor int16) (int32, error) {
	var n int32
	err := c.retry(ctx, "create topic "+topic, func(ctx context.Context) error {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = int32(c.cfg.timeout.Milliseconds())
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, replicationFactor
		req.Topics = append(req.Topics, rt)
		kresp, err := c.kcl.Request(ctx, req) // kgo sends it to the controller
		if err != nil {
			return c.transport(topic, nil, err)
		}
		for _, t := range kresp.(*kmsg.CreateTopicsResponse).Topics {
			if t.Topic != topic {
				continue
			}
			err := kerr.ErrorForCode(t.ErrorCode)
			switch {
			case err == nil:
				n = t.NumPartitions // -1 before v5, which does not say
				return nil
			case errors.Is(err, kerr.TopicAlreadyExists):
				return fmt.Errorf("%w: %q", ErrTopicExists, topic)
			case kerr.IsRetriable(err):
				return transient{err}
			case errors.Is(err, kerr.InvalidTopicException), errors.Is(err, kerr.InvalidPartitions),
				errors.Is(err, kerr.InvalidReplicationFactor), errors.Is(err, kerr.InvalidConfig),
				errors.Is(err, kerr.PolicyViolation), errors.Is(err, kerr.InvalidRequest):
				msg := ""
				if t.ErrorMessage != nil && *t.ErrorMessage != "" {
					msg = ": " + *t.ErrorMessage
				}
				return fmt.Errorf("%w: %q: %w%s", ErrTopicRefused, topic, err, msg)
			}
			return fmt.Errorf("kafkasrc: create topic %q: %w", topic, err)
		}
		return transient{fmt.Errorf("create topics response without topic %q", topic)}
	})
	if err != nil || n > 0 {
		return n, err
	}
	return c.Partitions(ctx, topic)
}

// Topics lists the topics, but Kafka's internal ones, by name.
func (c *Client) Topics(ctx context.Context) ([]TopicInfo, error) {
	var out []TopicInfo
	err := c.retry(ctx, "list topics", func(ctx context.Context) error {
		req := kmsg.NewPtrMetadataRequest() // no topics named: all of them
		req.AllowAutoTopicCreation = false
		kresp, err := c.kcl.Request(ctx, req)
		if err != nil {
			return c.transport("", nil, err)
		}
		out = out[:0]
		for _, t := range kresp.(*kmsg.MetadataResponse).Topics {
			if t.Topic == nil || t.IsInternal {
				continue
			}
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				if kerr.IsRetriable(err) {
					return transient{err}
				}
				return fmt.Errorf("kafkasrc: metadata of %q: %w", *t.Topic, err)
			}
			out = append(out, TopicInfo{Name: *t.Topic, Partitions: int32(len(t.Partitions))})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}
