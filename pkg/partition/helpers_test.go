package partition

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/tableschema"
)

// jsonSchema is the Iceberg schema of a JSON table with columns name:type, as Mink
// makes it (the Kafka columns after them).
func jsonSchema(t testing.TB, cols ...string) *iceberg.Schema {
	t.Helper()
	spec := tableschema.Spec{Format: tableschema.FormatJSON}
	for _, c := range cols {
		name, typ, _ := strings.Cut(c, ":")
		spec.Columns = append(spec.Columns, tableschema.Column{Name: name, Type: typ})
	}
	s, err := spec.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// registrySchema is the Iceberg schema of an Avro table whose values have root's
// fields, as tableschema.Compose numbers them: for the nested types JSON tables lack
// (structs, maps, fixed).
func registrySchema(t testing.TB, root *iceberg.StructType) *iceberg.Schema {
	t.Helper()
	spec := tableschema.Spec{Format: tableschema.FormatAvro,
		Value: &tableschema.Decoding{Format: tableschema.FormatAvro, Subject: "t-value", Mode: tableschema.ModePrefix}}
	fields, err := tableschema.Compose(spec, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	return iceberg.NewSchema(0, fields...)
}

func opt(name string, typ iceberg.Type) iceberg.NestedField {
	return iceberg.NestedField{Name: name, Type: typ}
}

// fieldError is err as the *tableschema.FieldError Build returns, or fails the test.
func fieldError(t *testing.T, err error) *tableschema.FieldError {
	t.Helper()
	var fe *tableschema.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *tableschema.FieldError", err, err)
	}
	return fe
}

func mustParse(t testing.TB, s string) Field {
	t.Helper()
	f, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustBuild(t testing.TB, schema *iceberg.Schema, prior []Spec, fields ...string) Spec {
	t.Helper()
	fs := make([]Field, len(fields))
	for i, s := range fields {
		fs[i] = mustParse(t, s)
	}
	spec, err := Build(schema, fs, prior)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// icebergBuilder is iceberg-go's metadata builder of a v2 table with schema s current.
func icebergBuilder(s *iceberg.Schema) (*table.MetadataBuilder, error) {
	b, err := table.NewMetadataBuilder(2)
	if err != nil {
		return nil, err
	}
	if err := b.AddSchema(iceberg.NewSchema(s.ID, s.Fields()...)); err != nil {
		return nil, err
	}
	return b, b.SetCurrentSchemaID(s.ID)
}

func bigInt(x int64) *big.Int { return big.NewInt(x) }

// unchecked is a spec of fields each as Build binds it alone, without the rules between
// fields (a second decimal-valued field): for what does not write manifests.
func unchecked(t testing.TB, schema *iceberg.Schema, fields ...string) Spec {
	t.Helper()
	var spec Spec
	for i, f := range fields {
		one := mustBuild(t, schema, nil, f)
		one.Fields[0].FieldID = FirstFieldID + i
		spec.Fields = append(spec.Fields, one.Fields[0])
	}
	return spec
}
