package fileserver_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/tables"
)

// TestLiveLoadUpsertKeylessTailFile: a tail file of an upsert table recorded without
// its keys (measured by a file server from before upsert tails recorded them, during a
// rolling upgrade) is no part of a load: the load measures that span again, which
// records the keys, and reads the latest record per key, its deletes computed from
// them. It does not fail until the row expires.
func TestLiveLoadUpsertKeylessTailFile(t *testing.T) {
	t.Parallel()
	le := newLiveEnvMode(t, noReuse, false, tables.ModeUpsert)
	n := le.startNodes(1)[0]
	latest := map[string]row{} // partition/key -> its latest record
	produce := func(count int) {
		t.Helper()
		var recs []*kgo.Record
		for p := range int32(livePartitions) {
			for range count {
				id := le.nextID
				le.nextID++
				recs = append(recs, &kgo.Record{Topic: le.name, Partition: p, Key: fmt.Appendf(nil, "k-%d", id%7),
					Value: fmt.Appendf(nil, `{"id": %d, "msg": "click %d"}`, id, id)})
			}
		}
		for _, r := range kafkatest.Produce(t, le.prod, recs...) {
			var id int64
			fmt.Sscanf(string(r.Value), `{"id": %d`, &id)
			latest[fmt.Sprint(r.Partition, "/", string(r.Key))] = row{r.Partition, r.Offset, id, fmt.Sprint("click ", id)}
		}
	}
	want := func() []row {
		var out []row
		for _, r := range latest {
			out = append(out, r)
		}
		sortRows(out)
		return out
	}

	produce(20)
	l := le.mustScan(n)
	sameRows(t, "first load", l.rows, want())
	if !l.live() || l.tailFiles() != livePartitions {
		t.Fatalf("first load: live %v, %d tail files; want one per partition", l.live(), l.tailFiles())
	}
	// Partition 0's tail file as a file server before migration 0014 records one: no
	// keys. Partition 1's keeps them: the next load reuses it.
	tag, err := le.db.Exec(le.ctx, `UPDATE mink_data_files SET keys = NULL
		WHERE table_id = $1 AND live AND deletes_of IS NULL AND partition = 0`, le.table.ID)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("clear the tail files' keys: %v (%d rows)", err, tag.RowsAffected())
	}
	builds := tailBuilds(n)
	produce(15) // updates of the same keys: partition 1's new tail file supersedes rows of its first
	l = le.mustScan(n)
	sameRows(t, "load over a keyless tail file", l.rows, want())
	if got := l.summary("added-position-deletes"); got == "" || got == "0" {
		t.Fatalf("the load adds no position deletes (%q), yet partition 1's second tail file updates keys of its first", got)
	}
	if got := tailBuilds(n) - builds; got != 2 {
		t.Errorf("%d tail builds, want 2: partition 0's tail measured anew from its start, partition 1's beyond its first file", got)
	}
	if got := l.tailFiles(); got != 3 {
		t.Errorf("%d tail files, want 3: one in partition 0, two in partition 1", got)
	}
	var keyless int
	if err := le.db.QueryRow(le.ctx, `SELECT count(*) FROM mink_data_files f
		WHERE f.table_id = $1 AND f.live AND f.deletes_of IS NULL AND f.keys IS NULL
		  AND f.key = ANY(SELECT unnest(deletes_tail) FROM mink_data_files WHERE deletes_of IS NOT NULL)`, le.table.ID).Scan(&keyless); err != nil || keyless != 0 {
		t.Fatalf("%d keyless tail files named by delete files (%v), want 0", keyless, err)
	}
}
