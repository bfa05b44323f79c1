package indexer_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/upsert"
)

// keyedRow is what an upsert test reads of a row.
type keyedRow struct {
	Offset int64  `parquet:"_kafka_offset"`
	Key    []byte `parquet:"_kafka_key,optional"`
}

// TestIndexUpsertRanges: an upsert table's range files hold the latest record of each
// key of the range, tombstones left out, in offset order; the range records the keys
// it touches; and its file rebuilds byte for byte from Kafka.
func TestIndexUpsertRanges(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.kafka.CreateTopic("users", 1, nil)
	tbl, err := tables.Create(ctx, e.db, tables.Table{Name: "users", Spec: spec, Mode: tables.ModeUpsert,
		Properties: map[string]string{tables.PropRangeMaxAge: "200ms"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.startIndexer(t, "idx-a")
	// Two batches a range apart: updates and tombstones within and across ranges.
	for b := range 2 {
		var recs []*kgo.Record
		for i := range 40 {
			k := fmt.Sprintf("user-%d", (i*7)%10)
			r := &kgo.Record{Topic: "users", Partition: 0, Key: []byte(k), Value: []byte(jsonEvents(100*b+i, 1)[0])}
			if i%9 == 4 {
				r.Value = nil // a tombstone
			}
			recs = append(recs, r)
		}
		recs = append(recs, &kgo.Record{Topic: "users", Partition: 0, Value: []byte(jsonEvents(999, 1)[0])}) // no key
		kafkatest.Produce(t, e.prod, recs...)
		leasetest.Eventually(t, 20*time.Second, "batch indexed", func() bool {
			st, err := ranges.State(ctx, e.db, tbl.ID, 0)
			return err == nil && st.IndexedEnd == int64(41*(b+1))
		})
	}
	rs, err := ranges.List(ctx, e.db, tbl.ID, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ranges.KeysOf(ctx, e.db, tbl.ID, 0, 0, 82)
	if err != nil || len(keys) != len(rs) {
		t.Fatalf("keys of %d ranges: %v", len(keys), err)
	}
	for i, r := range rs {
		// The model: the latest record per key of the range's offsets, from Kafka.
		last := map[string]int64{}
		dead := map[string]bool{}
		if err := e.kc.ReadRange(ctx, "users", 0, r.Start, r.End, func(rec record.Record) error {
			k := "\x00"
			if rec.Key != nil {
				k = "\x01" + string(rec.Key)
			}
			last[k], dead[k] = rec.Offset, rec.Value == nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var wantOffs []int64
		var wantDead []upsert.Hash
		for k, o := range last {
			if dead[k] {
				var key []byte
				if k != "\x00" {
					key = []byte(k[1:])
				}
				wantDead = append(wantDead, upsert.KeyHash(key))
				continue
			}
			wantOffs = append(wantOffs, o)
		}
		slices.Sort(wantOffs)
		var buf bytes.Buffer
		if _, err := rangefile.Build(ctx, e.kc, tablecodec.New(e.db, nil), tbl, r, &buf); err != nil {
			t.Fatalf("rebuild [%d, %d): %v", r.Start, r.End, err)
		}
		rows, err := parquet.Read[keyedRow](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		var gotOffs []int64
		var gotLive []upsert.Hash
		for _, row := range rows {
			gotOffs = append(gotOffs, row.Offset)
			gotLive = append(gotLive, upsert.KeyHash(row.Key))
		}
		if !slices.Equal(gotOffs, wantOffs) || r.Records != int64(len(wantOffs)) {
			t.Fatalf("range [%d, %d) rows at %v (%d recorded), want %v", r.Start, r.End, gotOffs, r.Records, wantOffs)
		}
		k, err := upsert.DecodeKeys(keys[i].Keys)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(wantDead, func(a, b upsert.Hash) int { return bytes.Compare(a[:], b[:]) })
		if !slices.Equal(k.Live, gotLive) || !slices.Equal(k.Dead, wantDead) {
			t.Fatalf("range [%d, %d): recorded keys %d live %d dead, want %d and %d", r.Start, r.End, len(k.Live), len(k.Dead), len(gotLive), len(wantDead))
		}
	}
	if len(rs) < 2 {
		t.Fatalf("%d ranges, want one per batch at least", len(rs))
	}
}
