package tableschema

import (
	"github.com/apache/iceberg-go"
)

// Names of the columns Mink adds to every table, after the user columns, in this order.
const (
	ColumnKafkaPartition = "_kafka_partition" // int, required
	ColumnKafkaOffset    = "_kafka_offset"    // long, required
	ColumnKafkaTimestamp = "_kafka_timestamp" // timestamptz, required
	ColumnKafkaKey       = "_kafka_key"       // binary, null when the record has no key
	ColumnKafkaHeaders   = "_kafka_headers"   // list<struct<key string, value binary>>, order kept
	ColumnMinkError      = "_mink_error"      // string: null when the record decoded, else why not

	// HeaderKey and HeaderValue name the fields of a _kafka_headers element.
	HeaderKey   = "key"
	HeaderValue = "value"

	// ColumnRawValue is the one user column of a raw table: the record value bytes.
	ColumnRawValue = "value"
)

// KafkaColumnCount is the number of columns after the user columns.
const KafkaColumnCount = 6

// SchemaID is the id of the one schema a table has.
const SchemaID = 0

// UserColumnCount is the number of top-level columns before the Kafka columns: the
// declared columns, or 1 ("value") for a raw table.
func (s Spec) UserColumnCount() int {
	if s.Format == FormatRaw {
		return 1
	}
	return len(s.Columns)
}

// Fields returns the table's top-level Iceberg fields in order: the user columns, then
// the Kafka columns. The spec must be valid.
//
// Field ids are part of every data file and manifest ever written, so their assignment is
// frozen: top-level fields get 1..m in order; then, walking the top-level fields in order,
// each list gets the next id for its element, and a struct element gets the next ids for
// its fields in order (Iceberg's own fresh-id order). For example, with one declared
// column tags list<string>: tags=1, _kafka_partition=2 ... _mink_error=7, tags.element=8,
// _kafka_headers.element=9, key=10, value=11.
//
// User columns are optional in Iceberg even when Required, because a record that fails to
// decode is still a row with every user column null.
func (s Spec) Fields() ([]iceberg.NestedField, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var fields []iceberg.NestedField
	if s.Format == FormatRaw {
		fields = append(fields, iceberg.NestedField{Name: ColumnRawValue, Type: iceberg.PrimitiveTypes.Binary})
	}
	for _, c := range s.Columns {
		elem, list, err := parseType(c.Type)
		if err != nil {
			return nil, err // unreachable after Validate
		}
		var t iceberg.Type = elem
		if list {
			t = &iceberg.ListType{Element: elem}
		}
		fields = append(fields, iceberg.NestedField{Name: c.Name, Type: t})
	}
	fields = append(fields,
		iceberg.NestedField{Name: ColumnKafkaPartition, Type: iceberg.PrimitiveTypes.Int32, Required: true},
		iceberg.NestedField{Name: ColumnKafkaOffset, Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{Name: ColumnKafkaTimestamp, Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{Name: ColumnKafkaKey, Type: iceberg.PrimitiveTypes.Binary},
		iceberg.NestedField{Name: ColumnKafkaHeaders, Type: &iceberg.ListType{
			ElementRequired: true,
			Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
				{Name: HeaderKey, Type: iceberg.PrimitiveTypes.String, Required: true},
				{Name: HeaderValue, Type: iceberg.PrimitiveTypes.Binary},
			}},
		}},
		iceberg.NestedField{Name: ColumnMinkError, Type: iceberg.PrimitiveTypes.String},
	)

	next := 0
	nextID := func() int { next++; return next }
	for i := range fields {
		fields[i].ID = nextID()
	}
	for i := range fields {
		assignNested(fields[i].Type, nextID)
	}
	return fields, nil
}

// assignNested gives ids to what t contains; t's own field already has one.
func assignNested(t iceberg.Type, nextID func() int) {
	switch t := t.(type) {
	case *iceberg.ListType:
		t.ElementID = nextID()
		assignNested(t.Element, nextID)
	case *iceberg.StructType:
		for i := range t.FieldList {
			t.FieldList[i].ID = nextID()
		}
		for i := range t.FieldList {
			assignNested(t.FieldList[i].Type, nextID)
		}
	}
}

// IcebergSchema returns the table's Iceberg schema (id 0) with the fields of Fields.
func (s Spec) IcebergSchema() (*iceberg.Schema, error) {
	fields, err := s.Fields()
	if err != nil {
		return nil, err
	}
	return iceberg.NewSchema(SchemaID, fields...), nil
}
