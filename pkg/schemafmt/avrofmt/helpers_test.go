package avrofmt

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/hamba/avro/v2"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/tableschema"
)

// withIDs returns a copy of t with fresh field ids 1, 2, 3...: a struct's fields first,
// then what is inside each of them; a list's element, a map's key and value after.
func withIDs(t iceberg.Type) iceberg.Type {
	next := 0
	var walk func(iceberg.Type) iceberg.Type
	walk = func(t iceberg.Type) iceberg.Type {
		switch t := t.(type) {
		case *iceberg.StructType:
			fields := make([]iceberg.NestedField, len(t.FieldList))
			for i, f := range t.FieldList {
				next++
				f.ID = next
				fields[i] = f
			}
			for i := range fields {
				fields[i].Type = walk(fields[i].Type)
			}
			return &iceberg.StructType{FieldList: fields}
		case *iceberg.ListType:
			next++
			l := *t
			l.ElementID = next
			l.Element = walk(t.Element)
			return &l
		case *iceberg.MapType:
			m := *t
			next++
			m.KeyID = next
			next++
			m.ValueID = next
			m.KeyType = walk(t.KeyType)
			m.ValueType = walk(t.ValueType)
			return &m
		}
		return t
	}
	return walk(t)
}

func mustCompile(t testing.TB, text string, refs ...schemafmt.Reference) schemafmt.Schema {
	t.Helper()
	s, err := Compile(schemafmt.Source{Text: text, References: refs})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

// mustBind binds s to its own root with ids.
func mustBind(t testing.TB, s schemafmt.Schema) schemafmt.Decoder {
	t.Helper()
	d, err := s.Bind(withIDs(s.Root()))
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	return d
}

// marshal encodes v with hamba/avro, as a producer would.
func marshal(t testing.TB, text string, v any) []byte {
	t.Helper()
	as, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	b, err := avro.Marshal(as, v)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return b
}

func decode(t testing.TB, d schemafmt.Decoder, data []byte) rowcodec.Value {
	t.Helper()
	var v rowcodec.Value
	if r := d.Decode(data, &v); r != "" {
		t.Fatalf("Decode: %s", r)
	}
	return v
}

// show prints v as a value of type t, for comparing with expectations: structs as
// {name: value}, lists as [a b], maps as {key: value}, strings quoted, binary, fixed
// and uuid in hex, decimals as unscaled integers.
func show(t iceberg.Type, v rowcodec.Value) string {
	if !v.Valid {
		return "null"
	}
	switch t := t.(type) {
	case *iceberg.StructType:
		var b strings.Builder
		b.WriteString("{")
		for i, f := range t.FieldList {
			if i > 0 {
				b.WriteString(", ")
			}
			var e rowcodec.Value
			if i < len(v.Elems) {
				e = v.Elems[i]
			} else {
				b.WriteString("MISSING ")
			}
			fmt.Fprintf(&b, "%s: %s", f.Name, show(f.Type, e))
		}
		if len(v.Elems) > len(t.FieldList) {
			b.WriteString(" EXTRA")
		}
		b.WriteString("}")
		return b.String()
	case *iceberg.ListType:
		parts := make([]string, len(v.Elems))
		for i, e := range v.Elems {
			parts[i] = show(t.Element, e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case *iceberg.MapType:
		parts := make([]string, len(v.Elems))
		for i, e := range v.Elems {
			if len(e.Elems) != 2 || !e.Valid {
				parts[i] = "BAD ENTRY"
				continue
			}
			parts[i] = show(t.KeyType, e.Elems[0]) + ": " + show(t.ValueType, e.Elems[1])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case iceberg.BooleanType:
		return fmt.Sprint(v.Int == 1)
	case iceberg.Float32Type, iceberg.Float64Type:
		return fmt.Sprint(v.Float)
	case iceberg.StringType:
		return strconv.Quote(string(v.Bytes))
	case iceberg.BinaryType, iceberg.FixedType, iceberg.UUIDType:
		return "0x" + hex.EncodeToString(v.Bytes)
	case iceberg.DecimalType:
		if t.Precision() <= 18 {
			return fmt.Sprint(v.Int)
		}
		if len(v.Bytes) != tableschema.DecimalBytes(t.Precision()) {
			return fmt.Sprintf("BAD DECIMAL LENGTH %d", len(v.Bytes))
		}
		n := new(big.Int).SetBytes(v.Bytes)
		if len(v.Bytes) > 0 && v.Bytes[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(v.Bytes))))
		}
		return n.String()
	}
	return fmt.Sprint(v.Int)
}

func decodeReason(d schemafmt.Decoder, data []byte) (rowcodec.Value, string) {
	var v rowcodec.Value
	r := d.Decode(data, &v)
	return v, r
}
