package kafkasrc_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// emptyFetch answers a fetch with no data and the given bounds, as a broker does when
// no batch is left between the fetch offset and the last stable offset.
func emptyFetch(req *kmsg.FetchRequest, end int64, throttle int32) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.ThrottleMillis = throttle
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = end, end, 0
			rp.RecordBatches = []byte{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func fetchesAt(req *kmsg.FetchRequest, at func(int64) bool) bool {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if !at(p.FetchOffset) {
				return false
			}
		}
	}
	return true
}

// A range whose last offsets hold no batch at all must still end. kfake always keeps a
// partition's last batch, so the broker is made to answer fetches from offset 10 on as
// if compaction had removed the batches of offsets 10-14 (the high watermark stays 15).
// A throttled empty answer, though, says nothing about the log and must not end a read.
func TestTrailingGap(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Brokers(1))
	const topic, end = "gap", 15
	c.CreateTopic(topic, 1, nil)
	p := producer(c)
	var produced []*kgo.Record
	for i := range end { // one batch each, so that a small fetch stops at every offset
		produced = append(produced, kafkatest.Produce(t, p, variedRecord(topic, 0, i))...)
	}
	all := want(produced[:10]) // the broker will say 10-14 are gone

	var throttled atomic.Int32
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if !fetchesAt(req, func(o int64) bool { return o == 5 }) {
			return nil, nil, false
		}
		throttled.Add(1)
		return emptyFetch(req, end, 1), nil, true // once, then the control is dropped
	})
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if !fetchesAt(req, func(o int64) bool { return o >= 10 }) {
			return nil, nil, false
		}
		c.KeepControl()
		return emptyFetch(req, end, 0), nil, true
	})

	cl := newClient(t, c, kafkasrc.WithFetchMaxBytes(64), kafkasrc.WithPollWait(100*time.Millisecond))
	checkRange(t, cl, all, topic, 0, 0, end) // throttled at 5, gap from 10
	if n := throttled.Load(); n != 1 {
		t.Fatalf("the throttled answer was given %d times", n)
	}
	checkRange(t, cl, all, topic, 0, 12, end)
	checkRange(t, cl, all, topic, 0, 10, 11)

	tl := kafkasrc.NewTailer(cl, topic, 0, 3)
	defer tl.Close()
	got, cuts := tail(t, tl, end) // next reaches 15, past the gap
	if d := diff(got, inRange(all, 0, 3, end)); d != "" {
		t.Fatal(d)
	}
	checkTiling(t, cl, all, topic, 0, cuts)
}
