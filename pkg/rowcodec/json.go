package rowcodec

import (
	"fmt"

	"github.com/minkhq/mink/pkg/jsonscan"
)

// JSON is read with pkg/jsonscan rather than encoding/json: it walks the document once,
// decodes only the keys a column reads, points into the record for strings without
// escapes, keeps numbers as their exact text, and never allocates per value. It accepts
// exactly RFC 8259 JSON; anything else is a syntax error.

// special8 is the scanner's test of eight string bytes at a time; this package's test
// checks it against a byte loop.
func special8(w uint64) bool { return jsonscan.Special8(w) }

// object reads an object whose keys are looked up in node, decoding the columns found.
func (d *Decoder) object(s *jsonscan.Scanner, node *pathNode, user []Value) bool {
	if empty, ok := s.Open(); !ok || empty {
		return ok
	}
	for {
		key, ok := s.Key()
		if !ok {
			return false
		}
		child := node.child(key)
		switch {
		case child == nil:
			ok = s.Skip()
		case child.col >= 0:
			c := &d.cols[child.col]
			d.seen[child.col] = true
			ok = d.value(s, c, &user[child.col])
		case s.Peek() == '{':
			ok = d.object(s, child, user)
		case s.Peek() == 'n':
			ok = s.Lit("null") // a null parent: every column below stays null
		default:
			d.valueError(&d.cols[child.firstCol], -1, fmt.Sprintf("expected an object at %q, got %s", child.path, s.Kind()))
			ok = s.Skip()
		}
		if !ok {
			return false
		}
		if done, ok := s.Next('}'); !ok || done {
			return ok
		}
	}
}

// value decodes one column value; it returns false only on a syntax error.
func (d *Decoder) value(s *jsonscan.Scanner, c *column, v *Value) bool {
	if s.Peek() == 'n' {
		v.Valid = false
		return s.Lit("null")
	}
	if !c.list {
		return d.scalar(s, c, -1, v)
	}
	if s.Peek() != '[' {
		return d.mismatch(s, c, -1, "an array")
	}
	elems := v.Elems[:0]
	if empty, ok := s.Open(); !ok {
		return false
	} else if empty {
		*v = Value{Valid: true, Elems: elems}
		return true
	}
	for i := 0; ; i++ {
		elems = append(elems, Value{})
		e := &elems[i]
		if s.Peek() == 'n' {
			if !s.Lit("null") {
				return false
			}
		} else if !d.scalar(s, c, i, e) {
			return false
		}
		done, ok := s.Next(']')
		if !ok {
			return false
		}
		if done {
			*v = Value{Valid: true, Elems: elems}
			return true
		}
	}
}

// mismatch records that the value is not what the column takes and skips it.
func (d *Decoder) mismatch(s *jsonscan.Scanner, c *column, elem int, want string) bool {
	msg, ok := s.Mismatch(want)
	if ok {
		d.valueError(c, elem, msg)
	}
	return ok
}
