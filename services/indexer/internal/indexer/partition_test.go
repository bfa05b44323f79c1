package indexer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/services/indexer/internal/indexer"
)

// A table stored with a partition spec other than identity(_kafka_partition) (the admin
// API refuses one; a newer node could store it) is not indexed by _kafka_partition: its
// partition pauses, saying why, and nothing is indexed; beside it, a table stored with
// the default spec asked for explicitly is indexed as any other.
func TestPartitionedTableIsNotIndexed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	fields, err := spec.Fields()
	if err != nil {
		t.Fatal(err)
	}
	schema := iceberg.NewSchema(tableschema.SchemaID, fields...)
	create := func(name, by string) tables.Table {
		t.Helper()
		f, err := partition.Parse(by)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := partition.Build(schema, []partition.Field{f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.kafka.CreateTopic(name, 1, nil)
		tbl, err := tables.Create(ctx, e.db, tables.Table{Name: name, Spec: spec, PartitionSpec: &ps,
			Properties: map[string]string{tables.PropRangeMaxAge: "200ms"}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		e.produce(t, name, 0, jsonEvents(0, 20)...)
		return tbl
	}
	bucketed := create("bucketed", "bucket[4](id)")
	plain := create("plain", "_kafka_partition")
	_, ix := e.startIndexerOpts(t, "idx", indexer.Options{}, nil)

	e.checkTiling(t, plain, 0)
	why := await.For(t, 20*time.Second, "the partitioned table's partition paused", func() (string, bool) {
		ps, err := ranges.Partitions(ctx, e.db, bucketed.ID)
		if err != nil || len(ps) != 1 {
			return "", false
		}
		return ps[0].IndexError, ps[0].IndexError != ""
	})
	for _, w := range []string{"default.bucketed", "bucket[4](id)", "not supported yet"} {
		if !strings.Contains(why, w) {
			t.Errorf("index error %q does not mention %q", why, w)
		}
	}
	if p := ix.Paused()["default.bucketed/0"]; p != why {
		t.Errorf("status figures say %q, want %q", p, why)
	}
	if st, err := ranges.State(ctx, e.db, bucketed.ID, 0); err != nil || st.Indexed {
		t.Errorf("the partitioned table was indexed: %+v %v", st, err)
	}
}
