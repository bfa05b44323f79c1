package kafkasrc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minkhq/mink/pkg/atomicmax"
	"github.com/minkhq/mink/pkg/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tailer follows one partition for the indexer. It owns no goroutine: Poll does its
// work on the caller's goroutine, and waiting for new data is shared by all Tailers of
// a Client (see hub).
type Tailer struct {
	c         *Client
	topic     string
	topicID   TopicID // zero: any incarnation of topic
	partition int32

	ctx    context.Context // ends when the Tailer is closed
	cancel context.CancelFunc

	mu   sync.Mutex   // one Poll at a time
	next atomic.Int64 // written by Poll only; atomic so Next never waits for a Poll

	hwm, lso atomic.Int64 // latest seen, -1 until the first answer
}

// NewTailer returns a Tailer that reads topic/partition from offset from. It does not
// talk to Kafka until Poll.
func NewTailer(c *Client, topic string, partition int32, from int64) *Tailer {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Tailer{c: c, topic: topic, partition: partition, ctx: ctx, cancel: cancel}
	t.next.Store(from)
	t.hwm.Store(-1)
	t.lso.Store(-1)
	return t
}

// Poll returns the next committed data records and next, the offset just past
// everything consumed so far, including transaction markers, aborted batches and
// compaction gaps. Ranges cut at successive values of next tile the partition.
//
// Poll blocks until it has records or next has moved (e.g. past a trailing commit or
// abort marker), or until ctx ends (then it returns ctx.Err()) or the Tailer is closed
// (ErrClosed). next is valid with any error: it is where the Tailer stands. Other
// errors are those of ReadRange (ErrOffsetsGone, ErrUnavailable, ErrUnknownTopic); the
// Tailer stays usable after them and the caller may Poll again.
func (t *Tailer) Poll(ctx context.Context) ([]record.Record, int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Closing the Tailer ends this Poll; AfterFunc starts no goroutine unless it fires.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()
	next := t.next.Load()
	fail := func(err error) ([]record.Record, int64, error) {
		if t.ctx.Err() != nil {
			err = ErrClosed
		}
		return nil, next, err
	}
	for {
		if t.ctx.Err() != nil {
			return fail(ErrClosed)
		}
		f, err := t.c.fetch(ctx, t.topic, t.topicID, t.partition, next)
		if err != nil {
			return fail(err)
		}
		t.observe(f.hwm, f.lso)
		moved := f.next > next
		next = f.next
		t.next.Store(next)
		if len(f.recs) > 0 {
			recs := make([]record.Record, len(f.recs))
			for i, r := range f.recs {
				recs[i] = toRecord(r)
			}
			return recs, next, nil
		}
		if moved {
			return nil, next, nil
		}
		if err := t.c.hub.wait(ctx, t, next); err != nil {
			return fail(err)
		}
	}
}

// Pin makes the Tailer read only the incarnation id of its topic (the one its caller
// checked, kafkasrc.TopicOffsets): once the topic is deleted and created again, Poll fails
// with ErrTopicChanged rather than go on reading the new one's records at the old
// offsets. A zero id pins nothing. Call it before the first Poll.
func (t *Tailer) Pin(id TopicID) { t.topicID = id }

// Next is the offset the Tailer stands at: where it started, or the last next that
// Poll returned.
func (t *Tailer) Next() int64 { return t.next.Load() }

// HighWatermark is the partition's latest known high watermark (-1 before any
// answer). It is refreshed by Poll and, while Poll waits, by every long poll.
func (t *Tailer) HighWatermark() int64 { return t.hwm.Load() }

// LastStable is the latest known last stable offset (-1 before any answer). Lag of a
// read_committed tail is LastStable - next.
func (t *Tailer) LastStable() int64 { return t.lso.Load() }

// Close ends a running Poll and makes later Polls return ErrClosed. It leaves nothing
// running.
func (t *Tailer) Close() { t.cancel() }

// observe records bounds seen in an answer; answers can arrive out of order (the hub
// and Poll both fetch), so values only move forward.
func (t *Tailer) observe(hwm, lso int64) {
	atomicmax.Store(&t.hwm, hwm)
	atomicmax.Store(&t.lso, lso)
}

// hub is the one long poll that all waiting Tailers of a Client share.
//
// Why: a Kafka broker serves the requests of one connection one at a time, and kgo has
// one fetch connection per broker per client. A long poll per Tailer would queue every
// Tailer (and every ReadRange) behind the others' waits. Instead, per broker, one loop
// sends a single fetch naming every partition a Tailer waits on (MaxWait = pollWait,
// MinBytes = 1, at most one batch of data), on a kgo client of its own so that it never
// delays range reads. When the answer shows a partition has moved past its waiter (LSO
// beyond the waiter's position) or an error, the waiter wakes and fetches for itself.
//
// The hub only ever wakes a Tailer, early or late; it never hands it data. Records and
// positions always come from the Tailer's own fetch, the same code as ReadRange, so the
// hub cannot break the positions' exactness.
type hub struct {
	c      *Client
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	kcl    *kgo.Client // created when the first Tailer waits
	loops  map[int32]*brokerLoop
	wg     sync.WaitGroup
	closed bool
}

// brokerLoop is the state of one broker's long poll; guarded by hub.mu.
type brokerLoop struct {
	waiting map[*waiter]struct{}
	cancel  context.CancelFunc // ends the round in flight
	kick    chan struct{}      // waiters came or went
}

type waiter struct {
	t    *Tailer
	pos  int64
	woke chan struct{}
	once sync.Once
}

func (w *waiter) wake() { w.once.Do(func() { close(w.woke) }) }

func (w *waiter) woken() bool {
	select {
	case <-w.woke:
		return true
	default:
		return false
	}
}

func newHub(c *Client) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &hub{c: c, ctx: ctx, cancel: cancel, loops: make(map[int32]*brokerLoop)}
}

// wait blocks until t's partition may have data past pos, or ctx ends.
func (h *hub) wait(ctx context.Context, t *Tailer, pos int64) error {
	tm := h.c.meta.cached(t.topic)
	if tm == nil || int(t.partition) >= len(tm.parts) || tm.parts[t.partition].leader < 0 {
		// No leader known: let the Tailer's own fetch find it.
		return ctx.Err()
	}
	leader := tm.parts[t.partition].leader
	w := &waiter{t: t, pos: pos, woke: make(chan struct{})}
	if err := h.add(leader, w); err != nil {
		return err
	}
	defer h.remove(leader, w)
	// Safety net: the hub wakes on every doubt it sees, but Poll does not depend on it
	// alone; after a while it looks for itself.
	recheck := time.NewTimer(20 * h.c.cfg.pollWait)
	defer recheck.Stop()
	select {
	case <-w.woke:
		return nil
	case <-recheck.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hub) add(leader int32, w *waiter) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	if h.kcl == nil {
		kcl, err := kgo.NewClient(h.c.cfg.kopts...)
		if err != nil {
			return err
		}
		h.kcl = kcl
	}
	bl := h.loops[leader]
	if bl == nil {
		bl = &brokerLoop{waiting: make(map[*waiter]struct{}), kick: make(chan struct{}, 1)}
		h.loops[leader] = bl
		h.wg.Add(1)
		go h.loop(leader, bl)
	}
	bl.waiting[w] = struct{}{}
	kick(bl.kick)
	return nil
}

func (h *hub) remove(leader int32, w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	bl := h.loops[leader]
	if bl == nil {
		return
	}
	delete(bl.waiting, w)
	if len(bl.waiting) == 0 {
		// Nobody waits on this broker: end its long poll now rather than at MaxWait,
		// so a closed Tailer leaves no goroutine behind.
		if bl.cancel != nil {
			bl.cancel()
		}
		kick(bl.kick)
	}
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for _, bl := range h.loops {
		for w := range bl.waiting {
			w.wake()
		}
	}
	kcl := h.kcl
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	if kcl != nil {
		kcl.Close()
	}
}

// loop long-polls one broker for as long as some Tailer waits on it.
func (h *hub) loop(leader int32, bl *brokerLoop) {
	defer h.wg.Done()
	failures := 0
	for {
		h.mu.Lock()
		if len(bl.waiting) == 0 || h.ctx.Err() != nil {
			delete(h.loops, leader)
			h.mu.Unlock()
			return
		}
		// Woken waiters are on their way out (to fetch for themselves); asking again
		// for them would only spin.
		var ws []*waiter
		for w := range bl.waiting {
			if !w.woken() {
				ws = append(ws, w)
			}
		}
		if len(ws) == 0 {
			h.mu.Unlock()
			select {
			case <-bl.kick:
			case <-h.ctx.Done():
			}
			continue
		}
		ctx, cancel := context.WithCancel(h.ctx)
		bl.cancel = cancel
		kcl := h.kcl
		h.mu.Unlock()

		start := time.Now()
		woke, err := h.round(ctx, kcl, leader, ws)
		interrupted := ctx.Err() != nil

		h.mu.Lock()
		bl.cancel = nil
		h.mu.Unlock()
		cancel()
		switch {
		case interrupted:
		case err != nil:
			// The waiters were woken and report the failure themselves; back off so a
			// dead broker is not hammered by this loop.
			failures++
			h.pause(bl, backoff(failures))
		default:
			failures = 0
			// A broker answers a long poll early only with news. An early answer that
			// woke nobody means something in between does not wait; do not spin on it.
			if d := h.c.cfg.pollWait/2 - time.Since(start); woke == 0 && d > 0 {
				h.pause(bl, d)
			}
		}
	}
}

// pause waits d, cut short when waiters come or go (so that a closed Tailer's loop
// exits at once) or the hub closes.
func (h *hub) pause(bl *brokerLoop, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-bl.kick:
	case <-h.ctx.Done():
	}
}

// round sends one long poll for ws and wakes those whose partition moved. It returns
// how many it woke, and an error when the broker could not be asked (then all of ws
// were woken to find out for themselves).
func (h *hub) round(ctx context.Context, kcl *kgo.Client, leader int32, ws []*waiter) (int, error) {
	type tp struct {
		topic     string
		partition int32
	}
	var (
		req    = fetchRequest(h.c.cfg.pollWait)
		byTP   = make(map[tp][]*waiter)
		lowest = make(map[tp]int64)
		names  = make(map[[16]byte]string)
		woke   int
	)
	for _, w := range ws {
		k := tp{w.t.topic, w.t.partition}
		if p, ok := lowest[k]; !ok || w.pos < p {
			lowest[k] = w.pos
		}
		byTP[k] = append(byTP[k], w)
	}
	for k, pos := range lowest {
		tm := h.c.meta.cached(k.topic)
		if tm == nil || int(k.partition) >= len(tm.parts) || tm.parts[k.partition].leader != leader {
			woke += wakeAll(byTP[k]) // moved or unknown: the Tailer's own fetch sorts it out
			delete(byTP, k)
			continue
		}
		names[tm.id] = tm.name
		addFetchPartition(req, tm, k.partition, pos, 1) // 1 byte: we want the offsets, not data
	}
	if len(byTP) == 0 {
		return woke, nil
	}
	kresp, err := kcl.Broker(int(leader)).Request(ctx, req)
	if err == nil {
		err = kerr.ErrorForCode(kresp.(*kmsg.FetchResponse).ErrorCode)
	}
	if err != nil {
		if ctx.Err() != nil {
			return woke, nil // interrupted: waiters left, or the client closes
		}
		for _, ws := range byTP {
			woke += wakeAll(ws)
		}
		return woke, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	for _, rt := range resp.Topics {
		topic := rt.Topic
		if topic == "" {
			topic = names[rt.TopicID]
		}
		for _, rp := range rt.Partitions {
			k := tp{topic, rp.Partition}
			lso := rp.LastStableOffset
			if lso < 0 {
				lso = rp.HighWatermark
			}
			for _, w := range byTP[k] {
				if rp.ErrorCode == 0 {
					w.t.observe(rp.HighWatermark, lso)
				}
				if rp.ErrorCode != 0 || lso > w.pos {
					w.wake()
					woke++
				}
			}
			delete(byTP, k)
		}
	}
	for _, ws := range byTP {
		woke += wakeAll(ws) // not in the answer: look for yourself
	}
	return woke, nil
}

func wakeAll(ws []*waiter) int {
	for _, w := range ws {
		w.wake()
	}
	return len(ws)
}
