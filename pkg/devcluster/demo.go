package devcluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/tableschema"
)

// DemoColumns are the demo table's columns: a shop's click stream, with what engines most
// often trip over: a decimal, an instant, a UUID, a list, nested JSON read through a path,
// and columns that are null in most rows.
var DemoColumns = []tableschema.Column{
	{Name: "id", Type: "long", Required: true},
	{Name: "ts", Type: "timestamptz", Required: true},
	{Name: "event", Type: "string", Required: true},
	{Name: "user", Type: "string", Required: true},
	{Name: "session", Type: "uuid"},
	{Name: "page", Type: "string"},
	{Name: "amount", Type: "decimal(10,2)"},
	{Name: "currency", Type: "string"},
	{Name: "qty", Type: "int"},
	{Name: "country", Type: "string", JSONPath: "geo.country"},
	{Name: "city", Type: "string", JSONPath: "geo.city"},
	{Name: "device", Type: "string"},
	{Name: "tags", Type: "list<string>"},
}

// DemoTableRequest is the CreateTable call that registers the demo topic.
func (c *Config) DemoTableRequest() *adminv1.CreateTableRequest {
	req := &adminv1.CreateTableRequest{
		Namespace: "default", Name: c.Table, Topic: c.Topic,
		Format: adminv1.RecordFormat_RECORD_FORMAT_JSON, Properties: c.tableProperties(),
	}
	for _, col := range DemoColumns {
		req.Columns = append(req.Columns, &adminv1.Column{Name: col.Name, Type: col.Type, Required: col.Required, JsonPath: col.JSONPath})
	}
	return req
}

// Event is one demo record's value.
type Event struct {
	ID       int64       `json:"id"`
	TS       string      `json:"ts"`
	Event    string      `json:"event"`
	User     string      `json:"user"`
	Session  string      `json:"session"`
	Page     string      `json:"page"`
	Amount   json.Number `json:"amount,omitempty"` // a JSON number written as text: exact cents
	Currency string      `json:"currency,omitempty"`
	Qty      int         `json:"qty,omitempty"`
	Geo      Geo         `json:"geo"`
	Device   string      `json:"device"`
	Tags     []string    `json:"tags"`
}

// Geo is nested, so the table reads it through JSON paths.
type Geo struct {
	Country string `json:"country"`
	City    string `json:"city"`
}

var (
	places = []Geo{{"NL", "Amsterdam"}, {"DE", "Berlin"}, {"FR", "Paris"}, {"US", "New York"},
		{"US", "Austin"}, {"GB", "London"}, {"JP", "Tokyo"}, {"BR", "São Paulo"}, {"IN", "Bengaluru"}}
	devices  = []string{"desktop", "mobile", "mobile", "tablet"}
	tagNames = []string{"returning", "promo", "newsletter", "beta", "gift"}
	searches = []string{"boots", "rain jacket", "espresso", "headphones", "tent"}
)

// NewEvent makes the event with this id: every field but the time is a function of the
// id, so a test can check a row's contents from its id alone.
func NewEvent(id int64, ts time.Time) Event {
	r := rand.New(rand.NewPCG(uint64(id), 0x6d696e6b))
	// A few users are much more active than most, as on any real site.
	user := int(r.ExpFloat64()*60) % 500
	e := Event{
		ID: id, TS: ts.UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
		User: fmt.Sprintf("u-%04d", user), Session: session(user, id/25),
		Geo: places[user%len(places)], Device: devices[user%len(devices)], Tags: []string{},
	}
	sku := 1000 + r.IntN(250)
	switch p := r.Float64(); {
	case p < 0.80:
		e.Event = "page_view"
		switch r.IntN(4) {
		case 0:
			e.Page = "/"
		case 1:
			e.Page = "/search?q=" + searches[r.IntN(len(searches))]
		default:
			e.Page = "/products/" + strconv.Itoa(sku)
		}
	case p < 0.95:
		e.Event, e.Page = "add_to_cart", "/products/"+strconv.Itoa(sku)
	default:
		e.Event, e.Page = "purchase", "/checkout"
	}
	if e.Event != "page_view" {
		e.Qty = 1 + r.IntN(3)
		cents := int64(e.Qty) * int64(499+sku%50*500+r.IntN(100))
		e.Amount = json.Number(fmt.Sprintf("%d.%02d", cents/100, cents%100))
		e.Currency = "EUR"
		if e.Geo.Country == "US" {
			e.Currency = "USD"
		}
	}
	for _, t := range tagNames {
		if r.IntN(5) == 0 {
			e.Tags = append(e.Tags, t)
		}
	}
	return e
}

// session is a UUID shared by a user's events in one stretch of ids.
func session(user int, stretch int64) string {
	h := fnv.New128a()
	binary.Write(h, binary.BigEndian, [2]int64{int64(user), stretch})
	b := h.Sum(nil)
	b[6] = b[6]&0x0f | 0x40 // version 4 layout, so every UUID parser accepts it
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Record is the Kafka record of an event: keyed by user, so a user's events stay in order
// in one partition.
func (e Event) Record(topic string) *kgo.Record {
	v, _ := json.Marshal(e) // plain strings and numbers: cannot fail
	return &kgo.Record{Topic: topic, Key: []byte(e.User), Value: v}
}

// ensureTopic creates the demo topic, or keeps it as it is when it exists.
func ensureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) (int, error) {
	_, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		return partitions, nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %q: %w", topic, err)
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describe topic %q: %w", topic, err)
	}
	return len(td[topic].Partitions), td.Error()
}

// lastID is the largest event id in the topic: a restart continues after it, so ids stay
// unique across runs. It reads the last record of each partition; idOf reads a record's
// id (0 for a record that is none of the demo's).
func lastID(ctx context.Context, brokers []string, adm *kadm.Client, topic string, idOf func(value []byte) int64) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	if err := ends.Error(); err != nil {
		return 0, err
	}
	want := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = kgo.NewOffset().At(o.Offset - 1)
		}
	})
	if len(want) == 0 {
		return 0, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var last int64
	for got := map[int32]bool{}; len(got) < len(want); {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("read the last record of each partition of %q: %w", topic, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return 0, fmt.Errorf("read the last record of each partition of %q: %w", topic, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = true
			last = max(last, idOf(r.Value))
		})
	}
	return last, nil
}

// eventID is a JSON demo record's id.
func eventID(value []byte) int64 {
	var e struct{ ID int64 }
	if json.Unmarshal(value, &e) != nil {
		return 0
	}
	return e.ID
}

// producer writes demo records at a steady rate.
type producer struct {
	cl       *kgo.Client
	topic    string
	rate     float64
	limit    int64 // 0: no end
	record   func(ctx context.Context, id int64) (*kgo.Record, error)
	log      *slog.Logger
	produced atomic.Int64 // acknowledged by Kafka
	failed   atomic.Int64
	firstErr atomic.Pointer[error]
}

// run produces records firstID, firstID+1, ... until ctx ends or the limit is reached,
// then waits for Kafka to acknowledge what it sent.
func (p *producer) run(ctx context.Context, firstID int64) {
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		p.cl.Flush(fctx)
	}()
	interval := time.Duration(float64(time.Second) / p.rate)
	interval = max(interval, 10*time.Millisecond) // high rates send several per tick
	tick := time.NewTicker(interval)
	defer tick.Stop()
	start := time.Now()
	var sent int64
	for {
		due := int64(time.Since(start).Seconds()*p.rate) + 1
		if p.limit > 0 {
			due = min(due, p.limit)
		}
		for ; sent < due; sent++ {
			rec, err := p.record(ctx, firstID+sent)
			if err != nil {
				p.acked(&kgo.Record{Topic: p.topic}, err)
				continue
			}
			// Produce blocks only while its buffer is full (Kafka down); ctx ends that.
			p.cl.Produce(ctx, rec, p.acked)
		}
		if p.limit > 0 && sent >= p.limit {
			p.log.Info("demo: produced the requested events", "topic", p.topic, "events", sent)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *producer) acked(r *kgo.Record, err error) {
	if err == nil {
		p.produced.Add(1)
		return
	}
	if errors.Is(err, context.Canceled) {
		return // stopping
	}
	if p.failed.Add(1) == 1 {
		p.firstErr.Store(&err)
	}
	p.log.Warn("demo: produce failed", "topic", r.Topic, "error", err)
}
