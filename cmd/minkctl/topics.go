package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

// The topic commands: a table is made of a Kafka topic, and the dialed node makes one
// with its own brokers, so minkctl needs no Kafka address or tools of its own.

type topicOpts struct {
	partitions, replicationFactor int
}

func topicCreateFlags(fs *flag.FlagSet) any {
	o := &topicOpts{}
	fs.IntVar(&o.partitions, "partitions", 0, "partitions of the topic (0: the brokers' default, num.partitions; 1 on make dev's broker)")
	fs.IntVar(&o.replicationFactor, "replication-factor", 0, "replicas of each partition (0: the brokers' default)")
	return o
}

func (c *cli) topicCreate(ctx context.Context, args []string, f any) error {
	o := f.(*topicOpts)
	if o.partitions < 0 {
		return usageError{fmt.Sprintf("--partitions: want 1 or more (0: the brokers' default), got %d", o.partitions)}
	}
	if o.replicationFactor < 0 {
		return usageError{fmt.Sprintf("--replication-factor: want 1 or more (0: the brokers' default), got %d", o.replicationFactor)}
	}
	resp, err := c.client.CreateTopic(ctx, &adminv1.CreateTopicRequest{Node: c.node, Name: args[0],
		Partitions: int32(min(o.partitions, 1<<30)), ReplicationFactor: int32(min(o.replicationFactor, 1<<30))})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) {
		t := resp.GetTopic()
		fmt.Fprintf(w, "created topic %s (%d partitions); make a table of it with: minkctl table create %s --column NAME:TYPE ...\n",
			t.GetName(), t.GetPartitions(), t.GetName())
	})
}

func (c *cli) topicList(ctx context.Context, _ []string, _ any) error {
	resp, err := c.client.ListTopics(ctx, &adminv1.ListTopicsRequest{Node: c.node})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) {
		fmt.Fprintln(w, "TOPIC\tPARTITIONS\tTABLES")
		for _, t := range resp.GetTopics() {
			fmt.Fprintf(w, "%s\t%d\t%s\n", t.GetName(), t.GetPartitions(), dash(strings.Join(t.GetTables(), ",")))
		}
	})
}
