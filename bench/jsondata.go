package bench

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
)

// Item 1's bare loop decodes EventSpec's JSON the way an application that reads the topic
// into Go values does, the fastest ordinary way: encoding/json into a struct declared for
// the event, then hand-written conversion of its fields to rowcodec values, as items 9
// and 10 do for Avro and Protobuf. (Before issue 17 it decoded with Mink's own
// pkg/rowcodec, so it measured only what the indexer process adds, never the decoder.)

// JSONEvent and JSONUser are EventSpec's event as an application declares it for
// encoding/json: the amount, a numeric string, as a string; the timestamp as time.Time
// (RFC 3339, time.Time's own UnmarshalJSON).
type JSONEvent struct {
	EventID    string    `json:"event_id"`
	Type       string    `json:"type"`
	User       JSONUser  `json:"user"`
	Session    string    `json:"session"`
	URL        string    `json:"url"`
	Amount     string    `json:"amount"`
	Quantity   int32     `json:"quantity"`
	DurationMs float64   `json:"duration_ms"`
	TS         time.Time `json:"ts"`
	Tags       []string  `json:"tags"`
}

// JSONUser is the nested object of JSONEvent.
type JSONUser struct {
	ID      int64  `json:"id"`
	Country string `json:"country"`
}

// jsonRows is item 1's bare decoder: json.Unmarshal into a JSONEvent reused from record
// to record, and straightforward code that turns its fields into the row.
type jsonRows struct {
	fields    []iceberg.NestedField
	unmarshal func([]byte, any) error
	c         []int // EventSpec's columns, in its order
	k         kafkaCols

	ev   JSONEvent
	tags []rowcodec.Value
	id   uuid.UUID
}

// NewJSONRows returns the bare decoder of EventSpec's records into rows of its fields.
func NewJSONRows() (rowcodec.RowDecoder, error) { return newJSONRowsWith(json.Unmarshal) }

// newJSONRowsWith is NewJSONRows with another json.Unmarshal, for the decoder
// benchmarks.
func newJSONRowsWith(unmarshal func([]byte, any) error) (rowcodec.RowDecoder, error) {
	fields, err := EventSpec.Fields()
	if err != nil {
		return nil, err
	}
	d := &jsonRows{fields: fields, unmarshal: unmarshal}
	names := make([]string, len(EventSpec.Columns))
	for i, c := range EventSpec.Columns {
		names[i] = c.Name
	}
	if d.c, d.k, err = rowColumns(fields, names...); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *jsonRows) Fields() []iceberg.NestedField { return d.fields }

var errNoEventID = errors.New("missing required column \"event_id\"")

func (d *jsonRows) Decode(r record.Record, row *rowcodec.Row) bool {
	v := rowOf(row, len(d.fields))
	d.ev = JSONEvent{Tags: d.ev.Tags[:0]}
	if err := d.unmarshal(r.Value, &d.ev); err != nil {
		return d.k.finish(r, v, err)
	}
	e, c := &d.ev, d.c
	if e.EventID == "" {
		return d.k.finish(r, v, errNoEventID)
	}
	var err error
	if d.id, err = uuid.Parse(e.EventID); err != nil {
		return d.k.finish(r, v, err)
	}
	amount, err := cents(e.Amount)
	if err != nil {
		return d.k.finish(r, v, err)
	}
	v[c[0]] = rowcodec.Value{Valid: true, Bytes: d.id[:]}
	v[c[1]] = str(e.Type)
	v[c[2]] = rowcodec.Value{Valid: true, Int: e.User.ID}
	v[c[3]] = str(e.User.Country)
	v[c[4]] = str(e.Session)
	v[c[5]] = str(e.URL)
	v[c[6]] = rowcodec.Value{Valid: true, Int: amount}
	v[c[7]] = rowcodec.Value{Valid: true, Int: int64(e.Quantity)}
	v[c[8]] = rowcodec.Value{Valid: true, Float: e.DurationMs}
	v[c[9]] = rowcodec.Value{Valid: true, Int: e.TS.UnixMicro()}
	d.tags = d.tags[:0]
	for _, t := range e.Tags {
		d.tags = append(d.tags, str(t))
	}
	v[c[10]] = rowcodec.Value{Valid: true, Elems: d.tags}
	return d.k.finish(r, v, nil)
}

// cents is decimal(12,2)'s unscaled value of a numeric string such as "123.4".
func cents(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 2 {
		return 0, errors.New("amount: more than 2 digits after the point")
	}
	n, err := strconv.ParseInt(whole+(frac + "00")[:2], 10, 64)
	if err != nil {
		return 0, errors.New("amount: not a decimal number")
	}
	return n, nil
}

// JSONFiles builds files of EventSpec's records through the bare decoder: item 1's
// baseline encode, the same builder Mink's indexer uses.
func JSONFiles() (FileMaker, error) {
	dec, err := NewJSONRows()
	if err != nil {
		return nil, err
	}
	return bareFiles(dec, parquetbuild.DefaultSettings()), nil
}
