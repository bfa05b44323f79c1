package kafkasrc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/record"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestBrokerDownAndBack(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Brokers(1), kafkatest.Persistent())
	const topic = "outage"
	c.CreateTopic(topic, 1, nil)
	p := producer(c)
	var produced []*kgo.Record
	for i := range 20 {
		produced = append(produced, kafkatest.Produce(t, p, variedRecord(topic, 0, i))...)
	}
	all := want(produced)
	const timeout = 2 * time.Second
	cl := newClient(t, c, kafkasrc.WithTimeout(timeout), kafkasrc.WithPollWait(200*time.Millisecond))
	checkRange(t, cl, all, topic, 0, 0, 20)
	tl := kafkasrc.NewTailer(cl, topic, 0, 0)
	defer tl.Close()
	tail(t, tl, 20)

	// A Poll already waiting for data when the broker goes away.
	waitNoHubGoroutines(t)
	waiting := make(chan error, 1)
	go func() {
		_, _, err := tl.Poll(context.Background()) // only the outage can end it
		waiting <- err
	}()
	await.True(t, 5*time.Second, "the tailer to wait", hubRunning)

	c.Stop()
	start := time.Now()
	// Each call must give up within the timeout plus one request's slack, never hang.
	bound := timeout + 2*time.Second
	type outcome struct {
		what string
		err  error
		took time.Duration
	}
	outcomes := make(chan outcome, 4)
	run := func(what string, f func(context.Context) error) {
		go func() {
			s := time.Now()
			err := f(context.Background())
			outcomes <- outcome{what, err, time.Since(s)}
		}()
	}
	run("ReadRange", func(ctx context.Context) error {
		return cl.ReadRange(ctx, topic, 0, 0, 20, func(record.Record) error { return nil })
	})
	run("Offsets", func(ctx context.Context) error { _, err := cl.Offsets(ctx, topic); return err })
	run("Partitions", func(ctx context.Context) error { _, err := cl.Partitions(ctx, topic); return err })
	go func() { outcomes <- outcome{"waiting Poll", <-waiting, time.Since(start)} }()
	for range 4 {
		o := <-outcomes
		if !errors.Is(o.err, kafkasrc.ErrUnavailable) || o.took > bound {
			t.Fatalf("%s with the broker down: %v after %v; want ErrUnavailable within %v", o.what, o.err, o.took, bound)
		}
		t.Logf("%s: %v after %v", o.what, o.err, o.took.Round(time.Millisecond))
	}
	// A fresh Poll fails the same way; the Tailer keeps its position.
	if _, next, err := tl.Poll(context.Background()); !errors.Is(err, kafkasrc.ErrUnavailable) || next != 20 {
		t.Fatalf("Poll with the broker down = %d, %v", next, err)
	}
	// The caller's context still wins over the timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err := cl.ReadRange(ctx, topic, 0, 0, 20, func(record.Record) error { return nil })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadRange with a short ctx and the broker down: %v", err)
	}

	// Back on the same address with the same data: the same Client and Tailer carry on.
	c.Restart()
	restarted := time.Now()
	await.True(t, 20*time.Second, "reads to work again", func() bool {
		err := cl.ReadRange(context.Background(), topic, 0, 0, 20, func(record.Record) error { return nil })
		return err == nil
	})
	t.Logf("reads work again %v after the restart", time.Since(restarted).Round(time.Millisecond))
	checkRange(t, cl, all, topic, 0, 0, 20)
	p2 := producer(c)
	for i := 20; i < 25; i++ {
		produced = append(produced, kafkatest.Produce(t, p2, variedRecord(topic, 0, i))...)
	}
	all = want(produced)
	got, cuts := tail(t, tl, 25)
	if d := diff(got, inRange(all, 0, 20, 25)); d != "" {
		t.Fatal(d)
	}
	checkTiling(t, cl, all, topic, 0, append([]int64{0}, cuts...))
}
