package tableschema

import (
	"fmt"
	"strings"

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

// SchemaID is the Iceberg schema id of a table's first version.
const SchemaID = 0

// UserColumnCount is the number of top-level columns before the Kafka columns: the
// declared columns, or 1 ("value") for a raw table.
func (s Spec) UserColumnCount() int {
	if s.Format == FormatRaw {
		return 1
	}
	return len(s.Columns)
}

// Fields returns the top-level Iceberg fields of version 0 of a JSON or raw table without
// a key format: the user columns, then the Kafka columns. Tables whose columns come from
// a Schema Registry have their fields from Compose (their versions are stored).
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
	if s.Format.Registry() || s.Key != nil {
		return nil, fmt.Errorf("tableschema: a %s table with a key format %v has its fields from the schema registry (Compose)", s.Format, s.Key != nil)
	}
	return Compose(s, nil, nil)
}

// Compose returns the top-level fields of a table's first version, with ids in the frozen
// order of Fields: the value columns, then the Kafka columns (with ColumnKafkaKeyDecoded
// after _kafka_key when the spec has a key format). value is the value schema's Root for
// registry formats (nil for JSON and raw: the declared columns, or "value"); a struct
// root's fields become the columns, any other root is the type of the one column
// "value". key is the key schema's Root when the spec has a key format. Neither is
// modified. Column names must be valid (ValidateNames).
func Compose(s Spec, value, key iceberg.Type) ([]iceberg.NestedField, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Format.Registry() != (value != nil) {
		return nil, fmt.Errorf("tableschema: format %s: value type %v given", s.Format, value != nil)
	}
	if (s.Key != nil) != (key != nil) {
		return nil, fmt.Errorf("tableschema: key format %v: key type %v given", s.Key != nil, key != nil)
	}
	var fields []iceberg.NestedField
	switch {
	case s.Format == FormatRaw:
		fields = append(fields, iceberg.NestedField{Name: ColumnRawValue, Type: iceberg.PrimitiveTypes.Binary})
	case s.Format.Registry():
		fields = append(fields, valueFields(value)...)
		if err := ValidateNames(fields); err != nil {
			return nil, err
		}
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
	fields = append(fields, kafkaFields(key)...)

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

// valueFields are the top-level fields of a value root, ids unset, copied.
func valueFields(root iceberg.Type) []iceberg.NestedField {
	if st, ok := root.(*iceberg.StructType); ok {
		out := make([]iceberg.NestedField, len(st.FieldList))
		for i, f := range st.FieldList {
			out[i] = iceberg.NestedField{Name: f.Name, Type: cloneType(f.Type), Required: f.Required}
		}
		return out
	}
	return []iceberg.NestedField{{Name: ColumnRawValue, Type: cloneType(root)}}
}

// kafkaFields are the Kafka columns, ids unset; key is the decoded key's type or nil.
func kafkaFields(key iceberg.Type) []iceberg.NestedField {
	fs := []iceberg.NestedField{
		{Name: ColumnKafkaPartition, Type: iceberg.PrimitiveTypes.Int32, Required: true},
		{Name: ColumnKafkaOffset, Type: iceberg.PrimitiveTypes.Int64, Required: true},
		{Name: ColumnKafkaTimestamp, Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		{Name: ColumnKafkaKey, Type: iceberg.PrimitiveTypes.Binary},
	}
	if key != nil {
		fs = append(fs, iceberg.NestedField{Name: ColumnKafkaKeyDecoded, Type: cloneType(key)})
	}
	return append(fs,
		iceberg.NestedField{Name: ColumnKafkaHeaders, Type: &iceberg.ListType{
			ElementRequired: true,
			Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
				{Name: HeaderKey, Type: iceberg.PrimitiveTypes.String, Required: true},
				{Name: HeaderValue, Type: iceberg.PrimitiveTypes.Binary},
			}},
		}},
		iceberg.NestedField{Name: ColumnMinkError, Type: iceberg.PrimitiveTypes.String},
	)
}

// IsKafkaColumn reports whether name is one of the columns Mink adds to every table.
func IsKafkaColumn(name string) bool {
	switch name {
	case ColumnKafkaPartition, ColumnKafkaOffset, ColumnKafkaTimestamp, ColumnKafkaKey,
		ColumnKafkaKeyDecoded, ColumnKafkaHeaders, ColumnMinkError:
		return true
	}
	return false
}

// ValidateNames checks the names of value columns taken from a registry schema: not
// empty, not starting with a reserved prefix, unique ignoring case (engines such as Spark
// resolve names case-insensitively). Nested field names may be anything.
func ValidateNames(fields []iceberg.NestedField) error {
	seen := map[string]string{}
	for _, f := range fields {
		if err := validColumnName(f.Name); err != nil {
			return err
		}
		lower := strings.ToLower(f.Name)
		if other, dup := seen[lower]; dup {
			return fmt.Errorf("columns %q and %q have the same name ignoring case", other, f.Name)
		}
		seen[lower] = f.Name
	}
	return nil
}

func validColumnName(name string) error {
	if name == "" {
		return fmt.Errorf("a field has an empty name")
	}
	lower := strings.ToLower(name)
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(lower, p) {
			return fmt.Errorf("field %q: names starting with %s are reserved for Mink's own columns", name, p)
		}
	}
	return nil
}

// cloneType copies t deeply, so that ids can be assigned to the copy.
func cloneType(t iceberg.Type) iceberg.Type {
	switch t := t.(type) {
	case *iceberg.StructType:
		out := &iceberg.StructType{FieldList: make([]iceberg.NestedField, len(t.FieldList))}
		for i, f := range t.FieldList {
			f.Type = cloneType(f.Type)
			out.FieldList[i] = f
		}
		return out
	case *iceberg.ListType:
		c := *t
		c.Element = cloneType(t.Element)
		return &c
	case *iceberg.MapType:
		c := *t
		c.KeyType = cloneType(t.KeyType)
		c.ValueType = cloneType(t.ValueType)
		return &c
	}
	return t
}

// assignNested gives ids to what t contains; t's own field already has one.
func assignNested(t iceberg.Type, nextID func() int) {
	switch t := t.(type) {
	case *iceberg.ListType:
		t.ElementID = nextID()
		assignNested(t.Element, nextID)
	case *iceberg.MapType:
		t.KeyID = nextID()
		t.ValueID = nextID()
		assignNested(t.KeyType, nextID)
		assignNested(t.ValueType, nextID)
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
