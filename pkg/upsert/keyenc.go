package upsert

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/rowcodec"
)

// Key identities, by the first byte hashed: KeyHash's 0 (no key) and 1 (the key's
// bytes), then these two for tables with a key format. Distinct first bytes keep the
// spaces apart, so no decoded key can take the identity of an undecoded one.
const (
	identityDecoded   = 2 // the canonical encoding of the decoded key (KeyEncoder)
	identityUndecoded = 3 // a key the table's key format cannot decode: its bytes
)

// DecodedKeyHash hashes the canonical encoding of a decoded key, as KeyEncoder.Append
// wrote it after buf[0] (which it overwrites): one allocation-free SHA-256.
func DecodedKeyHash(buf []byte) Hash {
	buf[0] = identityDecoded
	s := sha256.Sum256(buf)
	return Hash(s[:HashSize])
}

// UndecodedKeyHash hashes a key that the table's key format cannot decode (no schema id
// prefix, bytes the schema does not read): its bytes, in a space of their own, so the
// record is still one key of its own and nothing is merged with a decoded key.
func UndecodedKeyHash(key []byte) Hash {
	h := sha256.New()
	h.Write([]byte{identityUndecoded})
	h.Write(key)
	var out Hash
	copy(out[:], h.Sum(nil))
	return out
}

// KeyEncoder writes the canonical encoding of a decoded key of one Iceberg type (a
// table version's _kafka_key_decoded): what two records share exactly when their decoded
// keys are equal, whatever their wire form (field order, whitespace, schema id, Confluent
// prefix), and across table schema versions:
//
//   - A struct is its non-null fields in field-id order, each as its field id then its
//     value, then a 0 (ids are never 0). Field ids never change, and a null field is
//     left out, so a field a later key schema adds (null in older records, absent from
//     older versions) leaves the identity of older keys as it was.
//   - A list is its length then its elements; a null element is tagged, its position
//     matters. A map is its entries sorted by their encoding: entry order on the wire is
//     no part of the value.
//   - A primitive is a tag of its family then its value: integers (int and long, which
//     Iceberg may promote one to the other) as 8 bytes, floats and doubles as the bits of
//     the double (float→double is exact; -0 is 0 and every NaN one NaN, as equality has
//     them), decimals as the minimal two's complement of the unscaled value (the same
//     whether precision ≤ 18 holds it in Int or a wider one in Bytes; the scale never
//     changes), strings, binaries, uuids and fixed as their length and bytes.
//   - A null root (a key that decodes to null) is the null tag: a key, unlike no key.
//
// Not safe for concurrent use (it keeps scratch memory for maps).
type KeyEncoder struct {
	root *plan
}

// plan is one type's encoding, compiled once per table version.
type plan struct {
	tag    byte
	fields []planField // struct: in field-id order
	elem   *plan       // list element
	key    *plan       // map key
	value  *plan       // map value
	// scratch for a map's entries, reused record to record
	entries [][]byte
	buf     []byte
}

type planField struct {
	id, pos int // field id, and index in the value's Elems
	p       *plan
}

// Tags: one per primitive family, and one per nested shape.
const (
	tagNull byte = iota + 1
	tagBool
	tagInt
	tagFloat
	tagDecimal
	tagDate
	tagTime
	tagTimestamp
	tagTimestampTz
	tagString
	tagBinary
	tagUUID
	tagFixed
	tagStruct
	tagList
	tagMap
)

// NewKeyEncoder compiles the encoding of decoded keys of type t.
func NewKeyEncoder(t iceberg.Type) (*KeyEncoder, error) {
	p, err := compilePlan(t)
	if err != nil {
		return nil, err
	}
	return &KeyEncoder{root: p}, nil
}

func compilePlan(t iceberg.Type) (*plan, error) {
	switch t := t.(type) {
	case *iceberg.StructType:
		p := &plan{tag: tagStruct}
		for i, f := range t.FieldList {
			fp, err := compilePlan(f.Type)
			if err != nil {
				return nil, err
			}
			p.fields = append(p.fields, planField{id: f.ID, pos: i, p: fp})
		}
		slices.SortFunc(p.fields, func(a, b planField) int { return cmp.Compare(a.id, b.id) })
		return p, nil
	case *iceberg.ListType:
		e, err := compilePlan(t.Element)
		return &plan{tag: tagList, elem: e}, err
	case *iceberg.MapType:
		k, err := compilePlan(t.KeyType)
		if err != nil {
			return nil, err
		}
		v, err := compilePlan(t.ValueType)
		return &plan{tag: tagMap, key: k, value: v}, err
	case iceberg.BooleanType:
		return &plan{tag: tagBool}, nil
	case iceberg.Int32Type, iceberg.Int64Type:
		return &plan{tag: tagInt}, nil
	case iceberg.Float32Type, iceberg.Float64Type:
		return &plan{tag: tagFloat}, nil
	case iceberg.DecimalType:
		return &plan{tag: tagDecimal}, nil
	case iceberg.DateType:
		return &plan{tag: tagDate}, nil
	case iceberg.TimeType:
		return &plan{tag: tagTime}, nil
	case iceberg.TimestampType:
		return &plan{tag: tagTimestamp}, nil
	case iceberg.TimestampTzType:
		return &plan{tag: tagTimestampTz}, nil
	case iceberg.StringType:
		return &plan{tag: tagString}, nil
	case iceberg.BinaryType:
		return &plan{tag: tagBinary}, nil
	case iceberg.UUIDType:
		return &plan{tag: tagUUID}, nil
	case iceberg.FixedType:
		return &plan{tag: tagFixed}, nil
	}
	return nil, fmt.Errorf("upsert: no key encoding for type %s", t)
}

// Append appends the canonical encoding of decoded key v to dst, leaving dst[0] for
// DecodedKeyHash (a dst of length 0 gets a placeholder first byte).
func (e *KeyEncoder) Append(dst []byte, v rowcodec.Value) []byte {
	if len(dst) == 0 {
		dst = append(dst, 0)
	}
	return e.root.append(dst, v)
}

func (p *plan) append(dst []byte, v rowcodec.Value) []byte {
	if !v.Valid {
		return append(dst, tagNull)
	}
	dst = append(dst, p.tag)
	switch p.tag {
	case tagStruct:
		for _, f := range p.fields {
			if f.pos >= len(v.Elems) || !v.Elems[f.pos].Valid {
				continue
			}
			dst = binary.AppendUvarint(dst, uint64(f.id))
			dst = f.p.append(dst, v.Elems[f.pos])
		}
		return append(dst, 0)
	case tagList:
		dst = binary.AppendUvarint(dst, uint64(len(v.Elems)))
		for _, x := range v.Elems {
			dst = p.elem.append(dst, x)
		}
		return dst
	case tagMap:
		return p.appendMap(dst, v.Elems)
	case tagBool, tagInt, tagDate, tagTime, tagTimestamp, tagTimestampTz:
		return binary.BigEndian.AppendUint64(dst, uint64(v.Int))
	case tagFloat:
		f := v.Float
		switch {
		case f == 0:
			f = 0 // -0 is 0
		case math.IsNaN(f):
			f = math.NaN()
		}
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(f))
	case tagDecimal:
		var b []byte
		if v.Bytes != nil {
			b = rowcodec.MinimalTwos(v.Bytes)
		} else {
			var x [8]byte
			binary.BigEndian.PutUint64(x[:], uint64(v.Int))
			b = rowcodec.MinimalTwos(x[:])
		}
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		return append(dst, b...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(v.Bytes)))
	return append(dst, v.Bytes...)
}

// appendMap writes a map's entries sorted by their encoding (key first, so by key).
func (p *plan) appendMap(dst []byte, entries []rowcodec.Value) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	buf, list := p.buf[:0], p.entries[:0]
	for _, kv := range entries {
		start := len(buf)
		var k, v rowcodec.Value
		if len(kv.Elems) == 2 {
			k, v = kv.Elems[0], kv.Elems[1]
		}
		buf = p.key.append(buf, k)
		buf = p.value.append(buf, v)
		list = append(list, buf[start:len(buf):len(buf)])
	}
	slices.SortFunc(list, bytes.Compare)
	for _, e := range list {
		dst = append(dst, e...)
	}
	p.buf, p.entries = buf, list
	return dst
}
