package tablecodec_test

import (
	"encoding/binary"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
	"github.com/minkhq/mink/pkg/upsert"
)

// wire is a record key in the Confluent wire format: magic byte 0, schema id, payload.
func wire(id int, payload string) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, payload...)
}

const (
	jsonKeyV1 = `{"type":"object","properties":{"id":{"type":"integer"},"region":{"type":"string"}}}`
	// v2 lists the properties in another order and adds one: another schema id, and a
	// schema update of the table.
	jsonKeyV2 = `{"type":"object","properties":{"region":{"type":"string"},"id":{"type":"integer"},"note":{"type":"string"}}}`
)

// jsonKeyed makes a raw-value table whose keys are JSON Schema, with both key schemas
// learned and the table evolved to the second: its versions 0 and 1.
func jsonKeyed(f *fixture, name string) (tbl tables.Table, id1, id2 int) {
	f.t.Helper()
	id1 = f.register(name+"-key", jsonKeyV1, sr.TypeJSON)
	tbl = f.create(name, tableschema.Spec{Format: tableschema.FormatRaw,
		Key: &tableschema.Decoding{Format: tableschema.FormatJSONSchema, Subject: name + "-key", Mode: tableschema.ModePrefix}})
	id2 = f.register(name+"-key", jsonKeyV2, sr.TypeJSON)
	if err := f.codecs.Learn(f.ctx, tbl, id2, true); err != nil {
		f.t.Fatal(err)
	}
	if v, err := f.codecs.Evolve(f.ctx, nil, tbl, id2, true); err != nil || v.ID != 1 {
		f.t.Fatalf("evolve to the key's v2: %+v %v", v, err)
	}
	return f.table(tbl.ID), id1, id2
}

// TestKeyHashOfDecodedKeys: an upsert table's key identity when keys decode (JSON
// Schema here) is the decoded key's: field order, whitespace, the schema id and the
// table version it is decoded at do not change it; a null field is an absent one;
// other values are other keys. A key that does not decode is its bytes, apart from
// every decoded key; no key is no key. A process without the registry (a rebuild) gives
// the same identities.
func TestKeyHashOfDecodedKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tbl, id1, id2 := jsonKeyed(f, "users")
	d0 := f.decoder(f.codecs, tbl, tablecodec.NewSettings(0, 0, 0))
	d1 := f.decoder(f.codecs, tbl, tablecodec.NewSettings(1, 0, 0))
	rebuilt := tablecodec.New(f.db, nil)
	r0 := f.decoder(rebuilt, tbl, tablecodec.NewSettings(0, 0, 0))
	r1 := f.decoder(rebuilt, tbl, tablecodec.NewSettings(1, 0, 0))

	want := d0.KeyHash(wire(id1, `{"id":1,"region":"eu"}`))
	for _, c := range []struct {
		what string
		d    *tablecodec.Decoder
		key  []byte
	}{
		{"fields in another order, other whitespace", d0, wire(id1, " {\n \"region\" : \"eu\",\t\"id\":1 }")},
		{"the key's second schema id", d0, wire(id2, `{"region":"eu","id":1}`)},
		{"the table's next version", d1, wire(id1, `{"id":1,"region":"eu"}`)},
		{"the next version, the second schema id", d1, wire(id2, `{"id":1,"region":"eu"}`)},
		{"a null field of the second schema", d1, wire(id2, `{"id":1,"note":null,"region":"eu"}`)},
		{"an unknown field", d1, wire(id2, `{"id":1,"region":"eu","color":"red"}`)},
		{"a rebuild", r0, wire(id1, `{"region":"eu","id":1}`)},
		{"a rebuild at the next version", r1, wire(id2, ` {"id": 1, "region": "eu"}`)},
	} {
		if got := c.d.KeyHash(c.key); got != want {
			t.Errorf("%s: another key", c.what)
		}
	}
	bad := []byte("not a key")
	hs := map[upsert.Hash]string{want: `{"id":1,"region":"eu"}`}
	for _, c := range []struct {
		what string
		h    upsert.Hash
	}{
		{"another id", d1.KeyHash(wire(id2, `{"id":2,"region":"eu"}`))},
		{"another region", d1.KeyHash(wire(id1, `{"id":1,"region":"us"}`))},
		{"a note", d1.KeyHash(wire(id2, `{"id":1,"region":"eu","note":"x"}`))},
		{"no region", d1.KeyHash(wire(id2, `{"id":1}`))},
		{"no key", d1.KeyHash(nil)},
		{"a key without a prefix", d1.KeyHash(bad)},
		{"a key that is not JSON", d1.KeyHash(wire(id1, `{"id":`))},
		{"a schema id the table does not have", d1.KeyHash(wire(id2+100, `{"id":1,"region":"eu"}`))},
	} {
		if other, dup := hs[c.h]; dup {
			t.Errorf("%s: the same key as %s", c.what, other)
		}
		hs[c.h] = c.what
	}
	if d1.KeyHash(nil) != upsert.KeyHash(nil) || d1.KeyHash(bad) != upsert.UndecodedKeyHash(bad) || r1.KeyHash(bad) != upsert.UndecodedKeyHash(bad) {
		t.Error("no key, or a key that does not decode, is not its documented identity")
	}
	if d1.KeyHash(wire(id2, `{"id":1,"region":"eu","note":null}`)) != d1.KeyHash(wire(id2, `{"id":1,"region":"eu"}`)) {
		t.Error("a null field and an absent one are two keys")
	}

	// A table whose keys stay bytes keeps the identity of its keys' bytes.
	plain := f.create("plain", tableschema.Spec{Format: tableschema.FormatRaw})
	dp := f.decoder(f.codecs, plain, tablecodec.NewSettings(0, 0, 0))
	k := wire(id1, `{"id":1,"region":"eu"}`)
	if dp.KeyHash(k) != upsert.KeyHash(k) || dp.KeyHash(nil) != upsert.KeyHash(nil) {
		t.Error("a table without a key format: the key's identity is not its bytes'")
	}
}

const (
	avroKeyV1 = `{"type":"record","name":"Key","namespace":"shop","fields":[{"name":"tenant","type":"string"},{"name":"id","type":"int"}]}`
	avroKeyV2 = `{"type":"record","name":"Key","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"tenant","type":"string"},
		{"name":"region","type":["null","string"],"default":null}]}`
)

type avroKey1 struct {
	Tenant string `avro:"tenant"`
	ID     int32  `avro:"id"`
}

type avroKey2 struct {
	ID     int64   `avro:"id"`
	Tenant string  `avro:"tenant"`
	Region *string `avro:"region"`
}

// TestKeyHashOfAvroKeys: Avro keys written with two schema ids (fields reordered, id
// widened, a field added) are one key when their decoded fields are equal, at either
// table version.
func TestKeyHashOfAvroKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id1 := f.register("carts-key", avroKeyV1, sr.TypeAvro)
	tbl := f.create("carts", tableschema.Spec{Format: tableschema.FormatRaw,
		Key: &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: "carts-key", Mode: tableschema.ModePrefix}})
	id2 := f.register("carts-key", avroKeyV2, sr.TypeAvro)
	if err := f.codecs.Learn(f.ctx, tbl, id2, true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.codecs.Evolve(f.ctx, nil, tbl, id2, true); err != nil {
		t.Fatal(err)
	}
	tbl = f.table(tbl.ID)
	d0 := f.decoder(f.codecs, tbl, tablecodec.NewSettings(0, 0, 0))
	d1 := f.decoder(f.codecs, tbl, tablecodec.NewSettings(1, 0, 0))
	k1 := avroRecord(t, id1, avroKeyV1, avroKey1{"acme", 7})
	k2 := avroRecord(t, id2, avroKeyV2, avroKey2{ID: 7, Tenant: "acme"})
	eu := "eu"
	k2eu := avroRecord(t, id2, avroKeyV2, avroKey2{ID: 7, Tenant: "acme", Region: &eu})
	want := d0.KeyHash(k1)
	// (A key of the second schema is never decoded at version 0: it needs version 1,
	// which indexing evolves to first.)
	if d1.KeyHash(k1) != want {
		t.Error("one Avro key at two table versions is two keys")
	}
	if d1.KeyHash(k2) != want {
		t.Error("one Avro key under two schema ids is two keys")
	}
	if d1.KeyHash(k2eu) == want || d1.KeyHash(avroRecord(t, id1, avroKeyV1, avroKey1{"acme", 8})) == want {
		t.Error("Avro keys with other values are one key")
	}
}

// BenchmarkDecoderKeyHash: a record key's identity through a table's decoder, decoding
// included: keys as bytes (no key format), and a JSON Schema and an Avro key
// {id, region} decoded, canonically encoded and hashed.
func BenchmarkDecoderKeyHash(b *testing.B) {
	f := newFixture(b)
	plain := f.create("plain", tableschema.Spec{Format: tableschema.FormatRaw})
	jtbl, id1, _ := jsonKeyed(f, "users")
	const avroKey = `{"type":"record","name":"Key","fields":[{"name":"id","type":"long"},{"name":"region","type":"string"}]}`
	aid := f.register("carts-key", avroKey, sr.TypeAvro)
	atbl := f.create("carts", tableschema.Spec{Format: tableschema.FormatRaw,
		Key: &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: "carts-key", Mode: tableschema.ModePrefix}})
	payload, err := avro.Marshal(avro.MustParse(avroKey), struct {
		ID     int64  `avro:"id"`
		Region string `avro:"region"`
	}{12345, "eu-west"})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tbl  tables.Table
		key  []byte
	}{
		{"bytes", plain, wire(id1, `{"id":12345,"region":"eu-west"}`)},
		{"json_schema", jtbl, wire(id1, `{"id":12345,"region":"eu-west"}`)},
		{"avro", atbl, wire(aid, string(payload))},
	} {
		d := f.decoder(f.codecs, c.tbl, tablecodec.NewSettings(c.tbl.Version, 0, 0))
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d.KeyHash(c.key)
			}
		})
	}
}
