package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// Item 11 over five simulated minutes of the demo table: it runs (every merge is checked
// to hold its files' rows, and to be a run of adjacent files), the tiered policy keeps
// fewer files than the one before it, and the table holds every record.
func TestAssemblyItem(t *testing.T) {
	c := DefaultConfig()
	c.AssemblyMinutes = []int{5}
	it := &Item{N: 11}
	if err := runAssembly(context.Background(), c, it); err != nil {
		t.Fatal(err)
	}
	var files, table *Row
	for i, r := range it.Rows {
		switch {
		case strings.HasSuffix(r.What, "files per partition (the most of its partitions)"):
			files = &it.Rows[i]
		case strings.HasSuffix(r.What, "data files of the table, for its rows"):
			table = &it.Rows[i]
		}
	}
	if files == nil || table == nil {
		t.Fatalf("rows %+v", it.Rows)
	}
	mink, _ := strconv.Atoi(files.Mink)
	base, _ := strconv.Atoi(files.Baseline)
	if mink < 1 || mink > assemblyGoal || base <= mink {
		t.Fatalf("files per partition: %s tiered, %s before", files.Mink, files.Baseline)
	}
	// 5 minutes at 20 records/s, but for the ranges still open at the end: the same
	// rows under both policies.
	rows := func(s string) int {
		_, n, _ := strings.Cut(s, "files, ")
		v, _ := strconv.Atoi(strings.TrimSuffix(n, " rows"))
		return v
	}
	if r := rows(table.Mink); r < 5800 || r > 6000 || r != rows(table.Baseline) {
		t.Fatalf("table: %s tiered, %s before", table.Mink, table.Baseline)
	}
}
