package tableadmin_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/tableadmin"
)

// TestDescribeAndList: both calls show each table's decodings, schema version and id and
// current columns with their Iceberg types; Describe adds, per partition, Kafka's high
// watermark, its lag (from the log start before anything is indexed) and why indexing is
// paused.
func TestDescribeAndList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("orders", 2, nil)
	f.register("orders-value", orderAvro, sr.TypeAvro)
	f.register("orders-key", keyAvro, sr.TypeAvro)
	orders := f.create(&adminv1.CreateTableRequest{Namespace: "shop", Name: "orders", Format: avroFormat, KeyFormat: avroFormat,
		KeySchemaMode: adminv1.SchemaMode_SCHEMA_MODE_LATEST})
	jsonTable(f)
	f.alter(&adminv1.AlterTableRequest{Name: "events", Changes: []*adminv1.ColumnChange{widen("id", "long"), add("note", "string", "")}})

	prod := f.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, prod, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("a")},
		&kgo.Record{Topic: "orders", Partition: 1, Value: []byte("b")}, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("c")})
	// What an indexer records when the registry does not answer (ranges.SetIndexError,
	// which needs the partition's lease).
	const why = "schema registry http://sr:8081 is unreachable: dial tcp: connection refused"
	if _, err := f.db.Exec(f.ctx, `UPDATE mink_partitions SET index_error = $2, index_error_at = now() - interval '1 minute'
		WHERE table_id = $1 AND partition = 1`, orders.GetId(), why); err != nil {
		t.Fatal(err)
	}

	d, err := f.svc.DescribeTable(f.ctx, &adminv1.DescribeTableRequest{Namespace: "shop", Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	tbl := d.GetTable()
	if tbl.GetValue().GetSubject() != "orders-value" || tbl.GetKey().GetSubject() != "orders-key" ||
		tbl.GetKey().GetMode() != adminv1.SchemaMode_SCHEMA_MODE_LATEST || tbl.GetSchemaVersion() != 0 {
		t.Errorf("described table: %v", tbl)
	}
	if !slices.Equal(names(tbl), names(orders)) || columns(tbl)["price"] != "decimal(10, 2)" ||
		!strings.HasPrefix(columns(tbl)["_kafka_key_decoded"], "struct<") {
		t.Errorf("described schema: %v", tbl.GetSchema())
	}
	if len(d.GetPartitions()) != 2 {
		t.Fatalf("partitions: %v", d.GetPartitions())
	}
	p0, p1 := d.GetPartitions()[0], d.GetPartitions()[1]
	if p0.GetPartition() != 0 || p0.GetHighWatermark() != 0 || p0.GetIndexError() != "" || p0.GetIndexErrorSince() != nil {
		t.Errorf("partition 0: %v", p0)
	}
	if p1.GetHighWatermark() != 3 || p1.GetIndexError() != why || p1.GetIndexErrorSince() == nil ||
		time.Since(p1.GetIndexErrorSince().AsTime()) > time.Hour {
		t.Errorf("partition 1: %v", p1)
	}
	// Not indexed yet: indexing starts at the log start, so all of the log is lag; an
	// empty partition has none (not "unknown", which says Kafka did not answer).
	if p1.GetLagRecords() != 3 || p1.GetRangeCount() != 0 || p0.GetLagRecords() != 0 {
		t.Errorf("partition 1 lag %d, ranges %d; partition 0 lag %d", p1.GetLagRecords(), p1.GetRangeCount(), p0.GetLagRecords())
	}

	l, err := f.svc.ListTables(f.ctx, &adminv1.ListTablesRequest{})
	if err != nil || len(l.GetTables()) != 2 {
		t.Fatalf("ListTables: %v %v", l, err)
	}
	events, shop := l.GetTables()[0], l.GetTables()[1] // by namespace, then name
	if events.GetName() != "events" || events.GetSchemaVersion() != 1 || events.GetSchemaId() != 1 ||
		columns(events)["id"] != "long" || columns(events)["note"] != "string" || len(events.GetColumns()) != 5 {
		t.Errorf("listed events: %v", events)
	}
	if shop.GetName() != "orders" || !slices.Equal(names(shop), names(orders)) || shop.GetValue().GetSubject() != "orders-value" {
		t.Errorf("listed orders: %v", shop)
	}
	if l, err := f.svc.ListTables(f.ctx, &adminv1.ListTablesRequest{Namespace: "shop"}); err != nil || len(l.GetTables()) != 1 {
		t.Errorf("ListTables of shop: %v %v", l, err)
	}

	_, err = f.svc.DescribeTable(f.ctx, &adminv1.DescribeTableRequest{Name: "orders"})
	wantErr(t, "describe in the wrong namespace", err, apierr.NotFound, "", "default.orders")
	_, err = f.svc.DescribeTable(f.ctx, &adminv1.DescribeTableRequest{})
	wantErr(t, "describe without a name", err, apierr.InvalidArgument, "name")

	// Kafka gone: the table and its index are still described, high watermarks unknown.
	kafka, err := kafkasrc.New(f.kafka.Addrs(), kafkasrc.WithTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	svc := &tableadmin.Service{DB: f.db, Kafka: kafka, Codecs: f.svc.Codecs}
	f.kafka.Stop()
	d, err = svc.DescribeTable(f.ctx, &adminv1.DescribeTableRequest{Namespace: "shop", Name: "orders"})
	if err != nil || len(d.GetPartitions()) != 2 || d.GetPartitions()[1].GetHighWatermark() != -1 ||
		d.GetPartitions()[1].GetIndexError() != why || len(d.GetTable().GetSchema()) == 0 {
		t.Errorf("described without Kafka: %v %v", d, err)
	}
}
