package kafkasrc_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCompaction(t *testing.T) {
	c := kafkatest.New(t)
	const topic = "compacted"
	c.CreateTopic(topic, 1, map[string]string{"cleanup.policy": "compact"})
	p := producer(c)
	cl := newClient(t, c, kafkasrc.WithFetchMaxBytes(1024))

	// 12 keys overwritten many times, in batches of 1 to 6 records, so compaction
	// removes whole batches and records inside batches. Some keys end on a tombstone,
	// which compaction keeps (delete.retention.ms is a day). Every 9th record has a key
	// of its own and survives, the first one included: kfake (unlike Kafka) moves the
	// log start offset up to the first surviving batch.
	rng := rand.New(rand.NewPCG(3, 4))
	var produced []*kgo.Record
	for i := 0; i < 240; {
		var batch []*kgo.Record
		for range 1 + rng.IntN(6) {
			k := rng.IntN(12)
			key := fmt.Appendf(nil, "key-%d", k)
			if i%9 == 0 {
				key = fmt.Appendf(nil, "unique-%d", i)
			}
			r := &kgo.Record{Topic: topic, Key: key, Value: fmt.Appendf(nil, "v%d", i),
				Timestamp: base.Add(time.Duration(i) * time.Millisecond), Headers: []kgo.RecordHeader{{Key: "i", Value: fmt.Append(nil, i)}}}
			if k%5 == 0 && i%9 != 0 && rng.IntN(3) == 0 {
				r.Value = nil
			}
			batch = append(batch, r)
			i++
		}
		produced = append(produced, kafkatest.Produce(t, p, batch...)...)
	}
	// The broker never compacts the last batch; a key of its own makes it a survivor
	// by the usual rule too.
	produced = append(produced, kafkatest.Produce(t, p, &kgo.Record{Topic: topic, Key: []byte("last"), Value: []byte("last"), Timestamp: base.Add(time.Second)})...)
	end := int64(len(produced))

	latest := map[string]int64{}
	for _, r := range produced {
		latest[string(r.Key)] = r.Offset
	}
	var survivors []*kgo.Record
	for _, r := range produced {
		if latest[string(r.Key)] == r.Offset {
			survivors = append(survivors, r)
		}
	}
	all := want(survivors)

	c.Compact()
	// Compaction ran: the whole partition now reads as exactly the survivors.
	if got := readRange(t, cl, topic, 0, 0, end); len(got) == len(produced) {
		t.Fatal("nothing was compacted")
	}
	if po := hwm(t, cl, topic, 0); po.HighWatermark != end || po.LogStart != 0 {
		t.Fatalf("offsets after compaction: %+v", po)
	}
	checkRange(t, cl, all, topic, 0, 0, end)

	// Ranges that start, end, or lie entirely in holes still end, with the survivors.
	alive := map[int64]bool{}
	for _, r := range all {
		alive[r.Offset] = true
	}
	var holes []int64
	for o := range end {
		if !alive[o] {
			holes = append(holes, o)
		}
	}
	for i := 0; i+1 < len(holes); i += 7 {
		checkRange(t, cl, all, topic, 0, holes[i], holes[i+1]+1) // starts and ends on a hole
		checkRange(t, cl, all, topic, 0, holes[i], holes[i]+1)   // only a hole
		checkRange(t, cl, all, topic, 0, 0, holes[i+1]+1)        // ends on a hole
		checkRange(t, cl, all, topic, 0, holes[i], end)          // starts on a hole
	}
	for range 100 {
		from := rng.Int64N(end + 1)
		checkRange(t, cl, all, topic, 0, from, from+rng.Int64N(end-from+1))
	}

	tl := kafkasrc.NewTailer(cl, topic, 0, 0)
	defer tl.Close()
	got, cuts := tail(t, tl, end)
	if d := diff(got, all); d != "" {
		t.Fatal(d)
	}
	checkTiling(t, cl, all, topic, 0, cuts)
}

func TestOffsetsGone(t *testing.T) {
	c := kafkatest.New(t)
	const topic, retained = "trimmed", "retained"
	c.CreateTopic(topic, 2, nil)
	c.CreateTopic(retained, 1, map[string]string{"retention.ms": fmt.Sprint(time.Hour.Milliseconds())})
	p := producer(c)
	var produced []*kgo.Record
	for i := range 100 {
		produced = append(produced, kafkatest.Produce(t, p, variedRecord(topic, int32(i%2), i))...)
	}
	all := want(produced)
	cl := newClient(t, c)
	ctx := ctxFor(t, 10*time.Second)

	t.Run("DeleteRecords", func(t *testing.T) {
		resp, err := kadm.NewClient(c.Client()).DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 20}}})
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		if po := hwm(t, cl, topic, 0); po.LogStart != 20 || po.HighWatermark != 50 {
			t.Fatalf("offsets after DeleteRecords: %+v", po)
		}
		err = cl.ReadRange(ctx, topic, 0, 10, 30, func(record.Record) error {
			t.Fatal("fn called for a range Kafka no longer has")
			return nil
		})
		if !errors.Is(err, kafkasrc.ErrOffsetsGone) || !strings.Contains(err.Error(), "[10, 30)") || !strings.Contains(err.Error(), "log start offset 20") {
			t.Fatalf("ReadRange below the log start: %v", err)
		}
		checkRange(t, cl, all, topic, 0, 20, 50) // what is left reads fine
		checkRange(t, cl, all, topic, 1, 0, 50)  // and the other partition is untouched

		tl := kafkasrc.NewTailer(cl, topic, 0, 5)
		defer tl.Close()
		if _, next, err := tl.Poll(ctx); !errors.Is(err, kafkasrc.ErrOffsetsGone) || next != 5 {
			t.Fatalf("Poll below the log start = %d, %v", next, err)
		}
	})

	t.Run("retention", func(t *testing.T) {
		// Ten records from two hours ago, then ten from now: retention drops the old.
		var rs []*kgo.Record
		for i := range 20 {
			ts := time.Now()
			if i < 10 {
				ts = ts.Add(-2 * time.Hour)
			}
			rs = append(rs, kafkatest.Produce(t, p, &kgo.Record{Topic: retained, Value: fmt.Append(nil, i), Timestamp: ts.Truncate(time.Millisecond)})...)
		}
		c.ApplyRetention()
		po := hwm(t, cl, retained, 0)
		if po.LogStart != 10 {
			t.Fatalf("offsets after retention: %+v", po)
		}
		err := cl.ReadRange(ctx, retained, 0, 0, 20, func(record.Record) error { return nil })
		if !errors.Is(err, kafkasrc.ErrOffsetsGone) {
			t.Fatalf("ReadRange of expired records: %v", err)
		}
		checkRange(t, cl, want(rs), retained, 0, 10, 20)
	})
}
