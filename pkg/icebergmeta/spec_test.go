package icebergmeta_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/tableschema"
)

// A table without a spec of its own gets the metadata it always had: one spec, 0,
// identity(_kafka_partition) with field id 1000, the default; each file's partition
// value its Kafka partition.
func TestDefaultSpecMetadataUnchanged(t *testing.T) {
	tbl := testTable(t, nil)
	// What every table's metadata said before specs were written through the table's.
	kp, _ := tbl.Schema.FindFieldByName(tableschema.ColumnKafkaPartition)
	want := fmt.Sprintf(`[{"spec-id":0,"fields":[{"source-id":%d,"field-id":1000,"name":"_kafka_partition","transform":"identity"}]}]`, kp.ID)
	def, err := partition.KafkaPartitionSpec(tbl.Schema)
	if err != nil {
		t.Fatal(err)
	}
	explicit := tbl
	explicit.Specs = []partition.Spec{def}
	for name, tb := range map[string]icebergmeta.Table{"no spec": tbl, "the default stored": explicit} {
		s := store{}
		base := created(t, s, tb)
		var raw struct {
			Specs   json.RawMessage `json:"partition-specs"`
			Default *int            `json:"default-spec-id"`
			Last    *int            `json:"last-partition-id"`
		}
		if err := json.Unmarshal(s[base.Key], &raw); err != nil {
			t.Fatal(err)
		}
		if string(raw.Specs) != want || raw.Default == nil || *raw.Default != 0 || raw.Last == nil || *raw.Last != 1000 {
			t.Fatalf("%s: partition-specs %s, default-spec-id %v, last-partition-id %v; want %s, 0, 1000", name, raw.Specs, deref(raw.Default), deref(raw.Last), want)
		}
		res, err := icebergmeta.Commit(context.Background(), icebergmeta.NewReader(s), tb, base, icebergmeta.Change{
			Operation: table.OpAppend, Now: time.Now(), Add: []icebergmeta.DataFile{file(3, 0, 10, 10)},
		})
		if err != nil {
			t.Fatal(err)
		}
		s.put(res)
		md := current(t, s, res).Metadata
		if len(md.PartitionSpecs()) != 1 || md.DefaultPartitionSpec() != 0 {
			t.Fatalf("%s: after a commit, specs %v, default %d", name, md.PartitionSpecs(), md.DefaultPartitionSpec())
		}
		for _, df := range files(t, s, md) {
			if !maps1(df.Partition(), 1000, int32(3)) || df.SpecID() != 0 {
				t.Fatalf("%s: file partition %v of spec %d, want {1000: 3} of spec 0", name, df.Partition(), df.SpecID())
			}
		}
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func maps1(m map[int]any, k int, v any) bool { return len(m) == 1 && m[k] == v }

// The metadata lists every spec of the table, default-spec-id the current one, as
// iceberg-go lists them; a commit adds the specs the metadata lacks. Files are written
// only under the default spec until ranges are indexed per tuple: under another, the
// commit fails and writes nothing.
func TestMetadataListsEverySpec(t *testing.T) {
	ctx := context.Background()
	tbl := testTable(t, nil)
	def, err := partition.KafkaPartitionSpec(tbl.Schema)
	if err != nil {
		t.Fatal(err)
	}
	fields, err := partition.ParseList("bucket[4](id), _kafka_partition")
	if err != nil {
		t.Fatal(err)
	}
	bucketed, err := partition.Build(tbl.Schema, fields, []partition.Spec{def})
	if err != nil {
		t.Fatal(err)
	}
	if bucketed.ID != 1 {
		t.Fatalf("the second spec has id %d", bucketed.ID)
	}
	check := func(what string, md table.Metadata, current int) {
		t.Helper()
		var want []iceberg.PartitionSpec
		for _, s := range []partition.Spec{def, bucketed} {
			is, err := s.Iceberg(tbl.Schema)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, is)
		}
		if got := md.PartitionSpecs(); !slices.EqualFunc(got, want, func(a, b iceberg.PartitionSpec) bool { return a.Equals(b) && a.ID() == b.ID() }) ||
			md.DefaultPartitionSpec() != current || md.LastPartitionSpecID() == nil || *md.LastPartitionSpecID() != 1001 {
			t.Fatalf("%s: specs %v, default %d, last partition id %v; want %v, %d, 1001", what, got, md.DefaultPartitionSpec(), deref(md.LastPartitionSpecID()), want, current)
		}
	}

	// Created with both, the bucketed one current.
	evolved := tbl
	evolved.Specs, evolved.SpecID = []partition.Spec{bucketed, def}, 1
	s := store{}
	base := created(t, s, evolved)
	check("created", base.Metadata, 1)
	_, err = icebergmeta.Commit(ctx, icebergmeta.NewReader(s), evolved, base, icebergmeta.Change{
		Operation: table.OpAppend, Now: time.Now(), Add: []icebergmeta.DataFile{file(0, 0, 10, 10)},
	})
	if err == nil || !strings.Contains(err.Error(), "no partition tuple for spec 1") {
		t.Fatalf("a file under bucket[4](id): %v, want an error naming spec 1", err)
	}

	// Created with the default; a commit adds the other and makes it current, and one
	// back to the default keeps both listed.
	s = store{}
	r := icebergmeta.NewReader(s)
	base = created(t, s, tbl)
	res, err := icebergmeta.Commit(ctx, r, evolved, base, icebergmeta.Change{})
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base = current(t, s, res)
	check("evolved", base.Metadata, 1)
	back := evolved
	back.SpecID = 0
	res, err = icebergmeta.Commit(ctx, r, back, base, icebergmeta.Change{
		Operation: table.OpAppend, Now: time.Now(), Add: []icebergmeta.DataFile{file(2, 0, 10, 10)},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.put(res)
	base = current(t, s, res)
	check("back to the default", base.Metadata, 0)
	for _, df := range files(t, s, base.Metadata) {
		if !maps1(df.Partition(), 1000, int32(2)) || df.SpecID() != 0 {
			t.Fatalf("file partition %v of spec %d, want {1000: 2} of spec 0", df.Partition(), df.SpecID())
		}
	}
	if _, err := icebergmeta.Commit(ctx, r, back, base, icebergmeta.Change{}); err != icebergmeta.ErrNoChange {
		t.Fatalf("the same specs again: %v, want ErrNoChange", err)
	}
	missing := back
	missing.SpecID = 7
	if _, err := icebergmeta.Commit(ctx, r, missing, base, icebergmeta.Change{}); err == nil || !strings.Contains(err.Error(), "no partition spec 7") {
		t.Fatalf("a current spec not among the specs: %v", err)
	}
}
