package icebergmeta_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/parquetbuild"
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

// countingStore counts the reads of each metadata file.
type countingStore struct {
	store
	reads map[string]int
}

func (s countingStore) MetaFile(ctx context.Context, key string) ([]byte, error) {
	s.reads[key]++
	return s.store.MetaFile(ctx, key)
}

// A filter on _kafka_partition skips, by the manifest list's partition summaries, the
// manifests of other partitions unread, and by partition values the files of other
// partitions in a manifest of several, with no column bounds of _kafka_partition to
// go by (the files here have none): what server-side planning does with the metadata.
func TestIcebergGoSkipsByPartition(t *testing.T) {
	ctx := context.Background()
	s := countingStore{store: store{}, reads: map[string]int{}}
	r := icebergmeta.NewReader(s)
	tbl := testTable(t, map[string]string{table.ManifestMergeEnabledKey: "false"})
	base := created(t, s.store, tbl)
	commit := func(add ...icebergmeta.DataFile) string {
		t.Helper()
		res, err := icebergmeta.Commit(ctx, r, tbl, base, icebergmeta.Change{Operation: table.OpAppend, Now: time.Now(), Add: add})
		if err != nil {
			t.Fatal(err)
		}
		s.put(res)
		base = current(t, s.store, res)
		return res.Files[0].Key // the new manifest
	}
	// A manifest per partition, then one of both.
	only0 := commit(file(0, 0, 10, 10), file(0, 10, 20, 10))
	only1 := commit(file(1, 0, 10, 10))
	both := commit(file(0, 20, 30, 10), file(1, 10, 20, 10), file(2, 0, 10, 10))
	for _, f := range []icebergmeta.DataFile{file(0, 0, 10, 10), file(1, 0, 10, 10)} {
		var st []parquetbuild.ColumnStats
		json.Unmarshal(f.Stats, &st)
		for _, c := range st {
			if c.FieldID == 3 {
				t.Fatal("the test's files have bounds of _kafka_partition")
			}
		}
	}

	kp := iceberg.Reference("_kafka_partition")
	for _, c := range []struct {
		filter iceberg.BooleanExpression
		want   []icebergmeta.DataFile
		read   []string // the manifests read
	}{
		{iceberg.EqualTo(kp, int32(1)), []icebergmeta.DataFile{file(1, 0, 10, 10), file(1, 10, 20, 10)}, []string{only1, both}},
		{iceberg.IsIn(kp, int32(0)), []icebergmeta.DataFile{file(0, 0, 10, 10), file(0, 10, 20, 10), file(0, 20, 30, 10)}, []string{only0, both}},
		{iceberg.GreaterThanEqual(kp, int32(2)), []icebergmeta.DataFile{file(2, 0, 10, 10)}, []string{both}},
		{iceberg.LessThan(kp, int32(0)), nil, nil},
	} {
		clear(s.reads)
		it := table.New(table.Identifier{"ns", "events"}, base.Metadata, layout.URI(base.Key),
			func(ctx context.Context) (iceio.IO, error) { return icebergmeta.FileIO(ctx, s), nil }, nil)
		tasks, err := it.Scan(table.WithRowFilter(c.filter)).PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, task := range tasks {
			got = append(got, task.File.FilePath())
		}
		for _, f := range c.want {
			want = append(want, f.URI())
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: planned %v, want %v", c.filter, got, want)
		}
		var read []string
		for _, m := range []string{only0, only1, both} {
			if s.reads[m] > 0 {
				read = append(read, m)
			}
		}
		if !slices.Equal(read, c.read) {
			t.Fatalf("%s: read manifests %v, want %v", c.filter, read, c.read)
		}
	}
}
