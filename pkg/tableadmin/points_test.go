package tableadmin_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/schemapoints"
)

func (f *fixture) points(table int64, p int32) schemapoints.Points {
	f.t.Helper()
	ps, err := ranges.Points(f.ctx, f.db, table, p)
	if err != nil {
		f.t.Fatal(err)
	}
	return ps
}

func (f *fixture) produceN(topic string, p int32, n int) {
	f.t.Helper()
	cl := f.kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, `{"id":%d}`, i)})
	}
	kafkatest.Produce(f.t, cl, recs...)
}

func version(n int) schemapoints.Decoding { return schemapoints.Decoding{Version: n} }

// An alter that makes a version makes it take effect on every partition past Kafka's end
// when it began: records produced after it decode with it, the ones before with the
// version before (the partition's first point). A second alter before any record lands on
// the same point; an alter of properties alone adds none.
func TestAlterAddsSchemaPoints(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("clicks", 2, nil)
	tbl := f.create(&adminv1.CreateTableRequest{Name: "clicks", Format: jsonFormat, Columns: []*adminv1.Column{{Name: "id", Type: "int"}}})
	f.produceN("clicks", 0, 5)
	f.produceN("clicks", 1, 3)
	f.alter(&adminv1.AlterTableRequest{Name: "clicks", Changes: []*adminv1.ColumnChange{add("src", "string", "source")}})
	for p, want := range map[int32]schemapoints.Points{
		0: {{From: 0, Decoding: version(0)}, {From: 5, Decoding: version(1)}},
		1: {{From: 0, Decoding: version(0)}, {From: 3, Decoding: version(1)}},
	} {
		if got := f.points(tbl.GetId(), p); !slices.Equal(got, want) {
			t.Errorf("partition %d: points %v, want %v", p, got, want)
		}
	}
	f.alter(&adminv1.AlterTableRequest{Name: "clicks", Changes: []*adminv1.ColumnChange{add("ref", "string", "")}})
	f.alter(&adminv1.AlterTableRequest{Name: "clicks", SetProperties: map[string]string{"owner": "web"}})
	f.produceN("clicks", 1, 2)
	if got, want := f.points(tbl.GetId(), 0), (schemapoints.Points{{From: 0, Decoding: version(0)}, {From: 5, Decoding: version(2)}}); !slices.Equal(got, want) {
		t.Errorf("partition 0 after a second alter: points %v, want %v", got, want)
	}
	f.alter(&adminv1.AlterTableRequest{Name: "clicks", Changes: []*adminv1.ColumnChange{add("more", "string", "")}})
	if got, want := f.points(tbl.GetId(), 1), (schemapoints.Points{{From: 0, Decoding: version(0)}, {From: 3, Decoding: version(2)},
		{From: 5, Decoding: version(3)}}); !slices.Equal(got, want) {
		t.Errorf("partition 1 after a third alter: points %v, want %v", got, want)
	}
}

// A tail file being recorded while an alter runs: the alter (holding the table's row)
// waits for the tail's partition row and the tail (holding that row) inserts a row that
// references the table; neither waits for the other in a cycle, and the alter's point
// comes after the tail.
func TestAlterWhileATailIsRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("clicks", 1, nil)
	tbl := f.create(&adminv1.CreateTableRequest{Name: "clicks", Format: jsonFormat, Columns: []*adminv1.Column{{Name: "id", Type: "int"}}})
	f.produceN("clicks", 0, 4)
	if _, err := ranges.EnsurePoints(f.ctx, f.db, tbl.GetId(), 0, version(0)); err != nil {
		t.Fatal(err)
	}
	s := parquetbuild.DefaultSettings()
	settings, _ := json.Marshal(s)
	tail := objects.Tail{Table: tbl.GetId(), Key: "default/clicks/data/tail", Partition: 0, Start: 0, End: 9, Records: 4,
		Size: 1, SHA256: "00", Settings: settings, Stats: []byte(`[]`)}

	tx, err := f.db.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx)
	// The tail's check holds the partition's row...
	if err := ranges.CheckPoints(f.ctx, tx, tbl.GetId(), 0, tail.Start, tail.End, tail.Records, settings); err != nil {
		t.Fatal(err)
	}
	// ... while the alter takes the table's row and waits for the partition's.
	altered := make(chan error, 1)
	go func() {
		_, err := f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "clicks", Changes: []*adminv1.ColumnChange{add("src", "string", "source")}})
		altered <- err
	}()
	pgtest.WaitLockWaiter(t, f.db)
	// Then the tail's row, which references the table's.
	if _, _, _, err := objects.RecordTail(f.ctx, tx, tail, time.Minute, time.Minute); err != nil {
		t.Fatalf("record the tail while an alter waits: %v", err)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-altered; err != nil {
		t.Fatalf("alter while a tail was recorded: %v", err)
	}
	if got, want := f.points(tbl.GetId(), 0), (schemapoints.Points{{From: 0, Decoding: version(0)}, {From: 9, Decoding: version(1)}}); !slices.Equal(got, want) {
		t.Errorf("points %v, want %v (past the tail's end)", got, want)
	}
}

// An alter that makes a version needs Kafka's end of each partition (where it takes
// effect): without Kafka it is Unavailable, naming Kafka, and changes nothing; an alter
// of properties alone still works.
func TestAlterColumnsNeedKafka(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.kafka.CreateTopic("clicks", 1, nil)
	tbl := f.create(&adminv1.CreateTableRequest{Name: "clicks", Format: jsonFormat, Columns: []*adminv1.Column{{Name: "id", Type: "int"}}})
	f.kafka.Stop()
	_, err := f.svc.AlterTable(f.ctx, &adminv1.AlterTableRequest{Name: "clicks", Changes: []*adminv1.ColumnChange{add("src", "string", "source")}})
	wantErr(t, "a column added while Kafka is down", err, apierr.Unavailable, "", "kafka")
	if stored, n := f.stored(tbl.GetId()); stored.Version != 0 || n != 1 || len(f.points(tbl.GetId(), 0)) != 0 {
		t.Errorf("after a refused alter: version %d of %d, points %v", stored.Version, n, f.points(tbl.GetId(), 0))
	}
	if got := f.alter(&adminv1.AlterTableRequest{Name: "clicks", SetProperties: map[string]string{"owner": "web"}}); got.GetProperties()["owner"] != "web" {
		t.Errorf("a property alter while Kafka is down: %v", got.GetProperties())
	}
}
