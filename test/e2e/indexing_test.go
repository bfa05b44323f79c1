package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/test/cluster"
)

// TestIndexingHandoffBetweenProcesses: a table created through the admin API is indexed
// by real indexer processes while records keep arriving; the partition leases move from
// one process to another mid-stream (a join, a SIGKILL) and every partition's ranges
// still tile its offsets exactly, with every committed record in exactly one range.
func TestIndexingHandoffBetweenProcesses(t *testing.T) {
	const ttl = 2 * time.Second
	c := newCluster(t, ttl)
	c.Kafka.CreateTopic("orders", 3, nil)
	a := c.Start("indexer", "idx-a")
	ctx := context.Background()
	resp, err := c.Member("idx-a").Admin().CreateTable(ctx, &adminv1.CreateTableRequest{Name: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		Columns:    []*adminv1.Column{{Name: "id", Type: "long", Required: true}, {Name: "item", Type: "string"}},
		Properties: map[string]string{"mink.range.max-age": "300ms"}})
	if err != nil {
		t.Fatal(err)
	}
	tbl := resp.GetTable()
	if tbl.GetPartitions() != 3 {
		t.Fatalf("table has %d partitions, topic has 3", tbl.GetPartitions())
	}

	prod := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			var recs []*kgo.Record
			for p := int32(0); p < 3; p++ {
				recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: []byte(fmt.Sprintf(`{"id":%d,"item":"thing %d"}`, n, n))})
				n++
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := prod.ProduceSync(pctx, recs...).FirstErr()
			cancel()
			if err != nil { // t.Fatal is for the test's goroutine
				t.Errorf("produce: %v", err)
				<-stop
				done <- n
				return
			}
			time.Sleep(10 * time.Millisecond) // the pace of the stream, not a wait
		}
	}()
	waitFor(t, 20*time.Second, "idx-a to store ranges", func() (int64, bool) {
		st, _ := ranges.State(ctx, c.DB, tbl.GetId(), 0)
		return st.Ranges, st.Ranges >= 2
	})
	c.Start("indexer", "idx-b")
	waitFor(t, 20*time.Second, "idx-b to take partitions", func() (cluster.Shares, bool) {
		s := c.Shares(tbl.GetId())
		return s, s.Partitions["idx-b"] >= 1
	})
	a.Signal(syscall.SIGKILL)
	waitFor(t, 20*time.Second, "idx-b to hold all 3 partitions after idx-a's leases expire", func() (cluster.Shares, bool) {
		s := c.Shares(tbl.GetId())
		return s, s.Partitions["idx-b"] == 3
	})
	close(stop)
	produced := <-done

	kc, err := kafkasrc.New(c.Kafka.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	offs, err := kc.Offsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for p := int32(0); p < 3; p++ {
		end := offs[p].LastStable
		waitFor(t, 20*time.Second, fmt.Sprintf("partition %d indexed to %d", p, end), func() (int64, bool) {
			st, _ := ranges.State(ctx, c.DB, tbl.GetId(), p)
			return st.IndexedEnd, st.IndexedEnd == end
		})
		rs, err := ranges.List(ctx, c.DB, tbl.GetId(), p, -1)
		if err != nil {
			t.Fatal(err)
		}
		epochs := map[int64]bool{}
		for i, r := range rs {
			if i > 0 && r.Start != rs[i-1].End {
				t.Fatalf("partition %d: range %d starts at %d, previous ended at %d", p, i, r.Start, rs[i-1].End)
			}
			epochs[r.Epoch] = true
			total += r.Records
		}
		if rs[0].Start != offs[p].LogStart {
			t.Fatalf("partition %d: index starts at %d, log start %d", p, rs[0].Start, offs[p].LogStart)
		}
		var n int64
		kc.ReadRange(ctx, "orders", p, offs[p].LogStart, end, func(record.Record) error { n++; return nil })
		var inRanges int64
		for _, r := range rs {
			inRanges += r.Records
		}
		if inRanges != n {
			t.Fatalf("partition %d: %d records in ranges, %d in Kafka", p, inRanges, n)
		}
		t.Logf("partition %d: %d ranges under %d epochs, %d records", p, len(rs), len(epochs), n)
	}
	if total != int64(produced) {
		t.Fatalf("%d records indexed, %d produced", total, produced)
	}

	// DescribeTable reports the index against Kafka: nothing left to index.
	d, err := c.Member("idx-b").Admin().DescribeTable(ctx, &adminv1.DescribeTableRequest{Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.GetPartitions() {
		if p.GetLagRecords() != 0 || p.GetHolder() != "idx-b" || p.GetRangeCount() == 0 {
			t.Errorf("describe partition %d: %+v", p.GetPartition(), p)
		}
	}
}
