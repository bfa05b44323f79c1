package indexer_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/indexer/internal/indexer"
)

// An indexer holding many busy partitions keeps at most --build-memory of finished
// pages in memory, whatever mink.range.target-bytes is: the rest wait in temporary
// files, and the ranges still tile every partition and rebuild byte for byte.
func TestBuildMemoryBoundsManyPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const parts, limit = 40, 32 << 10
	// Ranges far larger than what arrives: without the bound every page of every
	// partition would wait in memory until the age cuts the range.
	tbl := e.createTable(t, "mem", parts, map[string]string{tables.PropRangeTargetBytes: "1073741824", tables.PropRangeMaxAge: "2s"})
	_, ix := e.startIndexerOpts(t, "idx-mem", indexer.Options{BuildMemory: limit}, func(ix *indexer.Indexer) {
		// Small pages in one row group per range: pages finish and wait early.
		ix.Settings.PageBufferBytes = 4 << 10
		ix.Settings.RowGroupRows = 1 << 20
	})
	for round := range 3 {
		for p := range int32(parts) {
			e.produce(t, "mem", p, jsonEvents(round*300, 300)...)
		}
	}
	for p := range int32(parts) {
		e.checkTiling(t, tbl, p)
	}
	if peak := ix.Pages.Peak(); peak > limit || peak == 0 {
		t.Errorf("peak of pages in memory: %d bytes, want 1..%d", peak, limit)
	}
	if ix.Pages.Spilled() == 0 {
		t.Errorf("no page spilled: the partitions' pages never needed more than %d bytes, the test shows nothing", limit)
	}
	// Every cut range gave its pages back.
	leasetest.Eventually(t, 10*time.Second, "pages in memory back to 0", func() bool { return ix.Pages.InMemory() == 0 })
	for _, p := range []int32{0, parts - 1} {
		rs, err := ranges.List(context.Background(), e.db, tbl.ID, p, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if _, err := rangefile.Build(context.Background(), e.kc, tablecodec.New(e.db, nil), tbl, r, io.Discard); err != nil {
				t.Fatalf("rebuild [%d, %d) of partition %d: %v", r.Start, r.End, p, err)
			}
		}
	}
}

// An idle partition holds no build: an indexer holds thousands of partitions, most of
// them quiet, and a Parquet writer costs tens of KiB before its first row (issue 32). A
// range's build starts with its first record and ends when the range is stored.
func TestIdlePartitionsHoldNoBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const parts = 3
	// Ranges cut by size only: each record below is larger than the target, so every
	// poll's records are stored at once and leave the partition's open range empty.
	tbl := e.createTable(t, "idle", parts, map[string]string{tables.PropRangeTargetBytes: "1024", tables.PropRangeMaxAge: "1h"})
	_, ix := e.startIndexerOpts(t, "idx-idle", indexer.Options{}, nil)
	big := func(from, n int) []string {
		var out []string
		for i := from; i < from+n; i++ {
			out = append(out, fmt.Sprintf(`{"id":%d,"msg":%q,"amount":"1.25"}`, i, strings.Repeat("x", 1100)))
		}
		return out
	}
	for p := range int32(parts) {
		e.produce(t, "idle", p, big(0, 5)...)
	}
	for p := range int32(parts) {
		e.checkTiling(t, tbl, p)
	}
	leasetest.Eventually(t, 10*time.Second, "no build open while every partition is idle", func() bool { return ix.OpenBuilds() == 0 })
	// A record below the target opens partition 0's next range, and its build.
	e.produce(t, "idle", 0, jsonEvents(5, 1)...)
	leasetest.Eventually(t, 20*time.Second, "one build open: partition 0's range of one record", func() bool { return ix.OpenBuilds() == 1 })
}
