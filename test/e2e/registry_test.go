package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tableschema"
)

// TestRegistryIncompatibleVersion: a version that changes a field's type (string to
// int, registered with compatibility NONE) cannot be read as the table's column: its
// records are rows whose _mink_error names the field and both types. So are records
// naming an id the registry lacks, without the wire prefix, or without a value. Records
// of a compatible version after them still index, evolving the table; nothing is lost:
// the row count is the record count.
func TestRegistryIncompatibleVersion(t *testing.T) {
	t.Parallel()
	rc := newRegCluster(t, true)
	rc.Kafka.CreateTopic("codes", 1, nil)
	const (
		v1 = `{"type":"record","name":"Code","fields":[{"name":"id","type":"long"},{"name":"code","type":"string"}]}`
		v2 = `{"type":"record","name":"Code","fields":[{"name":"id","type":"long"},{"name":"code","type":"int"}]}`
		v3 = `{"type":"record","name":"Code","fields":[{"name":"id","type":"long"},{"name":"code","type":"string"},
			{"name":"extra","type":["null","string"],"default":null}]}`
	)
	id1 := rc.reg.register("codes-value", sr.Schema{Schema: v1, Type: sr.TypeAvro})
	rc.createTable(&adminv1.CreateTableRequest{Name: "codes", Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO, Properties: regProps()})
	ctx := context.Background()
	if res := rc.reg.cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "codes-value"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	id2 := rc.reg.register("codes-value", sr.Schema{Schema: v2, Type: sr.TypeAvro})
	id3 := rc.reg.register("codes-value", sr.Schema{Schema: v3, Type: sr.TypeAvro})

	type codeV1 struct {
		ID   int64  `avro:"id"`
		Code string `avro:"code"`
	}
	type codeV2 struct {
		ID   int64 `avro:"id"`
		Code int32 `avro:"code"`
	}
	type codeV3 struct {
		ID    int64   `avro:"id"`
		Code  string  `avro:"code"`
		Extra *string `avro:"extra"`
	}
	s1, s2, s3 := regAvroSerde(t, id1, v1, codeV1{}), regAvroSerde(t, id2, v2, codeV2{}), regAvroSerde(t, id3, v3, codeV3{})
	// An error row: its value columns are null, _mink_error says why.
	badRow := map[string]any{"id": nil, "code": nil, "extra": nil,
		tableschema.ColumnMinkError: regContains{fmt.Sprintf("schema id %d", id2), `"code"`, "int", "string"}}
	extra := "more"
	want := regRows{}
	var recs []*kgo.Record
	var rows []map[string]any
	for i, v := range []any{codeV1{1, "A1"}, codeV1{2, "B2"}, codeV2{3, 33}, codeV2{4, 44}, codeV3{5, "E5", &extra}, codeV3{6, "F6", nil}, codeV2{7, 77}, codeV1{8, "H8"}} {
		var b []byte
		switch v := v.(type) {
		case codeV1:
			b, rows = s1.MustEncode(v), append(rows, map[string]any{"id": v.ID, "code": v.Code, "extra": nil})
		case codeV2:
			b, rows = s2.MustEncode(v), append(rows, badRow)
		case codeV3:
			row := map[string]any{"id": v.ID, "code": v.Code, "extra": nil}
			if v.Extra != nil {
				row["extra"] = *v.Extra
			}
			b, rows = s3.MustEncode(v), append(rows, row)
		}
		recs = append(recs, &kgo.Record{Topic: "codes", Value: b})
		if i%3 == 2 { // a few produce batches
			want.add(t, rc.produce(recs...), rows...)
			recs, rows = nil, nil
		}
	}
	want.add(t, rc.produce(recs...), rows...)
	// Records that no schema reads: an id the registry does not have (stored as missing,
	// so rebuilds agree), no wire prefix, a tombstone. Then a good one again.
	unknown := append([]byte{0, 0, 0, 3, 0xe7}, s1.MustEncode(codeV1{9, "I9"})[5:]...)
	want.add(t, rc.produce(&kgo.Record{Topic: "codes", Value: unknown}, &kgo.Record{Topic: "codes", Value: []byte("plain text")},
		&kgo.Record{Topic: "codes"}, &kgo.Record{Topic: "codes", Value: s3.MustEncode(codeV3{10, "J10", nil})}),
		map[string]any{"id": nil, tableschema.ColumnMinkError: regContains{"schema id 999", "not in the schema registry"}},
		map[string]any{"id": nil, tableschema.ColumnMinkError: regContains{"no schema id prefix"}},
		map[string]any{"id": nil, tableschema.ColumnMinkError: regContains{"tombstone"}},
		map[string]any{"id": int64(10), "code": "J10", "extra": nil})
	rc.waitCommitted("codes", want.ends())
	s := regScanTable(t, rc.catalog, "codes")
	s.check(t, want)
	var errRows []string
	for k, w := range want {
		if _, bad := w[tableschema.ColumnMinkError]; bad {
			errRows = append(errRows, fmt.Sprintf("%v: %v", k, s.rows[k][tableschema.ColumnMinkError]))
		}
	}
	sort.Strings(errRows)
	t.Logf("error rows:\n%s", strings.Join(errRows, "\n"))
	if got := regColumnType(s.tbl, "code"); got != "string" {
		t.Errorf("code is %s, want string (the incompatible version must not change it)", got)
	}
	d := rc.describe("codes")
	if cols := regSchemaColumns(d.GetTable()); cols["extra"] != "string" || cols["code"] != "string" || d.GetTable().GetSchemaVersion() != 1 {
		t.Errorf("DescribeTable: version %d, schema %v", d.GetTable().GetSchemaVersion(), cols)
	}
	var rangeRows, rangeErrors int64
	rs, err := ranges.List(ctx, rc.DB, d.GetTable().GetId(), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		rangeRows += r.Records
		rangeErrors += r.DecodeErrors
	}
	if rangeRows != int64(len(want)) || rangeErrors != 6 {
		t.Errorf("the index counts %d rows and %d decode errors; want %d and 6", rangeRows, rangeErrors, len(want))
	}
}

// TestRegistryOutage: records naming a schema id the table has not seen arrive while
// the registry cannot answer: first HTTP 500s (partition 0), then no registry at all
// (partition 1). The affected partition's indexing pauses (its index and committed
// snapshot stop before the record, DescribeTable says why naming the registry), no
// record becomes an error row, the other partition keeps going, table loads still
// answer; when the registry is back indexing resumes by itself and every record ends up
// once with its values.
func TestRegistryOutage(t *testing.T) {
	t.Parallel()
	rc := newRegCluster(t, true)
	rc.Kafka.CreateTopic("payments", 2, nil)
	const (
		v1 = `{"type":"record","name":"Payment","fields":[{"name":"id","type":"long"},{"name":"amount","type":"long"}]}`
		v2 = `{"type":"record","name":"Payment","fields":[{"name":"id","type":"long"},{"name":"amount","type":"long"},
			{"name":"currency","type":["null","string"],"default":null}]}`
		v3 = `{"type":"record","name":"Payment","fields":[{"name":"id","type":"long"},{"name":"amount","type":"long"},
			{"name":"currency","type":["null","string"],"default":null},{"name":"memo","type":["null","string"],"default":null}]}`
	)
	type payV1 struct {
		ID     int64 `avro:"id"`
		Amount int64 `avro:"amount"`
	}
	type payV3 struct {
		ID       int64   `avro:"id"`
		Amount   int64   `avro:"amount"`
		Currency *string `avro:"currency"`
		Memo     *string `avro:"memo"`
	}
	id1 := rc.reg.register("payments-value", sr.Schema{Schema: v1, Type: sr.TypeAvro})
	rc.createTable(&adminv1.CreateTableRequest{Name: "payments", Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO, Properties: regProps()})
	s1 := regAvroSerde(t, id1, v1, payV1{})
	want := regRows{}
	n := int64(0)
	put := func(p int32, serde *sr.Serde, v any, row map[string]any) regKey {
		recs := rc.produce(&kgo.Record{Topic: "payments", Partition: p, Value: serde.MustEncode(v)})
		want.add(t, recs, row)
		return regKey{p, recs[0].Offset}
	}
	v1Row := func(p int32) regKey {
		n++
		return put(p, s1, payV1{n, n * 100}, map[string]any{"id": n, "amount": n * 100, "currency": nil, "memo": nil})
	}
	str := func(s string) *string { return &s }
	v3Row := func(p int32, serde *sr.Serde) regKey {
		n++
		v := payV3{n, n * 100, str("EUR"), str(fmt.Sprintf("memo %d", n))}
		row := map[string]any{"id": n, "amount": n * 100, "currency": "EUR", "memo": *v.Memo}
		return put(p, serde, v, row)
	}
	for range 2 {
		v1Row(0)
		v1Row(1)
	}
	rc.waitCommitted("payments", want.ends())

	ctx := context.Background()
	partition := func(p int32) *adminv1.PartitionStatus {
		return rc.describe("payments").GetPartitions()[p]
	}
	// paused checks partition p while it waits for the registry: indexed and committed
	// no further than the record first naming the new schema, no error row anywhere, the
	// load through the catalog answered, and the tail of live loads stopped before it.
	paused := func(p int32, first regKey, why string) {
		t.Helper()
		st := waitFor(t, 20*time.Second, fmt.Sprintf("partition %d to say why it is paused", p), func() (*adminv1.PartitionStatus, bool) {
			st := partition(p)
			return st, strings.Contains(st.GetIndexError(), rc.reg.url) && strings.Contains(st.GetIndexError(), why)
		})
		t.Logf("partition %d paused: %s (since %v)", p, st.GetIndexError(), st.GetIndexErrorSince().AsTime())
		other := 1 - p
		rc.waitCommitted("payments", map[int32]int64{other: want.ends()[other]}) // the other partition goes on
		if st := partition(p); st.GetIndexedEndOffset() > first.o {
			t.Errorf("partition %d indexed to %d, past the record %v naming a schema it cannot know yet: %+v", p, st.GetIndexedEndOffset(), first, st)
		}
		resp, err := http.Get(rc.catalog + "/v1/namespaces/default/tables/payments")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("table load during the registry outage: HTTP %d", resp.StatusCode)
		}
		s := regScanTable(t, rc.catalog, "payments")
		cov, err := regCommitted(s.tbl)
		if err != nil {
			t.Fatal(err)
		}
		if cov[p] > first.o {
			t.Errorf("partition %d committed to %d, past %v", p, cov[p], first)
		}
		for k, row := range s.rows {
			if e := row[tableschema.ColumnMinkError]; e != nil {
				t.Errorf("row %v is an error row during the outage: %v", k, e)
			}
			if k.p == p && k.o >= first.o {
				t.Errorf("row %v, at or after %v, was read before its schema was known", k, first)
			}
		}
		// Everything before the record is readable (committed, or the live tail).
		for k := range want {
			if _, ok := s.rows[k]; !ok && (k.p != p || k.o < first.o) {
				t.Errorf("row %v is not readable during the outage", k)
			}
		}
		waitFor(t, 10*time.Second, "idx-1's status figures to count the paused partition", func() (map[string]string, bool) {
			st, err := rc.Member("idx-1").Admin().GetStatus(ctx, &adminv1.GetStatusRequest{})
			return st.GetFigures(), err == nil && st.GetFigures()["partitions_paused"] == "1" &&
				strings.Contains(st.GetFigures()[fmt.Sprintf("paused default.payments/%d", p)], rc.reg.url)
		})
	}
	resumed := func(p int32) {
		t.Helper()
		rc.waitCommitted("payments", want.ends())
		waitFor(t, 10*time.Second, fmt.Sprintf("partition %d's index_error to clear", p), func() (string, bool) {
			e := partition(p).GetIndexError()
			return e, e == ""
		})
	}

	// HTTP 500s while partition 0 gets records of v2 (known ones around them).
	id2 := rc.reg.register("payments-value", sr.Schema{Schema: v2, Type: sr.TypeAvro})
	s2 := regAvroSerde(t, id2, v2, payV3{})
	restore := rc.reg.fail500()
	v1Row(0)
	first := v3Row(0, s2)
	want[first]["memo"] = nil // v2 has no memo
	v1Row(0)
	v1Row(1)
	v1Row(1)
	paused(0, first, "HTTP 500")
	restore()
	resumed(0)

	// No registry at all while partition 1 gets records of v3; partition 0 goes on.
	id3 := rc.reg.register("payments-value", sr.Schema{Schema: v3, Type: sr.TypeAvro})
	s3 := regAvroSerde(t, id3, v3, payV3{})
	rc.reg.down()
	first = v3Row(1, s3)
	v1Row(1)
	v1Row(0)
	paused(1, first, "unreachable")
	rc.reg.up()
	resumed(1)

	s := regScanTable(t, rc.catalog, "payments")
	s.check(t, want)
	d := rc.describe("payments")
	if cols := regSchemaColumns(d.GetTable()); cols["currency"] != "string" || cols["memo"] != "string" {
		t.Errorf("DescribeTable schema: %v", cols)
	}
	for _, p := range d.GetPartitions() {
		if p.GetIndexError() != "" || p.GetLagRecords() != 0 {
			t.Errorf("partition %d after the outages: %+v", p.GetPartition(), p)
		}
	}
}

// TestRegistryLatestMode: values without the wire prefix (bare Avro), decoded with the
// subject's latest version when indexed. A version registered later is picked up by the
// indexer, which evolves the table; records indexed after it decode with it, and every
// range records the schema id it used.
func TestRegistryLatestMode(t *testing.T) {
	t.Parallel()
	rc := newRegCluster(t, true)
	rc.Kafka.CreateTopic("bare", 1, nil)
	const (
		v1 = `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`
		v2 = `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},
			{"name":"score","type":["null","double"],"default":null}]}`
	)
	type eventV2 struct {
		ID    int64    `avro:"id"`
		Name  string   `avro:"name"`
		Score *float64 `avro:"score"`
	}
	ctx := context.Background()
	id1 := rc.reg.register("bare-value", sr.Schema{Schema: v1, Type: sr.TypeAvro})
	tb := rc.createTable(&adminv1.CreateTableRequest{Name: "bare", Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO,
		ValueSchemaMode: adminv1.SchemaMode_SCHEMA_MODE_LATEST, Properties: regProps("mink.live-load", "false")})
	if tb.GetValue().GetMode() != adminv1.SchemaMode_SCHEMA_MODE_LATEST {
		t.Fatalf("CreateTable: %v", tb.GetValue())
	}
	bare := func(text string, v any) []byte {
		s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := avro.Marshal(s, v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	want := regRows{}
	ids := map[regKey]int{}
	for i := int64(1); i <= 3; i++ {
		v := struct {
			ID   int64  `avro:"id"`
			Name string `avro:"name"`
		}{i, fmt.Sprintf("e%d", i)}
		recs := rc.produce(&kgo.Record{Topic: "bare", Value: bare(v1, v)})
		want.add(t, recs, map[string]any{"id": i, "name": v.Name, "score": nil})
		ids[regKey{0, recs[0].Offset}] = id1
	}
	rc.waitCommitted("bare", want.ends())

	id2 := rc.reg.register("bare-value", sr.Schema{Schema: v2, Type: sr.TypeAvro})
	waitFor(t, 20*time.Second, "the indexer to take up the new latest version", func() (int32, bool) {
		v := rc.describe("bare").GetTable().GetSchemaVersion()
		return v, v == 1
	})
	// The writer commits the new schema although no record of it has come yet.
	waitFor(t, 20*time.Second, "the committed metadata to have the new column", func() (string, bool) {
		tbl, err := regLoad(ctx, rc.catalog, "bare")
		if err != nil {
			return err.Error(), false
		}
		typ := regColumnType(tbl, "score")
		return typ, typ == "double"
	})
	for i := int64(4); i <= 6; i++ {
		score := float64(i) / 4
		v := eventV2{i, fmt.Sprintf("e%d", i), &score}
		recs := rc.produce(&kgo.Record{Topic: "bare", Value: bare(v2, v)})
		want.add(t, recs, map[string]any{"id": i, "name": v.Name, "score": score})
		ids[regKey{0, recs[0].Offset}] = id2
	}
	rc.waitCommitted("bare", want.ends())
	s := regScanTable(t, rc.catalog, "bare")
	s.check(t, want)

	rs := rc.recipes(tb.GetId(), 0)
	for k, id := range ids {
		r, ok := regRecipeAt(rs, k.o)
		if !ok || r.settings.ValueSchemaID != id || (id == id2) != (r.settings.TableVersion == 1) {
			t.Errorf("record %v (schema id %d) is in range %+v", k, id, r)
		}
	}
	t.Logf("ranges: %+v", rs)
}

// TestRegistryKeyDecoding: keys are Avro records too (key_format): _kafka_key_decoded
// holds the key's fields and _kafka_key its bytes as produced. A record without a key
// cannot be decoded as the table says, and is an error row.
func TestRegistryKeyDecoding(t *testing.T) {
	t.Parallel()
	rc := newRegCluster(t, true)
	rc.Kafka.CreateTopic("keyed", 1, nil)
	const (
		keySchema   = `{"type":"record","name":"Key","namespace":"shop","fields":[{"name":"tenant","type":"string"},{"name":"id","type":"long"}]}`
		valueSchema = `{"type":"record","name":"Value","namespace":"shop","fields":[{"name":"body","type":"string"}]}`
	)
	type key struct {
		Tenant string `avro:"tenant"`
		ID     int64  `avro:"id"`
	}
	type value struct {
		Body string `avro:"body"`
	}
	kid := rc.reg.register("keyed-key", sr.Schema{Schema: keySchema, Type: sr.TypeAvro})
	vid := rc.reg.register("keyed-value", sr.Schema{Schema: valueSchema, Type: sr.TypeAvro})
	tb := rc.createTable(&adminv1.CreateTableRequest{Name: "keyed", Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO,
		KeyFormat: adminv1.RecordFormat_RECORD_FORMAT_AVRO, Properties: regProps()})
	if tb.GetKey().GetSubject() != "keyed-key" || tb.GetKey().GetFormat() != adminv1.RecordFormat_RECORD_FORMAT_AVRO {
		t.Fatalf("CreateTable: key decoding %v", tb.GetKey())
	}
	if typ := regSchemaColumns(tb)[tableschema.ColumnKafkaKeyDecoded]; !strings.HasPrefix(typ, "struct<") || !strings.Contains(typ, "tenant") {
		t.Errorf("CreateTable: %s is %q", tableschema.ColumnKafkaKeyDecoded, typ)
	}
	ks, vs := regAvroSerde(t, kid, keySchema, key{}), regAvroSerde(t, vid, valueSchema, value{})
	want := regRows{}
	for i, k := range []key{{"acme", 1}, {"acme", 2}, {"globex", -3}} {
		kb := ks.MustEncode(k)
		recs := rc.produce(&kgo.Record{Topic: "keyed", Key: kb, Value: vs.MustEncode(value{fmt.Sprintf("body %d", i)})})
		want.add(t, recs, map[string]any{"body": fmt.Sprintf("body %d", i), tableschema.ColumnKafkaKey: kb,
			tableschema.ColumnKafkaKeyDecoded: map[string]any{"tenant": k.Tenant, "id": k.ID}})
	}
	recs := rc.produce(&kgo.Record{Topic: "keyed", Value: vs.MustEncode(value{"no key"})})
	// A record without a key is a row like any other: nothing to decode, the column null.
	want.add(t, recs, map[string]any{"body": "no key", tableschema.ColumnKafkaKey: nil, tableschema.ColumnKafkaKeyDecoded: nil})
	for _, w := range want {
		if k, ok := w[tableschema.ColumnKafkaKeyDecoded].(map[string]any); ok {
			k["region"] = nil // a field of the key's v2 only
		}
	}
	rc.waitCommitted("keyed", want.ends())

	// The key schema evolves too: a field inside the decoded key struct.
	const keyV2 = `{"type":"record","name":"Key","namespace":"shop","fields":[{"name":"tenant","type":"string"},{"name":"id","type":"long"},
		{"name":"region","type":["null","string"],"default":null}]}`
	type keyRegion struct {
		Tenant string  `avro:"tenant"`
		ID     int64   `avro:"id"`
		Region *string `avro:"region"`
	}
	kid2 := rc.reg.register("keyed-key", sr.Schema{Schema: keyV2, Type: sr.TypeAvro})
	ks2 := regAvroSerde(t, kid2, keyV2, keyRegion{})
	eu := "eu"
	for i, k := range []keyRegion{{"acme", 4, &eu}, {"acme", 5, nil}} {
		kb := ks2.MustEncode(k)
		recs := rc.produce(&kgo.Record{Topic: "keyed", Key: kb, Value: vs.MustEncode(value{fmt.Sprintf("v2 body %d", i)})})
		decoded := map[string]any{"tenant": k.Tenant, "id": k.ID, "region": nil}
		if k.Region != nil {
			decoded["region"] = *k.Region
		}
		want.add(t, recs, map[string]any{"body": fmt.Sprintf("v2 body %d", i), tableschema.ColumnKafkaKey: kb,
			tableschema.ColumnKafkaKeyDecoded: decoded})
	}
	rc.waitCommitted("keyed", want.ends())
	s := regScanTable(t, rc.catalog, "keyed")
	s.check(t, want)
	if typ := regColumnType(s.tbl, tableschema.ColumnKafkaKeyDecoded); !strings.Contains(typ, "region") {
		t.Errorf("%s is %s after the key's v2", tableschema.ColumnKafkaKeyDecoded, typ)
	}
	if v := rc.describe("keyed").GetTable().GetSchemaVersion(); v != 1 {
		t.Errorf("schema version %d after the key's v2, want 1", v)
	}
}

// TestRegistryCreateTableErrors: CreateTable through the admin API of a real node
// refuses, with the code and a message naming the culprit: an unknown subject
// (NotFound), a registry that cannot be reached (Unavailable, naming its URL), a
// recursive Avro schema (InvalidArgument, naming the type), a Protobuf message the
// schema lacks, a subject of another format, a bad property. Nothing is created by a
// refused request.
func TestRegistryCreateTableErrors(t *testing.T) {
	t.Parallel()
	rc := newRegCluster(t, false)
	rc.startRole("indexer", "idx-1")
	rc.Kafka.CreateTopic("errs", 1, nil)
	const good = `{"type":"record","name":"Good","fields":[{"name":"id","type":"long"}]}`
	rc.reg.register("good-value", sr.Schema{Schema: good, Type: sr.TypeAvro})
	rc.reg.register("errs-value", sr.Schema{Schema: `{"type":"record","name":"Node","namespace":"tree","fields":[
		{"name":"v","type":"int"},{"name":"next","type":["null","tree.Node"],"default":null}]}`, Type: sr.TypeAvro})
	rc.reg.register("proto-value", sr.Schema{Schema: "syntax = \"proto3\";\npackage p;\nmessage A { int64 id = 1; }\n", Type: sr.TypeProtobuf})
	client := rc.Member("idx-1").Admin()
	ctx := context.Background()
	avroReq := func(name, subject string, props map[string]string) *adminv1.CreateTableRequest {
		return &adminv1.CreateTableRequest{Name: name, Topic: "errs", Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO, ValueSubject: subject, Properties: props}
	}
	cases := []struct {
		name string
		req  *adminv1.CreateTableRequest
		down bool // with the registry unreachable
		code codes.Code
		want []string
	}{
		{"unknown subject", avroReq("t1", "nosuch-value", nil), false, codes.NotFound, []string{`"nosuch-value"`}},
		{"recursive schema", avroReq("errs", "", nil), false, codes.InvalidArgument, []string{"recursive", "Node", "errs-value"}},
		{"unknown message", &adminv1.CreateTableRequest{Name: "t2", Topic: "errs", Format: adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF,
			ValueSubject: "proto-value", Message: "p.Nope"}, false, codes.InvalidArgument, []string{`"p.Nope"`, "p.A"}},
		{"subject of another format", &adminv1.CreateTableRequest{Name: "t3", Topic: "errs", Format: adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF,
			ValueSubject: "good-value"}, false, codes.InvalidArgument, []string{`"good-value"`, "AVRO"}},
		{"bad property", avroReq("t4", "good-value", map[string]string{"history.expire.min-snapshots-to-keep": "-5"}), false,
			codes.InvalidArgument, []string{"history.expire.min-snapshots-to-keep", "-5"}},
		{"registry unreachable", avroReq("t5", "good-value", nil), true, codes.Unavailable, []string{rc.reg.url, "unreachable"}},
	}
	for _, tc := range cases {
		if tc.down {
			rc.reg.down()
		}
		_, err := client.CreateTable(ctx, tc.req)
		if tc.down {
			rc.reg.up()
		}
		st := status.Convert(err)
		if err == nil || st.Code() != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(st.Message(), w) {
				t.Errorf("%s: message %q does not name %s", tc.name, st.Message(), w)
			}
		}
		t.Logf("%s: %v: %s", tc.name, st.Code(), st.Message())
	}
	list, err := client.ListTables(ctx, &adminv1.ListTablesRequest{})
	if err != nil || len(list.GetTables()) != 0 {
		t.Fatalf("after refused requests: tables %v, %v", list.GetTables(), err)
	}
	// The same request as the unreachable one succeeds once the registry answers.
	if _, err := client.CreateTable(ctx, avroReq("t5", "good-value", nil)); err != nil {
		t.Fatalf("CreateTable with the registry back: %v", err)
	}
}
