package avrofmt

import (
	"fmt"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/schemafmt"
)

// op is what a plan node reads and how it stores it.
type op uint8

const (
	opBool       op = iota
	opInt           // int, date; into int or long
	opIntMillis     // time-millis
	opLong          // long, time-micros, timestamps in micros
	opLongMillis    // timestamps in millis
	opFloat         // into float or double
	opDouble
	opBytes
	opString     // checked UTF-8
	opFixed      // fixed, uuid on fixed(16)
	opEnum       // the symbol
	opUUIDString // text to 16 bytes
	opDecimalBytes
	opDecimalFixed
	opRecord   // into a struct
	opArray    // into a list
	opMap      // into a map
	opUnion    // a union of several types into a struct
	opOptional // a union of one type and null branches, as that type
)

// pnode is the plan that decodes one writer type into one target type.
type pnode struct {
	op   op
	w    *wnode // the writer type: its path, and how to skip what the target lacks
	path string

	prec    int    // decimal: the writer's precision, which the value must fit
	tprec   int    // decimal: the target's precision, which decides the stored form
	tooWide string // decimal: the reason when the value does not fit

	fields []pslot // record: per writer field, in writer order
	nulls  []int   // record: target fields the writer lacks
	n      int     // record, union: number of target fields

	elem *pnode // array element, map value

	branches []pslot // union: per writer branch
	keyPath  string  // map: path of the keys, for messages
}

// pslot is where a writer field or union branch goes: the target field index and its
// plan, or slot -1 to skip it (then null tells a union that the value is null).
type pslot struct {
	slot int
	p    *pnode
	null bool
}

func conflict(path string, w, t iceberg.Type) error {
	return &schemafmt.Conflict{Path: path, Schema: typeName(w), Table: typeName(t)}
}

func typeName(t iceberg.Type) string {
	switch t.(type) {
	case nil:
		return "nothing"
	case *iceberg.StructType:
		return "struct"
	case *iceberg.ListType:
		return "list"
	case *iceberg.MapType:
		return "map"
	}
	return t.String()
}

// bind compiles the plan for decoding w into t. w.typ is not nil.
func bind(w *wnode, t iceberg.Type) (*pnode, error) {
	p := &pnode{w: w, path: w.path}
	switch w.kind {
	case wUnion:
		if w.single >= 0 {
			inner, err := bind(w.branches[w.single], t)
			if err != nil {
				return nil, err
			}
			p.op, p.elem = opOptional, inner
			return p, nil
		}
		st, ok := t.(*iceberg.StructType)
		if !ok {
			return nil, conflict(w.path, w.typ, t)
		}
		p.op, p.n = opUnion, len(st.FieldList)
		for i, b := range w.branches {
			s := pslot{slot: -1, null: w.names[i] == ""}
			if !s.null {
				if j := fieldIndex(st, w.names[i]); j >= 0 {
					bp, err := bind(b, st.FieldList[j].Type)
					if err != nil {
						return nil, err
					}
					s.slot, s.p = j, bp
				}
			}
			p.branches = append(p.branches, s)
		}
		return p, nil
	case wRecord:
		st, ok := t.(*iceberg.StructType)
		if !ok {
			return nil, conflict(w.path, w.typ, t)
		}
		p.op, p.n = opRecord, len(st.FieldList)
		have := make([]bool, len(st.FieldList))
		for _, f := range w.fields {
			s := pslot{slot: -1}
			if j := fieldIndex(st, f.name); j >= 0 && f.node.typ != nil {
				fp, err := bind(f.node, st.FieldList[j].Type)
				if err != nil {
					return nil, err
				}
				s.slot, s.p = j, fp
				have[j] = true
			}
			p.fields = append(p.fields, s)
		}
		for j, h := range have {
			if !h {
				p.nulls = append(p.nulls, j)
			}
		}
		return p, nil
	case wArray:
		lt, ok := t.(*iceberg.ListType)
		if !ok {
			return nil, conflict(w.path, w.typ, t)
		}
		elem, err := bind(w.items, lt.Element)
		if err != nil {
			return nil, err
		}
		p.op, p.elem = opArray, elem
		return p, nil
	case wMap:
		mt, ok := t.(*iceberg.MapType)
		if !ok {
			return nil, conflict(w.path, w.typ, t)
		}
		p.keyPath = join(w.path, "key")
		if !iceberg.PrimitiveTypes.String.Equals(mt.KeyType) {
			return nil, conflict(p.keyPath, iceberg.PrimitiveTypes.String, mt.KeyType)
		}
		elem, err := bind(w.items, mt.ValueType)
		if err != nil {
			return nil, err
		}
		p.op, p.elem = opMap, elem
		return p, nil
	}

	if !schemafmt.Promotable(w.typ, t) {
		return nil, conflict(w.path, w.typ, t)
	}
	switch w.kind {
	case wBool:
		p.op = opBool
	case wInt:
		p.op = opInt
		if w.conv == convMillis {
			p.op = opIntMillis
		}
	case wLong:
		p.op = opLong
		if w.conv == convMillis {
			p.op = opLongMillis
		}
	case wFloat:
		p.op = opFloat
	case wDouble:
		p.op = opDouble
	case wBytes:
		p.op = opBytes
	case wString:
		p.op = opString
		if w.conv == convUUID {
			p.op = opUUIDString
		}
	case wFixed:
		p.op = opFixed
	case wEnum:
		p.op = opEnum
	default:
		return nil, conflict(w.path, w.typ, t) // unreachable: w.typ is nil
	}
	if w.conv == convDecimal {
		p.op = opDecimalBytes
		if w.kind == wFixed {
			p.op = opDecimalFixed
		}
		p.prec, p.tprec = w.prec, t.(iceberg.DecimalType).Precision()
		p.tooWide = fmt.Sprintf("decimal does not fit decimal(%d,%d)", w.prec, w.scale)
	}
	return p, nil
}

func fieldIndex(st *iceberg.StructType, name string) int {
	for j := range st.FieldList {
		if st.FieldList[j].Name == name {
			return j
		}
	}
	return -1
}
