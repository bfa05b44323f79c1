package partition

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/tableschema"
)

func eventSchema(t *testing.T) *iceberg.Schema {
	return jsonSchema(t, "event_ts:timestamptz", "local_ts:timestamp", "day_of:date", "at:time", "customer_id:long",
		"qty:int", "name:string", "price:decimal(9,2)", "big:decimal(38,4)", "tiny:decimal(2,0)", "ratio:double", "f:float",
		"ok:boolean", "id:uuid", "blob:binary", "tags:list<string>", "user_id:string")
}

func TestBuildDefaults(t *testing.T) {
	s := eventSchema(t)
	spec := mustBuild(t, s, nil, "day(event_ts)", "bucket[16](customer_id)", "truncate[4](name)", "identity(qty)",
		"hour(local_ts)", "month(day_of)", "year(_kafka_timestamp)", "void(ratio)", "_kafka_partition")
	want := []string{"event_ts_day", "customer_id_bucket", "name_trunc", "qty", "local_ts_hour", "day_of_month",
		"_kafka_timestamp_year", "ratio_null", "_kafka_partition"}
	if spec.ID != 0 || len(spec.Fields) != len(want) {
		t.Fatalf("spec = %+v", spec)
	}
	for i, f := range spec.Fields {
		if f.Name != want[i] || f.FieldID != FirstFieldID+i {
			t.Errorf("field %d = %+v; want name %s, id %d", i, f, want[i], FirstFieldID+i)
		}
	}
	ts, _ := s.FindFieldByName("event_ts")
	if spec.Fields[0].SourceID != ts.ID {
		t.Errorf("source of day(event_ts) = %d; want %d", spec.Fields[0].SourceID, ts.ID)
	}

	// The spec as Iceberg's JSON, as table metadata lists specs.
	b, err := json.Marshal(mustBuild(t, s, nil, "day(event_ts)", "bucket[16](customer_id) AS cust"))
	if err != nil {
		t.Fatal(err)
	}
	cust, _ := s.FindFieldByName("customer_id")
	wantJSON := `{"spec-id":0,"fields":[{"source-id":` + itoa(ts.ID) + `,"field-id":1000,"name":"event_ts_day","transform":"day"},` +
		`{"source-id":` + itoa(cust.ID) + `,"field-id":1001,"name":"cust","transform":"bucket[16]"}]}`
	if string(b) != wantJSON {
		t.Errorf("JSON %s; want %s", b, wantJSON)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil || back.ID != 0 || !back.Equal(mustBuild(t, s, nil, "day(event_ts)", "bucket[16](customer_id) AS cust")) {
		t.Errorf("JSON reads back as %+v, %v", back, err)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// Every spec Build makes is one iceberg-go accepts as authored, with the same fields,
// and serializes to the same JSON.
func TestBuildIsIcebergs(t *testing.T) {
	s := eventSchema(t)
	spec := mustBuild(t, s, nil, "day(event_ts)", "bucket[16](customer_id)", "truncate[4](name)", "qty",
		"hour(local_ts)", "void(ratio)", "bucket[3](id)", "truncate[10](price)", "truncate[3](blob)")
	ice, err := spec.Iceberg(s)
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := json.Marshal(spec)
	theirs, _ := json.Marshal(ice)
	if string(mine) != string(theirs) {
		t.Errorf("spec JSON\n%s\niceberg-go's\n%s", mine, theirs)
	}
	// The names Build gives are iceberg-go's own default names but for bucket and
	// truncate, which Java's PartitionSpec.Builder (and the spec's examples) name
	// without the argument.
	for _, f := range ice.Fields() {
		n, err := iceberg.GeneratePartitionFieldName(s, iceberg.PartitionField{SourceIDs: f.SourceIDs, Transform: f.Transform})
		if err != nil {
			t.Fatal(err)
		}
		switch f.Transform.(type) {
		case iceberg.BucketTransform, iceberg.TruncateTransform:
			n = n[:strings.LastIndexByte(n, '_')]
		}
		if n != f.Name {
			t.Errorf("%s: name %s, iceberg-go's default %s", f.Transform, f.Name, n)
		}
	}
	// The spec's partition type is iceberg-go's.
	e, err := NewEvaluator(spec, s)
	if err != nil {
		t.Fatal(err)
	}
	pt := ice.PartitionType(s)
	for i, typ := range e.Types() {
		if !typ.Equals(pt.FieldList[i].Type) {
			t.Errorf("field %d type %s; iceberg-go's %s", i, typ, pt.FieldList[i].Type)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	s := eventSchema(t)
	nested := registrySchema(t, &iceberg.StructType{FieldList: []iceberg.NestedField{
		opt("user", &iceberg.StructType{FieldList: []iceberg.NestedField{opt("id", iceberg.PrimitiveTypes.String), opt("Id", iceberg.PrimitiveTypes.Int64)}}),
		opt("attrs", &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: iceberg.PrimitiveTypes.String, ValueRequired: false}),
		opt("user_id", iceberg.PrimitiveTypes.String),
		opt("my-field", iceberg.PrimitiveTypes.Int32),
	}})
	for _, c := range []struct {
		schema *iceberg.Schema
		fields []string
		field  string // the FieldError's Field
		reason string // held by its Reason
	}{
		{s, []string{"day(evnt_ts)"}, `partition_spec[0] ("day(evnt_ts)")`, `no column evnt_ts (did you mean event_ts?)`},
		{s, []string{"day(zzz)"}, `partition_spec[0] ("day(zzz)")`, `no column zzz (the Kafka columns are _kafka_timestamp, _kafka_partition, _kafka_key and _kafka_offset)`},
		{s, []string{"hour(name)"}, `partition_spec[0] ("hour(name)")`, "hour is defined for timestamp and timestamptz columns, and name is string"},
		{s, []string{"hour(day_of)"}, `partition_spec[0] ("hour(day_of)")`, "hour is defined for timestamp and timestamptz columns, and day_of is date (a date has no hours: day(day_of))"},
		{s, []string{"day(customer_id)"}, `partition_spec[0] ("day(customer_id)")`, "day is defined for date, timestamp and timestamptz columns, and customer_id is long"},
		{s, []string{"day(at)"}, `partition_spec[0] ("day(at)")`, "and at is time"},
		{s, []string{"bucket[4](ratio)"}, `partition_spec[0] ("bucket[4](ratio)")`, "bucket is defined for int, long, decimal, date, time, timestamp, timestamptz, string, uuid, fixed and binary columns, and ratio is double (Iceberg does not hash double; identity(ratio) partitions by its values)"},
		{s, []string{"bucket[4](f)"}, `partition_spec[0] ("bucket[4](f)")`, "and f is float"},
		{s, []string{"bucket[4](ok)"}, `partition_spec[0] ("bucket[4](ok)")`, "and ok is boolean"},
		{s, []string{"truncate[4](event_ts)"}, `partition_spec[0] ("truncate[4](event_ts)")`, "truncate is defined for int, long, decimal, string and binary columns, and event_ts is timestamptz (to cut time to a unit use year, month, day or hour(event_ts))"},
		{s, []string{"truncate[4](id)"}, `partition_spec[0] ("truncate[4](id)")`, "and id is uuid"},
		{s, []string{"tags"}, `partition_spec[0] ("tags")`, "tags is a list: a partition source is a primitive column (in structs only)"},
		{s, []string{"bucket[2](tags.element)"}, `partition_spec[0] ("bucket[2](tags.element)")`, "tags is a list: a partition source is a primitive column, inside structs only (not lists or maps)"},
		{s, []string{"void(_kafka_headers)"}, `partition_spec[0] ("void(_kafka_headers)")`, "_kafka_headers is a list"},
		{s, []string{"_kafka_offset"}, `partition_spec[0] ("_kafka_offset")`, "identity of _kafka_offset puts every record in a partition of its own"},
		{s, []string{"truncate[1000](tiny)"}, `partition_spec[0] ("truncate[1000](tiny)")`, "truncate[1000] of a decimal(2,0) could make values it cannot hold; use a width of at most 30"},
		{s, []string{"day(event_ts)", "hour(event_ts)"}, `partition_spec[1] ("hour(event_ts)")`, `partition_spec[0] ("day(event_ts)") already partitions event_ts by day: a column takes one of year, month, day and hour`},
		{s, []string{"bucket[4](name)", "bucket[4](name) AS b2"}, `partition_spec[1] ("bucket[4](name) AS b2")`, `repeats partition_spec[0] ("bucket[4](name)")`},
		{s, []string{"day(event_ts) AS d", "hour(local_ts) AS D"}, `partition_spec[1] ("hour(local_ts) AS D")`, `name "D" is taken by partition_spec[0] ("day(event_ts) AS d") (names compare ignoring case)`},
		{s, []string{"day(event_ts) AS name"}, `partition_spec[0] ("day(event_ts) AS name")`, `name "name" is a column's; a partition field may take only its own source column's name, and only for identity`},
		{s, []string{"qty AS Name"}, `partition_spec[0] ("qty AS Name")`, `name "Name" is a column's`},
		{s, []string{"day(event_ts) AS `a.b`"}, "partition_spec[0] (\"day(event_ts) AS `a.b`\")", `name "a.b" must match [A-Za-z_][A-Za-z0-9_]* (manifests carry it as an Avro field name)`},
		{s, []string{"day(event_ts) AS " + strings.Repeat("n", 129)}, "partition_spec[0]", "name is longer than 128 bytes"},
		{s, []string{"bucket[16](name)", "bucket[32](customer_id)"}, `partition_spec[1] ("bucket[32](customer_id)")`, "its buckets make up to 512 partition tuples per range, more than the 256 a range holds"},
		{s, []string{"price", "bucket[2](big)", "truncate[10](big)"}, `partition_spec[2] ("truncate[10](big)")`, `partition_spec[0] ("price") is decimal-valued already: a spec holds one decimal partition value`},
		{s, []string{"void(tiny)", "price"}, `partition_spec[1] ("price")`, `partition_spec[0] ("void(tiny)") is decimal-valued already`},
		{nested, []string{"user"}, `partition_spec[0] ("user")`, "user is a struct: partition by one of its fields (user.<field>)"},
		{nested, []string{"attrs.key"}, `partition_spec[0] ("attrs.key")`, "attrs is a map"},
		{nested, []string{"USER.ID"}, `partition_spec[0] ("USER.ID")`, `column "USER.ID" is ambiguous: "user.Id", "user.id"`},
		{nested, []string{"user.id"}, `partition_spec[0] ("user.id")`, `name "user_id" is a column's`},
	} {
		fields := make([]Field, len(c.fields))
		for i, f := range c.fields {
			fields[i] = mustParse(t, f)
		}
		_, err := Build(c.schema, fields, nil)
		if err == nil {
			t.Errorf("%v: no error; want %s: %s", c.fields, c.field, c.reason)
			continue
		}
		fe := fieldError(t, err)
		if !strings.HasPrefix(fe.Field, c.field) || !strings.Contains(fe.Reason, c.reason) {
			t.Errorf("%v:\n got %s: %s\nwant %s: %s", c.fields, fe.Field, fe.Reason, c.field, c.reason)
		}
	}

	var many []Field
	for range MaxFields + 1 {
		many = append(many, Field{Column: "qty", Transform: Transform{Kind: Void}})
	}
	if _, err := Build(s, many, nil); err == nil || fieldError(t, err).Field != "partition_spec" {
		t.Errorf("%d fields: %v", len(many), err)
	}
	if _, err := Build(s, []Field{{Column: "qty", Transform: Transform{Kind: Bucket}}}, nil); err == nil ||
		!strings.Contains(err.Error(), "bucket: N must be 1..2147483647, not 0") {
		t.Errorf("bucket[0]: %v", err)
	}
}

func TestBuildNested(t *testing.T) {
	s := registrySchema(t, &iceberg.StructType{FieldList: []iceberg.NestedField{
		opt("user", &iceberg.StructType{FieldList: []iceberg.NestedField{
			opt("id", iceberg.PrimitiveTypes.String),
			opt("geo", &iceberg.StructType{FieldList: []iceberg.NestedField{opt("country", iceberg.PrimitiveTypes.String)}}),
		}}),
		opt("my-field", iceberg.PrimitiveTypes.Int32),
		opt("code", iceberg.FixedTypeOf(4)),
	}})
	spec := mustBuild(t, s, nil, "bucket[8](user.id)", "user.geo.country", "`my-field`", "bucket[4](code)", "bucket[2](User.Geo.Country) AS c2")
	for i, want := range []string{"user_id_bucket", "user_geo_country", "my_field", "code_bucket", "c2"} {
		if spec.Fields[i].Name != want {
			t.Errorf("field %d name %q; want %q", i, spec.Fields[i].Name, want)
		}
	}
	country, _ := s.FindFieldByName("user.geo.country")
	if spec.Fields[1].SourceID != country.ID || spec.Fields[4].SourceID != country.ID {
		t.Errorf("user.geo.country is %d; spec %+v", country.ID, spec)
	}
	if _, err := spec.Iceberg(s); err != nil {
		t.Error(err)
	}
	// Shown with the columns as the schema spells them.
	var shown []string
	for _, f := range spec.Describe(s) {
		shown = append(shown, f.String())
	}
	if got := strings.Join(shown, ", "); got != "bucket[8](user.id) AS user_id_bucket, user.geo.country AS user_geo_country, `my-field` AS my_field, bucket[4](code) AS code_bucket, bucket[2](user.geo.country) AS c2" {
		t.Errorf("Describe: %s", got)
	}
}

// Evolution: field ids are kept for the same source and transform, new ones follow the
// largest; a spec like an earlier one is that one.
func TestBuildEvolution(t *testing.T) {
	s := eventSchema(t)
	s0 := mustBuild(t, s, nil, "day(event_ts)", "bucket[16](customer_id)")
	s1 := mustBuild(t, s, []Spec{s0}, "bucket[16](customer_id)", "hour(event_ts)")
	if s1.ID != 1 || s1.Fields[0].FieldID != 1001 || s1.Fields[1].FieldID != 1002 {
		t.Errorf("spec 1 = %+v", s1)
	}
	s2 := mustBuild(t, s, []Spec{s0, s1}, "day(event_ts) AS event_day", "truncate[2](name)")
	if s2.ID != 2 || s2.Fields[0].FieldID != 1000 || s2.Fields[1].FieldID != 1003 {
		t.Errorf("spec 2 = %+v", s2)
	}
	again := mustBuild(t, s, []Spec{s0, s1, s2}, "day(event_ts)", "bucket[16](customer_id)")
	if again.ID != 0 || !again.Equal(s0) {
		t.Errorf("spec 0 again = %+v", again)
	}
	unpartitioned := mustBuild(t, s, []Spec{s0, s1, s2})
	if unpartitioned.ID != 3 || !unpartitioned.Unpartitioned() {
		t.Errorf("unpartitioned = %+v", unpartitioned)
	}

	// iceberg-go's metadata builder takes the specs with the same ids.
	b, err := icebergBuilder(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []Spec{s0, s1, s2} {
		ice, err := spec.Iceberg(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.AddPartitionSpec(&ice, spec.ID == 0); err != nil {
			t.Fatal(err)
		}
		got, err := b.GetSpecByID(spec.ID)
		if err != nil {
			t.Fatalf("spec %d: %v", spec.ID, err)
		}
		mine, _ := json.Marshal(spec)
		theirs, _ := json.Marshal(got)
		if string(mine) != string(theirs) {
			t.Errorf("spec %d: %s; the builder holds %s", spec.ID, mine, theirs)
		}
	}
}

func TestKafkaPartitionSpec(t *testing.T) {
	s := jsonSchema(t, "x:int")
	spec, err := KafkaPartitionSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.FindFieldByName(tableschema.ColumnKafkaPartition)
	want := Spec{ID: 0, Fields: []SpecField{{SourceID: p.ID, FieldID: 1000, Name: "_kafka_partition", Transform: Transform{Kind: Identity}}}}
	if spec.ID != want.ID || !spec.Equal(want) {
		t.Errorf("spec %+v; want %+v", spec, want)
	}
}
