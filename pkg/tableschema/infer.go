package tableschema

import (
	"maps"
	"slices"

	"github.com/apache/iceberg-go"
)

// ColumnMinkUnfit is the column of an inferred JSON table that keeps what did not fit a
// column, as a JSON object of each value's path to its JSON text as written: a value
// whose type is not its column's, and a field past the inference bounds. It is null when
// everything fit. It comes just before the Kafka columns.
const ColumnMinkUnfit = "_mink_unfit"

// Bounds of inference (README, "Tables without a declared schema"). Past them a field is
// no column: it is kept in _mink_unfit.
const (
	// InferMaxColumns bounds the inferred fields of a table, nested ones included.
	InferMaxColumns = 500
	// InferMaxDepth bounds nesting: a field inside this many objects and lists is no column.
	InferMaxDepth = 8
	// InferMaxNameLen bounds a field's JSON key, in bytes.
	InferMaxNameLen = maxNameLen
	// InferMaxVersionsPerHour bounds the versions inference creates per table per hour
	// (by Postgres's clock); past it, new fields wait in _mink_unfit until the hour passes.
	InferMaxVersionsPerHour = 60
)

// Inference is what an inferred JSON table (created with no columns) keeps besides its
// Iceberg fields, which are its columns: the JSON key each field reads where its name is
// not the key (a sanitised name, a rename), and where the data first showed each
// top-level column. Both are by field id, which never changes.
type Inference struct {
	Keys  map[int]string `json:"keys,omitempty"`
	Since map[int]string `json:"since,omitempty"` // "partition P offset O" of the record that showed it
}

// Key is the JSON key field f reads.
func (in *Inference) Key(f iceberg.NestedField) string {
	if k, ok := in.Keys[f.ID]; ok {
		return k
	}
	return f.Name
}

// Clone copies in deeply.
func (in *Inference) Clone() *Inference {
	return &Inference{Keys: maps.Clone(in.Keys), Since: maps.Clone(in.Since)}
}

// Inferred reports whether the spec's columns are inferred from the records.
func (s Spec) Inferred() bool { return s.Infer != nil }

// InferredFields are the top-level fields of an inferred table's version: its columns
// (ids set), then _mink_unfit and the Kafka columns, numbered above lastID.
func InferredFields(columns []iceberg.NestedField, lastID int) []iceberg.NestedField {
	rest := append([]iceberg.NestedField{{Name: ColumnMinkUnfit, Type: iceberg.PrimitiveTypes.String}}, kafkaFields(nil)...)
	next := lastID
	nextID := func() int { next++; return next }
	for i := range rest {
		rest[i].ID = nextID()
	}
	for i := range rest {
		assignNested(rest[i].Type, nextID)
	}
	return slices.Concat(columns, rest)
}

// InferredColumns splits an inferred version's top-level fields: its columns (in
// order) and the position of _mink_unfit (-1 if none).
func InferredColumns(fields []iceberg.NestedField) (cols []int, unfit int) {
	unfit = -1
	for i, f := range fields {
		switch {
		case f.Name == ColumnMinkUnfit:
			unfit = i
		case !IsKafkaColumn(f.Name):
			cols = append(cols, i)
		}
	}
	return cols, unfit
}

// AssignIDs gives ids above lastID to what t contains, in Iceberg's fresh-id order; t's
// own field id is set by the caller.
func AssignIDs(t iceberg.Type, nextID func() int) { assignNested(t, nextID) }
