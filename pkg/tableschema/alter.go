package tableschema

import (
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
)

// ColumnChange is one change AlterTable makes to a JSON table's declared columns. Exactly
// one field is set.
type ColumnChange struct {
	Add      *Column // a new column, after the others
	Widen    *Widen  // a wider type for a column: int→long, float→double, decimal(P,S)→decimal(P2,S), also in lists
	Optional string  // the column to make optional: a record without it is no longer an error
	Rename   *Rename // a new name; the Iceberg field id (and so every file) is kept
}

// Widen gives column Name the type Type.
type Widen struct{ Name, Type string }

// Rename renames column Name to NewName.
type Rename struct{ Name, NewName string }

// Alter returns the spec and top-level fields of the version after changes, applied in
// order, to a JSON table: field ids are kept; an added column gets ids above lastID. A
// renamed column without a json_path reads the JSON key it read before (its old name),
// so renaming never changes what is read. Errors are *FieldError naming the change.
func (v Version) Alter(changes []ColumnChange, lastID int) (Spec, []iceberg.NestedField, error) {
	if v.Spec.Infer != nil {
		return v.alterInferred(changes, lastID)
	}
	if v.Spec.Format != FormatJSON {
		return Spec{}, nil, &FieldError{"changes", fmt.Sprintf("only JSON tables with declared columns have columns to change; a %s table's follow its schema registry subject", v.Spec.Format)}
	}
	spec := v.Spec
	spec.Columns = slices.Clone(spec.Columns)
	fields := slices.Clone(v.Schema.Fields())
	next := lastID
	nextID := func() int { next++; return next }
	find := func(name string) int {
		return slices.IndexFunc(spec.Columns, func(c Column) bool { return c.Name == name })
	}
	for i, ch := range changes {
		field := fmt.Sprintf("changes[%d]", i)
		bad := func(format string, args ...any) error {
			return &FieldError{field, fmt.Sprintf(format, args...)}
		}
		n := 0
		for _, set := range []bool{ch.Add != nil, ch.Widen != nil, ch.Optional != "", ch.Rename != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return Spec{}, nil, bad("want exactly one of add, widen, optional, rename")
		}
		switch {
		case ch.Add != nil:
			c := *ch.Add
			elem, list, err := parseType(c.Type)
			if err != nil {
				return Spec{}, nil, bad("add %q: %v", c.Name, err)
			}
			spec.Columns = append(spec.Columns, c)
			var t iceberg.Type = elem
			if list {
				t = &iceberg.ListType{Element: elem}
			}
			f := iceberg.NestedField{Name: c.Name, Type: t, ID: nextID()}
			assignNested(f.Type, nextID)
			fields = slices.Insert(fields, len(spec.Columns)-1, f)

		case ch.Widen != nil:
			j := find(ch.Widen.Name)
			if j < 0 {
				return Spec{}, nil, bad("widen: no column %q", ch.Widen.Name)
			}
			oldElem, oldList, _ := parseType(spec.Columns[j].Type)
			elem, list, err := parseType(ch.Widen.Type)
			if err != nil {
				return Spec{}, nil, bad("widen %q: %v", ch.Widen.Name, err)
			}
			if list != oldList || !Promotable(oldElem, elem) {
				return Spec{}, nil, bad("widen %q: %s cannot become %s (Iceberg widens int to long, float to double, decimal(P,S) to decimal(P2,S) with P2 >= P)",
					ch.Widen.Name, spec.Columns[j].Type, ch.Widen.Type)
			}
			spec.Columns[j].Type = ch.Widen.Type
			if l, ok := fields[j].Type.(*iceberg.ListType); ok {
				nl := *l
				nl.Element = elem
				fields[j].Type = &nl
			} else {
				fields[j].Type = elem
			}

		case ch.Optional != "":
			j := find(ch.Optional)
			if j < 0 {
				return Spec{}, nil, bad("optional: no column %q", ch.Optional)
			}
			// The Iceberg column is optional already (error rows are null); only the
			// decode-time check goes.
			spec.Columns[j].Required = false

		case ch.Rename != nil:
			j := find(ch.Rename.Name)
			if j < 0 {
				return Spec{}, nil, bad("rename: no column %q", ch.Rename.Name)
			}
			c := &spec.Columns[j]
			if c.JSONPath == "" {
				c.JSONPath = c.Name
			}
			c.Name = ch.Rename.NewName
			fields[j].Name = ch.Rename.NewName
		}
		if err := spec.Validate(); err != nil {
			return Spec{}, nil, bad("%v", err)
		}
	}
	return spec, fields, nil
}
