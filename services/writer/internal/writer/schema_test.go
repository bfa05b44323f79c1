package writer

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// indexAt is index with the ranges built at a schema version.
func (f *fixture) indexAt(p int32, step int64, version int) {
	f.t.Helper()
	st, err := ranges.State(f.ctx, f.db, f.tbl.ID, p)
	if err != nil {
		f.t.Fatal(err)
	}
	po := f.offsets(p)
	start := st.IndexedEnd
	if !st.Indexed {
		start = po.LogStart
	}
	s := tablecodec.NewSettings(version, 0, 0)
	settings, _ := json.Marshal(s)
	for start < po.LastStable {
		end := min(start+step, po.LastStable)
		fs, err := rangefile.BuildOffsets(f.ctx, f.src, tablecodec.New(f.db, nil), f.tbl, s, p, start, end, io.Discard)
		if err != nil {
			f.t.Fatal(err)
		}
		stats, _ := json.Marshal(fs.Columns)
		if err := ranges.Append(f.ctx, f.db, f.leases[p], ranges.Range{Table: f.tbl.ID, Partition: p, Start: start, End: end,
			Records: fs.RowCount, DecodeErrors: fs.DecodeErrors, Size: fs.Size, SHA256: fs.SHA256, Settings: settings, Stats: stats}); err != nil {
			f.t.Fatal(err)
		}
		start = end
	}
}

// A new schema version (an indexer evolved the table, or AlterTable) becomes the
// metadata's current schema at the writer's next commit, even with no new ranges, and
// old schemas stay for the files written with them; properties set later are served.
func TestSchemaAndPropertyUpdates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, nil)
	f.produce(0, 20)
	f.index(0, 10)
	f.run(f.newWriter(), f.take("writer", -1, "w1"))
	v := f.waitCovered()
	first := v.md.CurrentSnapshot().SnapshotID
	if id := v.md.CurrentSchema().ID; id != 0 || len(v.md.Schemas()) != 1 {
		t.Fatalf("schema %d of %d", id, len(v.md.Schemas()))
	}

	// AlterTable's way: a column added, a version stored.
	ver, err := tables.Evolve(f.ctx, f.db, nil, f.tbl.ID, func(cur tableschema.Version, last int) (tableschema.Spec, []iceberg.NestedField, bool, error) {
		spec, fields, err := cur.Alter([]tableschema.ColumnChange{{Add: &tableschema.Column{Name: "note", Type: "string"}}}, last)
		return spec, fields, true, err
	})
	if err != nil || ver.ID != 1 || ver.Schema.ID != 1 {
		t.Fatalf("evolve: %+v %v", ver, err)
	}
	leasetest.Eventually(t, 10*time.Second, "the new schema committed", func() bool {
		v = f.view()
		return v.md.CurrentSchema().ID == 1
	})
	if len(v.md.Schemas()) != 2 || v.md.CurrentSnapshot().SnapshotID != first {
		t.Fatalf("schemas %d, snapshot %d (was %d): a schema update makes no snapshot", len(v.md.Schemas()), v.md.CurrentSnapshot().SnapshotID, first)
	}
	note, ok := v.md.CurrentSchema().FindFieldByName("note")
	if !ok || note.ID <= tableschema.HighestID(v.md.Schemas()[0]) {
		t.Fatalf("note %+v", note)
	}

	// Ranges of the new version: the next snapshot is written with the new schema; the
	// old files keep theirs.
	f.produce(0, 10)
	f.indexAt(0, 10, 1)
	v = f.waitCovered()
	if s := v.md.CurrentSnapshot(); s.SchemaID == nil || *s.SchemaID != 1 {
		t.Fatalf("snapshot schema id %v", s.SchemaID)
	}
	f.checkExact(v)

	// Properties set later reach the metadata; Iceberg's own are served as given.
	if err := tables.SetProperties(f.ctx, f.db, f.tbl.ID, map[string]string{tables.PropCommitInterval: "30ms",
		PropMaintenanceInterval: "30ms", "owner": "data-eng", "history.expire.min-snapshots-to-keep": "7"}); err != nil {
		t.Fatal(err)
	}
	leasetest.Eventually(t, 10*time.Second, "the new properties committed", func() bool {
		v = f.view()
		p := v.md.Properties()
		return p["owner"] == "data-eng" && p["history.expire.min-snapshots-to-keep"] == "7"
	})
}

// The metadata lists the table's stored partition spec, default-spec-id its id, as
// iceberg-go binds it; for a spec Mink does not index by yet (stored by a newer node)
// there are no files to commit, but the table says what it is.
func TestMetadataListsTheStoredSpec(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.DB(t)
	cols := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{{Name: "id", Type: "long"}, {Name: "msg", Type: "string"}}}
	schema, err := cols.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	by, err := partition.ParseList("bucket[4](id), _kafka_partition")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := partition.Build(schema, by, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureSpec(t, db, 1, nil, &ps)
	f.run(f.newWriter(), f.take("writer", -1, "w1"))
	var v view
	leasetest.Eventually(t, 10*time.Second, "the table's metadata created", func() bool {
		v = f.view()
		return v.key != ""
	})
	want, err := ps.Iceberg(v.md.CurrentSchema())
	if err != nil {
		t.Fatal(err)
	}
	got := v.md.PartitionSpecs()
	if len(got) != 1 || !got[0].Equals(want) || v.md.DefaultPartitionSpec() != ps.ID || got[0].NumFields() != 2 {
		t.Fatalf("partition specs %v, default %d; want %v, %d", got, v.md.DefaultPartitionSpec(), want, ps.ID)
	}
}
