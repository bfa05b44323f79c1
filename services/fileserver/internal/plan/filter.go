package plan

// The filter of a PlanTableScanRequest is the spec's Expression JSON. Clients send the
// form Java's ExpressionParser writes ({"type":"lt","term":"id","value":5}); the spec
// also has newer spellings (left/right and child operands, {"type":"reference",
// "name"|"id"}, typed literal objects, {"type":"true"}) and function applications.
// normalize rewrites any of them into the form iceberg-go parses, with three changes
// that keep pruning safe:
//
//   - NOT is pushed down to the predicates (as Iceberg's own evaluators do), so every
//     predicate that remains stands in a positive position;
//   - a predicate no statistics can decide (a function, two columns compared, a column
//     the planning schema lacks) becomes true there: a file is never pruned for it;
//   - names resolve against the request's schema (case-insensitively if asked) and are
//     written as the planning schema names the same field ids.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/apierr"
)

// filter is a request's filter made ready for planning.
type filter struct {
	expr iceberg.BooleanExpression // over the planning schema; AlwaysTrue without a filter
	// exact: expr says all the request's filter says, by the same names. When false
	// (parts were read as true, or names differ between the schemas) a task's residual
	// is left out, and clients apply their own filter, as the spec says.
	exact bool
	set   bool // the request had a filter
}

// maxFilterDepth bounds the nesting of a filter (and the recursion reading it).
const maxFilterDepth = 500

var (
	negated = map[string]string{
		"lt": "gt-eq", "lt-eq": "gt", "gt": "lt-eq", "gt-eq": "lt", "eq": "not-eq", "not-eq": "eq",
		"in": "not-in", "not-in": "in", "is-null": "not-null", "not-null": "is-null",
		"is-nan": "not-nan", "not-nan": "is-nan", "starts-with": "not-starts-with", "not-starts-with": "starts-with",
	}
	// mirrored is a comparison with its operands swapped (5 < x is x > 5).
	mirrored = map[string]string{"lt": "gt", "lt-eq": "gt-eq", "gt": "lt", "gt-eq": "lt-eq", "eq": "eq", "not-eq": "not-eq"}
	unaryOps = map[string]bool{"is-null": true, "not-null": true, "is-nan": true, "not-nan": true}
	setOps   = map[string]bool{"in": true, "not-in": true}
)

// parseFilter reads raw (absent: no filter) with names resolved in names and written
// as plan names the same fields.
func parseFilter(raw json.RawMessage, names, plan *iceberg.Schema, caseSensitive bool) (filter, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return filter{expr: iceberg.AlwaysTrue{}, exact: true}, nil
	}
	n := &normalizer{names: names, plan: plan, caseSensitive: caseSensitive, exact: true}
	out, err := n.expr(raw, false, "filter", 0)
	if err != nil {
		return filter{}, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return filter{}, fmt.Errorf("filter: encode: %w", err)
	}
	expr, err := iceberg.ParseExpr(b, plan)
	if err != nil {
		// iceberg-go's words about the request's filter.
		return filter{}, apierr.Invalid("filter", "%s", clip(strings.ReplaceAll(err.Error(), "\n", "; ")))
	}
	return filter{expr: expr, exact: n.exact, set: true}, nil
}

type normalizer struct {
	names, plan   *iceberg.Schema
	caseSensitive bool
	exact         bool
}

// object is one JSON object of the filter, by key.
type object map[string]json.RawMessage

func (o object) str(key string) (string, bool) {
	var s string
	if raw, ok := o[key]; !ok || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// expr is the expression at raw (negated if neg) in the form iceberg-go parses: a bool
// or a map.
func (n *normalizer) expr(raw json.RawMessage, neg bool, path string, depth int) (any, error) {
	if depth > maxFilterDepth {
		return nil, apierr.Invalid(path, "the filter is nested more than %d levels deep", maxFilterDepth)
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b != neg, nil
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, apierr.Invalid(path, "an expression is true, false or an object with a type, not %s", clip(string(raw)))
	}
	typ, ok := o.str("type")
	if !ok {
		return nil, apierr.Invalid(path, "the expression has no type (a string such as \"and\", \"eq\" or \"is-null\")")
	}
	switch typ {
	case "true", "false": // the spec's deprecated constant objects
		return (typ == "true") != neg, nil
	case "literal": // Java's constant spelling
		if err := json.Unmarshal(o["value"], &b); err != nil {
			return nil, apierr.Invalid(path+".value", "a literal expression's value is true or false")
		}
		return b != neg, nil
	case "not":
		child, ok := o["child"]
		if !ok {
			return nil, apierr.Invalid(path, "not has no child")
		}
		return n.expr(child, !neg, path+".child", depth+1)
	case "and", "or":
		left, lok := o["left"]
		right, rok := o["right"]
		if !lok || !rok {
			return nil, apierr.Invalid(path, "%s needs left and right", typ)
		}
		l, err := n.expr(left, neg, path+".left", depth+1)
		if err != nil {
			return nil, err
		}
		r, err := n.expr(right, neg, path+".right", depth+1)
		if err != nil {
			return nil, err
		}
		if neg { // De Morgan
			typ = map[string]string{"and": "or", "or": "and"}[typ]
		}
		return map[string]any{"type": typ, "left": l, "right": r}, nil
	}
	if _, ok := negated[typ]; !ok {
		return nil, apierr.Invalid(path+".type", "unknown expression type %q", clip(typ))
	}
	return n.predicate(o, typ, neg, path)
}

// operand is what a predicate tests: a field (possibly through a transform), a literal,
// or something no statistics decide.
type operand struct {
	name      string // the field's name in the planning schema; "" if unknown
	transform string
	literal   json.RawMessage
	unknown   bool
}

func (n *normalizer) predicate(o object, op string, neg bool, path string) (any, error) {
	var subject operand
	var value json.RawMessage // comparisons
	var values []json.RawMessage
	var err error
	_, hasTerm := o["term"]
	_, hasChild := o["child"]
	_, hasLeft := o["left"]
	switch {
	case unaryOps[op] || setOps[op]:
		if hasTerm == hasChild {
			return nil, apierr.Invalid(path, "%s needs one operand: child (or term)", op)
		}
		if hasTerm {
			subject, err = n.term(o["term"], path+".term")
		} else {
			subject, err = n.valueExpr(o["child"], path+".child")
		}
		if err != nil {
			return nil, err
		}
		if unaryOps[op] {
			if _, ok := o["value"]; ok {
				return nil, apierr.Invalid(path, "%s takes no value", op)
			}
			if _, ok := o["values"]; ok {
				return nil, apierr.Invalid(path, "%s takes no values", op)
			}
		} else {
			if _, ok := o["value"]; ok {
				return nil, apierr.Invalid(path, "%s takes values, not value", op)
			}
			if values, err = literals(o["values"], path+".values"); err != nil {
				return nil, err
			}
		}
	case hasTerm:
		if hasLeft || hasChild {
			return nil, apierr.Invalid(path, "%s has both term and left or child", op)
		}
		if _, ok := o["values"]; ok {
			return nil, apierr.Invalid(path, "%s takes value, not values", op)
		}
		if subject, err = n.term(o["term"], path+".term"); err != nil {
			return nil, err
		}
		if value, err = literal(o["value"], path+".value"); err != nil {
			return nil, err
		}
	case hasLeft:
		left, err := n.valueExpr(o["left"], path+".left")
		if err != nil {
			return nil, err
		}
		right, err := n.valueExpr(o["right"], path+".right")
		if err != nil {
			return nil, err
		}
		switch {
		case left.literal == nil && right.literal != nil:
			subject, value = left, right.literal
		case left.literal != nil && right.literal == nil && mirrored[op] != "":
			subject, value, op = right, left.literal, mirrored[op]
		default: // two columns, two literals, or a literal prefix of a column
			subject = operand{unknown: true}
		}
	default:
		return nil, apierr.Invalid(path, "%s needs term and value, or left and right", op)
	}
	if subject.unknown || subject.literal != nil {
		n.exact = false
		return true, nil
	}
	if neg {
		op = negated[op]
	}
	var term any = subject.name
	if subject.transform != "" {
		term = map[string]any{"type": "transform", "transform": subject.transform, "term": subject.name}
	}
	out := map[string]any{"type": op, "term": term}
	switch {
	case value != nil:
		out["value"] = value
	case values != nil:
		out["values"] = values
	}
	return out, nil
}

// term reads the legacy operand: a column name, {"type":"reference",...} or a transform.
func (n *normalizer) term(raw json.RawMessage, path string) (operand, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return n.field(name, path)
	}
	return n.valueExpr(raw, path)
}

// valueExpr reads a ValueExpression: a literal, a reference, or a function application
// (a transform term too, as older clients send it).
func (n *normalizer) valueExpr(raw json.RawMessage, path string) (operand, error) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		lit, err := literal(raw, path)
		return operand{literal: lit}, err
	}
	typ, _ := o.str("type")
	switch typ {
	case "reference":
		if name, ok := o.str("name"); ok {
			return n.field(name, path+".name")
		}
		if name, ok := o.str("term"); ok {
			return n.field(name, path+".term")
		}
		var id int
		if err := json.Unmarshal(o["id"], &id); err != nil {
			return operand{}, apierr.Invalid(path, "a reference has a name (or an integer id)")
		}
		f, ok := n.names.FindFieldByID(id)
		if !ok {
			return operand{}, apierr.Invalid(path+".id", "the table's schema has no field with id %d", id)
		}
		return n.resolved(f)
	case "transform":
		tf, ok := o.str("transform")
		if !ok {
			return operand{}, apierr.Invalid(path+".transform", "a transform term names its transform (\"bucket[16]\", \"day\", ...)")
		}
		inner, err := n.term(o["term"], path+".term")
		if err != nil || inner.unknown || inner.literal != nil {
			return operand{unknown: true}, err
		}
		inner.transform = tf
		return inner, nil
	case "apply":
		return operand{unknown: true}, nil
	case "literal":
		lit, err := literal(raw, path)
		return operand{literal: lit}, err
	}
	return operand{}, apierr.Invalid(path, "an operand is a reference, a literal or an apply, not %s", clip(string(raw)))
}

// field resolves a column name of the request's schema.
func (n *normalizer) field(name, path string) (operand, error) {
	var f iceberg.NestedField
	var ok bool
	if n.caseSensitive {
		f, ok = n.names.FindFieldByName(name)
	} else {
		f, ok = n.names.FindFieldByNameCaseInsensitive(name)
	}
	if !ok {
		how := ""
		if !n.caseSensitive {
			how = ", in any case"
		}
		return operand{}, apierr.Invalid(path, "the table has no column %q%s", clip(name), how)
	}
	return n.resolved(f)
}

// resolved names f as the planning schema does: unknown if that schema lacks it.
func (n *normalizer) resolved(f iceberg.NestedField) (operand, error) {
	name, ok := n.plan.FindColumnName(f.ID)
	if !ok {
		return operand{unknown: true}, nil
	}
	if own, _ := n.names.FindColumnName(f.ID); own != name {
		n.exact = false
	}
	return operand{name: name}, nil
}

// literal reads one literal: a JSON scalar, or {"type":"literal","value":v} (with an
// optional data-type; the column's type decides how v converts).
func literal(raw json.RawMessage, path string) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, apierr.Invalid(path, "a predicate needs a value here")
	}
	switch raw[0] {
	case '{':
		var o object
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, apierr.Invalid(path, "not a literal: %s", clip(string(raw)))
		}
		if typ, _ := o.str("type"); typ != "literal" {
			return nil, apierr.Invalid(path, "not a literal: %s", clip(string(raw)))
		}
		return literal(o["value"], path+".value")
	case '[':
		return nil, apierr.Invalid(path, "a value is one literal, not a list")
	case 'n':
		return nil, apierr.Invalid(path, "a value is never null: test for null with is-null")
	}
	if !json.Valid(raw) {
		return nil, apierr.Invalid(path, "not a literal: %s", clip(string(raw)))
	}
	return raw, nil
}

// literals reads a set predicate's values: a list of literals, or {"type":"literals",
// "values":[...]}.
func literals(raw json.RawMessage, path string) ([]json.RawMessage, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		var o object
		if json.Unmarshal(raw, &o) != nil || o == nil {
			return nil, apierr.Invalid(path, "values are a list of literals")
		}
		if typ, _ := o.str("type"); typ != "literals" {
			return nil, apierr.Invalid(path, "values are a list of literals")
		}
		if err := json.Unmarshal(o["values"], &list); err != nil {
			return nil, apierr.Invalid(path+".values", "values are a list of literals")
		}
	}
	out := make([]json.RawMessage, 0, len(list))
	for i, v := range list {
		lit, err := literal(v, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, lit)
	}
	return out, nil
}

// clip shortens what a message quotes from the request.
func clip(s string) string {
	const most = 200
	if len(s) > most {
		return s[:most] + "..."
	}
	return s
}
