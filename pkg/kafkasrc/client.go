// Package kafkasrc reads Kafka for Mink: exact offset ranges for the file server
// (ReadRange) and a tail for the indexer (Tailer). Every read is read_committed, and
// every position it reports counts the offsets Kafka spends on things that are not rows
// (transaction markers, aborted batches, compacted-away records), so ranges cut at those
// positions tile a partition with no gap and no overlap.
//
// Design notes: docs/design/kafkasrc.md.
package kafkasrc

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	// ErrUnknownTopic: the topic does not exist (or the partition is not in it).
	ErrUnknownTopic = errors.New("kafkasrc: unknown topic")
	// ErrOffsetsGone: offsets asked for are below the log start offset; retention or
	// DeleteRecords removed them and Kafka can no longer yield them.
	ErrOffsetsGone = errors.New("kafkasrc: offsets no longer in Kafka")
	// ErrNotStable: a range ends beyond the last stable offset, so some of it is not
	// written yet or is inside an open transaction. Reading it now would mean waiting.
	ErrNotStable = errors.New("kafkasrc: range ends beyond the last stable offset")
	// ErrUnavailable: Kafka did not answer usefully within the client's timeout.
	ErrUnavailable = errors.New("kafkasrc: kafka unavailable")
	// ErrClosed: the Client or Tailer was closed.
	ErrClosed = errors.New("kafkasrc: closed")
	// ErrTopicChanged: the topic a Tailer reads was deleted and created again (Kafka
	// names it by another TopicID): its offsets start over, with other records.
	ErrTopicChanged = errors.New("kafkasrc: topic deleted and created again")
)

// PartitionOffsets are a partition's bounds: records live in [LogStart, HighWatermark),
// and read_committed readers can see up to LastStable (<= HighWatermark).
type PartitionOffsets struct {
	Partition     int32
	LogStart      int64
	HighWatermark int64
	LastStable    int64
}

// Option configures a Client.
type Option func(*config)

type config struct {
	timeout       time.Duration
	fetchMaxBytes int32
	pollWait      time.Duration
	kopts         []kgo.Opt
}

// WithTimeout bounds how long one operation (a fetch, a metadata or offsets lookup)
// may go without a useful answer before it fails with ErrUnavailable. Default 10s.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithFetchMaxBytes is the size a single fetch asks for (default 4 MiB). Memory in use
// is about this times the number of concurrent readers. A batch larger than this is
// still read: the fetch size doubles for it, up to 64 MiB.
func WithFetchMaxBytes(n int32) Option { return func(c *config) { c.fetchMaxBytes = n } }

// WithPollWait is how long a Tailer's long poll waits at the broker for new data
// (default 500ms). It bounds how late a tailer that starts waiting joins the shared
// long poll, not how late data is seen once it is being waited for.
func WithPollWait(d time.Duration) Option { return func(c *config) { c.pollWait = d } }

// WithKgoOptions passes options (TLS, SASL, logger, client ID) to the franz-go clients.
func WithKgoOptions(opts ...kgo.Opt) Option {
	return func(c *config) { c.kopts = append(c.kopts, opts...) }
}

const maxFetchBytes = 64 << 20 // below kgo's default BrokerMaxReadBytes (100 MiB)

// Client reads Kafka. One Client serves a whole process: it is safe for concurrent use
// by any number of ReadRange calls and Tailers.
type Client struct {
	cfg    config
	kcl    *kgo.Client // metadata, offsets and short (MaxWait 0) fetches
	decomp kgo.Decompressor
	meta   metaCache
	hub    *hub
	closed atomic.Bool
}

// New returns a Client for the given seed brokers. It does not connect: a Kafka that is
// down at start-up shows up as ErrUnavailable on first use, not here.
func New(brokers []string, opts ...Option) (*Client, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafkasrc: no brokers")
	}
	cfg := config{timeout: 10 * time.Second, fetchMaxBytes: 4 << 20, pollWait: 500 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.timeout <= 0 || cfg.pollWait <= 0 || cfg.fetchMaxBytes <= 0 || cfg.fetchMaxBytes > maxFetchBytes {
		return nil, fmt.Errorf("kafkasrc: invalid options: timeout %v, poll wait %v, fetch max bytes %d",
			cfg.timeout, cfg.pollWait, cfg.fetchMaxBytes)
	}
	cfg.kopts = append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DialTimeout(min(cfg.timeout, 10*time.Second)),
		kgo.RetryTimeout(cfg.timeout),
		// Our own retry loop (retry) backs off, refreshes metadata and bounds the
		// total time; leaving retries to it also lets it report the actual cause
		// ("connection refused") rather than only that time ran out.
		kgo.RequestRetries(1),
	}, cfg.kopts...)
	kcl, err := kgo.NewClient(cfg.kopts...)
	if err != nil {
		return nil, fmt.Errorf("kafkasrc: %w", err)
	}
	c := &Client{cfg: cfg, kcl: kcl, decomp: kgo.DefaultDecompressor()}
	c.meta.topics = make(map[string]*topicMeta)
	c.hub = newHub(c)
	return c, nil
}

// Close stops the Client: Tailers waiting in Poll return ErrClosed, every goroutine
// the Client started has exited when Close returns.
func (c *Client) Close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.hub.close()
	c.kcl.Close()
}

// Partitions returns the topic's partition count, from fresh metadata.
func (c *Client) Partitions(ctx context.Context, topic string) (int32, error) {
	_, n, err := c.Topic(ctx, topic)
	return n, err
}

// Topic returns the topic's id and partition count, from fresh metadata.
func (c *Client) Topic(ctx context.Context, topic string) (TopicID, int32, error) {
	var n int32
	var id TopicID
	err := c.retry(ctx, "metadata of "+topic, func(ctx context.Context) error {
		tm, err := c.topic(ctx, topic, 0)
		if err != nil {
			return err
		}
		n, id = int32(len(tm.parts)), tm.id
		return nil
	})
	return id, n, err
}

// TopicID names one incarnation of a topic (Kafka 2.8 and later): a topic deleted and
// created again under the same name has a new one. The zero TopicID: the broker names
// none.
type TopicID [16]byte

// IsZero reports whether the broker named no id.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// String is the id as Kafka's tools print it (base64, URL alphabet, unpadded); "" for
// the zero id.
func (id TopicID) String() string {
	if id.IsZero() {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Offsets returns the bounds of every partition of topic. The three lists are read in
// the order log start, last stable, high watermark, so LastStable <= HighWatermark
// holds even while producers write.
func (c *Client) Offsets(ctx context.Context, topic string) ([]PartitionOffsets, error) {
	_, offs, err := c.listOffsets(ctx, topic, -1)
	return offs, err
}

// TopicOffsets is Offsets with the id of the topic they were read from (from the same
// fresh metadata), so a caller can tell a topic created again from the one it knew.
func (c *Client) TopicOffsets(ctx context.Context, topic string) (TopicID, []PartitionOffsets, error) {
	return c.listOffsets(ctx, topic, -1)
}

func (c *Client) partitionOffsets(ctx context.Context, topic string, partition int32) (PartitionOffsets, error) {
	_, pos, err := c.listOffsets(ctx, topic, partition)
	if err != nil {
		return PartitionOffsets{}, err
	}
	return pos[0], nil
}

// listOffsets lists one partition, or all when partition < 0.
func (c *Client) listOffsets(ctx context.Context, topic string, partition int32) (TopicID, []PartitionOffsets, error) {
	var out []PartitionOffsets
	var id TopicID
	err := c.retry(ctx, "list offsets of "+topic, func(ctx context.Context) error {
		// All partitions: fresh metadata, so that new partitions are listed at once.
		maxAge := time.Duration(0)
		if partition >= 0 {
			maxAge = metaMaxAge
		}
		tm, err := c.topic(ctx, topic, maxAge)
		if err == nil && int(partition) >= len(tm.parts) {
			tm, err = c.topic(ctx, topic, 0) // partitions may have been added since we cached
		}
		if err != nil {
			return err
		}
		parts := make([]int32, 0, len(tm.parts))
		if partition >= 0 {
			if int(partition) >= len(tm.parts) {
				return fmt.Errorf("%w: %q has no partition %d", ErrUnknownTopic, topic, partition)
			}
			parts = append(parts, partition)
		} else {
			for p := range tm.parts {
				parts = append(parts, int32(p))
			}
		}
		list := func(isolation int8, ts int64) (map[int32]int64, error) {
			req := kmsg.NewPtrListOffsetsRequest()
			req.IsolationLevel = isolation
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			for _, p := range parts {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition = p
				rp.Timestamp = ts
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			// kgo splits a ListOffsets by partition leader and merges the answers.
			kresp, err := c.kcl.Request(ctx, req)
			if err != nil {
				return nil, c.transport(topic, tm, err)
			}
			got := make(map[int32]int64, len(parts))
			for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
				for _, p := range t.Partitions {
					if err := c.partitionErr(topic, tm, p.ErrorCode); err != nil {
						return nil, err
					}
					got[p.Partition] = p.Offset
				}
			}
			for _, p := range parts {
				if _, ok := got[p]; !ok {
					return nil, transient{fmt.Errorf("no offset listed for %s/%d", topic, p)}
				}
			}
			return got, nil
		}
		start, err := list(0, -2)
		if err != nil {
			return err
		}
		stable, err := list(1, -1)
		if err != nil {
			return err
		}
		high, err := list(0, -1)
		if err != nil {
			return err
		}
		out = out[:0]
		for _, p := range parts {
			out = append(out, PartitionOffsets{Partition: p, LogStart: start[p], HighWatermark: high[p], LastStable: stable[p]})
		}
		id = tm.id
		return nil
	})
	return id, out, err
}

// transient marks an error worth retrying (leader moved, connection lost); retry turns
// it into ErrUnavailable if it persists for the client's timeout.
type transient struct{ err error }

func (t transient) Error() string { return t.err.Error() }
func (t transient) Unwrap() error { return t.err }

// retry runs op until it succeeds, fails with a non-transient error, or the client's
// timeout passes. A caller's ctx ending wins over everything and is returned as is.
func (c *Client) retry(ctx context.Context, what string, op func(context.Context) error) error {
	if c.closed.Load() {
		return ErrClosed
	}
	opCtx, cancel := context.WithTimeout(ctx, c.cfg.timeout)
	defer cancel()
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !sleep(opCtx, backoff(attempt)) {
			break
		}
		err := op(opCtx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var t transient
		if !errors.As(err, &t) {
			return err
		}
		// Keep the most telling cause: a later attempt cut short by the deadline
		// says less than an earlier "connection refused".
		if last == nil || !errors.Is(t.err, context.DeadlineExceeded) {
			last = t.err
		}
		if opCtx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if c.closed.Load() {
		return ErrClosed
	}
	return fmt.Errorf("%w: %s: no answer within %v: %v", ErrUnavailable, what, c.cfg.timeout, last)
}

func backoff(attempt int) time.Duration {
	return min(25*time.Millisecond<<min(attempt, 6), time.Second)
}

// sleep waits d or until ctx ends; it reports whether the full d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// transport classifies an error from a kgo request: every transport failure is worth a
// retry (with fresh metadata, since the leader may have moved), except a closed client.
func (c *Client) transport(topic string, tm *topicMeta, err error) error {
	if errors.Is(err, kgo.ErrClientClosed) {
		return ErrClosed
	}
	c.meta.invalidate(topic, tm)
	return transient{err}
}

// partitionErr classifies a partition-level error code.
func (c *Client) partitionErr(topic string, tm *topicMeta, code int16) error {
	if code == 0 {
		return nil
	}
	err := kerr.ErrorForCode(code)
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		// Either stale metadata or a deleted topic: a metadata refresh decides.
		c.meta.invalidate(topic, tm)
		return transient{err}
	case kerr.IsRetriable(err):
		c.meta.invalidate(topic, tm)
		return transient{err}
	}
	return fmt.Errorf("kafkasrc: %s: %w", topic, err)
}

// Metadata cache. Reads need the leader and topic ID of a partition on every fetch;
// asking Kafka each time would double the request count, so entries live metaMaxAge
// and are dropped early whenever a leader-related error says they are stale.
const metaMaxAge = 30 * time.Second

type topicMeta struct {
	name  string
	id    TopicID
	parts []partMeta // indexed by partition
	at    time.Time
}

type partMeta struct {
	leader int32 // -1: none right now
	epoch  int32
}

type metaCache struct {
	mu     sync.Mutex
	topics map[string]*topicMeta
}

func (m *metaCache) cached(topic string) *topicMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.topics[topic]
}

// invalidate drops tm if it is still the cached entry, so that many readers failing on
// the same stale entry cause one refresh each at most, never a drop of a newer entry.
func (m *metaCache) invalidate(topic string, tm *topicMeta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if tm == nil || m.topics[topic] == tm {
		delete(m.topics, topic)
	}
}

// topic returns metadata for topic no older than maxAge (0: always fresh).
func (c *Client) topic(ctx context.Context, topic string, maxAge time.Duration) (*topicMeta, error) {
	if tm := c.meta.cached(topic); tm != nil && maxAge > 0 && time.Since(tm.at) < maxAge {
		return tm, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false // reading must never create a topic
	kresp, err := c.kcl.Request(ctx, req)
	if err != nil {
		return nil, c.transport(topic, nil, err)
	}
	for _, t := range kresp.(*kmsg.MetadataResponse).Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
			}
			if kerr.IsRetriable(err) {
				return nil, transient{err}
			}
			return nil, fmt.Errorf("kafkasrc: metadata of %q: %w", topic, err)
		}
		n := 0
		for _, p := range t.Partitions {
			n = max(n, int(p.Partition)+1)
		}
		tm := &topicMeta{name: topic, id: t.TopicID, parts: make([]partMeta, n), at: time.Now()}
		for i := range tm.parts {
			tm.parts[i] = partMeta{leader: -1, epoch: -1}
		}
		for _, p := range t.Partitions {
			leader := p.Leader
			if p.ErrorCode != 0 {
				leader = -1 // e.g. LeaderNotAvailable: fetches retry until one is elected
			}
			tm.parts[p.Partition] = partMeta{leader: leader, epoch: p.LeaderEpoch}
		}
		c.meta.mu.Lock()
		c.meta.topics[topic] = tm
		c.meta.mu.Unlock()
		return tm, nil
	}
	return nil, transient{fmt.Errorf("metadata response without topic %q", topic)}
}

// leader returns the topic metadata and the current leader of a partition.
func (c *Client) leader(ctx context.Context, topic string, partition int32) (*topicMeta, int32, error) {
	tm, err := c.topic(ctx, topic, metaMaxAge)
	if err == nil && partition >= 0 && int(partition) >= len(tm.parts) {
		tm, err = c.topic(ctx, topic, 0) // partitions may have been added since we cached
	}
	if err != nil {
		return nil, -1, err
	}
	if partition < 0 || int(partition) >= len(tm.parts) {
		return nil, -1, fmt.Errorf("%w: %q has no partition %d", ErrUnknownTopic, topic, partition)
	}
	leader := tm.parts[partition].leader
	if leader < 0 {
		c.meta.invalidate(topic, tm)
		return nil, -1, transient{fmt.Errorf("%s/%d has no leader", topic, partition)}
	}
	return tm, leader, nil
}
