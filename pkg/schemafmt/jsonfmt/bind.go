package jsonfmt

import (
	"fmt"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/schemafmt"
)

// compiled is a compiled JSON Schema.
type compiled struct {
	root *node
}

var _ schemafmt.Schema = (*compiled)(nil)

func (c *compiled) Root() iceberg.Type { return c.root.typ }

// Bind compiles a decoder of JSON documents written with this schema into target.
func (c *compiled) Bind(target iceberg.Type) (schemafmt.Decoder, error) {
	d, err := bind(c.root, target, "")
	if err != nil {
		return nil, err
	}
	return &decoder{root: d}, nil
}

// maxScan is the number of keys up to which comparing beats hashing.
const maxScan = 16

// dec reads one value of a schema node into the shape of its target type.
type dec struct {
	kind kind
	// kStruct: the schema's properties the target has, and where each goes.
	nTarget int
	keys    []string
	index   []int // keys[i]'s target field
	kids    []*dec
	byKey   map[string]int // key → i, when there are more than maxScan keys
	// kList: the element; kMap: the value.
	elem *dec
}

// lookup returns the i of key, or -1.
func (d *dec) lookup(key []byte) int {
	if d.byKey != nil {
		if i, ok := d.byKey[string(key)]; ok {
			return i
		}
		return -1
	}
	for i, k := range d.keys {
		if k == string(key) {
			return i
		}
	}
	return -1
}

// typeName names t for a Conflict: nested types by their kind (their parts conflict on
// their own paths), primitives by Iceberg's name.
func typeName(t iceberg.Type) string {
	switch t.(type) {
	case *iceberg.StructType:
		return "struct"
	case *iceberg.ListType:
		return "list"
	case *iceberg.MapType:
		return "map"
	case nil:
		return "nothing"
	}
	return t.String()
}

func bind(n *node, t iceberg.Type, path string) (*dec, error) {
	conflict := func() error {
		return &schemafmt.Conflict{Path: path, Schema: typeName(n.typ), Table: typeName(t)}
	}
	switch tt := t.(type) {
	case *iceberg.StructType:
		if n.kind != kStruct {
			return nil, conflict()
		}
		d := &dec{kind: kStruct, nTarget: len(tt.FieldList)}
		for i, f := range tt.FieldList {
			sub := n.field(f.Name)
			if sub == nil {
				continue // the schema lacks it: null
			}
			kid, err := bind(sub, f.Type, join(path, f.Name))
			if err != nil {
				return nil, err
			}
			d.keys = append(d.keys, f.Name)
			d.index = append(d.index, i)
			d.kids = append(d.kids, kid)
		}
		if len(d.keys) > maxScan {
			d.byKey = make(map[string]int, len(d.keys))
			for i, k := range d.keys {
				d.byKey[k] = i
			}
		}
		return d, nil
	case *iceberg.ListType:
		if n.kind != kList {
			return nil, conflict()
		}
		elem, err := bind(n.elem, tt.Element, join(path, "element"))
		if err != nil {
			return nil, err
		}
		return &dec{kind: kList, elem: elem}, nil
	case *iceberg.MapType:
		if n.kind != kMap {
			return nil, conflict()
		}
		if tt.KeyType == nil || !schemafmt.Promotable(iceberg.PrimitiveTypes.String, tt.KeyType) {
			return nil, &schemafmt.Conflict{Path: join(path, "key"), Schema: "string", Table: typeName(tt.KeyType)}
		}
		val, err := bind(n.elem, tt.ValueType, join(path, "value"))
		if err != nil {
			return nil, err
		}
		return &dec{kind: kMap, elem: val}, nil
	case nil:
		return nil, fmt.Errorf("jsonfmt: field %q: the target type is missing", pathName(path))
	}
	if n.kind >= kStruct || !schemafmt.Promotable(n.typ, t) {
		return nil, conflict()
	}
	// Iceberg promotes nothing to a type JSON values map to: the target is n's type.
	return &dec{kind: n.kind}, nil
}
