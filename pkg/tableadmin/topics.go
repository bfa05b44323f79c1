package tableadmin

import (
	"context"
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/tables"
)

// The topic calls: a table is made of a topic, and a user who has none yet makes it
// here, with the node's own brokers, rather than needing Kafka's tools and addresses.

// maxTopicName is Kafka's bound on a topic name.
const maxTopicName = 249

// MaxTopicPartitions bounds CreateTopic's partitions: far above what one table is
// indexed with, low enough that a typo does not make a broker build a million logs.
const MaxTopicPartitions = 10000

// CreateTopic creates a Kafka topic; the brokers' defaults fill in what is 0.
func (s *Service) CreateTopic(ctx context.Context, req *adminv1.CreateTopicRequest) (*adminv1.CreateTopicResponse, error) {
	name := req.GetName()
	if err := validTopic(name); err != nil {
		return nil, err
	}
	parts, rf := req.GetPartitions(), req.GetReplicationFactor()
	if parts < 0 || parts > MaxTopicPartitions {
		return nil, apierr.Invalid("partitions", "%d is out of range (1 to %d; 0: the brokers' default)", parts, MaxTopicPartitions)
	}
	if rf < 0 || rf > math.MaxInt16 {
		return nil, apierr.Invalid("replication_factor", "%d is out of range (0: the brokers' default)", rf)
	}
	if parts == 0 {
		parts = -1
	}
	if rf == 0 {
		rf = -1
	}
	n, err := s.Kafka.CreateTopic(ctx, name, parts, int16(rf))
	var ke *kerr.Error
	switch {
	case errors.Is(err, kafkasrc.ErrTopicExists):
		return nil, apierr.New(apierr.AlreadyExists, "topic %q exists in Kafka already", name)
	case errors.Is(err, kafkasrc.ErrTopicRefused) && errors.As(err, &ke):
		field := map[*kerr.Error]string{kerr.InvalidPartitions: "partitions", kerr.InvalidReplicationFactor: "replication_factor",
			kerr.InvalidTopicException: "name"}[ke]
		if field == "" {
			return nil, apierr.New(apierr.FailedPrecondition, "kafka refused topic %q: %v", name, err)
		}
		return nil, apierr.Invalid(field, "kafka refused topic %q: %v", name, err)
	case err != nil:
		return nil, kafkaErr(err)
	}
	tbls, err := s.tablesByTopic(ctx)
	if err != nil {
		return nil, err
	}
	return &adminv1.CreateTopicResponse{Topic: &adminv1.Topic{Name: name, Partitions: n, Tables: tbls[name]}}, nil
}

// ListTopics lists Kafka's topics (but its internal ones) with the tables made of each.
func (s *Service) ListTopics(ctx context.Context, _ *adminv1.ListTopicsRequest) (*adminv1.ListTopicsResponse, error) {
	ts, err := s.Kafka.Topics(ctx)
	if err != nil {
		return nil, kafkaErr(err)
	}
	tbls, err := s.tablesByTopic(ctx)
	if err != nil {
		return nil, err
	}
	resp := &adminv1.ListTopicsResponse{}
	for _, t := range ts {
		resp.Topics = append(resp.Topics, &adminv1.Topic{Name: t.Name, Partitions: t.Partitions, Tables: tbls[t.Name]})
	}
	return resp, nil
}

// tablesByTopic names the tables of each topic.
func (s *Service) tablesByTopic(ctx context.Context) (map[string][]string, error) {
	ts, err := tables.List(ctx, s.DB, "")
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, t := range ts {
		out[t.Topic] = append(out[t.Topic], t.FullName())
	}
	return out, nil
}

// validTopic checks a topic name by Kafka's rules, so a bad one is refused naming the
// field before any broker is asked.
func validTopic(name string) error {
	switch {
	case name == "":
		return apierr.Invalid("name", "the topic name is empty")
	case len(name) > maxTopicName:
		return apierr.Invalid("name", "the topic name is %d characters long; Kafka takes at most %d", len(name), maxTopicName)
	case name == "." || name == "..":
		return apierr.Invalid("name", "%q is not a topic name Kafka takes", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return apierr.Invalid("name", "topic %q has the character %q: Kafka takes only a-z, A-Z, 0-9, '.', '_' and '-'", name, r)
		}
	}
	return nil
}

// noTopic is CreateTable's answer for a topic Kafka does not have: the two ways to make it.
func noTopic(topic string) error {
	return apierr.Invalid("topic", "topic %q does not exist in Kafka: create it first with "+
		"`minkctl topic create %s --partitions N` (AdminService/CreateTopic), or produce to it "+
		"where the brokers create topics on first produce (make dev's embedded broker does)", topic, topic)
}
