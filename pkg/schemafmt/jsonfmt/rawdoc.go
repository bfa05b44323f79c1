package jsonfmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// jnode is a schema document kept in document order. The validator library holds
// objects as Go maps; Mink needs the order of "properties" (it is the column order) and
// the raw "format" (the library keeps it only when it asserts formats), so each compiled
// schema is looked up here by its location.
type jnode struct {
	keys    []string          // object: member names, first occurrence order
	members map[string]*jnode // object
	elems   []*jnode          // array
	isObj   bool
	isArr   bool
	scalar  any // string, json.Number, bool or nil
}

// maxDocDepth bounds a schema document's nesting while parsing it.
const maxDocDepth = 10000

func parseDoc(text string) (*jnode, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	n, err := parseNode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the schema")
	}
	return n, nil
}

func parseNode(dec *json.Decoder, depth int) (*jnode, error) {
	if depth > maxDocDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDocDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		n := &jnode{isObj: true, members: map[string]*jnode{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, errors.New("an object key is not a string")
			}
			v, err := parseNode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := n.members[k]; !dup {
				n.keys = append(n.keys, k)
			}
			n.members[k] = v // the last value wins, as in encoding/json and the library
		}
		_, err := dec.Token() // }
		return n, err
	case json.Delim('['):
		n := &jnode{isArr: true}
		for dec.More() {
			v, err := parseNode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, v)
		}
		_, err := dec.Token() // ]
		return n, err
	}
	return &jnode{scalar: tok}, nil
}

// value converts n to the form the validator library takes.
func (n *jnode) value() any {
	switch {
	case n.isObj:
		m := make(map[string]any, len(n.members))
		for k, v := range n.members {
			m[k] = v.value()
		}
		return m
	case n.isArr:
		a := make([]any, len(n.elems))
		for i, v := range n.elems {
			a[i] = v.value()
		}
		return a
	}
	return n.scalar
}

func (n *jnode) member(k string) *jnode {
	if n == nil || !n.isObj {
		return nil
	}
	return n.members[k]
}

func (n *jnode) str(k string) (string, bool) {
	m := n.member(k)
	if m == nil {
		return "", false
	}
	s, ok := m.scalar.(string)
	return s, ok
}

// lookup follows a JSON pointer whose tokens are percent-encoded, as the library writes
// them in locations.
func (n *jnode) lookup(ptr string) *jnode {
	if n == nil || ptr == "" {
		return n
	}
	if ptr[0] != '/' {
		return nil
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		t, err := url.PathUnescape(tok)
		if err != nil {
			return nil
		}
		t = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
		switch {
		case n.isObj:
			n = n.members[t]
		case n.isArr:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(n.elems) {
				return nil
			}
			n = n.elems[i]
		default:
			return nil
		}
		if n == nil {
			return nil
		}
	}
	return n
}

// knownDraft reports whether a $schema URL names a draft by number. Confluent takes any
// other $schema (even json-schema.org/schema, "the latest") to mean draft 7, and so do
// we; left in, the library would pick another draft or try to fetch it.
func knownDraft(u string) bool {
	u = strings.TrimSuffix(u, "#")
	u = strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	switch u {
	case "json-schema.org/draft-04/schema",
		"json-schema.org/draft-06/schema",
		"json-schema.org/draft-07/schema",
		"json-schema.org/draft/2019-09/schema",
		"json-schema.org/draft/2020-12/schema":
		return true
	}
	return false
}

// sameText reports whether two schema texts are the same document, ignoring
// insignificant whitespace.
func sameText(a, b string) bool {
	if a == b {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, []byte(a)) == nil && json.Compact(&cb, []byte(b)) == nil &&
		bytes.Equal(ca.Bytes(), cb.Bytes())
}
