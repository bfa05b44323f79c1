// Package jsoninfer is how a JSON table created without columns gets them: the Iceberg
// types of records' fields (Grow, from a sample and then from each record with a field
// its version lacks), and the decoder of records into an inferred version's columns,
// which keeps what does not fit in _mink_unfit. The rules are the README's ("Tables
// without a declared schema").
package jsoninfer

import (
	"github.com/minkhq/mink/pkg/jsonscan"
)

type kind uint8

const (
	kNull kind = iota
	kBool
	kInt // a JSON integer (no fraction, no exponent) within long's range
	kNum // any other number
	kString
	kObject
	kArray
)

// node is one parsed JSON value.
type node struct {
	kind kind
	raw  []byte // the value's JSON text as written
	str  []byte // a string's bytes, unescaped; a number's text
	yes  bool   // a boolean's value
	keys [][]byte
	kids []*node // an object's members' values (keys[i]), an array's elements
}

// parse reads one JSON document; on a syntax error it returns the scanner's message.
// Strings may alias data and *scratch.
func parse(data []byte, scratch *[]byte) (*node, string) {
	s := jsonscan.New(data, scratch)
	if !s.Start() {
		return nil, s.Err()
	}
	n := value(&s)
	if n != nil {
		s.End()
	}
	if s.Err() != "" {
		return nil, s.Err()
	}
	return n, ""
}

func value(s *jsonscan.Scanner) *node {
	start := s.Pos()
	n := &node{}
	switch c := s.Peek(); {
	case c == '{' || c == '[':
		empty, ok := s.Open()
		if !ok {
			return nil
		}
		n.kind = kArray
		closing := byte(']')
		if c == '{' {
			n.kind, closing = kObject, '}'
		}
		for !empty {
			if n.kind == kObject {
				k, ok := s.Key()
				if !ok {
					return nil
				}
				n.keys = append(n.keys, k)
			}
			kid := value(s)
			if kid == nil {
				return nil
			}
			n.kids = append(n.kids, kid)
			done, ok := s.Next(closing)
			if !ok {
				return nil
			}
			empty = done
		}
	case c == '"':
		str, ok := s.Str()
		if !ok {
			return nil
		}
		n.kind, n.str = kString, str
	case c == 't' || c == 'f':
		word := "false"
		if c == 't' {
			word = "true"
		}
		if !s.Lit(word) {
			return nil
		}
		n.kind, n.yes = kBool, c == 't'
	case c == 'n':
		if !s.Lit("null") {
			return nil
		}
	case jsonscan.IsNumberStart(c):
		tok, ok := s.Number()
		if !ok {
			return nil
		}
		n.kind, n.str = kNum, tok
		if integerText(tok) {
			if _, msg := jsonscan.Integer(tok, -1<<63, 1<<63-1); msg == "" {
				n.kind = kInt
			}
		}
	default:
		s.Skip() // records the syntax error
		return nil
	}
	n.raw = s.Since(start)
	return n
}

// integerText reports whether a JSON number is written as an integer: digits alone.
func integerText(tok []byte) bool {
	for _, c := range tok {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// kindName names a JSON value's kind for messages.
func (n *node) kindName() string {
	switch n.kind {
	case kBool:
		return "a boolean"
	case kInt:
		return "an integer"
	case kNum:
		return "a number"
	case kString:
		return "a string"
	case kObject:
		return "an object"
	case kArray:
		return "an array"
	}
	return "null"
}
