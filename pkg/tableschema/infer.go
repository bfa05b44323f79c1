package tableschema

import (
	"fmt"
	"maps"
	"slices"
	"strings"

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

// alterInferred is Alter of an inferred table: its columns are its fields. Rename keeps
// the JSON key read (and the field id); make optional changes nothing (every inferred
// column is optional); widen follows Iceberg's promotions; add pins a column's type
// before the data shows it (boolean, long, double, string or a list of one), reading
// the key json_path or its name.
func (v Version) alterInferred(changes []ColumnChange, lastID int) (Spec, []iceberg.NestedField, error) {
	spec := v.Spec
	spec.Infer = v.Spec.Infer.Clone()
	fields := slices.Clone(v.Schema.Fields())
	next := lastID
	find := func(name string) int {
		cols, _ := InferredColumns(fields)
		for _, i := range cols {
			if fields[i].Name == name {
				return i
			}
		}
		return -1
	}
	for i, ch := range changes {
		bad := func(format string, args ...any) error {
			return &FieldError{fmt.Sprintf("changes[%d]", i), fmt.Sprintf(format, args...)}
		}
		taken := func(name string) error {
			if err := validateName(name); err != nil {
				return err
			}
			for _, f := range fields {
				if strings.EqualFold(f.Name, name) {
					return fmt.Errorf("a column %q exists already (names are unique ignoring case)", f.Name)
				}
			}
			return nil
		}
		switch {
		case ch.Rename != nil:
			j := find(ch.Rename.Name)
			if j < 0 {
				return Spec{}, nil, bad("rename: no column %q", ch.Rename.Name)
			}
			if err := taken(ch.Rename.NewName); err != nil {
				return Spec{}, nil, bad("rename %q: %v", ch.Rename.Name, err)
			}
			key := spec.Infer.Key(fields[j])
			if spec.Infer.Keys == nil {
				spec.Infer.Keys = map[int]string{}
			}
			spec.Infer.Keys[fields[j].ID] = key
			fields[j].Name = ch.Rename.NewName
		case ch.Optional != "":
			if find(ch.Optional) < 0 {
				return Spec{}, nil, bad("optional: no column %q", ch.Optional)
			}
		case ch.Widen != nil:
			j := find(ch.Widen.Name)
			if j < 0 {
				return Spec{}, nil, bad("widen: no column %q", ch.Widen.Name)
			}
			to, list, err := parseType(ch.Widen.Type)
			if err != nil {
				return Spec{}, nil, bad("widen %q: %v", ch.Widen.Name, err)
			}
			cur := fields[j].Type
			if l, ok := cur.(*iceberg.ListType); ok == list && ok {
				cur = l.Element
			}
			if _, isList := fields[j].Type.(*iceberg.ListType); isList != list || !Promotable(cur, to) {
				return Spec{}, nil, bad("widen %q: %s cannot become %s (Iceberg widens int to long, float to double, decimal(P,S) to decimal(P2,S))", ch.Widen.Name, fields[j].Type, ch.Widen.Type)
			}
			if l, ok := fields[j].Type.(*iceberg.ListType); ok {
				nl := *l
				nl.Element = to
				fields[j].Type = &nl
			} else {
				fields[j].Type = to
			}
		case ch.Add != nil:
			c := *ch.Add
			if c.Required {
				return Spec{}, nil, bad("add %q: an inferred table's columns are optional", c.Name)
			}
			elem, list, err := parseType(c.Type)
			if err != nil {
				return Spec{}, nil, bad("add %q: %v", c.Name, err)
			}
			switch elem.(type) {
			case iceberg.BooleanType, iceberg.Int64Type, iceberg.Float64Type, iceberg.StringType:
			default:
				return Spec{}, nil, bad("add %q: an inferred table reads boolean, long, double and string (and lists of them), not %s", c.Name, c.Type)
			}
			if err := taken(c.Name); err != nil {
				return Spec{}, nil, bad("add %q: %v", c.Name, err)
			}
			key := c.Name
			if c.JSONPath != "" {
				key = c.JSONPath // one top-level key: nested fields come from the data
			}
			var t iceberg.Type = elem
			if list {
				next++
				t = &iceberg.ListType{ElementID: next, Element: elem}
			}
			next++
			f := iceberg.NestedField{ID: next, Name: c.Name, Type: t}
			for _, g := range fields {
				if spec.Infer.Key(g) == key && !IsKafkaColumn(g.Name) && g.Name != ColumnMinkUnfit {
					return Spec{}, nil, bad("add %q: column %q reads key %q already", c.Name, g.Name, key)
				}
			}
			if key != c.Name {
				if spec.Infer.Keys == nil {
					spec.Infer.Keys = map[int]string{}
				}
				spec.Infer.Keys[f.ID] = key
			}
			_, unfit := InferredColumns(fields)
			fields = slices.Insert(fields, unfit, f)
		default:
			return Spec{}, nil, bad("want exactly one of add, widen, optional, rename")
		}
	}
	return spec, fields, nil
}
