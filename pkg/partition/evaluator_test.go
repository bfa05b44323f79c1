package partition

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Rows decoded by rowcodec from Kafka records get their tuples from data and Kafka
// columns; a record that does not decode is one row whose data partitions are null.
func TestEvaluateDecodedRows(t *testing.T) {
	table := tableschema.Spec{Format: tableschema.FormatJSON, Columns: []tableschema.Column{
		{Name: "event_ts", Type: "timestamptz"},
		{Name: "user_id", Type: "long", JSONPath: "user.id"},
		{Name: "name", Type: "string"},
	}}
	schema, err := table.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := rowcodec.NewDecoder(table)
	if err != nil {
		t.Fatal(err)
	}
	spec := mustBuild(t, schema, nil, "day(event_ts)", "bucket[8](user_id)", "hour(_kafka_timestamp)",
		"_kafka_partition", "bucket[4](_kafka_key)", "truncate[2](name)")
	e, err := NewEvaluator(spec, schema)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 7, 13, 5, 0, 0, time.UTC)
	var row rowcodec.Row
	rec := record.Record{Partition: 3, Offset: 42, Timestamp: at, Key: []byte("k1"),
		Value: []byte(`{"event_ts":"2026-12-06T23:59:59.999999-01:00","user":{"id":34},"name":"éclair"}`)}
	if !dec.Decode(rec, &row) {
		t.Fatalf("record does not decode: %+v", row)
	}
	tu := e.Tuple(&row, nil)
	want := []string{"2026-12-07", fmt.Sprint(2017239379 % 8), "2026-12-07-13", "3", "", "éc"}
	want[4] = HumanValue(Transform{Kind: Bucket, Arg: 4}, iceberg.PrimitiveTypes.Binary, bucketOf(t, 4, iceberg.PrimitiveTypes.Binary, []byte("k1")))
	for i, h := range e.Human(tu) {
		if h != want[i] {
			t.Errorf("field %s = %s; want %s", spec.Fields[i].Name, h, want[i])
		}
	}

	// Not JSON: one row, its data columns null, its Kafka columns as they were.
	rec.Value = []byte(`{"event_ts": 12`)
	if dec.Decode(rec, &row) {
		t.Fatal("a broken record decodes")
	}
	if got := e.Human(e.Tuple(&row, tu)); fmt.Sprint(got) != fmt.Sprint([]string{"null", "null", "2026-12-07-13", "3", want[4], "null"}) {
		t.Errorf("error row's tuple = %v", got)
	}
}

func bucketOf(t *testing.T, n int, typ iceberg.Type, b []byte) rowcodec.Value {
	return apply(t, Transform{Kind: Bucket, Arg: n}, typ, bytesv(b))
}

// A source nested in structs is found through them; a null struct makes it null.
func TestEvaluateNested(t *testing.T) {
	s := registrySchema(t, &iceberg.StructType{FieldList: []iceberg.NestedField{
		opt("id", iceberg.PrimitiveTypes.Int64),
		opt("user", &iceberg.StructType{FieldList: []iceberg.NestedField{
			opt("name", iceberg.PrimitiveTypes.String),
			opt("geo", &iceberg.StructType{FieldList: []iceberg.NestedField{opt("country", iceberg.PrimitiveTypes.String)}}),
		}}),
	}})
	e, err := NewEvaluator(mustBuild(t, s, nil, "user.geo.country", "truncate[1](user.name)"), s)
	if err != nil {
		t.Fatal(err)
	}
	row := func(user rowcodec.Value) *rowcodec.Row {
		r := &rowcodec.Row{Values: make([]rowcodec.Value, len(s.Fields()))}
		r.Values[0], r.Values[1] = intv(1), user
		return r
	}
	geo := rowcodec.Value{Valid: true, Elems: []rowcodec.Value{strv("NL")}}
	for _, c := range []struct {
		user rowcodec.Value
		want string
	}{
		{rowcodec.Value{Valid: true, Elems: []rowcodec.Value{strv("ann"), geo}}, "[NL a]"},
		{rowcodec.Value{Valid: true, Elems: []rowcodec.Value{{}, {}}}, "[null null]"},
		{rowcodec.Value{}, "[null null]"},
		{rowcodec.Value{Valid: true}, "[null null]"}, // a row short of fields
	} {
		if got := fmt.Sprint(e.Human(e.Tuple(row(c.user), nil))); got != c.want {
			t.Errorf("user %+v: %s; want %s", c.user, got, c.want)
		}
	}
}

// A spec evaluates alike over every schema version: a column added before the source
// moves it, a promotion (int to long, decimal(9,2) to decimal(20,2)) widens it, and
// keys stay the same.
func TestEvaluateAcrossVersions(t *testing.T) {
	v0 := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "n", Type: iceberg.PrimitiveTypes.Int32},
		iceberg.NestedField{ID: 2, Name: "price", Type: iceberg.DecimalTypeOf(9, 2)},
		iceberg.NestedField{ID: 3, Name: "x", Type: iceberg.PrimitiveTypes.Float32})
	v1 := iceberg.NewSchema(1,
		iceberg.NestedField{ID: 4, Name: "added", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 1, Name: "n", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "price", Type: iceberg.DecimalTypeOf(20, 2)},
		iceberg.NestedField{ID: 3, Name: "x", Type: iceberg.PrimitiveTypes.Float64})
	spec := unchecked(t, v0, "n", "price", "x", "bucket[16](n) AS nb", "truncate[100](price) AS pt")
	e0, err := NewEvaluator(spec, v0)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := NewEvaluator(spec, v1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n, price int64
		x        float32
	}{{34, 1420, 1.5}, {-7, -1, -0.25}, {1 << 30, 99999999, 3.4e38}} {
		r0 := &rowcodec.Row{Values: []rowcodec.Value{intv(c.n), intv(c.price), {Valid: true, Float: float64(c.x)}}}
		r1 := &rowcodec.Row{Values: []rowcodec.Value{strv("new"), intv(c.n), bytesv(toTwos(bigInt(c.price), 9)), {Valid: true, Float: float64(c.x)}}}
		k0, k1 := e0.AppendKey(nil, e0.Tuple(r0, nil)), e1.AppendKey(nil, e1.Tuple(r1, nil))
		if !bytes.Equal(k0, k1) {
			t.Errorf("%+v: key %x under v0, %x under v1", c, k0, k1)
		}
	}
	// A dropped source column: an error, but for void.
	v2 := iceberg.NewSchema(2, iceberg.NestedField{ID: 4, Name: "added", Type: iceberg.PrimitiveTypes.String})
	if _, err := NewEvaluator(spec, v2); err == nil {
		t.Error("a spec over a dropped column evaluates")
	}
	voided := Spec{ID: 1, Fields: []SpecField{{SourceID: 1, FieldID: 1000, Name: "n", Transform: Transform{Kind: Void}}}}
	e2, err := NewEvaluator(voided, v2)
	if err != nil {
		t.Fatal(err)
	}
	if got := e2.Tuple(&rowcodec.Row{Values: []rowcodec.Value{strv("a")}}, nil); got[0].Valid {
		t.Errorf("void of a dropped column = %+v", got)
	}
}

// Tuples as manifests carry them: iceberg-go writes each file's partition values from
// Literals and reads back the same, with partition summaries in the manifest list entry.
func TestLiteralsInManifests(t *testing.T) {
	s := jsonSchema(t, "event_ts:timestamptz", "d:date", "user_id:long", "name:string", "price:decimal(9,2)",
		"big:decimal(30,3)", "u:uuid", "blob:binary", "x:double", "ok:boolean", "tm:time", "ts:timestamp", "i:int", "f:float")
	for _, dec := range []string{"price", "truncate[10](big)"} {
		spec := mustBuild(t, s, nil, "day(event_ts)", "month(d)", "bucket[8](user_id)", "truncate[3](name)", dec,
			"u", "blob", "x", "ok", "tm", "ts", "truncate[5](i)", "f", "void(name) AS gone")
		writeAndRead(t, s, spec)
	}
}

// writeAndRead writes a manifest of spec with a file of every field set and one of
// every field null, reads it back and compares.
func writeAndRead(t *testing.T, s *iceberg.Schema, spec Spec) {
	t.Helper()
	ice, err := spec.Iceberg(s)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEvaluator(spec, s)
	if err != nil {
		t.Fatal(err)
	}
	full := make(Tuple, len(spec.Fields))
	for i, typ := range e.Types() {
		switch typ.(type) {
		case iceberg.StringType, iceberg.BinaryType:
			full[i] = strv("abc")
		case iceberg.UUIDType:
			full[i] = bytesv(bytes.Repeat([]byte{7}, 16))
		case iceberg.DecimalType:
			if isFixedDecimal(typ) {
				full[i] = bytesv(toTwos(bigInt(-123456789), 13))
			} else {
				full[i] = intv(-1420)
			}
		case iceberg.Float64Type, iceberg.Float32Type:
			full[i] = rowcodec.Value{Valid: true, Float: -2.5}
		case iceberg.BooleanType:
			full[i] = intv(1)
		default:
			full[i] = intv(-3)
		}
		if spec.Fields[i].Transform.Kind == Void {
			full[i] = rowcodec.Value{}
		}
	}
	tuples := []Tuple{full, make(Tuple, len(spec.Fields))}

	snap := int64(1)
	var entries []iceberg.ManifestEntry
	for i, tu := range tuples {
		b, err := iceberg.NewDataFileBuilder(ice, iceberg.EntryContentData, fmt.Sprintf("s3://mink/t/%d.parquet", i),
			iceberg.ParquetFile, e.Literals(tu), nil, nil, 1, 100)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &snap, nil, nil, b.Build()))
	}
	var buf bytes.Buffer
	mf, err := iceberg.WriteManifest("s3://mink/t/m.avro", &buf, 2, ice, s, snap, entries)
	if err != nil {
		t.Fatal(err)
	}
	back, err := iceberg.ReadManifest(mf, bytes.NewReader(buf.Bytes()), false)
	if err != nil {
		t.Fatal(err)
	}
	for i, entry := range back {
		got := entry.DataFile().Partition()
		for j, f := range spec.Fields {
			want := Literal(e.Types()[j], tuples[i][j])
			v := got[f.FieldID]
			if (want == nil) != (v == nil) {
				t.Errorf("file %d %s: read %v; wrote %v", i, f.Name, v, want)
				continue
			}
			if want == nil {
				continue
			}
			lit, ok := v.(iceberg.Literal)
			if !ok {
				lit = literalOf(v, want)
			}
			if lit == nil || !lit.Equals(want) {
				t.Errorf("file %d %s: read %v (%T); wrote %v", i, f.Name, v, v, want)
			}
		}
	}
	sums := mf.Partitions()
	if len(sums) != len(spec.Fields) {
		t.Fatalf("%d partition summaries for %d fields", len(sums), len(spec.Fields))
	}
	for j, sum := range sums {
		void := spec.Fields[j].Transform.Kind == Void
		if !sum.ContainsNull || void == (sum.LowerBound != nil) {
			t.Errorf("summary of %s: %+v", spec.Fields[j].Name, sum)
		}
	}
}

// Why Build takes one decimal-valued field per spec: iceberg-go cannot write a
// manifest of a spec with two. When this test fails, iceberg-go writes them, and
// Build's rule can go.
func TestTwoDecimalsDoNotWrite(t *testing.T) {
	s := jsonSchema(t, "a:decimal(9,2)", "b:decimal(9,2)")
	a, _ := s.FindFieldByName("a")
	b, _ := s.FindFieldByName("b")
	spec := Spec{Fields: []SpecField{{SourceID: a.ID, FieldID: 1000, Name: "a", Transform: Transform{Kind: Identity}},
		{SourceID: b.ID, FieldID: 1001, Name: "b", Transform: Transform{Kind: Identity}}}}
	ice, err := spec.Iceberg(s)
	if err != nil {
		t.Fatal(err)
	}
	df, err := iceberg.NewDataFileBuilder(ice, iceberg.EntryContentData, "s3://mink/t/0.parquet", iceberg.ParquetFile,
		map[int]any{1000: nil, 1001: nil}, nil, nil, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	snap := int64(1)
	var buf bytes.Buffer
	if _, err := iceberg.WriteManifest("s3://mink/t/m.avro", &buf, 2, ice, s, snap,
		[]iceberg.ManifestEntry{iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &snap, nil, nil, df.Build())}); err == nil {
		t.Error("iceberg-go writes a manifest of two decimal partition fields: Build may take them now")
	}
}

// literalOf is a Go value a manifest read gives, as a literal of want's type.
func literalOf(v any, want iceberg.Literal) iceberg.Literal {
	switch v := v.(type) {
	case iceberg.Decimal:
		return iceberg.DecimalLiteral(v)
	case iceberg.Date:
		return iceberg.DateLiteral(v)
	case iceberg.Time:
		return iceberg.TimeLiteral(v)
	case iceberg.Timestamp:
		return iceberg.TimestampLiteral(v)
	case int32:
		if _, ok := want.(iceberg.DateLiteral); ok {
			return iceberg.DateLiteral(v)
		}
		return iceberg.Int32Literal(v)
	case int64:
		switch want.(type) {
		case iceberg.TimeLiteral:
			return iceberg.TimeLiteral(v)
		case iceberg.TimestampLiteral:
			return iceberg.TimestampLiteral(v)
		}
		return iceberg.Int64Literal(v)
	case float32:
		return iceberg.Float32Literal(v)
	case float64:
		return iceberg.Float64Literal(v)
	case bool:
		return iceberg.BoolLiteral(v)
	case string:
		return iceberg.StringLiteral(v)
	case uuid.UUID:
		return iceberg.UUIDLiteral(v)
	case []byte:
		if _, ok := want.(iceberg.FixedLiteral); ok {
			return iceberg.FixedLiteral(v)
		}
		return iceberg.BinaryLiteral(v)
	}
	return nil
}
