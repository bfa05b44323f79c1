package protofmt

import (
	"slices"

	"github.com/apache/iceberg-go"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/tableschema"
)

// op is how one value is read from the wire.
type op uint8

const (
	opBool op = iota
	opInt32
	opSint32
	opSfixed32
	opInt64
	opSint64
	opSfixed64
	opUint32
	opFixed32
	opUint64  // into a decimal(P≥20, 0)
	opFixed64 // into a decimal(P≥20, 0)
	opFloat
	opDouble
	opString
	opBytes
	opEnum
	// Message kinds: a length-delimited (or group) payload.
	opMessage
	opTimestamp
	opDuration
	opWrapper
	opStruct
	opValue
	opListValue
	opAny
)

// valPlan reads one value of a field (a singular field, a list element, a map key or
// value) into the target's representation.
type valPlan struct {
	op     op
	wt     protowire.Type // the wire type of one value
	isMsg  bool           // a message kind: duplicates merge
	decLen int            // opUint64, opFixed64: bytes of the target decimal's fixed form
	enum   *enumNames
	msg    *msgPlan // opMessage
	inner  *valPlan // opWrapper: the wrapped value, field 1
	zero   rowcodec.Value
	// Reasons, made once: constant text and the field's path.
	bad, badUTF8, badRange, badDepth string
}

// packable reports whether a repeated field of p may come packed.
func (p *valPlan) packable() bool {
	return p.op <= opEnum && p.op != opString && p.op != opBytes
}

type card uint8

const (
	cardSingle card = iota
	cardList
	cardMap
)

// fieldPlan reads one writer field into its target slot.
type fieldPlan struct {
	slot     int
	card     card
	val      valPlan // the value, the list element or the map value
	key      valPlan // map key
	keyBytes bool    // map keys compare as bytes (strings, uint64 decimals), else as Int
	others   []int   // slots of the other members of its oneof, nulled when it is set
	bad      string  // reason for a malformed map entry or packed run
}

// msgPlan reads a message into a struct of the target's fields.
type msgPlan struct {
	init   []rowcodec.Value // per target field: its value when the field is absent
	fields []fieldPlan
	dense  []int32 // field number → index into fields + 1; 0: not read
	sparse map[protowire.Number]int32
	maps   []int // indexes into fields of maps, sorted after the message is read
	bad    string
}

func (p *msgPlan) lookup(num protowire.Number) int {
	if uint(num) < uint(len(p.dense)) {
		return int(p.dense[num]) - 1
	}
	if i, ok := p.sparse[num]; ok {
		return int(i)
	}
	return -1
}

// maxDense bounds the field numbers looked up by index rather than hashing.
const maxDense = 1024

// enumNames is an enum's value names by number.
type enumNames struct {
	dense  [][]byte
	sparse map[int32][]byte
}

func newEnumNames(ed protoreflect.EnumDescriptor) *enumNames {
	e := &enumNames{}
	vals := ed.Values()
	hi := int32(-1)
	lo := int32(0)
	for i := 0; i < vals.Len(); i++ {
		n := int32(vals.Get(i).Number())
		hi = max(hi, n)
		lo = min(lo, n)
	}
	if lo >= 0 && hi < maxDense {
		e.dense = make([][]byte, hi+1)
	} else {
		e.sparse = map[int32][]byte{}
	}
	// The first value declared with a number names it (aliases share numbers).
	for i := vals.Len() - 1; i >= 0; i-- {
		v := vals.Get(i)
		name := []byte(v.Name())
		if e.dense != nil {
			e.dense[v.Number()] = name
		} else {
			e.sparse[int32(v.Number())] = name
		}
	}
	return e
}

func (e *enumNames) name(n int32) []byte {
	if e.dense != nil {
		if uint32(n) < uint32(len(e.dense)) {
			return e.dense[n]
		}
		return nil
	}
	return e.sparse[n]
}

// Bind compiles a decoder of the message's wire bytes into target, a struct type (see
// schemafmt.Schema).
func (s *Schema) Bind(target iceberg.Type) (schemafmt.Decoder, error) {
	st, ok := target.(*iceberg.StructType)
	if !ok {
		return nil, &schemafmt.Conflict{Path: "", Schema: "struct", Table: typeName(target)}
	}
	p, err := bindMessage(s.md, st, "")
	if err != nil {
		return nil, err
	}
	return &decoder{root: p, md: s.md}, nil
}

func typeName(t iceberg.Type) string {
	if _, ok := t.(iceberg.PrimitiveType); ok {
		return t.String()
	}
	return t.Type()
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func reasonBad(path string) string {
	if path == "" {
		return "invalid Protobuf wire data"
	}
	return `invalid Protobuf wire data in field "` + path + `"`
}

func bindMessage(md protoreflect.MessageDescriptor, st *iceberg.StructType, path string) (*msgPlan, error) {
	p := &msgPlan{init: make([]rowcodec.Value, len(st.FieldList)), bad: reasonBad(path)}
	fds := md.Fields()
	slotOf := map[protoreflect.FieldNumber]int{}
	var fdOf []protoreflect.FieldDescriptor
	for j, tf := range st.FieldList {
		fd := fds.ByName(protoreflect.Name(tf.Name))
		if fd == nil || fieldType(fd) == nil {
			continue // not in the writer schema (or no column of it): null
		}
		fp, init, err := bindField(fd, tf.Type, join(path, tf.Name))
		if err != nil {
			return nil, err
		}
		fp.slot = j
		p.init[j] = init
		if fp.card == cardMap {
			p.maps = append(p.maps, len(p.fields))
		}
		slotOf[fd.Number()] = j
		p.fields = append(p.fields, fp)
		fdOf = append(fdOf, fd)
	}
	// A oneof member that is set clears the others, even one that is not read: it is
	// then planned with slot -1, only to clear them.
	for k := 0; k < md.Oneofs().Len(); k++ {
		members := md.Oneofs().Get(k).Fields()
		read := 0
		for m := 0; m < members.Len(); m++ {
			if _, ok := slotOf[members.Get(m).Number()]; ok {
				read++
			}
		}
		if read == 0 {
			continue
		}
		for m := 0; m < members.Len(); m++ {
			fd := members.Get(m)
			i := slices.Index(fdOf, fd)
			if i < 0 {
				i = len(p.fields)
				fp := fieldPlan{slot: -1, val: valPlan{wt: wireType(fd)}}
				p.fields = append(p.fields, fp)
				fdOf = append(fdOf, fd)
			}
			for n := 0; n < members.Len(); n++ {
				if slot, ok := slotOf[members.Get(n).Number()]; ok && n != m {
					p.fields[i].others = append(p.fields[i].others, slot)
				}
			}
		}
	}
	hi := 0
	for _, fd := range fdOf {
		if n := int(fd.Number()); n < maxDense {
			hi = max(hi, n)
		}
	}
	p.dense = make([]int32, hi+1)
	for i, fd := range fdOf {
		n := fd.Number()
		if n < maxDense {
			p.dense[n] = int32(i + 1)
			continue
		}
		if p.sparse == nil {
			p.sparse = map[protowire.Number]int32{}
		}
		p.sparse[n] = int32(i)
	}
	return p, nil
}

func conflict(path string, schema, table iceberg.Type) error {
	return &schemafmt.Conflict{Path: path, Schema: typeName(schema), Table: typeName(table)}
}

// bindField plans field fd into target type t, and gives the value of its slot when the
// field is absent from a message.
func bindField(fd protoreflect.FieldDescriptor, t iceberg.Type, path string) (fieldPlan, rowcodec.Value, error) {
	fp := fieldPlan{bad: reasonBad(path)}
	var err error
	switch {
	case fd.IsMap():
		mt, ok := t.(*iceberg.MapType)
		if !ok {
			return fp, rowcodec.Value{}, conflict(path, fieldType(fd), t)
		}
		fp.card = cardMap
		if fp.key, err = bindValue(fd.MapKey(), mt.KeyType, path+".key"); err != nil {
			return fp, rowcodec.Value{}, err
		}
		if fp.val, err = bindValue(fd.MapValue(), mt.ValueType, path+".value"); err != nil {
			return fp, rowcodec.Value{}, err
		}
		switch fp.key.op {
		case opString, opUint64, opFixed64:
			fp.keyBytes = true
		}
		return fp, rowcodec.Value{Valid: true}, nil
	case fd.IsList():
		lt, ok := t.(*iceberg.ListType)
		if !ok {
			return fp, rowcodec.Value{}, conflict(path, fieldType(fd), t)
		}
		fp.card = cardList
		if fp.val, err = bindValue(fd, lt.Element, path+".element"); err != nil {
			return fp, rowcodec.Value{}, err
		}
		return fp, rowcodec.Value{Valid: true}, nil
	}
	if fp.val, err = bindValue(fd, t, path); err != nil {
		return fp, rowcodec.Value{}, err
	}
	if fd.HasPresence() {
		return fp, rowcodec.Value{}, nil
	}
	return fp, fp.val.zero, nil
}

// empty is a present empty string or binary.
var empty = []byte{}

// bindValue plans one value of fd (ignoring its cardinality) into target type t.
func bindValue(fd protoreflect.FieldDescriptor, t iceberg.Type, path string) (valPlan, error) {
	p := valPlan{
		bad:      reasonBad(path),
		badUTF8:  `invalid UTF-8 in field "` + path + `"`,
		badRange: `value out of range in field "` + path + `"`,
		badDepth: `JSON value nested too deeply in field "` + path + `"`,
	}
	kind := fd.Kind()
	if kind == protoreflect.MessageKind || kind == protoreflect.GroupKind {
		p.isMsg = true
		p.wt = protowire.BytesType
		if kind == protoreflect.GroupKind {
			p.wt = protowire.StartGroupType
		}
		md := fd.Message()
		k := wkt(md.FullName())
		if k == wktNone {
			st, ok := t.(*iceberg.StructType)
			if !ok {
				return p, conflict(path, messageType(md), t)
			}
			msg, err := bindMessage(md, st, path)
			if err != nil {
				return p, err
			}
			p.op, p.msg = opMessage, msg
			return p, nil
		}
		if w := messageType(md); !schemafmt.Promotable(w, t) {
			return p, conflict(path, w, t)
		}
		switch k {
		case wktTimestamp:
			p.op = opTimestamp
		case wktDuration:
			p.op = opDuration
		case wktStruct:
			p.op = opStruct
		case wktValue:
			p.op = opValue
		case wktListValue:
			p.op = opListValue
		case wktAny:
			p.op = opAny
		default:
			inner, err := bindValue(md.Fields().ByNumber(1), t, path)
			if err != nil {
				return p, err
			}
			p.op, p.inner = opWrapper, &inner
		}
		return p, nil
	}

	if w := valueType(fd); !schemafmt.Promotable(w, t) {
		return p, conflict(path, w, t)
	}
	// A list element's zero is never used, and a repeated field has no default.
	p.zero = rowcodec.Value{Valid: true}
	def := fd.Default()
	if !def.IsValid() {
		def = zeroOf(kind)
	}
	switch kind {
	case protoreflect.BoolKind:
		p.op, p.wt = opBool, protowire.VarintType
		if def.Bool() {
			p.zero.Int = 1
		}
	case protoreflect.Int32Kind:
		p.op, p.wt, p.zero.Int = opInt32, protowire.VarintType, def.Int()
	case protoreflect.Sint32Kind:
		p.op, p.wt, p.zero.Int = opSint32, protowire.VarintType, def.Int()
	case protoreflect.Sfixed32Kind:
		p.op, p.wt, p.zero.Int = opSfixed32, protowire.Fixed32Type, def.Int()
	case protoreflect.Int64Kind:
		p.op, p.wt, p.zero.Int = opInt64, protowire.VarintType, def.Int()
	case protoreflect.Sint64Kind:
		p.op, p.wt, p.zero.Int = opSint64, protowire.VarintType, def.Int()
	case protoreflect.Sfixed64Kind:
		p.op, p.wt, p.zero.Int = opSfixed64, protowire.Fixed64Type, def.Int()
	case protoreflect.Uint32Kind:
		p.op, p.wt, p.zero.Int = opUint32, protowire.VarintType, int64(def.Uint())
	case protoreflect.Fixed32Kind:
		p.op, p.wt, p.zero.Int = opFixed32, protowire.Fixed32Type, int64(def.Uint())
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		p.op, p.wt = opUint64, protowire.VarintType
		if kind == protoreflect.Fixed64Kind {
			p.op, p.wt = opFixed64, protowire.Fixed64Type
		}
		p.decLen = tableschema.DecimalBytes(t.(iceberg.DecimalType).Precision())
		p.zero.Bytes = appendDecimal(nil, def.Uint(), p.decLen)
	case protoreflect.FloatKind:
		p.op, p.wt, p.zero.Float = opFloat, protowire.Fixed32Type, def.Float()
	case protoreflect.DoubleKind:
		p.op, p.wt, p.zero.Float = opDouble, protowire.Fixed64Type, def.Float()
	case protoreflect.StringKind:
		p.op, p.wt = opString, protowire.BytesType
		p.zero.Bytes = append(empty, def.String()...)
	case protoreflect.BytesKind:
		p.op, p.wt = opBytes, protowire.BytesType
		p.zero.Bytes = append(empty, def.Bytes()...)
	case protoreflect.EnumKind:
		p.op, p.wt = opEnum, protowire.VarintType
		p.enum = newEnumNames(fd.Enum())
		n := int32(0)
		if d := fd.DefaultEnumValue(); d != nil {
			n = int32(d.Number())
		} else if fd.Enum().Values().Len() > 0 {
			n = int32(fd.Enum().Values().Get(0).Number())
		}
		p.zero.Bytes = enumText(p.enum, n)
	}
	return p, nil
}

// wireType is the wire type of one value of fd.
func wireType(fd protoreflect.FieldDescriptor) protowire.Type {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return scalarWireType(fd.Kind())
}

// enumText is the text an enum number reads as, outside any decode.
func enumText(e *enumNames, n int32) []byte {
	if name := e.name(n); name != nil {
		return name
	}
	return appendInt(nil, int64(n))
}

// zeroOf is the zero value of a scalar kind (enums are handled apart).
func zeroOf(k protoreflect.Kind) protoreflect.Value {
	switch k {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(false)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(0)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(0)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(nil)
	}
	return protoreflect.ValueOfEnum(0)
}
