// Package tableschema holds what a Mink table is made of besides its topic: the record
// format, the columns the user declared or the Schema Registry subjects that describe
// them, and the Kafka columns every table has. It turns that into the table's Iceberg
// schema with stable field ids, and evolves it (Version, Merge, Alter) without ever
// changing an id. Decoding records lives in pkg/rowcodec and pkg/schemafmt; writing
// Parquet lives in pkg/parquetbuild.
package tableschema

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Format is how a table's record values are encoded.
type Format string

const (
	// FormatJSON: each value is one JSON object; declared columns are read from it.
	FormatJSON Format = "json"
	// FormatRaw: the value bytes are the one user column, "value".
	FormatRaw Format = "raw"
	// FormatAvro, FormatProtobuf and FormatJSONSchema: values written with a
	// Confluent-compatible Schema Registry; the columns come from the registry schema.
	FormatAvro       Format = "avro"
	FormatProtobuf   Format = "protobuf"
	FormatJSONSchema Format = "json_schema"
)

// Registry reports whether values of format f are described by a Schema Registry.
func (f Format) Registry() bool {
	return f == FormatAvro || f == FormatProtobuf || f == FormatJSONSchema
}

// SchemaMode is how a registry-format record names its schema.
type SchemaMode string

const (
	// ModePrefix: the Confluent wire format, magic byte 0 and a 4-byte schema id (and
	// for Protobuf the message indexes) before the encoded value. The default.
	ModePrefix SchemaMode = "prefix"
	// ModeLatest: the bare encoded value, decoded with the subject's latest version at
	// the time the record is indexed; the id used is recorded with the range.
	ModeLatest SchemaMode = "latest"
)

// Decoding is how values (or keys) of a registry format are decoded.
type Decoding struct {
	Format  Format     `json:"format"`
	Subject string     `json:"subject"`           // registry subject: <topic>-value by default
	Mode    SchemaMode `json:"mode"`              // prefix or latest
	Message string     `json:"message,omitempty"` // Protobuf: the message read, fully qualified; "" = the first
}

// ColumnKafkaKeyDecoded is the column of the decoded key, when the table has a key
// format: right after _kafka_key, which keeps the key's bytes.
const ColumnKafkaKeyDecoded = "_kafka_key_decoded"

// Column is one user-declared column of a JSON table.
type Column struct {
	// Name is the column's name in the table, [A-Za-z_][A-Za-z0-9_]*, unique ignoring
	// case (engines such as Spark resolve names case-insensitively).
	Name string `json:"name"`
	// Type is an Iceberg primitive type name (boolean, int, long, float, double,
	// decimal(P,S), date, time, timestamp, timestamptz, string, uuid, binary) or list<T>
	// of one of them.
	Type string `json:"type"`
	// Required makes a record whose value lacks this column (or has it null) a decode
	// error. The Iceberg column itself is always optional, because a record that fails
	// to decode is still a row, with every user column null.
	Required bool `json:"required,omitempty"`
	// JSONPath, when set, is a dotted path of object keys (user.id) where the value is
	// found, instead of the top-level key Name (ParseJSONPath). Keys containing dots
	// cannot be addressed.
	JSONPath string `json:"json_path,omitempty"`
}

// Path returns the object keys leading to the column's value in a JSON record. A path
// stored before ParseJSONPath's rules reads as it always did: split at its dots.
func (c Column) Path() []string {
	if c.JSONPath == "" {
		return []string{c.Name}
	}
	if keys, err := ParseJSONPath(c.JSONPath); err == nil {
		return keys
	}
	return strings.Split(c.JSONPath, ".")
}

// jsonPathSyntax are JSONPath's brackets and wildcard: in a json_path they are a JSONPath
// written where keys are meant, which would read nothing from any record. (@ and $ begin
// common keys: @timestamp, $oid.)
const jsonPathSyntax = "[]*"

// ParseJSONPath reads a json_path: object keys joined by dots (user.id), each key
// non-empty, without control characters, JSONPath's brackets and wildcard ([ ] *) or
// spaces at its ends, the first not "$" alone (JSONPath's root). It returns the keys from the outermost
// object in, or says what is wrong.
func ParseJSONPath(p string) ([]string, error) {
	switch {
	case len(p) > maxJSONPathLen:
		return nil, fmt.Errorf("longer than %d bytes", maxJSONPathLen)
	case !utf8.ValidString(p):
		return nil, fmt.Errorf("not valid UTF-8")
	case p == "$" || strings.HasPrefix(p, "$.") || strings.HasPrefix(p, "$["):
		return nil, fmt.Errorf(`a json_path is object keys joined by dots (user.id), not JSONPath: leave out the leading "$"`)
	}
	keys := strings.Split(p, ".")
	for _, k := range keys {
		switch {
		case k == "":
			return nil, fmt.Errorf("empty key (want dotted keys such as user.id)")
		case strings.IndexFunc(k, unicode.IsControl) >= 0:
			return nil, fmt.Errorf("control character in key %q", k)
		case strings.ContainsAny(k, jsonPathSyntax):
			return nil, fmt.Errorf("key %q holds %q: %s are JSONPath syntax, and a json_path is object keys joined by dots (user.id); a list is read whole by a list<T> column",
				k, k[strings.IndexAny(k, jsonPathSyntax)], "[ ] and *")
		case strings.TrimSpace(k) != k:
			return nil, fmt.Errorf("key %q begins or ends with a space", k)
		}
	}
	return keys, nil
}

// Spec is a table's record format and declared columns. It is stored as JSON (jsonb in
// Postgres) and read back identically.
//
// Format is the value format. Registry formats have no Columns; Value says which subject
// and mode their values use. Key, optional with any value format, decodes keys with a
// registry format into ColumnKafkaKeyDecoded.
type Spec struct {
	Format  Format    `json:"format"`
	Columns []Column  `json:"columns,omitempty"`
	Value   *Decoding `json:"value,omitempty"`
	Key     *Decoding `json:"key,omitempty"`
	// Infer, set on a JSON table created without columns, makes its columns follow the
	// records (pkg/jsoninfer): they are the version's Iceberg fields, not Columns.
	Infer *Inference `json:"infer,omitempty"`
}

// UnmarshalJSON reads a Spec, leaving Columns nil when there are none so that a stored
// spec reads back equal to the one that was written.
func (s *Spec) UnmarshalJSON(b []byte) error {
	type plain Spec // no methods: avoids recursing into this one
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if len(p.Columns) == 0 {
		p.Columns = nil
	}
	*s = Spec(p)
	return nil
}

// FieldError is a validation error naming the field at fault, in the form gRPC
// InvalidArgument messages use: `columns[1] ("msg"): unknown type "strng"`.
type FieldError struct {
	Field  string // e.g. `format`, `columns`, `columns[1] ("msg")`
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

const (
	maxNameLen     = 128
	maxJSONPathLen = 1024
	// MaxColumns bounds a JSON table's declared columns (README, "The admin API").
	MaxColumns = 1000
)

// Reserved column name prefixes: Mink's own columns use them.
var reservedPrefixes = []string{"_kafka_", "_mink_"}

// Validate checks the spec and returns the first problem as a *FieldError.
func (s Spec) Validate() error {
	switch s.Format {
	case FormatJSON:
		if s.Infer != nil && len(s.Columns) > 0 {
			return &FieldError{"columns", "an inferred JSON table declares no columns"}
		}
		if s.Infer == nil && len(s.Columns) == 0 {
			return &FieldError{"columns", "format json needs at least one column, or none at all to infer them from the records"}
		}
	case FormatRaw:
		if len(s.Columns) > 0 {
			return &FieldError{"columns", `format raw takes no declared columns (its one user column is "value")`}
		}
	case FormatAvro, FormatProtobuf, FormatJSONSchema:
		if len(s.Columns) > 0 {
			return &FieldError{"columns", fmt.Sprintf("format %s takes its columns from the schema registry; declare none", s.Format)}
		}
		if s.Value == nil {
			return &FieldError{"value_subject", fmt.Sprintf("format %s needs a registry subject", s.Format)}
		}
		if s.Value.Format != s.Format {
			return &FieldError{"format", fmt.Sprintf("value decoding format %s differs from the table format %s", s.Value.Format, s.Format)}
		}
		if err := s.Value.validate("value_subject", "value_schema_mode", "message"); err != nil {
			return err
		}
	case "":
		return &FieldError{"format", "required (json, raw, avro, protobuf or json_schema)"}
	default:
		return &FieldError{"format", fmt.Sprintf("unknown format %q (want json, raw, avro, protobuf or json_schema)", string(s.Format))}
	}
	if s.Infer != nil && s.Format != FormatJSON {
		return &FieldError{"format", fmt.Sprintf("only JSON tables infer their columns, not %s", s.Format)}
	}
	if !s.Format.Registry() && s.Value != nil {
		return &FieldError{"value_subject", fmt.Sprintf("format %s reads no registry subject", s.Format)}
	}
	if s.Key != nil {
		if !s.Key.Format.Registry() {
			return &FieldError{"key_format", fmt.Sprintf("key format %q is not a registry format (want avro, protobuf or json_schema)", string(s.Key.Format))}
		}
		if err := s.Key.validate("key_subject", "key_schema_mode", "key_message"); err != nil {
			return err
		}
	}

	if len(s.Columns) > MaxColumns {
		return &FieldError{"columns", fmt.Sprintf("%d columns: a table declares at most %d", len(s.Columns), MaxColumns)}
	}
	byLowerName := make(map[string]int, len(s.Columns))
	byPath := make(map[string]int, len(s.Columns))
	for i, c := range s.Columns {
		field := columnField(i, c)
		if err := validateName(c.Name); err != nil {
			return &FieldError{field, err.Error()}
		}
		lower := strings.ToLower(c.Name)
		if j, dup := byLowerName[lower]; dup {
			return &FieldError{field, fmt.Sprintf("duplicate name: %s has the same name ignoring case", columnField(j, s.Columns[j]))}
		}
		byLowerName[lower] = i

		if _, _, err := parseType(c.Type); err != nil {
			return &FieldError{field, err.Error()}
		}

		if c.JSONPath != "" {
			if _, err := ParseJSONPath(c.JSONPath); err != nil {
				return &FieldError{field, fmt.Sprintf("json_path %q: %v", c.JSONPath, err)}
			}
		}
		// Two columns reading the same key, or one reading inside a key another reads
		// whole, would make one record decode two ways; reject both.
		path := c.Path()
		for k := 1; k <= len(path); k++ {
			prefix := strings.Join(path[:k], ".")
			j, taken := byPath[prefix]
			if !taken {
				continue
			}
			if k == len(path) {
				return &FieldError{field, fmt.Sprintf("json path %q is already read by %s", prefix, columnField(j, s.Columns[j]))}
			}
			return &FieldError{field, fmt.Sprintf("json path %q lies inside %q, which %s reads", strings.Join(path, "."), prefix, columnField(j, s.Columns[j]))}
		}
		full := strings.Join(path, ".")
		for p, j := range byPath {
			if strings.HasPrefix(p, full+".") {
				return &FieldError{field, fmt.Sprintf("json path %q contains %q, which %s reads", full, p, columnField(j, s.Columns[j]))}
			}
		}
		byPath[full] = i
	}
	return nil
}

// maxSubjectLen bounds registry subject names (the registry itself allows more; nobody
// needs it).
const maxSubjectLen = 1024

func (d *Decoding) validate(subjectField, modeField, messageField string) error {
	switch {
	case d.Subject == "":
		return &FieldError{subjectField, "empty"}
	case len(d.Subject) > maxSubjectLen:
		return &FieldError{subjectField, fmt.Sprintf("longer than %d bytes", maxSubjectLen)}
	case !utf8.ValidString(d.Subject) || strings.IndexFunc(d.Subject, unicode.IsControl) >= 0:
		return &FieldError{subjectField, fmt.Sprintf("%q is not a subject name", d.Subject)}
	}
	if d.Mode != ModePrefix && d.Mode != ModeLatest {
		return &FieldError{modeField, fmt.Sprintf("unknown schema mode %q (want prefix or latest)", string(d.Mode))}
	}
	if d.Message != "" && d.Format != FormatProtobuf {
		return &FieldError{messageField, fmt.Sprintf("only Protobuf schemas have messages to pick, not %s", d.Format)}
	}
	if len(d.Message) > maxNameLen*4 || strings.IndexFunc(d.Message, func(r rune) bool {
		return !(r == '.' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}) >= 0 {
		return &FieldError{messageField, fmt.Sprintf("%q is not a fully qualified message name (acme.orders.v1.Order)", d.Message)}
	}
	return nil
}

func columnField(i int, c Column) string {
	if c.Name == "" {
		return fmt.Sprintf("columns[%d]", i)
	}
	return fmt.Sprintf("columns[%d] (%q)", i, c.Name)
}

func validateName(name string) error {
	if name == "" {
		return fmt.Errorf("name is empty")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("name is longer than %d bytes", maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || (i > 0 && '0' <= c && c <= '9')
		if !ok {
			return fmt.Errorf("name must match [A-Za-z_][A-Za-z0-9_]* (use json_path to read other keys)")
		}
	}
	lower := strings.ToLower(name)
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(lower, p) {
			return fmt.Errorf("names starting with %s are reserved", p)
		}
	}
	return nil
}
