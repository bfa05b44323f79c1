package kafkasrc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/record"
	"github.com/twmb/franz-go/pkg/kgo"
)

type txnLog struct {
	t         *testing.T
	topic     string
	plain, tx *kgo.Client
	committed []*kgo.Record // every record that must be read
	aborted   []*kgo.Record // every record that must never be read
	n         int
}

func (l *txnLog) rec() *kgo.Record {
	l.n++
	return &kgo.Record{Topic: l.topic, Key: fmt.Appendf(nil, "k%d", l.n), Value: fmt.Appendf(nil, "v%d", l.n), Timestamp: base.Add(time.Duration(l.n) * time.Millisecond)}
}

func (l *txnLog) plainRecs(n int) {
	for range n {
		l.committed = append(l.committed, kafkatest.Produce(l.t, l.plain, l.rec())...)
	}
}

func (l *txnLog) begin() {
	if err := l.tx.BeginTransaction(); err != nil {
		l.t.Fatal(err)
	}
}

func (l *txnLog) txRecs(n int) []*kgo.Record {
	var rs []*kgo.Record
	for range n {
		rs = append(rs, kafkatest.Produce(l.t, l.tx, l.rec())...)
	}
	return rs
}

func (l *txnLog) end(commit kgo.TransactionEndTry) {
	if err := l.tx.EndTransaction(ctxFor(l.t, 10*time.Second), commit); err != nil {
		l.t.Fatal(err)
	}
}

func TestTransactions(t *testing.T) {
	c := kafkatest.New(t)
	const topic = "txn"
	c.CreateTopic(topic, 1, nil)
	l := &txnLog{
		t: t, topic: topic,
		plain: c.Client(kgo.DefaultProduceTopic(topic)),
		tx:    c.Client(kgo.TransactionalID("mink-test-tx"), kgo.DefaultProduceTopic(topic)),
	}
	cl := newClient(t, c, kafkasrc.WithFetchMaxBytes(512), kafkasrc.WithPollWait(200*time.Millisecond))

	// plain, committed, aborted with plain records interleaved, plain, committed: the
	// log ends with a commit marker.
	l.plainRecs(3)
	l.begin()
	l.committed = append(l.committed, l.txRecs(4)...)
	l.end(kgo.TryCommit)
	l.begin()
	l.aborted = append(l.aborted, l.txRecs(2)...)
	l.plainRecs(2)
	l.aborted = append(l.aborted, l.txRecs(3)...)
	l.end(kgo.TryAbort)
	l.plainRecs(2)
	l.begin()
	l.committed = append(l.committed, l.txRecs(3)...)
	l.end(kgo.TryCommit)

	all := want(l.committed)
	po := hwm(t, cl, topic, 0)
	lastData := all[len(all)-1].Offset
	if po.LastStable != po.HighWatermark || po.HighWatermark != lastData+2 {
		t.Fatalf("offsets %+v: want the log to end with one marker after offset %d", po, lastData)
	}
	end := po.HighWatermark
	used := map[int64]bool{}
	for _, r := range append(slices.Clone(l.committed), l.aborted...) {
		used[r.Offset] = true
	}
	var markers []int64
	for o := range end {
		if !used[o] {
			markers = append(markers, o)
		}
	}
	if len(markers) != 3 {
		t.Fatalf("markers at %v, want 3 (commit, abort, commit)", markers)
	}
	t.Logf("committed %d, aborted %d, markers at %v, end %d", len(l.committed), len(l.aborted), markers, end)

	t.Run("aborted records and markers never appear", func(t *testing.T) {
		checkRange(t, cl, all, topic, 0, 0, end)
		// Every split point, markers and aborted offsets included, tiles exactly.
		for cut := range end + 1 {
			checkTiling(t, cl, all, topic, 0, []int64{0, cut, end})
		}
		// Ranges that end right after the last aborted record and right after the
		// abort marker, and one that is only aborted records and a marker.
		lastAborted := l.aborted[len(l.aborted)-1].Offset
		checkRange(t, cl, all, topic, 0, 0, lastAborted+1)
		checkRange(t, cl, all, topic, 0, l.aborted[0].Offset, lastAborted+1)
		checkRange(t, cl, all, topic, 0, lastAborted+1, markers[1]+1)
		checkRange(t, cl, all, topic, 0, markers[1], markers[1]+1)
		if got := readRange(t, cl, topic, 0, l.aborted[2].Offset, markers[1]+1); len(got) != 0 {
			t.Fatalf("range of aborted records and a marker returned %d records", len(got))
		}
	})

	t.Run("tailer moves past the trailing marker", func(t *testing.T) {
		tl := kafkasrc.NewTailer(cl, topic, 0, 0)
		defer tl.Close()
		got, cuts := tail(t, tl, end) // fails unless next reaches end, past the marker
		if d := diff(got, all); d != "" {
			t.Fatal(d)
		}
		checkTiling(t, cl, all, topic, 0, cuts)
	})

	t.Run("open transaction", func(t *testing.T) {
		tl := kafkasrc.NewTailer(cl, topic, 0, end)
		defer tl.Close()
		l.begin()
		open := l.txRecs(3)
		po := hwm(t, cl, topic, 0)
		if po.LastStable != end || po.HighWatermark != end+3 {
			t.Fatalf("with an open transaction: %+v", po)
		}

		// A range into the open transaction fails at once instead of waiting.
		start := time.Now()
		err := cl.ReadRange(ctxFor(t, 10*time.Second), topic, 0, 0, end+1, func(record.Record) error { return nil })
		if !errors.Is(err, kafkasrc.ErrNotStable) || time.Since(start) > 2*time.Second {
			t.Fatalf("ReadRange into an open transaction: %v after %v", err, time.Since(start))
		}
		checkRange(t, cl, all, topic, 0, 0, end) // up to the LSO is fine

		// The tailer sees nothing of it and stays put.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		recs, next, err := tl.Poll(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || len(recs) != 0 || next != end {
			t.Fatalf("Poll during an open transaction = %d records, %d, %v", len(recs), next, err)
		}
		if tl.HighWatermark() != end+3 || tl.LastStable() != end {
			t.Fatalf("tailer reports hwm %d lso %d during the transaction", tl.HighWatermark(), tl.LastStable())
		}

		// Aborting it: a waiting Poll wakes and moves past the aborted records and the
		// abort marker with no records, so there is no lag left.
		type result struct {
			recs []record.Record
			next int64
			err  error
		}
		res := make(chan result, 1)
		waitNoHubGoroutines(t) // so that hubRunning below means this Poll waits
		pollCtx := ctxFor(t, 10*time.Second)
		go func() {
			recs, next, err := tl.Poll(pollCtx)
			res <- result{recs, next, err}
		}()
		await.True(t, 5*time.Second, "the tailer to wait", hubRunning)
		l.end(kgo.TryAbort)
		aborted := time.Now()
		r := <-res
		if r.err != nil || len(r.recs) != 0 || r.next != end+4 {
			t.Fatalf("Poll after abort = %d records, next %d, %v; want none, %d", len(r.recs), r.next, r.err, end+4)
		}
		// Woken by the shared long poll, not by Poll's own 4s (20 x poll wait) recheck.
		if d := time.Since(aborted); d > 2*time.Second {
			t.Fatalf("Poll took %v to see the abort", d)
		}
		l.aborted = append(l.aborted, open...)
		all := want(l.committed)
		checkRange(t, cl, all, topic, 0, end, end+4) // aborted batch then marker: empty

		// And the next committed transaction arrives whole.
		l.begin()
		l.committed = append(l.committed, l.txRecs(2)...)
		l.end(kgo.TryCommit)
		all = want(l.committed)
		got, cuts := tail(t, tl, end+7)
		if d := diff(got, inRange(all, 0, end+4, end+7)); d != "" {
			t.Fatal(d)
		}
		checkTiling(t, cl, all, topic, 0, append([]int64{0, end}, cuts...))
	})
}
