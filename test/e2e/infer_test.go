package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/tableschema"
)

// driftRecord is record i of partition p of a topic whose shape drifts: id, p and amount
// from the start (amount a fraction in some records from 120 on, which its long column
// cannot hold), name from 50 (a number in 1% of records), user from 100, user.geo from
// 150; every 97th record is not a JSON object.
func driftRecord(p int32, i int) []byte {
	if i%97 == 96 {
		return fmt.Appendf(nil, `[%d]`, i)
	}
	m := map[string]any{"id": i, "p": p, "amount": i}
	if i >= 120 && i%37 == 0 {
		m["amount"] = float64(i) + 0.5
	}
	if i >= 50 {
		m["name"] = fmt.Sprintf("n%d", i)
		if i%100 == 51 {
			m["name"] = i
		}
	}
	if i >= 100 {
		u := map[string]any{"id": i * 10}
		if i >= 150 {
			u["geo"] = map[string]any{"lat": float64(i) + 0.25}
		}
		m["user"] = u
	}
	b, _ := json.Marshal(m)
	return b
}

// inferRecords is how many records per partition the drift test produces:
// MINK_INFER_RECORDS (default 1000; the 20,000 in all is 10000).
func inferRecords(t *testing.T) int {
	if s := os.Getenv("MINK_INFER_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 200 {
			t.Fatalf("MINK_INFER_RECORDS=%q: want a count of at least 200", s)
		}
		return n
	}
	return 1000
}

// TestInferredTableDrift is issue 30 through real processes: a table created with no
// columns over a topic whose shape drifts, indexed by two indexers while one is
// SIGKILLed and started again. Every record is one row exactly once; each column's value
// is the JSON's, or null with the value in _mink_unfit and _mink_error naming the field;
// the table's versions are exactly those the data calls for; iceberg-go reads every
// committed snapshot, each row the same in every snapshot that has it.
func TestInferredTableDrift(t *testing.T) {
	t.Parallel()
	perPart := inferRecords(t)
	rc := newRegCluster(t, false)
	rc.startRole("indexer", "idx-1")
	rc.startRole("indexer", "idx-2")
	rc.startRole("writer", "wr-1")
	rc.startFileServer("fs-1")
	const parts = 2
	rc.Kafka.CreateTopic("drift", parts, nil)
	tbl := rc.createTable(&adminv1.CreateTableRequest{Name: "drift", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		Properties: regProps("mink.range.max-age", "500ms", "mink.commit.interval", "300ms", "mink.history.max-snapshots", "100000")})
	if len(tbl.GetColumns()) != 0 || tbl.GetSchemaVersion() != 0 {
		t.Fatalf("an empty topic's table: %v", tbl)
	}
	rc.waitCommitted("drift", nil)

	values := map[regKey][]byte{}
	ends := map[int32]int64{}
	const batch = 50
	killed := false
	for i := 0; i < perPart; i += batch {
		var recs []*kgo.Record
		for p := range int32(parts) {
			for j := i; j < min(i+batch, perPart); j++ {
				recs = append(recs, &kgo.Record{Topic: "drift", Partition: p, Value: driftRecord(p, j)})
			}
		}
		for _, r := range rc.produce(recs...) {
			values[regKey{r.Partition, r.Offset}] = r.Value
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
		if i == 100 {
			// Mid-drift, with user's first records produced and geo's still to come:
			// idx-1's partitions go to idx-2 once its leases expire.
			rc.Node("idx-1").Kill()
			killed = true
			waitFor(t, 60*time.Second, "idx-2 to index both partitions", func() (any, bool) {
				d, err := rc.Member("idx-2").Admin().DescribeTable(context.Background(), &adminv1.DescribeTableRequest{Name: "drift"})
				if err != nil {
					return err, false
				}
				ps := d.GetPartitions()
				return ps, len(ps) == parts && ps[0].GetHolder() == "idx-2" && ps[1].GetHolder() == "idx-2"
			})
		}
		if killed && i >= perPart/2 {
			rc.Node("idx-1").Restart()
			killed = false
		}
	}
	if killed {
		rc.Node("idx-1").Restart()
	}
	rc.waitCommitted("drift", ends)

	// The versions the data calls for, each made once: none, then id/p/amount, name,
	// user, user.geo.
	d := rc.describe("drift")
	if v := d.GetTable().GetSchemaVersion(); v != 4 {
		t.Errorf("schema version %d, want 4: %v", v, d.GetTable().GetSchema())
	}
	since := map[string]string{}
	for _, c := range d.GetTable().GetColumns() {
		since[c.GetName()] = c.GetInferredSince()
	}
	for _, c := range []string{"id", "p", "amount", "name", "user"} {
		if !strings.HasPrefix(since[c], "partition ") {
			t.Errorf("column %s inferred since %q", c, since[c])
		}
	}

	s := regScanTable(t, rc.catalog, "drift")
	if len(s.dups) > 0 {
		t.Errorf("rows read twice: %v", s.dups)
	}
	if len(s.rows) != len(values) {
		t.Errorf("%d rows, %d records", len(s.rows), len(values))
	}
	bad := 0
	for k, v := range values {
		row, ok := s.rows[k]
		if !ok {
			t.Errorf("record %v: no row", k)
			bad++
		} else if why := inferredRowDiff(v, row); why != "" {
			t.Errorf("record %v %s: %s", k, v, why)
			bad++
		}
		if bad > 20 {
			t.Fatal("too many differences")
		}
	}
	// Every committed snapshot reads, each row as every other snapshot reads it.
	book := newRowBook()
	diffs, n := rc.observeSnapshots(t, book, "drift", map[int64]bool{})
	for _, d := range diffs {
		t.Error(d)
	}
	t.Logf("%d records, %d snapshots read", len(values), n)
}

// inferredRowDiff says how a row differs from its record's JSON ("" when it does not):
// each field equal to its column, or null there with its value in _mink_unfit and
// _mink_error naming it; a record that is not an object an error row.
func inferredRowDiff(value []byte, row map[string]any) string {
	errText, _ := row[tableschema.ColumnMinkError].(string)
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		if !strings.Contains(errText, "not a JSON object") {
			return fmt.Sprintf("not an error row: %q", errText)
		}
		return ""
	}
	unfit := map[string]json.RawMessage{}
	if u, ok := row[tableschema.ColumnMinkUnfit].(string); ok {
		if err := json.Unmarshal([]byte(u), &unfit); err != nil {
			return fmt.Sprintf("_mink_unfit %q: %v", u, err)
		}
	}
	for k, want := range m {
		if raw, kept := unfit[k]; kept {
			if row[k] != nil || !strings.Contains(errText, `"`+k+`"`) || !bytes.Equal(raw, mustJSON(want)) {
				return fmt.Sprintf("%s kept as %s, column %v, error %q", k, raw, row[k], errText)
			}
			continue
		}
		if d := inferredMatch(want, row[k]); d != "" {
			return k + ": " + d
		}
	}
	return ""
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// inferredMatch compares a JSON value (numbers as json.Number) with a cell as iceberg-go
// read it.
func inferredMatch(want, got any) string {
	switch w := want.(type) {
	case json.Number:
		switch g := got.(type) {
		case int64:
			if w.String() == strconv.FormatInt(g, 10) {
				return ""
			}
		case float64:
			if f, _ := w.Float64(); f == g {
				return ""
			}
		}
	case string:
		if got == w {
			return ""
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		for k, v := range w {
			if d := inferredMatch(v, g[k]); d != "" {
				return k + ": " + d
			}
		}
		return ""
	}
	return fmt.Sprintf("read %#v, JSON has %v", got, want)
}
