package protofmt

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
)

// withIDs returns a copy of t with fresh field ids, as a table assigns them.
func withIDs(t iceberg.Type) iceberg.Type {
	next := 0
	id := func() int { next++; return next }
	var walk func(t iceberg.Type) iceberg.Type
	walk = func(t iceberg.Type) iceberg.Type {
		switch t := t.(type) {
		case *iceberg.StructType:
			out := &iceberg.StructType{FieldList: make([]iceberg.NestedField, len(t.FieldList))}
			for i, f := range t.FieldList {
				f.ID = id()
				out.FieldList[i] = f
			}
			for i := range out.FieldList {
				out.FieldList[i].Type = walk(out.FieldList[i].Type)
			}
			return out
		case *iceberg.ListType:
			return &iceberg.ListType{ElementID: id(), Element: walk(t.Element), ElementRequired: t.ElementRequired}
		case *iceberg.MapType:
			k, v := id(), id()
			return &iceberg.MapType{KeyID: k, KeyType: walk(t.KeyType), ValueID: v, ValueType: walk(t.ValueType), ValueRequired: t.ValueRequired}
		}
		return t
	}
	return walk(t)
}

// render writes v, of type t, as text for comparisons.
func render(v rowcodec.Value, t iceberg.Type) string {
	var b strings.Builder
	renderTo(&b, v, t)
	return b.String()
}

func renderTo(b *strings.Builder, v rowcodec.Value, t iceberg.Type) {
	if !v.Valid {
		b.WriteString("null")
		return
	}
	switch t := t.(type) {
	case *iceberg.StructType:
		b.WriteByte('{')
		for i, f := range t.FieldList {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.Name + ": ")
			if i >= len(v.Elems) {
				b.WriteString("MISSING")
				continue
			}
			renderTo(b, v.Elems[i], f.Type)
		}
		b.WriteByte('}')
	case *iceberg.ListType:
		b.WriteByte('[')
		for i, e := range v.Elems {
			if i > 0 {
				b.WriteString(", ")
			}
			renderTo(b, e, t.Element)
		}
		b.WriteByte(']')
	case *iceberg.MapType:
		b.WriteString("map[")
		for i, e := range v.Elems {
			if i > 0 {
				b.WriteString(", ")
			}
			renderTo(b, e.Elems[0], t.KeyType)
			b.WriteString(": ")
			renderTo(b, e.Elems[1], t.ValueType)
		}
		b.WriteByte(']')
	case iceberg.BooleanType:
		b.WriteString(strconv.FormatBool(v.Int != 0))
	case iceberg.Float32Type, iceberg.Float64Type:
		b.WriteString(strconv.FormatFloat(v.Float, 'g', -1, 64))
	case iceberg.StringType:
		b.WriteString(strconv.Quote(string(v.Bytes)))
	case iceberg.BinaryType:
		b.WriteString("0x" + hex.EncodeToString(v.Bytes))
	case iceberg.DecimalType:
		if t.Precision() <= 18 {
			b.WriteString(strconv.FormatInt(v.Int, 10))
			break
		}
		n := new(big.Int).SetBytes(v.Bytes)
		if len(v.Bytes) > 0 && v.Bytes[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(v.Bytes))))
		}
		b.WriteString(n.String() + "/" + strconv.Itoa(len(v.Bytes)))
	default: // int, long, timestamptz
		b.WriteString(strconv.FormatInt(v.Int, 10))
	}
}

// ref renders message m as render renders its decoded value, computed independently
// from protoreflect: the oracle the decoder is checked against.
func ref(m protoreflect.Message) string {
	var b strings.Builder
	refMessage(&b, m)
	return b.String()
}

func refMessage(b *strings.Builder, m protoreflect.Message) {
	b.WriteByte('{')
	i := 0
	for _, fd := range sortedFields(m.Descriptor()) {
		if fieldType(fd) == nil {
			continue // no column
		}
		if i > 0 {
			b.WriteString(", ")
		}
		i++
		b.WriteString(string(fd.Name()) + ": ")
		switch {
		case fd.IsMap():
			type ent struct {
				k protoreflect.MapKey
				v protoreflect.Value
			}
			var es []ent
			m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				es = append(es, ent{k, v})
				return true
			})
			slices.SortFunc(es, func(a, b ent) int { return cmpKey(a.k.Interface(), b.k.Interface()) })
			b.WriteString("map[")
			for j, e := range es {
				if j > 0 {
					b.WriteString(", ")
				}
				refValue(b, fd.MapKey(), e.k.Value())
				b.WriteString(": ")
				refValue(b, fd.MapValue(), e.v)
			}
			b.WriteByte(']')
		case fd.IsList():
			l := m.Get(fd).List()
			b.WriteByte('[')
			for j := 0; j < l.Len(); j++ {
				if j > 0 {
					b.WriteString(", ")
				}
				refValue(b, fd, l.Get(j))
			}
			b.WriteByte(']')
		case fd.HasPresence() && !m.Has(fd):
			b.WriteString("null")
		default:
			refValue(b, fd, m.Get(fd))
		}
	}
	b.WriteByte('}')
}

func cmpKey(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case bool:
		x, y := 0, 0
		if a {
			x = 1
		}
		if b.(bool) {
			y = 1
		}
		return x - y
	case int32:
		return cmp3(int64(a), int64(b.(int32)))
	case int64:
		return cmp3(a, b.(int64))
	case uint32:
		return cmp3(int64(a), int64(b.(uint32)))
	case uint64:
		y := b.(uint64)
		switch {
		case a < y:
			return -1
		case a > y:
			return 1
		}
		return 0
	}
	panic("key type")
}

func cmp3(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func refValue(b *strings.Builder, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b.WriteString(strconv.FormatUint(v.Uint(), 10) + "/9")
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		b.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case protoreflect.StringKind:
		b.WriteString(strconv.Quote(v.String()))
	case protoreflect.BytesKind:
		b.WriteString("0x" + hex.EncodeToString(v.Bytes()))
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			b.WriteString(strconv.Quote(string(ev.Name())))
		} else {
			b.WriteString(strconv.Quote(strconv.Itoa(int(v.Enum()))))
		}
	default:
		refWKT(b, v.Message())
	}
}

func refWKT(b *strings.Builder, m protoreflect.Message) {
	md := m.Descriptor()
	get := func(n protoreflect.FieldNumber) protoreflect.Value { return m.Get(md.Fields().ByNumber(n)) }
	switch wkt(md.FullName()) {
	case wktNone:
		refMessage(b, m)
	case wktTimestamp, wktDuration:
		sec, nanos := get(1).Int(), get(2).Int()
		b.WriteString(strconv.FormatInt(sec*1e6+int64(math.Floor(float64(nanos)/1000)), 10))
	case wktStruct, wktValue, wktListValue:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(goJSON(m)); err != nil {
			panic(err)
		}
		b.WriteString(strconv.Quote(strings.TrimSuffix(buf.String(), "\n")))
	case wktAny:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(get(1).String())
		b.WriteString(strconv.Quote(`{"@type":` + strings.TrimSuffix(buf.String(), "\n") +
			`,"value":"` + base64.StdEncoding.EncodeToString(get(2).Bytes()) + `"}`))
	default: // wrappers
		refValue(b, md.Fields().ByNumber(1), get(1))
	}
}

// goJSON converts a Struct, Value or ListValue to what encoding/json marshals.
func goJSON(m protoreflect.Message) any {
	md := m.Descriptor()
	switch wkt(md.FullName()) {
	case wktStruct:
		out := map[string]any{}
		m.Get(md.Fields().ByNumber(1)).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			out[k.String()] = goJSON(v.Message())
			return true
		})
		return out
	case wktListValue:
		out := []any{}
		l := m.Get(md.Fields().ByNumber(1)).List()
		for i := 0; i < l.Len(); i++ {
			out = append(out, goJSON(l.Get(i).Message()))
		}
		return out
	}
	od := md.Oneofs().ByName("kind")
	fd := m.WhichOneof(od)
	if fd == nil {
		return nil
	}
	v := m.Get(fd)
	switch fd.Number() {
	case 2:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "Infinity"
		case math.IsInf(f, -1):
			return "-Infinity"
		}
		return f
	case 3:
		return v.String()
	case 4:
		return v.Bool()
	case 5, 6:
		return goJSON(v.Message())
	}
	return nil
}

// compile compiles text (with refs) or fails the test.
func compile(t testing.TB, text, message string, refs ...schemafmt.Reference) *Schema {
	t.Helper()
	s, err := Compile(schemafmt.Source{Text: text, References: refs}, message)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bind binds s to its own Root with fresh ids.
func bind(t testing.TB, s *Schema) (schemafmt.Decoder, iceberg.Type) {
	t.Helper()
	target := withIDs(s.Root())
	dec, err := s.Bind(target)
	if err != nil {
		t.Fatal(err)
	}
	return dec, target
}

// newMsg is an empty dynamic message of s's message.
func newMsg(s *Schema) *dynamicpb.Message { return dynamicpb.NewMessage(s.Descriptor()) }

// set sets field name of m (a dotted path through singular messages) to v, which
// may be a Go value or protoreflect.Value.
func set(m protoreflect.Message, path string, v any) {
	names := strings.Split(path, ".")
	for _, n := range names[:len(names)-1] {
		m = m.Mutable(field(m, n)).Message()
	}
	fd := field(m, names[len(names)-1])
	m.Set(fd, pv(v))
}

func field(m protoreflect.Message, name string) protoreflect.FieldDescriptor {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name)
	}
	return fd
}

func pv(v any) protoreflect.Value {
	switch v := v.(type) {
	case protoreflect.Value:
		return v
	case protoreflect.Message:
		return protoreflect.ValueOfMessage(v)
	case protoreflect.EnumNumber:
		return protoreflect.ValueOfEnum(v)
	}
	return protoreflect.ValueOf(v)
}

// appendList appends v to list field name of m.
func appendList(m protoreflect.Message, name string, vs ...any) {
	l := m.Mutable(field(m, name)).List()
	for _, v := range vs {
		l.Append(pv(v))
	}
}

// setMap sets key k of map field name of m to v.
func setMap(m protoreflect.Message, name string, k, v any) {
	mp := m.Mutable(field(m, name)).Map()
	mp.Set(pv(k).MapKey(), pv(v))
}

// sub is an empty message of the type of m's field name.
func sub(m protoreflect.Message, name string) protoreflect.Message {
	fd := field(m, name)
	if fd.IsMap() {
		return m.Get(fd).Map().NewValue().Message()
	}
	if fd.IsList() {
		return m.Get(fd).List().NewElement().Message()
	}
	return m.NewField(fd).Message()
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decode decodes data with dec and renders it.
func decode(t testing.TB, dec schemafmt.Decoder, target iceberg.Type, data []byte) string {
	t.Helper()
	var v rowcodec.Value
	if r := dec.Decode(data, &v); r != "" {
		t.Fatalf("Decode: %s", r)
	}
	return render(v, target)
}
