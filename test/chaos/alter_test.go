package chaos

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/test/cluster"
)

// seenRows are the rows loads have returned, each as first read.
type seenRows map[[2]int64]row

// observe compares rows with their first reads (a column a read lacks is null there)
// and books the new ones; it returns the differences.
func (s seenRows) observe(what string, rows []row) []string {
	var diffs []string
	for _, r := range rows {
		k := [2]int64{int64(r.partition), r.offset}
		was, ok := s[k]
		if !ok {
			s[k] = r
			continue
		}
		if was.minkErr != r.minkErr || was.id != r.id || was.idValid != r.idValid || !maps.Equal(was.strs, r.strs) {
			diffs = append(diffs, fmt.Sprintf("%s: row %d/%d read %+v, first %+v", what, r.partition, r.offset, r, was))
		}
	}
	return diffs
}

// TestAlterUnderLoad: columns are added (AlterTable, reading keys every record has)
// while records arrive, indexers index, the writer commits and clients load the table
// live all the time, and an indexer hands its partitions over in between. No row a load
// returned ever reads otherwise later (the records before each alter read the new
// column as null, those after with its value, in every load), and in the end every
// record is one row.
func TestAlterUnderLoad(t *testing.T) {
	c := newCluster(t)
	a := c.Join("indexer", "idx-a")
	b := c.Join("indexer", "idx-b")
	c.addDataPath()
	table := c.createTable(a, "altered", 4)
	pr := c.produce(20*time.Millisecond, map[string]int32{"altered": 4})
	c.indexing(table, 4, map[string]int{"idx-a": 2, "idx-b": 2}, false)

	alter := func(column string) { // a column of the key of its name
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := c.Node("wr-1").Admin().AlterTable(ctx, &adminv1.AlterTableRequest{Name: "altered", Changes: []*adminv1.ColumnChange{
			{Change: &adminv1.ColumnChange_Add{Add: &adminv1.Column{Name: column, Type: "string", JsonPath: column}}}}})
		if err != nil {
			t.Fatalf("alter: add %s: %v", column, err)
		}
	}
	seen := seenRows{}
	var diffs []string
	loads := 0
	for i := range 24 {
		switch i {
		case 4:
			alter("tag")
		case 10:
			b.Leave() // its partitions go to idx-a mid-stream
		case 12:
			alter("note")
		case 16:
			b.Restart()
		}
		rows, err := c.scan(c.fileServer(), "default", "altered")
		if err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
		loads++
		diffs = append(diffs, seen.observe(fmt.Sprintf("load %d", i), rows)...)
		cluster.Until(time.Now().Add(250 * time.Millisecond))
	}
	pr.halt()
	c.check()
	rows, err := c.scan(c.fileServer(), "default", "altered")
	if err != nil {
		t.Fatal(err)
	}
	diffs = append(diffs, seen.observe("the last load", rows)...)
	var labelled, before int
	for _, r := range rows {
		if _, ok := r.strs["tag"]; ok {
			labelled++
		} else {
			before++
		}
		for _, c := range []string{"tag", "note"} {
			if v, ok := r.strs[c]; ok && v != fmt.Sprintf("%s %d", c, r.id) {
				t.Errorf("row %d/%d: %s %q, id %d", r.partition, r.offset, c, v, r.id)
			}
		}
	}
	if labelled == 0 || before == 0 {
		t.Errorf("%d rows with the new column set, %d without: the alter did not take effect mid-stream", labelled, before)
	}
	for i, d := range diffs {
		if i == 20 {
			t.Errorf("... and %d more", len(diffs)-20)
			break
		}
		t.Error(d)
	}
	t.Logf("%d loads, %d rows seen; %d rows read the new column, %d from before the alter", loads, len(seen), labelled, before)
}
