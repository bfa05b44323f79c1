package kafkasrc

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/minkhq/mink/pkg/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReadRange calls fn for exactly the committed data records of one partition with
// from <= offset < to, in offset order, and returns nil once the range is done.
//
// Offsets in the range that hold no row (transaction markers, aborted records,
// records removed by compaction) are skipped, also at the end of the range. Errors:
//   - ErrNotStable if to is beyond the last stable offset (checked before fn is called);
//   - ErrOffsetsGone if the log start offset has moved past an offset still to be read;
//   - ErrUnknownTopic, ErrUnavailable, ErrClosed, ctx.Err(), or fn's error unchanged.
//
// fn may have been called for a prefix of the range before an error; the caller
// discards that output. Key, Value and header values of a Record alias the fetch
// buffer, which kafkasrc never reuses, so fn may keep them.
func (c *Client) ReadRange(ctx context.Context, topic string, partition int32, from, to int64, fn func(record.Record) error) error {
	if from < 0 || to < from {
		return fmt.Errorf("kafkasrc: invalid range [%d, %d) of %s/%d", from, to, topic, partition)
	}
	if from == to {
		return nil
	}
	// One fetch ahead: the next fetch is in flight while fn works on this one's
	// records, so a file build costs about max(fetch, encode) rather than the sum.
	ctx, cancel := context.WithCancel(ctx)
	type result struct {
		f   fetched
		err error
	}
	var pending chan result
	fetchAhead := func(pos int64) {
		pending = make(chan result, 1)
		go func(ch chan<- result) {
			f, err := c.fetch(ctx, topic, TopicID{}, partition, pos)
			ch <- result{f, err}
		}(pending)
	}
	defer func() {
		cancel()
		if pending != nil {
			<-pending // nothing outlives the call
		}
	}()
	fetchAhead(from)
	for {
		r := <-pending
		pending = nil
		if r.err != nil {
			return fmt.Errorf("read %s/%d [%d, %d): %w", topic, partition, from, to, r.err)
		}
		f := r.f
		if to > f.lso {
			return fmt.Errorf("%w: read %s/%d [%d, %d): last stable offset is %d, high watermark %d",
				ErrNotStable, topic, partition, from, to, f.lso, f.hwm)
		}
		if f.next < to {
			fetchAhead(f.next)
		}
		for _, rec := range f.recs {
			if rec.Offset >= to {
				break
			}
			if err := fn(toRecord(rec)); err != nil {
				return err
			}
		}
		if f.next >= to {
			return nil
		}
	}
}

// fetched is the outcome of one fetch at a position.
type fetched struct {
	recs []*kgo.Record // committed data records at offsets >= the position, in order
	// next is the position just past everything this fetch consumed: data, control
	// batches, aborted batches and gaps. No committed record lies in [position, next)
	// other than recs.
	next               int64
	hwm, lso, logStart int64
}

// fetch reads from pos with one short (MaxWait 0) fetch, retrying leader moves and
// lost connections for up to the client's timeout. With a non-zero want, only that
// incarnation of the topic is read: ErrTopicChanged once fresh metadata names another.
func (c *Client) fetch(ctx context.Context, topic string, want TopicID, partition int32, pos int64) (fetched, error) {
	var (
		f        fetched
		gone     bool
		maxBytes = c.cfg.fetchMaxBytes
	)
	err := c.retry(ctx, fmt.Sprintf("fetch %s/%d at offset %d", topic, partition, pos), func(ctx context.Context) error {
		for {
			tm, leader, err := c.leader(ctx, topic, partition)
			if err != nil {
				return err
			}
			if !want.IsZero() && !tm.id.IsZero() && tm.id != want {
				// Cached metadata may predate the incarnation want names: ask afresh.
				c.meta.invalidate(topic, tm)
				if tm, leader, err = c.leader(ctx, topic, partition); err != nil {
					return err
				}
				if !tm.id.IsZero() && tm.id != want {
					return fmt.Errorf("%w: %s is topic id %s now, not %s", ErrTopicChanged, topic, tm.id, want)
				}
			}
			req := fetchRequest(0)
			addFetchPartition(req, tm, partition, pos, maxBytes)
			kresp, err := c.kcl.Broker(int(leader)).Request(ctx, req)
			if err != nil {
				return c.transport(topic, tm, err)
			}
			resp := kresp.(*kmsg.FetchResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				if kerr.IsRetriable(err) {
					return transient{err}
				}
				return fmt.Errorf("kafkasrc: fetch %s/%d: %w", topic, partition, err)
			}
			rp := responsePartition(resp, partition)
			if rp == nil {
				return transient{fmt.Errorf("fetch response without %s/%d", topic, partition)}
			}
			if rp.ErrorCode == kerr.OffsetOutOfRange.Code {
				gone = true // diagnosed below: below the log start, or past the end
				return nil
			}
			if err := c.partitionErr(topic, tm, rp.ErrorCode); err != nil {
				return err
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset:         pos,
				IsolationLevel: kgo.ReadCommitted(),
				Topic:          topic,
				Partition:      partition,
			}, rp, c.decomp, nil)
			f = fetched{hwm: rp.HighWatermark, lso: rp.LastStableOffset, logStart: rp.LogStartOffset}
			if f.lso < 0 { // brokers before fetch v4 have no LSO (and no transactions)
				f.lso = f.hwm
			}
			switch {
			case next > pos:
				// Progress. A bad batch after good ones (fp.Err) is met again, first,
				// by the next fetch, which then fails below.
			case fp.Err != nil:
				return fmt.Errorf("kafkasrc: %s/%d at offset %d: %w", topic, partition, pos, fp.Err)
			case len(rp.RecordBatches) > 0:
				// Only part of a batch came back: it is larger than maxBytes.
				if maxBytes >= maxFetchBytes {
					return fmt.Errorf("kafkasrc: %s/%d: batch at offset %d is larger than %d bytes", topic, partition, pos, maxFetchBytes)
				}
				maxBytes = min(2*maxBytes, maxFetchBytes)
				continue
			case resp.ThrottleMillis > 0:
				// A throttled broker answers empty (KIP-219); that says nothing about
				// the log. kgo delays our next request by the throttle time.
				return transient{fmt.Errorf("fetch throttled for %dms", resp.ThrottleMillis)}
			case pos < f.lso:
				// The broker returns the first batch at or after pos that starts below
				// the LSO, whatever the size limit. None came back, so no batch remains
				// in [pos, LSO): compaction emptied the rest of the range. Jump, or a
				// read ending on such a gap would never finish.
				next = f.lso
			}
			f.recs, f.next = fp.Records, next
			return nil
		}
	})
	if err != nil {
		return fetched{}, err
	}
	if gone {
		return fetched{}, c.outOfRange(ctx, topic, partition, pos)
	}
	return f, nil
}

// outOfRange explains an OffsetOutOfRange answer with the partition's bounds.
func (c *Client) outOfRange(ctx context.Context, topic string, partition int32, pos int64) error {
	po, err := c.partitionOffsets(ctx, topic, partition)
	if err != nil {
		return err
	}
	if pos < po.LogStart {
		return fmt.Errorf("%w: %s/%d: offset %d is below the log start offset %d", ErrOffsetsGone, topic, partition, pos, po.LogStart)
	}
	return fmt.Errorf("kafkasrc: %s/%d: offset %d is outside the log [%d, %d] (truncated or recreated topic?)",
		topic, partition, pos, po.LogStart, po.HighWatermark)
}

func fetchRequest(maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(maxWait.Milliseconds())
	req.MinBytes = 1
	// Sizes are limited per partition only. kfake drops a response's aborted
	// transactions when the request-wide limit is what cuts it short, which would let
	// aborted records through (TestTransactions finds it); a broker bounds the answer
	// by the partition limit anyway (plus its own fetch.max.bytes).
	req.MaxBytes = math.MaxInt32
	req.IsolationLevel = 1 // read_committed
	// SessionID 0 with the default SessionEpoch -1: a full fetch, no session state at
	// the broker, so concurrent independent fetches cannot disturb each other.
	return req
}

func addFetchPartition(req *kmsg.FetchRequest, tm *topicMeta, partition int32, pos int64, maxBytes int32) {
	var rt *kmsg.FetchRequestTopic
	for i := range req.Topics {
		if req.Topics[i].Topic == tm.name {
			rt = &req.Topics[i]
		}
	}
	if rt == nil {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = tm.name
		t.TopicID = tm.id // fetch v13+ names topics by ID only
		req.Topics = append(req.Topics, t)
		rt = &req.Topics[len(req.Topics)-1]
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = pos
	rp.PartitionMaxBytes = maxBytes
	// Fencing by leader epoch (KIP-320) stops a deposed leader from answering.
	rp.CurrentLeaderEpoch = tm.parts[partition].epoch
	rt.Partitions = append(rt.Partitions, rp)
}

// responsePartition finds the only partition of a one-partition fetch response.
func responsePartition(resp *kmsg.FetchResponse, partition int32) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if rp := &resp.Topics[i].Partitions[j]; rp.Partition == partition {
				return rp
			}
		}
	}
	return nil
}

// toRecord converts without copying bytes; only headers need a new slice.
func toRecord(r *kgo.Record) record.Record {
	var hs []record.Header
	if len(r.Headers) > 0 {
		hs = make([]record.Header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = record.Header{Key: h.Key, Value: h.Value}
		}
	}
	return record.Record{
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp,
		Key:       r.Key,
		Value:     r.Value,
		Headers:   hs,
	}
}
