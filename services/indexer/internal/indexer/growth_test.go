package indexer_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tables"
)

// Partitions added to the topic become new partition leases, which indexers take and
// index like the others.
func TestTopicGrowthBecomesNewPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := e.createTable(t, "grow", 2, nil)
	e.startIndexer(t, "idx-a")
	e.produce(t, "grow", 0, jsonEvents(0, 5)...)
	e.checkTiling(t, tbl, 0)

	adm := kadm.NewClient(e.kafka.Client())
	if _, err := adm.CreatePartitions(context.Background(), 2, "grow"); err != nil {
		t.Fatal(err)
	}
	// A fresh producer: the old one's metadata still says 2 partitions.
	e.prod = e.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	e.produce(t, "grow", 3, jsonEvents(100, 7)...)
	leasetest.Eventually(t, 20*time.Second, "table to have 4 partitions", func() bool {
		got, err := tables.GetByID(context.Background(), e.db, tbl.ID)
		return err == nil && got.Partitions == 4
	})
	ls, err := lease.ListLeases(context.Background(), e.db, tbl.ID)
	if err != nil || len(ls) != 5 {
		t.Fatalf("leases after growth: %d %v, want 4 partition + 1 writer", len(ls), err)
	}
	rs := e.checkTiling(t, tbl, 3)
	var n int64
	for _, r := range rs {
		n += r.Records
	}
	if n != 7 {
		t.Fatalf("new partition 3 indexed %d records, want 7", n)
	}
	if ps, _ := ranges.Partitions(context.Background(), e.db, tbl.ID); len(ps) != 4 {
		t.Fatalf("index rows for %d partitions, want 4", len(ps))
	}
}
