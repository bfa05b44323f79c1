package devcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

// The Avro demo is a shop's orders, written the way most Kafka shops write Avro: with the
// Confluent serializer's wire format (a schema id before each value) and the subject
// <topic>-value. Version 2 of the schema adds an optional field, so the table gains a
// column while it runs.
const (
	// AvroSchemaV1 is the Avro demo's first schema: a long, a string, a double, an
	// instant, an enum, a nested record with an optional field, an array of records.
	AvroSchemaV1 = `{"type":"record","name":"Order","namespace":"mink.demo","fields":[
  {"name":"id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"total","type":"double"},
  {"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["PLACED","PAID","SHIPPED","CANCELLED"]}},
  {"name":"shipping","type":{"type":"record","name":"Address","fields":[
    {"name":"country","type":"string"},
    {"name":"city","type":"string"},
    {"name":"zip","type":["null","string"],"default":null}]}},
  {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
    {"name":"sku","type":"string"},
    {"name":"qty","type":"int"},
    {"name":"price","type":"double"}]}}}
]}`
	// AvroSchemaV2 adds AvroNewField, optional with a default, as compatible evolution
	// does: records of version 1 read it as null.
	AvroSchemaV2 = `{"type":"record","name":"Order","namespace":"mink.demo","fields":[
  {"name":"id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"total","type":"double"},
  {"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["PLACED","PAID","SHIPPED","CANCELLED"]}},
  {"name":"shipping","type":{"type":"record","name":"Address","fields":[
    {"name":"country","type":"string"},
    {"name":"city","type":"string"},
    {"name":"zip","type":["null","string"],"default":null}]}},
  {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
    {"name":"sku","type":"string"},
    {"name":"qty","type":"int"},
    {"name":"price","type":"double"}]}}},
  {"name":"coupon","type":["null","string"],"default":null}
]}`
	// AvroNewField is the field version 2 adds: the table's new column.
	AvroNewField = "coupon"
)

// Order is one Avro demo record's value. Coupon is written from schema version 2 on.
type Order struct {
	ID       int64     `avro:"id"`
	Customer string    `avro:"customer"`
	Total    float64   `avro:"total"`
	PlacedAt time.Time `avro:"placed_at"`
	Status   string    `avro:"status"`
	Shipping Address   `avro:"shipping"`
	Items    []Item    `avro:"items"`
	Coupon   *string   `avro:"coupon"`
}

// Address is a nested record.
type Address struct {
	Country string  `avro:"country"`
	City    string  `avro:"city"`
	Zip     *string `avro:"zip"`
}

// Item is one line of an order.
type Item struct {
	SKU   string  `avro:"sku"`
	Qty   int32   `avro:"qty"`
	Price float64 `avro:"price"`
}

var (
	statuses = []string{"PLACED", "PLACED", "PAID", "PAID", "PAID", "SHIPPED", "SHIPPED", "CANCELLED"}
	coupons  = []string{"WELCOME10", "SPRING5", "FREESHIP"}
	zips     = map[string]string{"Amsterdam": "1012", "Berlin": "10115", "Paris": "75001", "New York": "10001",
		"Austin": "73301", "London": "EC1A", "Tokyo": "100-0001"} // São Paulo and Bengaluru: none given
)

// NewOrder makes the order with this id: every field but the time is a function of the
// id, so a test can check a row from its id alone. Coupon is set on about one order in
// four; only schema version 2 writes it.
func NewOrder(id int64, ts time.Time) Order {
	r := rand.New(rand.NewPCG(uint64(id), 0x61767230))
	customer := int(r.ExpFloat64()*40) % 300
	place := places[customer%len(places)]
	o := Order{
		ID: id, Customer: fmt.Sprintf("c-%04d", customer), PlacedAt: ts.UTC().Truncate(time.Millisecond),
		Status: statuses[r.IntN(len(statuses))], Shipping: Address{Country: place.Country, City: place.City},
		Items: []Item{},
	}
	if z, ok := zips[place.City]; ok {
		o.Shipping.Zip = &z
	}
	cents := int64(0)
	for range 1 + r.IntN(3) {
		sku := 1000 + r.IntN(250)
		it := Item{SKU: "sku-" + strconv.Itoa(sku), Qty: int32(1 + r.IntN(3)), Price: float64(499+sku%50*500) / 100}
		o.Items = append(o.Items, it)
		cents += int64(it.Qty) * int64(math.Round(it.Price*100))
	}
	o.Total = float64(cents) / 100
	if r.IntN(4) == 0 {
		c := coupons[r.IntN(len(coupons))]
		o.Coupon = &c
	}
	return o
}

// AvroSubject is the registry subject of the Avro demo topic's values.
func (c *Config) AvroSubject() string { return c.AvroTopic + "-value" }

// AvroTableRequest is the CreateTable call that registers the Avro demo topic: the
// columns come from the subject's schema, the default <topic>-value.
func (c *Config) AvroTableRequest() *adminv1.CreateTableRequest {
	return &adminv1.CreateTableRequest{
		Namespace: "default", Name: c.AvroTable, Topic: c.AvroTopic,
		Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO, Properties: c.tableProperties(),
	}
}

// avroDemo encodes orders with the registry's schema ids: version 1 until the ids pass
// evolveAfter, then version 2, which it registers when the first such order is made.
type avroDemo struct {
	cl          *sr.Client
	subject     string
	evolveAfter int64 // 0: never
	log         *slog.Logger
	say         func(string, ...any) // tells the terminal when version 2 is registered
	v1, v2      avro.Schema

	mu      sync.Mutex
	serde   sr.Serde
	id1     int
	id2     atomic.Int64 // 0 until version 2 is registered
	retryAt time.Time    // after a failed registration of version 2
}

func newAvroDemo(cl *sr.Client, subject string, evolveAfter int64, log *slog.Logger, say func(string, ...any)) *avroDemo {
	return &avroDemo{cl: cl, subject: subject, evolveAfter: evolveAfter, log: log, say: say,
		v1: avro.MustParse(AvroSchemaV1), v2: avro.MustParse(AvroSchemaV2)}
}

// prepare finds the demo's schemas in the registry, registering version 1 when it is
// not there: a rerun reuses every id, and writes version 2 at once when an earlier run
// registered it.
func (a *avroDemo) prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id1, err := a.lookup(ctx, AvroSchemaV1)
	if err != nil {
		return err
	}
	if id1 == 0 {
		if id1, err = a.cl.RegisterSchema(ctx, a.subject, sr.Schema{Schema: AvroSchemaV1, Type: sr.TypeAvro}, -1, -1); err != nil {
			return fmt.Errorf("register the demo schema under %s: %w", a.subject, err)
		}
		a.log.Info("demo_avro: registered schema version 1", "subject", a.subject, "id", id1)
	}
	id2, err := a.lookup(ctx, AvroSchemaV2)
	if err != nil {
		return err
	}
	a.id1 = id1
	a.register(id1, orderV1{}, a.v1)
	if id2 != 0 {
		a.id2.Store(int64(id2))
		a.register(id2, orderV2{}, a.v2)
	}
	return nil
}

// lookup is the id of schema text under the subject, 0 when it is not registered there.
func (a *avroDemo) lookup(ctx context.Context, text string) (int, error) {
	ss, err := a.cl.LookupSchema(ctx, a.subject, sr.Schema{Schema: text, Type: sr.TypeAvro})
	var re *sr.ResponseError
	if errors.As(err, &re) && (re.ErrorCode == sr.ErrSubjectNotFound.Code || re.ErrorCode == sr.ErrSchemaNotFound.Code) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("look up the demo schema under %s: %w", a.subject, err)
	}
	return ss.ID, nil
}

// register makes the Go type v encode with schema s under id: each version has its own
// type, as Serde picks the id by type.
func (a *avroDemo) register(id int, v any, s avro.Schema) {
	a.serde.Register(id, v, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }))
}

// An Order written with version 1 (which has no coupon) or 2.
type (
	orderV1 Order
	orderV2 Order
)

// SchemaIDs are the registry ids of versions 1 and 2 (0 until registered).
func (a *avroDemo) SchemaIDs() (v1, v2 int) { return a.id1, int(a.id2.Load()) }

// record is the Kafka record of order id, keyed by customer.
func (a *avroDemo) record(ctx context.Context, topic string, id int64) (*kgo.Record, error) {
	o := NewOrder(id, time.Now())
	var v any = orderV1(o)
	if a.id2.Load() != 0 || (a.evolveAfter > 0 && id > a.evolveAfter && a.evolve(ctx)) {
		v = orderV2(o)
	}
	b, err := a.serde.Encode(v)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(o.Customer), Value: b}, nil
}

// evolve registers version 2 unless it is, and says whether it is. A failure is logged
// and retried a second later; orders are written with version 1 meanwhile.
func (a *avroDemo) evolve(ctx context.Context) bool {
	if a.id2.Load() != 0 {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if time.Now().Before(a.retryAt) {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id, err := a.cl.RegisterSchema(rctx, a.subject, sr.Schema{Schema: AvroSchemaV2, Type: sr.TypeAvro}, -1, -1)
	if err != nil {
		a.retryAt = time.Now().Add(time.Second)
		if ctx.Err() == nil {
			a.log.Warn("demo_avro: register schema version 2", "subject", a.subject, "error", err)
		}
		return false
	}
	a.register(id, orderV2{}, a.v2)
	a.id2.Store(int64(id))
	a.say("demo: registered version 2 of %s (id %d), which adds the field %s: the table gains the column once the next orders are indexed",
		a.subject, id, AvroNewField)
	return true
}

// orderID is the id of an Avro demo record, 0 when it is none of the demo's.
func (a *avroDemo) orderID(value []byte) int64 {
	var o orderV2 // decodes either version: version 1 leaves Coupon nil
	if err := a.decode(value, &o); err != nil {
		return 0
	}
	return o.ID
}

func (a *avroDemo) decode(b []byte, o *orderV2) error {
	id, rest, err := a.serde.DecodeID(b)
	if err != nil {
		return err
	}
	s := a.v1
	switch id {
	case a.id1:
	case int(a.id2.Load()):
		s = a.v2
	default:
		return fmt.Errorf("schema id %d is not the demo's", id)
	}
	return avro.Unmarshal(s, rest, o)
}
