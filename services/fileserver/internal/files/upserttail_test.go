package files

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/filecache"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/pkg/upsert"
)

// A live load's tail of an upsert table with more latest records than a build holds
// (upsert.DefaultHold): the file server keeps only their offsets and reads the tail from
// Kafka again, and the tail file is byte for byte the one holding every latest record
// builds, with the same recorded keys.
func TestUpsertTailBeyondTheHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.DB(t)
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	kc := kafkatest.New(t, kafkatest.Brokers(1))
	kc.CreateTopic("wide", 1, nil)
	prod := kc.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	t.Cleanup(prod.Close)
	// 3,000 records of 2,500 keys with 2 KiB values: about 5 MiB of latest records.
	const n = 3000
	pad := strings.Repeat("x", 2048)
	var recs []*kgo.Record
	for i := range n {
		r := &kgo.Record{Topic: "wide", Partition: 0, Key: fmt.Appendf(nil, "key-%d", i%2500), Value: fmt.Appendf(nil, `{"id": %d, "pad": "%s"}`, i, pad)}
		if i%97 == 96 {
			r.Value = nil
		}
		if recs = append(recs, r); len(recs) == 200 {
			kafkatest.Produce(t, prod, recs...)
			recs = nil
		}
	}
	kafka, err := kafkasrc.New(kc.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	table, err := tables.Create(ctx, db, tables.Table{Namespace: "default", Name: "wide", Topic: "wide", Mode: tables.ModeUpsert,
		Spec:       tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "id", Type: "long"}, {Name: "pad", Type: "string"}}},
		Properties: map[string]string{tables.PropLiveMaxBytes: fmt.Sprint(64 << 20)}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache, err := filecache.Open(t.TempDir(), 256<<20, log)
	if err != nil {
		t.Fatal(err)
	}
	codecs := tablecodec.New(db, nil)
	s, err := New(Options{NodeID: "fs-1", DB: db, Kafka: kafka, Codecs: codecs, Cache: cache, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m, err := s.Measure(ctx, MeasureRequest{Table: table, Partition: 0, Start: 0, End: n, MaxBytes: 64 << 20, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if m.End != n || m.Cut != "" {
		t.Fatalf("tail measured to %d (cut %q), want all %d offsets", m.End, m.Cut, n)
	}
	got, err := readAll(ctx, s, m.Key)
	if err != nil {
		t.Fatal(err)
	}

	// The model: every latest record held, then built in offset order.
	d, err := codecs.Current(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	settings := tablecodec.SettingsOf(d)
	dec, err := codecs.Decoder(ctx, table, settings)
	if err != nil {
		t.Fatal(err)
	}
	l := upsert.NewLatest(dec.KeyHash)
	if err := kafka.ReadRange(ctx, "wide", 0, 0, n, func(r record.Record) error { l.Add(r); return nil }); err != nil {
		t.Fatal(err)
	}
	rows, keys := l.Finish()
	var held int64
	for _, r := range rows {
		held += upsert.HeldBytes(r)
	}
	if held <= upsert.DefaultHold {
		t.Fatalf("the tail's latest records are %d bytes, within the %d a build holds: the test shows nothing", held, upsert.DefaultHold)
	}
	var want bytes.Buffer
	b, err := parquetbuild.NewBuilderFor(&want, dec, settings)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("tail file: %d bytes, holding every latest record builds %d bytes, not the same", len(got), want.Len())
	}
	fk, err := objects.TailKeys(ctx, db, []string{m.Key})
	if err != nil {
		t.Fatal(err)
	}
	if len(fk) != 1 || !bytes.Equal(fk[0].Keys, keys.Encode()) {
		t.Fatalf("the tail file's recorded keys differ from those of its latest records (%d rows)", len(fk))
	}
}
