package icebergmeta_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
)

// iceberg-go plans scans over what Commit writes: every file, and with filters, pruned
// by partition (manifest partition summaries and partition values) and by column
// bounds (the statistics from the ranges).
func TestIcebergGoPlansScans(t *testing.T) {
	ctx := context.Background()
	s := store{}
	r := icebergmeta.NewReader(s)
	tbl := testTable(t, nil)
	res, err := icebergmeta.Create(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base := current(t, s, res)
	for i := int64(0); i < 4; i++ {
		res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{
			Operation: table.OpAppend, Now: time.Now(),
			Add: []icebergmeta.DataFile{file(0, i*10, i*10+10, 10), file(1, i*10, i*10+10, 10)},
		})
		if err != nil {
			t.Fatal(err)
		}
		s.put(res)
		base = current(t, s, res)
	}
	it := table.New(table.Identifier{"ns", "events"}, base.Metadata, layout.URI(base.Key),
		func(ctx context.Context) (iceio.IO, error) { return icebergmeta.FileIO(ctx, s), nil }, nil)
	plan := func(filter iceberg.BooleanExpression) []string {
		t.Helper()
		var opts []table.ScanOption
		if filter != nil {
			opts = append(opts, table.WithRowFilter(filter))
		}
		tasks, err := it.Scan(opts...).PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, task := range tasks {
			out = append(out, task.File.FilePath())
		}
		slices.Sort(out)
		return out
	}
	if got := plan(nil); len(got) != 8 {
		t.Fatalf("plan of everything: %d files", len(got))
	}
	if got := plan(iceberg.EqualTo(iceberg.Reference("_kafka_partition"), int32(1))); len(got) != 4 || !slices.Equal(got, []string{
		file(1, 0, 10, 10).URI(), file(1, 10, 20, 10).URI(), file(1, 20, 30, 10).URI(), file(1, 30, 40, 10).URI()}) {
		t.Fatalf("plan of partition 1: %v", got)
	}
	if got := plan(iceberg.GreaterThanEqual(iceberg.Reference("id"), int64(30))); len(got) != 2 {
		t.Fatalf("plan of id >= 30 (bounds prune): %v", got)
	}
}
