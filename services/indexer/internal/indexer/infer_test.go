package indexer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/jsoninfer"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// driftingRecord is record i of partition p of a topic whose shape drifts: amount from
// the start (with a fraction in some records from 120 on, which a long column cannot
// hold), name from 50 (a number in 1%), user from 100, user.geo from 150; every 97th
// record is not an object.
func driftingRecord(p int32, i int) string {
	if i%97 == 96 {
		return fmt.Sprintf(`[%d]`, i)
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
	return string(b)
}

// An inferred table over a drifting topic, indexed by two indexers of which one stops
// midway: every record is one row exactly once; the versions are exactly those the data
// calls for, each made once; every range rebuilds byte for byte with the version
// recorded for it; each column's value is the JSON's, or null with the value in
// _mink_unfit and _mink_error naming the field.
func TestInferredTableEvolves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const parts, n = 2, 200
	e.kafka.CreateTopic("drift", parts, nil)
	fields, in := jsoninfer.First(nil) // an empty topic: the Kafka columns alone
	tbl, err := tables.CreateVersioned(ctx, e.db, tables.Table{Name: "drift", Spec: tableschema.Spec{Format: tableschema.FormatJSON, Infer: in},
		Properties: map[string]string{tables.PropRangeMaxAge: "200ms"}}, parts, fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop1 := e.startIndexer(t, "ix1")
	e.startIndexer(t, "ix2")
	for i := 0; i < n; i += 10 {
		for p := range int32(parts) {
			var vs []string
			for j := i; j < i+10; j++ {
				vs = append(vs, driftingRecord(p, j))
			}
			e.produce(t, "drift", p, vs...)
		}
		if i == 100 {
			stop1() // its partitions go to ix2 once their leases expire
		}
	}
	codecs := tablecodec.New(e.db, nil)
	for p := range int32(parts) {
		rs := e.checkTiling(t, tbl, p)
		for _, r := range rs {
			if _, err := rangefile.Build(ctx, e.kc, codecs, tbl, r, io.Discard); err != nil {
				t.Errorf("rebuild of partition %d [%d, %d): %v", p, r.Start, r.End, err)
			}
			checkRows(t, e, codecs, tbl, r)
		}
	}
	vs, err := tables.Versions(ctx, e.db, tbl.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Version 0 (no columns), then id/p/amount, name, user, user.geo: each once.
	var shapes []string
	for _, v := range vs {
		cols, _ := tableschema.InferredColumns(v.Schema.Fields())
		var names []string
		for _, i := range cols {
			names = append(names, v.Schema.Fields()[i].Name+":"+v.Schema.Fields()[i].Type.String())
		}
		shapes = append(shapes, strings.Join(names, ","))
	}
	if len(vs) != 5 || !strings.Contains(shapes[4], "geo") || strings.Contains(shapes[3], "geo") || !strings.Contains(shapes[3], "user") ||
		!strings.Contains(shapes[2], "name") || strings.Contains(shapes[2], "user") || shapes[0] != "" {
		t.Fatalf("versions:\n%s", strings.Join(shapes, "\n"))
	}
	if !strings.Contains(shapes[1], "amount:long") {
		t.Errorf("amount inferred as %s", shapes[1])
	}
	for _, v := range vs[1:] {
		for id, since := range v.Spec.Infer.Since {
			if !strings.HasPrefix(since, "partition ") {
				t.Errorf("version %d: field %d since %q", v.ID, id, since)
			}
		}
	}
}

// checkRows decodes range r's records with the version it was recorded with and checks
// every row against its JSON.
func checkRows(t *testing.T, e *env, codecs *tablecodec.Codecs, tbl tables.Table, r ranges.Range) {
	t.Helper()
	var s parquetbuild.Settings
	if err := json.Unmarshal(r.Settings, &s); err != nil {
		t.Fatal(err)
	}
	dec, err := codecs.Decoder(context.Background(), tbl, s)
	if err != nil {
		t.Fatal(err)
	}
	fields := dec.Fields()
	pos := map[string]int{}
	for i, f := range fields {
		pos[f.Name] = i
	}
	var row rowcodec.Row
	err = e.kc.ReadRange(context.Background(), tbl.Topic, r.Partition, r.Start, r.End, func(rec record.Record) error {
		dec.Decode(rec, &row)
		var m map[string]any
		errText := row.Values[pos[tableschema.ColumnMinkError]]
		if json.Unmarshal(rec.Value, &m) != nil {
			if !errText.Valid || !strings.Contains(string(errText.Bytes), "not a JSON object") {
				t.Errorf("offset %d: %s decoded with error %q", rec.Offset, rec.Value, errText.Bytes)
			}
			return nil
		}
		unfit := map[string]json.RawMessage{}
		if u := row.Values[pos[tableschema.ColumnMinkUnfit]]; u.Valid {
			if err := json.Unmarshal(u.Bytes, &unfit); err != nil {
				t.Errorf("offset %d: _mink_unfit %s", rec.Offset, u.Bytes)
			}
		}
		for k, v := range m {
			i, ok := pos[k]
			if !ok {
				t.Errorf("partition %d offset %d: field %q has no column at version %d", r.Partition, rec.Offset, k, s.TableVersion)
				continue
			}
			got := row.Values[i]
			if raw, kept := unfit[k]; kept {
				if got.Valid || !errText.Valid || !strings.Contains(string(errText.Bytes), `"`+k+`"`) {
					t.Errorf("offset %d: %s kept as %s, column %+v, error %q", rec.Offset, k, raw, got, errText.Bytes)
				}
				continue
			}
			want := fmt.Sprint(v)
			var have string
			switch k {
			case "name":
				have = string(got.Bytes)
			case "user":
				have = fmt.Sprint(map[string]any{"id": float64(got.Elems[0].Int)})
				if u := v.(map[string]any); u["geo"] != nil {
					have = fmt.Sprint(map[string]any{"id": float64(got.Elems[0].Int), "geo": map[string]any{"lat": got.Elems[1].Elems[0].Float}})
				}
			default:
				have = fmt.Sprint(float64(got.Int))
			}
			if !got.Valid || have != want {
				t.Errorf("partition %d offset %d: %s = %s, JSON has %s", r.Partition, rec.Offset, k, have, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An upsert table over an inferred topic takes the same path: its ranges hold each key's
// latest record, decode with the version in force at their start, and rebuild alike.
func TestInferredUpsertTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.kafka.CreateTopic("kv", 1, nil)
	fields, in := jsoninfer.First(nil)
	tbl, err := tables.CreateVersioned(ctx, e.db, tables.Table{Name: "kv", Spec: tableschema.Spec{Format: tableschema.FormatJSON, Infer: in},
		Mode: tables.ModeUpsert, Properties: map[string]string{tables.PropRangeMaxAge: "200ms"}}, 1, fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.startIndexer(t, "ix1")
	var recs []*kgo.Record
	for i := range 60 {
		v := fmt.Sprintf(`{"k": %d, "v": %d}`, i%5, i)
		if i >= 30 {
			v = fmt.Sprintf(`{"k": %d, "v": %d, "extra": "e%d"}`, i%5, i, i)
		}
		recs = append(recs, &kgo.Record{Topic: "kv", Key: []byte{byte('a' + i%5)}, Value: []byte(v)})
	}
	kafkatest.Produce(t, e.prod, recs...)
	codecs := tablecodec.New(e.db, nil)
	leasetest.Eventually(t, 20*time.Second, "60 records indexed", func() bool {
		st, err := ranges.State(ctx, e.db, tbl.ID, 0)
		return err == nil && st.IndexedEnd == 60
	})
	rs, err := ranges.List(ctx, e.db, tbl.ID, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if i > 0 && r.Start != rs[i-1].End || r.Start < 30 && r.End > 30 {
			t.Errorf("range [%d, %d) after [%d, %d), across the new field at 30", r.Start, r.End, rs[max(i-1, 0)].Start, rs[max(i-1, 0)].End)
		}
		if _, err := rangefile.Build(ctx, e.kc, codecs, tbl, r, io.Discard); err != nil {
			t.Errorf("rebuild of [%d, %d): %v", r.Start, r.End, err)
		}
	}
	vs, err := tables.Versions(ctx, e.db, tbl.ID)
	if err != nil || len(vs) != 3 {
		t.Fatalf("%d versions %v", len(vs), err)
	}
}

// Past the versions-per-hour bound a record with a new field is indexed at once with the
// version in force, the field kept in _mink_unfit: indexing neither loops nor pauses.
func TestInferredBoundKeepsIndexing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.kafka.CreateTopic("capped", 1, nil)
	fields, in := jsoninfer.First(nil)
	tbl, err := tables.CreateVersioned(ctx, e.db, tables.Table{Name: "capped", Spec: tableschema.Spec{Format: tableschema.FormatJSON, Infer: in},
		Properties: map[string]string{tables.PropRangeMaxAge: "200ms"}}, 1, fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	codecs := tablecodec.New(e.db, nil)
	for i := range tableschema.InferMaxVersionsPerHour {
		if _, err := codecs.Infer(ctx, nil, tbl, fmt.Appendf(nil, `{"f%d": 1}`, i), "test"); err != nil {
			t.Fatal(err)
		}
	}
	e.startIndexer(t, "ix1")
	var vals []string
	for i := range 20 {
		vals = append(vals, fmt.Sprintf(`{"f0": %d, "new%d": %d}`, i, i, i))
	}
	e.produce(t, "capped", 0, vals...)
	for _, r := range e.checkTiling(t, tbl, 0) {
		checkRowsKept(t, e, codecs, tbl, r)
	}
	if vs, _ := tables.Versions(ctx, e.db, tbl.ID); len(vs) != tableschema.InferMaxVersionsPerHour+1 {
		t.Errorf("%d versions past the bound", len(vs))
	}
}

// checkRowsKept checks that every record of r has its new field in _mink_unfit.
func checkRowsKept(t *testing.T, e *env, codecs *tablecodec.Codecs, tbl tables.Table, r ranges.Range) {
	t.Helper()
	var s parquetbuild.Settings
	if err := json.Unmarshal(r.Settings, &s); err != nil {
		t.Fatal(err)
	}
	dec, err := codecs.Decoder(context.Background(), tbl, s)
	if err != nil {
		t.Fatal(err)
	}
	unfit := -1
	for i, f := range dec.Fields() {
		if f.Name == tableschema.ColumnMinkUnfit {
			unfit = i
		}
	}
	var row rowcodec.Row
	err = e.kc.ReadRange(context.Background(), tbl.Topic, r.Partition, r.Start, r.End, func(rec record.Record) error {
		dec.Decode(rec, &row)
		if u := row.Values[unfit]; !u.Valid || !strings.Contains(string(u.Bytes), fmt.Sprintf(`"new%d":`, rec.Offset)) {
			t.Errorf("offset %d: _mink_unfit %q", rec.Offset, u.Bytes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
