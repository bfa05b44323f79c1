package e2e

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/tableschema"
)

// The Avro schemas of the evolution tests: v2 widens qty from int to long (and zip, in
// the nested record) and adds the optional field note.
const (
	regOrderAvroV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"id","type":"long"},
		{"name":"qty","type":"int"},
		{"name":"item","type":"string"},
		{"name":"address","type":{"type":"record","name":"Address","fields":[
			{"name":"city","type":"string"},{"name":"zip","type":"int"}]}},
		{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}}]}`
	regOrderAvroV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"id","type":"long"},
		{"name":"qty","type":"long"},
		{"name":"item","type":"string"},
		{"name":"address","type":{"type":"record","name":"Address","fields":[
			{"name":"city","type":"string"},{"name":"zip","type":"long"}]}},
		{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}},
		{"name":"note","type":["null","string"],"default":null}]}`
)

type regAddress struct {
	City string `avro:"city"`
	Zip  int32  `avro:"zip"`
}

type regOrderV1 struct {
	ID      int64      `avro:"id"`
	Qty     int32      `avro:"qty"`
	Item    string     `avro:"item"`
	Address regAddress `avro:"address"`
	Tags    []string   `avro:"tags"`
	Price   *big.Rat   `avro:"price"`
	At      time.Time  `avro:"at"`
	Status  string     `avro:"status"`
}

type regAddressV2 struct {
	City string `avro:"city"`
	Zip  int64  `avro:"zip"`
}

type regOrderV2 struct {
	ID      int64        `avro:"id"`
	Qty     int64        `avro:"qty"`
	Item    string       `avro:"item"`
	Address regAddressV2 `avro:"address"`
	Tags    []string     `avro:"tags"`
	Price   *big.Rat     `avro:"price"`
	At      time.Time    `avro:"at"`
	Status  string       `avro:"status"`
	Note    *string      `avro:"note"`
}

var regOrderStatuses = []string{"NEW", "PAID", "SHIPPED"}

// regBaseTime has milliseconds, as timestamp-millis values do.
var regBaseTime = time.UnixMilli(1_767_225_600_123).UTC()

func newRegOrderV1(i int) regOrderV1 {
	return regOrderV1{ID: int64(i), Qty: int32(i*7 + 1), Item: fmt.Sprintf("item-%d", i),
		Address: regAddress{City: fmt.Sprintf("city-%d", i%3), Zip: int32(10000 + i)},
		Tags:    []string{"t", fmt.Sprintf("tag-%d", i)}, Price: big.NewRat(int64(i)*100+99, 100),
		At: regBaseTime.Add(time.Duration(i) * 1001 * time.Millisecond), Status: regOrderStatuses[i%3]}
}

func newRegOrderV2(i int) regOrderV2 {
	o := newRegOrderV1(i)
	note := fmt.Sprintf("note %d", i)
	return regOrderV2{ID: o.ID, Qty: 5_000_000_000 + int64(i), Item: o.Item,
		Address: regAddressV2{City: o.Address.City, Zip: 1<<40 + int64(i)}, Tags: o.Tags,
		Price: o.Price, At: o.At, Status: o.Status, Note: &note}
}

func regStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func regOrderRow(id, qty int64, item, city string, zip int64, tags []string, price *big.Rat, at time.Time, status string, note any) map[string]any {
	return map[string]any{
		"id":      id,
		"qty":     qty,
		"item":    item,
		"address": map[string]any{"city": city, "zip": zip},
		"tags":    regStrings(tags),
		"price":   regDec(price, 2),
		"at":      regTS(at),
		"status":  status,
		"note":    note,
	}
}

// row is how a v1 record reads back: the column v2 added is null.
func (o regOrderV1) row() map[string]any {
	return regOrderRow(o.ID, int64(o.Qty), o.Item, o.Address.City, int64(o.Address.Zip), o.Tags, o.Price, o.At, o.Status, nil)
}

func (o regOrderV2) row() map[string]any {
	return regOrderRow(o.ID, o.Qty, o.Item, o.Address.City, o.Address.Zip, o.Tags, o.Price, o.At, o.Status, *o.Note)
}

// regAvroSerde is a producer's serde of one Avro schema registered as id: the Confluent
// wire prefix, then hamba/avro's encoding of a value of v's Go type.
func regAvroSerde(t *testing.T, id int, text string, v any) *sr.Serde {
	t.Helper()
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	serde := sr.NewSerde()
	serde.Register(id, v, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }))
	return serde
}

// regAvroEvolved is the Avro evolution scenario up to everything committed: a 2-partition
// topic, schema v1 registered and a table created through the admin API, v1 records
// indexed and committed, then v2 registered and its records produced mid-stream (with
// an old producer still writing v1 after them).
type regAvroEvolved struct {
	rc       *regCluster
	table    *adminv1.Table
	want     regRows
	phase1   map[int32]int64 // where the v1-only records end
	v2       map[regKey]bool // the records written with v2
	id1, id2 int
}

func setupRegAvroEvolved(t *testing.T) *regAvroEvolved {
	rc := newRegCluster(t, true)
	rc.Kafka.CreateTopic("orders", 2, nil)
	e := &regAvroEvolved{rc: rc, want: regRows{}, v2: map[regKey]bool{}}
	e.id1 = rc.reg.register("orders-value", sr.Schema{Schema: regOrderAvroV1, Type: sr.TypeAvro})
	e.table = rc.createTable(&adminv1.CreateTableRequest{Name: "orders", Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO,
		Properties: regProps("mink.live-load", "false")}) // every read is of committed snapshots
	if v := e.table.GetValue(); v.GetSubject() != "orders-value" || v.GetMode() != adminv1.SchemaMode_SCHEMA_MODE_PREFIX {
		t.Fatalf("CreateTable: value decoding %v, want subject orders-value in prefix mode", v)
	}
	ser1 := regAvroSerde(t, e.id1, regOrderAvroV1, regOrderV1{})
	n := 0
	produceV1 := func(p int32) {
		o := newRegOrderV1(n)
		n++
		recs := rc.produce(&kgo.Record{Topic: "orders", Partition: p, Value: ser1.MustEncode(o)})
		e.want.add(t, recs, o.row())
	}
	for range 3 {
		produceV1(0)
		produceV1(1)
	}
	e.phase1 = e.want.ends()
	rc.waitCommitted("orders", e.phase1)

	// v2, mid-stream. Partition 0 gets v2 first, then an old producer's v1 record;
	// partition 1 a v1 record then v2 records, in one batch: a range cut at the change.
	e.id2 = rc.reg.register("orders-value", sr.Schema{Schema: regOrderAvroV2, Type: sr.TypeAvro})
	ser2 := regAvroSerde(t, e.id2, regOrderAvroV2, regOrderV2{})
	var recs []*kgo.Record
	var rows []map[string]any
	add := func(p int32, v2 bool) {
		if v2 {
			o := newRegOrderV2(n)
			recs, rows = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: ser2.MustEncode(o)}), append(rows, o.row())
		} else {
			o := newRegOrderV1(n)
			recs, rows = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: ser1.MustEncode(o)}), append(rows, o.row())
		}
		n++
	}
	add(0, true)
	add(0, true)
	add(0, false)
	add(1, false)
	add(1, true)
	add(1, true)
	recs = rc.produce(recs...)
	e.want.add(t, recs, rows...)
	for i, r := range recs {
		if rows[i]["note"] != nil {
			e.v2[regKey{r.Partition, r.Offset}] = true
		}
	}
	rc.waitCommitted("orders", e.want.ends())
	e.assemble()
	return e
}

// assemble has the writer merge the small files of each schema version into one, as it
// does with real sizes: AlterTable sets an assembly target that the biggest run of
// ranges of one recipe fits, and a short maintenance interval; the test waits until the
// committed snapshot holds fewer data files.
func (e *regAvroEvolved) assemble() {
	rc, t := e.rc, e.rc.T
	t.Helper()
	ctx := context.Background()
	var target, files int64
	for p := int32(0); p < 2; p++ {
		byVersion := map[int]int64{}
		for _, r := range rc.recipes(e.table.GetId(), p) {
			byVersion[r.settings.TableVersion] += r.size
			files++
		}
		for _, size := range byVersion {
			target = max(target, size)
		}
	}
	if _, err := rc.Member("idx-1").Admin().AlterTable(ctx, &adminv1.AlterTableRequest{Name: "orders", SetProperties: map[string]string{
		"mink.assembly.target-bytes": strconv.FormatInt(max(target, 1024), 10), "mink.maintenance.interval": "100ms"}}); err != nil {
		t.Fatalf("AlterTable: %v", err)
	}
	left := waitFor(t, 30*time.Second, fmt.Sprintf("the writer to merge some of the %d files", files), func() (string, bool) {
		tbl, err := regLoad(ctx, rc.catalog, "orders")
		if err != nil || tbl.CurrentSnapshot() == nil || tbl.CurrentSnapshot().Summary == nil {
			return fmt.Sprint(err), false
		}
		n := tbl.CurrentSnapshot().Summary.Properties["total-data-files"]
		got, _ := strconv.ParseInt(n, 10, 64)
		return n, got > 0 && got < files && tbl.Properties()["mink.assembly.target-bytes"] != ""
	})
	t.Logf("assembly: %d range files, %s data files in the snapshot (target %d bytes)", files, left, target)
}

// TestRegistryAvroEvolution: an Avro table through real processes, a registry and
// iceberg-go. Schema v1, then v2 (an optional field added, an int widened to long)
// mid-stream: every record reads back once with its values; the metadata holds both
// schemas with the newer current; v1 rows read the new column as null; ranges are cut
// at the version change; DescribeTable shows version 1 and the new column.
func TestRegistryAvroEvolution(t *testing.T) {
	t.Parallel()
	e := setupRegAvroEvolved(t)
	rc := e.rc
	s := regScanTable(t, rc.catalog, "orders")
	s.check(t, e.want)

	md := s.tbl.Metadata()
	if n := len(md.Schemas()); n != 2 {
		t.Errorf("metadata has %d schemas, want 2: %v", n, md.Schemas())
	}
	cur := md.CurrentSchema()
	for _, sc := range md.Schemas() {
		if sc.ID > cur.ID {
			t.Errorf("current schema id %d, but schema %d is newer", cur.ID, sc.ID)
		}
		if sc.ID != cur.ID {
			if f, ok := sc.FindFieldByName("qty"); !ok || f.Type.String() != "int" {
				t.Errorf("the first schema's qty: %v", f)
			}
			if f, ok := sc.FindFieldByName("address.zip"); !ok || f.Type.String() != "int" {
				t.Errorf("the first schema's address.zip: %v", f)
			}
			if _, ok := sc.FindFieldByName("note"); ok {
				t.Errorf("the first schema has note: %v", sc)
			}
		}
	}
	if got := regColumnType(s.tbl, "qty"); got != "long" {
		t.Errorf("qty is %s in the current schema, want long", got)
	}
	if f, ok := cur.FindFieldByName("address.zip"); !ok || f.Type.String() != "long" {
		t.Errorf("address.zip in the current schema: %v", f)
	}
	if got := regColumnType(s.tbl, "note"); got != "string" {
		t.Errorf("note is %s in the current schema, want string", got)
	}
	// Field ids survive the evolution: every field of the first schema keeps its id.
	for _, sc := range md.Schemas() {
		for _, f := range sc.Fields() {
			if g, ok := cur.FindFieldByName(f.Name); !ok || g.ID != f.ID {
				t.Errorf("field %s (id %d) of schema %d is id %d in the current schema", f.Name, f.ID, sc.ID, g.ID)
			}
		}
	}

	d := rc.describe("orders")
	if d.GetTable().GetSchemaVersion() != 1 || int(d.GetTable().GetSchemaId()) != cur.ID {
		t.Errorf("DescribeTable: schema version %d, schema id %d; want version 1, id %d",
			d.GetTable().GetSchemaVersion(), d.GetTable().GetSchemaId(), cur.ID)
	}
	cols := regSchemaColumns(d.GetTable())
	if cols["note"] != "string" || cols["qty"] != "long" || cols[tableschema.ColumnMinkError] != "string" {
		t.Errorf("DescribeTable schema: %v", cols)
	}

	// Every range holding a v2 record was built with version 1, every range of the
	// v1-only records with version 0.
	for p := int32(0); p < 2; p++ {
		rs := rc.recipes(e.table.GetId(), p)
		for k := range e.want {
			if k.p != p {
				continue
			}
			r, ok := regRecipeAt(rs, k.o)
			switch {
			case !ok:
				t.Errorf("record %v is in no range: %v", k, rs)
			case e.v2[k] && r.settings.TableVersion != 1:
				t.Errorf("v2 record %v is in range [%d, %d) of version %d", k, r.start, r.end, r.settings.TableVersion)
			case k.o < e.phase1[p] && r.settings.TableVersion != 0:
				t.Errorf("v1 record %v, indexed before v2 existed, is in range [%d, %d) of version %d", k, r.start, r.end, r.settings.TableVersion)
			}
		}
	}
}

// TestRegistryRebuildWithoutRegistry: once the Avro scenario's data is committed, the
// registry goes away entirely and the file server restarts with an empty cache: every
// file is rebuilt from Kafka with the schemas stored in Postgres, byte for byte (the
// file server serves a rebuild only when it matches the recorded size and checksum),
// and iceberg-go reads the same rows.
func TestRegistryRebuildWithoutRegistry(t *testing.T) {
	t.Parallel()
	e := setupRegAvroEvolved(t)
	rc := e.rc
	before := regScanTable(t, rc.catalog, "orders")
	before.check(t, e.want)

	rc.reg.down()
	rc.restart("fileserver", "fs-1") // the same node, a fresh cache, the registry still named and gone
	after := regScanTable(t, rc.catalog, "orders")
	after.check(t, e.want)
	for k, row := range before.rows {
		if d := regMatch(row, after.rows[k]); d != "" {
			t.Errorf("row %v after the restart: %s", k, d)
		}
	}
	st, err := rc.Member("fs-1").Admin().GetStatus(context.Background(), &adminv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	f := st.GetFigures()
	files, _ := strconv.Atoi(after.tbl.CurrentSnapshot().Summary.Properties["total-data-files"])
	if builds, _ := strconv.Atoi(f["builds"]); builds < files || files == 0 || f["build_failures"] != "0" {
		t.Errorf("the restarted file server's figures: builds %s, build failures %s", f["builds"], f["build_failures"])
	}
	t.Logf("restarted fs-1: %s builds, %s failures, %s cached files", f["builds"], f["build_failures"], f["cache_files"])

	// An indexer that restarts while the registry is gone keeps indexing records of the
	// schemas the table has stored.
	rc.restart("indexer", "idx-1")
	ser1, ser2 := regAvroSerde(t, e.id1, regOrderAvroV1, regOrderV1{}), regAvroSerde(t, e.id2, regOrderAvroV2, regOrderV2{})
	o1, o2 := newRegOrderV1(100), newRegOrderV2(101)
	recs := rc.produce(&kgo.Record{Topic: "orders", Partition: 0, Value: ser2.MustEncode(o2)},
		&kgo.Record{Topic: "orders", Partition: 1, Value: ser1.MustEncode(o1)})
	e.want.add(t, recs, o2.row(), o1.row())
	rc.waitCommitted("orders", e.want.ends())
	regScanTable(t, rc.catalog, "orders").check(t, e.want)
	for _, p := range rc.describe("orders").GetPartitions() {
		if p.GetIndexError() != "" {
			t.Errorf("partition %d: %s", p.GetPartition(), p.GetIndexError())
		}
	}
}
