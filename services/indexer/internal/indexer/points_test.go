package indexer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/jackc/pgx/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/schemapoints"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/services/indexer/internal/indexer"
)

// alterAt stores a new version of tbl with column name added (AlterTable's way) and
// makes it take effect on partition 0 from offset from (or past what builds recorded):
// it returns the version and where.
func (e *env) alterAt(t *testing.T, tbl tables.Table, name string, from int64) (int, int64) {
	t.Helper()
	ctx := context.Background()
	cur, err := tables.GetByID(ctx, e.db, tbl.ID)
	if err != nil {
		t.Fatal(err)
	}
	before, err := tablecodec.New(e.db, nil).Current(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	var version int
	var at int64
	err = pgx.BeginFunc(ctx, e.db, func(tx pgx.Tx) error {
		v, err := tables.Evolve(ctx, tx, nil, tbl.ID, func(cur tableschema.Version, last int) (tableschema.Spec, []iceberg.NestedField, bool, error) {
			spec, fields, err := cur.Alter([]tableschema.ColumnChange{{Add: &tableschema.Column{Name: name, Type: "string"}}}, last)
			return spec, fields, true, err
		})
		if err != nil {
			return err
		}
		version = v.ID
		pts, err := ranges.AddPoints(ctx, tx, tbl.ID, map[int32]int64{0: from}, before, func(d schemapoints.Decoding) schemapoints.Decoding {
			d.Version = v.ID
			return d
		}, objects.RecordedEnds)
		at = pts[0].From
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return version, at
}

// A range decodes with the schema point in force at its start and ends at the next one:
// a point known when the range opens cuts it there; one added inside a range already
// open (an AlterTable while records are being indexed) makes its store fail, and the
// range is read again from Kafka and cut there. Every range rebuilds byte for byte.
func TestIndexerCutsAtSchemaPoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tbl := e.createTable(t, "pts", 1, map[string]string{tables.PropRangeMaxAge: "6s"})
	e.produce(t, "pts", 0, jsonEvents(0, 10)...)
	v1, at := e.alterAt(t, tbl, "note", 4)
	if at != 4 {
		t.Fatalf("point at %d, want 4 (nothing recorded yet)", at)
	}
	reader := sdkmetric.NewManualReader()
	e.startIndexerOpts(t, "idx", indexer.Options{Meter: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")}, nil)
	indexedTo := func(end int64) {
		t.Helper()
		leasetest.Eventually(t, 30*time.Second, fmt.Sprint("indexed to ", end), func() bool {
			st, err := ranges.State(ctx, e.db, tbl.ID, 0)
			return err == nil && st.IndexedEnd == end
		})
	}
	indexedTo(10)

	// The next range is open with records [10, 20) when a version takes effect at 15.
	e.produce(t, "pts", 0, jsonEvents(10, 10)...)
	leasetest.Eventually(t, 30*time.Second, "records [10, 20) in the open range", func() bool {
		return counter(t, reader, "mink.indexer.records") == 20
	})
	if st, _ := ranges.State(ctx, e.db, tbl.ID, 0); st.IndexedEnd != 10 {
		t.Fatalf("the range was stored (indexed end %d) before the point could fall inside it: raise its max age", st.IndexedEnd)
	}
	v2, at := e.alterAt(t, tbl, "extra", 15)
	if at != 15 {
		t.Fatalf("point at %d, want 15", at)
	}
	indexedTo(20)
	if n := counter(t, reader, "mink.indexer.records"); n != 30 {
		t.Errorf("%d records polled, want 30: [10, 20) read again once", n)
	}

	rs := e.checkTiling(t, tbl, 0)
	want := []struct {
		start, end int64
		version    int
	}{{0, 4, 0}, {4, 10, v1}, {10, 15, v1}, {15, 20, v2}}
	if len(rs) != len(want) {
		t.Fatalf("ranges %v, want %v", spans(rs), want)
	}
	for i, r := range rs {
		var s parquetbuild.Settings
		if err := json.Unmarshal(r.Settings, &s); err != nil {
			t.Fatal(err)
		}
		if w := want[i]; r.Start != w.start || r.End != w.end || s.TableVersion != w.version {
			t.Errorf("range %d: [%d, %d) version %d, want [%d, %d) version %d", i, r.Start, r.End, s.TableVersion, w.start, w.end, w.version)
		}
		cur, _ := tables.GetByID(ctx, e.db, tbl.ID)
		if _, err := rangefile.Build(ctx, e.kc, tablecodec.New(e.db, nil), cur, r, io.Discard); err != nil {
			t.Errorf("rebuild [%d, %d): %v", r.Start, r.End, err)
		}
	}
}

func spans(rs []ranges.Range) [][2]int64 {
	out := make([][2]int64, len(rs))
	for i, r := range rs {
		out[i] = [2]int64{r.Start, r.End}
	}
	return out
}
