// Package protofmt is the Protobuf format of Mink's Schema Registry schemas: it compiles
// a registry schema (.proto source text with its references) with protocompile, maps the
// chosen message to an Iceberg type, and decodes the message's wire bytes (a record's
// payload after the Confluent prefix and message indexes) into rowcodec values.
//
// Design notes: docs/design/protobuf-mapping.md.
package protofmt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/minkhq/mink/pkg/schemafmt"
)

// Schema is a compiled Protobuf registry schema, read as one of its messages.
type Schema struct {
	file    protoreflect.FileDescriptor
	md      protoreflect.MessageDescriptor
	indexes []int
	root    *iceberg.StructType
}

var _ schemafmt.Schema = (*Schema)(nil)

// Compile compiles src, a .proto file's text with its imports as references, and
// chooses message, a fully qualified message name defined in that file ("" for the
// file's first message). It refuses recursive messages, naming them.
func Compile(src schemafmt.Source, message string) (_ *Schema, err error) {
	// Schema text comes from the registry: a compiler bug must not take the process down.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("compiling the Protobuf schema: the compiler failed: %v", r)
		}
	}()
	files := map[string]string{}
	if err := collectRefs(files, src.References); err != nil {
		return nil, err
	}
	rootName := "schema.proto"
	for i := 1; ; i++ {
		if _, taken := files[rootName]; !taken {
			break
		}
		rootName = "schema~" + strconv.Itoa(i) + ".proto"
	}
	files[rootName] = src.Text

	// The standard imports come first: registries need no references for them, and
	// the well-known types must be the real ones for the mapping to apply.
	std := protocompile.WithStandardImports(protocompile.ResolverFunc(func(string) (protocompile.SearchResult, error) {
		return protocompile.SearchResult{}, fs.ErrNotExist
	}))
	resolve := func(path string) (protocompile.SearchResult, error) {
		if r, err := std.FindFileByPath(path); err == nil {
			return r, nil
		}
		if text, ok := files[path]; ok {
			return protocompile.SearchResult{Source: strings.NewReader(text)}, nil
		}
		return protocompile.SearchResult{}, errors.New("no reference has this name")
	}
	c := protocompile.Compiler{Resolver: protocompile.ResolverFunc(resolve), MaxParallelism: 1}
	compiled, err := c.Compile(context.Background(), rootName)
	if err != nil {
		return nil, fmt.Errorf("compiling the Protobuf schema: %w", err)
	}
	fd := protoreflect.FileDescriptor(compiled[0])

	md, err := chooseMessage(fd, message)
	if err != nil {
		return nil, err
	}
	if err := checkRecursion(md, map[protoreflect.FullName]bool{}, nil); err != nil {
		return nil, err
	}
	s := &Schema{file: fd, md: md, indexes: messageIndexes(md)}
	s.root = structType(md)
	return s, nil
}

// collectRefs adds the references and theirs, recursively, to files by import path.
func collectRefs(files map[string]string, refs []schemafmt.Reference) error {
	for _, r := range refs {
		if old, ok := files[r.Name]; ok {
			if old != r.Source.Text {
				return fmt.Errorf("the Protobuf schema's references give two different texts for %q", r.Name)
			}
			continue
		}
		files[r.Name] = r.Source.Text
		if err := collectRefs(files, r.Source.References); err != nil {
			return err
		}
	}
	return nil
}

// chooseMessage finds the message named name in fd, or fd's first message for "".
func chooseMessage(fd protoreflect.FileDescriptor, name string) (protoreflect.MessageDescriptor, error) {
	var all []protoreflect.MessageDescriptor
	var walk func(ms protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			if m.IsMapEntry() {
				continue
			}
			all = append(all, m)
			walk(m.Messages())
		}
	}
	walk(fd.Messages())
	if len(all) == 0 {
		return nil, errors.New("the Protobuf schema defines no message")
	}
	if name == "" {
		return fd.Messages().Get(0), nil
	}
	want := protoreflect.FullName(strings.TrimPrefix(name, "."))
	for _, m := range all {
		if m.FullName() == want {
			return m, nil
		}
	}
	names := make([]string, len(all))
	for i, m := range all {
		names[i] = string(m.FullName())
	}
	return nil, noSuchMessage{fmt.Errorf("message %q is not defined in the Protobuf schema, which defines: %s", name, strings.Join(names, ", "))}
}

// ErrNoSuchMessage: the message asked for is not in the schema (errors.Is of Compile's
// error), so that callers can blame the request field that named the message.
var ErrNoSuchMessage = errors.New("no such message")

type noSuchMessage struct{ error }

func (noSuchMessage) Is(target error) bool { return target == ErrNoSuchMessage }

// messageIndexes is md's Confluent message-index path: its index among the file's
// messages, then among its parent's nested messages (map entries count, as they are
// nested types in the descriptor), outermost first.
func messageIndexes(md protoreflect.MessageDescriptor) []int {
	var idx []int
	for d := protoreflect.Descriptor(md); ; d = d.Parent() {
		m, ok := d.(protoreflect.MessageDescriptor)
		if !ok {
			break
		}
		idx = append(idx, m.Index())
	}
	slices.Reverse(idx)
	return idx
}

// checkRecursion refuses a message that contains itself through its fields.
func checkRecursion(md protoreflect.MessageDescriptor, done map[protoreflect.FullName]bool, stack []protoreflect.FullName) error {
	name := md.FullName()
	if wkt(name) != wktNone || done[name] {
		return nil
	}
	if i := slices.Index(stack, name); i >= 0 {
		return fmt.Errorf("message %s is recursive (%s → %s): Mink cannot map a recursive message to a table",
			name, strings.Join(stackNames(stack[i:]), " → "), name)
	}
	stack = append(stack, name)
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		if f.IsMap() {
			f = f.MapValue()
		}
		if m := f.Message(); m != nil {
			if err := checkRecursion(m, done, stack); err != nil {
				return err
			}
		}
	}
	done[name] = true
	return nil
}

func stackNames(s []protoreflect.FullName) []string {
	out := make([]string, len(s))
	for i, n := range s {
		out[i] = string(n)
	}
	return out
}

// Root is the Iceberg type of the message (see the package doc).
func (s *Schema) Root() iceberg.Type { return s.root }

// Indexes is the Confluent message-index path of the chosen message: [0] for the
// file's first message, [1, 0] for the first nested message of the second. Callers
// must not modify it.
func (s *Schema) Indexes() []int { return s.indexes }

// Message is the chosen message's full name.
func (s *Schema) Message() string { return string(s.md.FullName()) }

// Descriptor is the chosen message's descriptor.
func (s *Schema) Descriptor() protoreflect.MessageDescriptor { return s.md }

// wktKind is how a well-known message type is mapped; wktNone for other messages.
type wktKind uint8

const (
	wktNone wktKind = iota
	wktTimestamp
	wktDuration
	wktDouble
	wktFloat
	wktInt64
	wktUInt64
	wktInt32
	wktUInt32
	wktBool
	wktString
	wktBytes
	wktStruct
	wktValue
	wktListValue
	wktAny
)

var wkts = map[protoreflect.FullName]wktKind{
	"google.protobuf.Timestamp":   wktTimestamp,
	"google.protobuf.Duration":    wktDuration,
	"google.protobuf.DoubleValue": wktDouble,
	"google.protobuf.FloatValue":  wktFloat,
	"google.protobuf.Int64Value":  wktInt64,
	"google.protobuf.UInt64Value": wktUInt64,
	"google.protobuf.Int32Value":  wktInt32,
	"google.protobuf.UInt32Value": wktUInt32,
	"google.protobuf.BoolValue":   wktBool,
	"google.protobuf.StringValue": wktString,
	"google.protobuf.BytesValue":  wktBytes,
	"google.protobuf.Struct":      wktStruct,
	"google.protobuf.Value":       wktValue,
	"google.protobuf.ListValue":   wktListValue,
	"google.protobuf.Any":         wktAny,
}

func wkt(name protoreflect.FullName) wktKind { return wkts[name] }

// uint64Type holds every uint64 exactly.
var uint64Type = iceberg.DecimalTypeOf(20, 0)

// structType is the Iceberg struct of md's fields in field-number order, leaving out
// those that carry no data (see fieldType).
func structType(md protoreflect.MessageDescriptor) *iceberg.StructType {
	st := &iceberg.StructType{FieldList: []iceberg.NestedField{}}
	for _, f := range sortedFields(md) {
		if t := fieldType(f); t != nil {
			st.FieldList = append(st.FieldList, iceberg.NestedField{Name: string(f.Name()), Type: t})
		}
	}
	return st
}

// sortedFields is md's fields in field-number order.
func sortedFields(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	fs := md.Fields()
	out := make([]protoreflect.FieldDescriptor, fs.Len())
	for i := range out {
		out[i] = fs.Get(i)
	}
	slices.SortFunc(out, func(a, b protoreflect.FieldDescriptor) int { return int(a.Number()) - int(b.Number()) })
	return out
}

// fieldType is the Iceberg type of field f, with its cardinality, or nil when its
// values carry no data: a message without fields (google.protobuf.Empty), or without
// fields but such ones, or a list or map of them. Such a field is no column, as Parquet
// has no empty groups; Avro's null is left out likewise.
func fieldType(f protoreflect.FieldDescriptor) iceberg.Type {
	switch {
	case f.IsMap():
		v := valueType(f.MapValue())
		if v == nil {
			return nil
		}
		return &iceberg.MapType{KeyType: valueType(f.MapKey()), ValueType: v}
	case f.IsList():
		e := valueType(f)
		if e == nil {
			return nil
		}
		return &iceberg.ListType{Element: e}
	}
	return valueType(f)
}

// valueType is the Iceberg type of one value of f, ignoring its cardinality, or nil.
func valueType(f protoreflect.FieldDescriptor) iceberg.Type {
	switch f.Kind() {
	case protoreflect.BoolKind:
		return iceberg.PrimitiveTypes.Bool
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return iceberg.PrimitiveTypes.Int32
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return iceberg.PrimitiveTypes.Int64
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return uint64Type
	case protoreflect.FloatKind:
		return iceberg.PrimitiveTypes.Float32
	case protoreflect.DoubleKind:
		return iceberg.PrimitiveTypes.Float64
	case protoreflect.StringKind, protoreflect.EnumKind:
		return iceberg.PrimitiveTypes.String
	case protoreflect.BytesKind:
		return iceberg.PrimitiveTypes.Binary
	}
	return messageType(f.Message())
}

// messageType is the Iceberg type of a message value: a struct, a well-known type's
// primitive, or nil for a message that carries no data.
func messageType(md protoreflect.MessageDescriptor) iceberg.Type {
	switch wkt(md.FullName()) {
	case wktTimestamp:
		return iceberg.PrimitiveTypes.TimestampTz
	case wktDuration, wktInt64, wktUInt32:
		return iceberg.PrimitiveTypes.Int64
	case wktDouble:
		return iceberg.PrimitiveTypes.Float64
	case wktFloat:
		return iceberg.PrimitiveTypes.Float32
	case wktUInt64:
		return uint64Type
	case wktInt32:
		return iceberg.PrimitiveTypes.Int32
	case wktBool:
		return iceberg.PrimitiveTypes.Bool
	case wktBytes:
		return iceberg.PrimitiveTypes.Binary
	case wktString, wktStruct, wktValue, wktListValue, wktAny:
		return iceberg.PrimitiveTypes.String
	}
	if st := structType(md); len(st.FieldList) > 0 {
		return st
	}
	return nil
}
