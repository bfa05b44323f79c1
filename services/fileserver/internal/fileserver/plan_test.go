package fileserver_test

import (
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// iceberg-go planning on the server (WithScanPlanningMode remote) reads every row a
// load names, the live tail included, and with a filter exactly the matching rows.
func TestPlanIcebergGoRemotePlanning(t *testing.T) {
	le := newLiveEnv(t, nil, false)
	n := le.startNodes(1)[0]
	le.produce(30)
	le.index(1 << 62)
	le.commit()
	le.produce(20) // the tail: neither indexed nor committed

	cat := le.catalogClient(n)
	if !cat.SupportsFullRemoteScanPlanning() {
		t.Fatal("the catalog does not advertise planning's endpoints")
	}
	tbl, err := cat.LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		t.Fatal(err)
	}
	read := func(opts ...table.ScanOption) []row {
		t.Helper()
		at, err := tbl.Scan(append(opts, table.WithScanPlanningMode(table.ScanPlanningRemote))...).ToArrowTable(le.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer at.Release()
		return rowsOf(t, at)
	}
	sameRows(t, "remote plan of everything", read(), le.rows)
	var want []row
	for _, r := range le.rows {
		if r.id >= 70 {
			want = append(want, r)
		}
	}
	sameRows(t, "remote plan of id >= 70", read(table.WithRowFilter(iceberg.GreaterThanEqual(iceberg.Reference("id"), int64(70)))), want)
}
