package partition

import (
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/tableschema"
)

// Spec is a partition spec bound to a table's schema, in Iceberg's JSON form (as table
// metadata's partition-specs list it): source columns by field id, so that renaming a
// column keeps its partitioning.
type Spec struct {
	ID     int         `json:"spec-id"`
	Fields []SpecField `json:"fields"`
}

// SpecField is one field of a Spec.
type SpecField struct {
	SourceID  int       `json:"source-id"`
	FieldID   int       `json:"field-id"` // from 1000, unique across a table's specs
	Name      string    `json:"name"`
	Transform Transform `json:"transform"`
}

const (
	// FirstFieldID is the id of the first partition field of a table, as Iceberg
	// numbers them.
	FirstFieldID = iceberg.PartitionDataIDStart
	// MaxFields bounds the fields of a spec: each is a directory level of a file's key
	// and a value in every manifest entry.
	MaxFields = 16
	// MaxTuplesPerRange bounds the partition tuples of one indexed range: a range is
	// one file per tuple, all built at once while it is measured. The indexer is to cut
	// a range before the record that would add a tuple past it, that record beginning
	// the next range (not built yet: docs/design/partition-specs.md). Build refuses a
	// spec whose buckets alone make more.
	MaxTuplesPerRange = 256
	maxNameLen        = 128
)

// Equal reports whether s and o have the same fields (ids, names, sources and
// transforms), whatever their spec ids.
func (s Spec) Equal(o Spec) bool { return slices.Equal(s.Fields, o.Fields) }

// Unpartitioned reports whether every row of the spec falls in one tuple.
func (s Spec) Unpartitioned() bool {
	for _, f := range s.Fields {
		if f.Transform.Kind != Void {
			return false
		}
	}
	return true
}

// Iceberg is the spec as iceberg-go has it, bound to schema (which must hold every
// source column). It is how table metadata lists the spec.
func (s Spec) Iceberg(schema *iceberg.Schema) (iceberg.PartitionSpec, error) {
	opts := []iceberg.PartitionOption{iceberg.WithSpecID(s.ID)}
	for _, f := range s.Fields {
		id := f.FieldID
		opts = append(opts, iceberg.AddPartitionFieldBySourceID(f.SourceID, f.Name, f.Transform.Iceberg(), schema, &id))
	}
	spec, err := iceberg.NewPartitionSpecOpts(opts...)
	if err != nil {
		return iceberg.PartitionSpec{}, fmt.Errorf("partition: spec %d: %w", s.ID, err)
	}
	return spec, nil
}

// Describe is the spec's fields as users write them, with the columns as schema names
// them now; a column the schema no longer has reads as its field id (#7).
func (s Spec) Describe(schema *iceberg.Schema) []Field {
	out := make([]Field, len(s.Fields))
	for i, f := range s.Fields {
		col, ok := schema.FindColumnName(f.SourceID)
		if !ok {
			col = fmt.Sprintf("#%d", f.SourceID)
		}
		out[i] = Field{Column: col, Transform: f.Transform, Name: f.Name}
	}
	return out
}

// KafkaPartitionSpec is the spec of a table created without one: identity on
// _kafka_partition, what every Mink table had before partition specs.
func KafkaPartitionSpec(schema *iceberg.Schema) (Spec, error) {
	return Build(schema, []Field{{Column: tableschema.ColumnKafkaPartition, Transform: Transform{Kind: Identity}}}, nil)
}

// DefaultName is the name Iceberg gives a field without one (as Java's
// PartitionSpec.Builder, which Spark's CREATE TABLE uses, and the spec's examples name
// them): the source column for identity, else the column and _year, _month, _day,
// _hour, _bucket, _trunc or _null. Characters an Avro name cannot hold become _
// (user.id → user_id), since manifests carry partition names as Avro field names.
func DefaultName(column string, t Transform) string {
	suffix := map[Kind]string{Year: "_year", Month: "_month", Day: "_day", Hour: "_hour",
		Bucket: "_bucket", Truncate: "_trunc", Void: "_null"}[t.Kind]
	return avroName(column) + suffix
}

// avroName replaces what an Avro name cannot hold ([A-Za-z_][A-Za-z0-9_]*) with _.
func avroName(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
		default:
			r = '_'
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// checkName checks a partition field's name: an Avro name, since manifests carry it as
// one (iceberg-go writes names as they are).
func checkName(name string) error {
	if len(name) > maxNameLen {
		return fmt.Errorf("name is longer than %d bytes", maxNameLen)
	}
	if avroName(name) != name || name == "" {
		return fmt.Errorf("name %q must match [A-Za-z_][A-Za-z0-9_]* (manifests carry it as an Avro field name)", name)
	}
	return nil
}

// label names the i-th field in errors, as tableschema's columns are named:
// partition_spec[1] ("bucket[16](customer_id)").
func label(i int, f Field) string {
	return fmt.Sprintf("partition_spec[%d] (%q)", i, f.String())
}

// Build binds fields to schema, the table's current schema, as the next spec of a
// table whose specs so far are prior (none for a new table). It checks every field
// and returns the first problem as a *tableschema.FieldError naming the field:
// unknown column, a column inside a list or map, a struct, list or map column, a
// transform not defined for the column's type, a repeated name or field, a name taken
// by another column, two decimal-valued fields, a spec of more than MaxFields fields or
// with buckets making more than MaxTuplesPerRange tuples.
//
// Field ids are reused from prior specs for the same source and transform, new ones
// follow the largest so far; a spec with the same fields as a prior one is that spec
// (its id), as Iceberg's reference implementation reuses specs. Otherwise the spec's
// id follows the largest prior one.
func Build(schema *iceberg.Schema, fields []Field, prior []Spec) (Spec, error) {
	if len(fields) > MaxFields {
		return Spec{}, &tableschema.FieldError{Field: "partition_spec", Reason: fmt.Sprintf("%d fields: a spec has at most %d", len(fields), MaxFields)}
	}
	out := Spec{Fields: make([]SpecField, 0, len(fields))}
	names := map[string]int{}
	tuples, decimal := 1, -1
	for i, f := range fields {
		at := label(i, f)
		fail := func(format string, args ...any) error {
			return &tableschema.FieldError{Field: at, Reason: fmt.Sprintf(format, args...)}
		}
		if err := f.Transform.check(); err != nil {
			return Spec{}, fail("%v", err)
		}
		src, column, _, err := resolve(schema, f.Column)
		if err != nil {
			return Spec{}, fail("%v", err)
		}
		if _, ok := src.Type.(iceberg.PrimitiveType); !ok || !f.Transform.Applies(src.Type) {
			return Spec{}, fail("%s", notDefined(f, src.Type))
		}
		if err := checkDecimalWidth(f.Transform, src.Type); err != nil {
			return Spec{}, fail("%v", err)
		}
		if column == tableschema.ColumnKafkaOffset && f.Transform.Kind == Identity {
			return Spec{}, fail("identity of %s puts every record in a partition of its own (a file per record); use truncate[W] or bucket[N] of it, or no partition by offset", column)
		}
		name := f.Name
		if name == "" {
			name = DefaultName(column, f.Transform)
		}
		if err := checkName(name); err != nil {
			return Spec{}, fail("%v", err)
		}
		lower := strings.ToLower(name)
		if j, dup := names[lower]; dup {
			return Spec{}, fail("name %q is taken by %s (names compare ignoring case); give one of them another with AS", name, label(j, fields[j]))
		}
		names[lower] = i
		if col, ok := schema.FindFieldByNameCaseInsensitive(name); ok && (f.Transform.Kind != Identity || col.ID != src.ID) {
			return Spec{}, fail("name %q is a column's; a partition field may take only its own source column's name, and only for identity", name)
		}
		for j, g := range out.Fields {
			if g.SourceID != src.ID || g.Transform.Kind == Void || f.Transform.Kind == Void {
				continue
			}
			if g.Transform == f.Transform {
				return Spec{}, fail("repeats %s", label(j, fields[j]))
			}
			if g.Transform.isTime() && f.Transform.isTime() {
				return Spec{}, fail("%s already partitions %s by %s: a column takes one of year, month, day and hour", label(j, fields[j]), formatColumn(column), g.Transform)
			}
		}
		if _, ok := f.Transform.ResultType(src.Type).(iceberg.DecimalType); ok {
			// iceberg-go (v0.7.0), which writes Mink's manifests, names every decimal
			// partition value's Avro type "fixed" and fails on a second one.
			if decimal >= 0 {
				return Spec{}, fail("%s is decimal-valued already: a spec holds one decimal partition value (identity, truncate or void of a decimal column); bucket[N] of this one would do", label(decimal, fields[decimal]))
			}
			decimal = i
		}
		if f.Transform.Kind == Bucket {
			if tuples *= f.Transform.Arg; tuples > MaxTuplesPerRange {
				return Spec{}, fail("its buckets make up to %d partition tuples per range, more than the %d a range holds (ranges would be cut to a few records each); use fewer buckets", tuples, MaxTuplesPerRange)
			}
		}
		out.Fields = append(out.Fields, SpecField{SourceID: src.ID, Name: name, Transform: f.Transform})
	}
	assignIDs(&out, prior)
	return out, nil
}

// assignIDs gives s its field ids and its spec id, reusing prior ones (Build).
func assignIDs(s *Spec, prior []Spec) {
	last, lastSpec := FirstFieldID-1, -1
	for _, p := range prior {
		lastSpec = max(lastSpec, p.ID)
		for _, f := range p.Fields {
			last = max(last, f.FieldID)
		}
	}
	for i := range s.Fields {
		f := &s.Fields[i]
		f.FieldID = 0
		for j := len(prior) - 1; j >= 0 && f.FieldID == 0; j-- {
			for _, g := range prior[j].Fields {
				if g.SourceID == f.SourceID && g.Transform == f.Transform {
					f.FieldID = g.FieldID
					break
				}
			}
		}
		if f.FieldID == 0 {
			last++
			f.FieldID = last
		}
	}
	for _, p := range prior {
		if p.Equal(*s) {
			s.ID = p.ID
			return
		}
	}
	s.ID = lastSpec + 1
}

// notDefined says that f's transform does not apply to a column of type typ, and what
// would.
func notDefined(f Field, typ iceberg.Type) string {
	col := formatColumn(f.Column)
	switch typ.(type) {
	case *iceberg.StructType:
		return fmt.Sprintf("%s is a struct: partition by one of its fields (%s.<field>)", col, col)
	case *iceberg.ListType, *iceberg.MapType:
		return fmt.Sprintf("%s is a %s: a partition source is a primitive column (in structs only)", col, typeName(typ))
	}
	msg := fmt.Sprintf("%s is defined for %s, and %s is %s", f.Transform.Kind, f.Transform.appliesTo(), col, typeName(typ))
	switch {
	case f.Transform.Kind == Hour && isType[iceberg.DateType](typ):
		msg += fmt.Sprintf(" (a date has no hours: day(%s))", col)
	case f.Transform.isTime():
		msg += " (time transforms read dates and timestamps; a string or number holding one needs a column of that type)"
	case f.Transform.Kind == Bucket && (isType[iceberg.Float32Type](typ) || isType[iceberg.Float64Type](typ) || isType[iceberg.BooleanType](typ)):
		msg += fmt.Sprintf(" (Iceberg does not hash %s; identity(%s) partitions by its values)", typeName(typ), col)
	case f.Transform.Kind == Truncate && (isType[iceberg.TimestampType](typ) || isType[iceberg.TimestampTzType](typ) || isType[iceberg.DateType](typ)):
		msg += fmt.Sprintf(" (to cut time to a unit use year, month, day or hour(%s))", col)
	}
	return msg
}

func isType[T iceberg.Type](t iceberg.Type) bool {
	_, ok := t.(T)
	return ok
}

// typeName is a type as messages name it: its Iceberg name, struct, list or map.
func typeName(t iceberg.Type) string {
	switch t.(type) {
	case *iceberg.StructType:
		return "a struct"
	case *iceberg.ListType:
		return "list"
	case *iceberg.MapType:
		return "map"
	}
	return strings.ReplaceAll(t.String(), " ", "")
}

// checkDecimalWidth refuses truncate[W] of a decimal whose truncated values may not fit
// the type's storage: truncating rounds down, so the smallest value, -(10^P-1), may
// become up to W-1 smaller, and manifests hold a decimal(P,S) value in the fixed
// number of bytes P needs.
func checkDecimalWidth(t Transform, typ iceberg.Type) error {
	d, ok := typ.(iceberg.DecimalType)
	if t.Kind != Truncate || !ok {
		return nil
	}
	// -(10^P-1) - (W-1) ≥ -2^(8n-1), the least value n bytes hold: W ≤ 2^(8n-1) - 10^P + 2.
	n := tableschema.DecimalBytes(d.Precision())
	room := new(big.Int).Lsh(big.NewInt(1), uint(8*n-1))
	room.Sub(room, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Precision())), nil))
	room.Add(room, big.NewInt(2))
	if big.NewInt(int64(t.Arg)).Cmp(room) > 0 {
		return fmt.Errorf("truncate[%d] of a decimal(%d,%d) could make values it cannot hold; use a width of at most %s", t.Arg, d.Precision(), d.Scale(), room)
	}
	return nil
}

// resolve finds column in schema: its field, its dotted name as the schema spells it,
// and the positions leading to it from the top-level field (a row's value index)
// through struct fields. Names match exactly, else ignoring case when only one field
// matches so.
func resolve(schema *iceberg.Schema, column string) (iceberg.NestedField, string, []int, error) {
	if column == "" {
		return iceberg.NestedField{}, "", nil, fmt.Errorf("no column given")
	}
	for _, fold := range []bool{false, true} {
		var found []match
		find(schema.Fields(), column, nil, fold, &found)
		switch len(found) {
		case 0:
			continue
		case 1:
			m := found[0]
			if m.err != nil {
				return iceberg.NestedField{}, "", nil, m.err
			}
			return m.field, m.name, m.path, nil
		}
		names := make([]string, len(found))
		for i, m := range found {
			names[i] = fmt.Sprintf("%q", m.name)
		}
		sort.Strings(names)
		return iceberg.NestedField{}, "", nil, fmt.Errorf("column %q is ambiguous: %s; write it as one of them", column, strings.Join(names, ", "))
	}
	return iceberg.NestedField{}, "", nil, unknownColumn(schema, column)
}

type match struct {
	field iceberg.NestedField
	path  []int
	name  string
	err   error // the path leads into a list or map
}

// find collects the fields of fields (and below, through structs) whose dotted name is
// rest. A name may itself hold dots, so each field whose name begins rest is tried.
func find(fields []iceberg.NestedField, rest string, path []int, fold bool, out *[]match) {
	for i, f := range fields {
		p := append(slices.Clip(path), i)
		name, tail, ok := cutName(rest, f.Name, fold)
		if !ok {
			continue
		}
		if tail == "" {
			*out = append(*out, match{field: f, path: p, name: name})
			continue
		}
		switch t := f.Type.(type) {
		case *iceberg.StructType:
			var below []match
			find(t.FieldList, tail, p, fold, &below)
			for _, m := range below {
				m.name = name + "." + m.name
				*out = append(*out, m)
			}
		case *iceberg.ListType, *iceberg.MapType:
			*out = append(*out, match{name: name, err: fmt.Errorf("%s is a %s: a partition source is a primitive column, inside structs only (not lists or maps)", formatColumn(name), typeName(t))})
		}
	}
}

// cutName reports whether rest is name, or name and "." and more; it returns the name
// as rest spells it and the more.
func cutName(rest, name string, fold bool) (string, string, bool) {
	if len(rest) < len(name) {
		return "", "", false
	}
	head := rest[:len(name)]
	if head != name && !(fold && strings.EqualFold(head, name)) {
		return "", "", false
	}
	switch {
	case len(rest) == len(name):
		return name, "", true
	case rest[len(name)] == '.' && len(rest) > len(name)+1:
		return name, rest[len(name)+1:], true
	}
	return "", "", false
}

// unknownColumn says that column is not in schema, and names the nearest ones.
func unknownColumn(schema *iceberg.Schema, column string) error {
	var near []string
	lower := strings.ToLower(column)
	for _, f := range schema.Fields() {
		walkNames(f, "", func(name string) {
			if d := tableschema.EditDistance(lower, strings.ToLower(name)); d <= 2 && len(column) > 2 || d <= max(1, len(name)/4) {
				near = append(near, formatColumn(name))
			}
		})
	}
	if len(near) > 5 {
		near = near[:5]
	}
	if len(near) == 0 {
		return fmt.Errorf("no column %s (the Kafka columns are %s, %s, %s and %s)", formatColumn(column),
			tableschema.ColumnKafkaTimestamp, tableschema.ColumnKafkaPartition, tableschema.ColumnKafkaKey, tableschema.ColumnKafkaOffset)
	}
	return fmt.Errorf("no column %s (did you mean %s?)", formatColumn(column), strings.Join(near, " or "))
}

// walkNames calls fn with the dotted name of f and of every field below it in structs.
func walkNames(f iceberg.NestedField, prefix string, fn func(string)) {
	name := prefix + f.Name
	fn(name)
	if st, ok := f.Type.(*iceberg.StructType); ok {
		for _, g := range st.FieldList {
			walkNames(g, name+".", fn)
		}
	}
}
