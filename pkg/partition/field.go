package partition

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Field is one partition field as a user gives it, before it is bound to a schema.
type Field struct {
	// Column is the source column as Iceberg names it: a top-level column (event_ts), a
	// field nested in structs by its path (user.id), or a Kafka column
	// (_kafka_timestamp).
	Column    string
	Transform Transform
	// Name is the partition field's name; "" takes the default (DefaultName).
	Name string
}

// String writes f in the syntax Parse reads: day(event_ts), bucket[16](customer_id),
// a column alone for identity, and " AS name" when f has a name.
func (f Field) String() string {
	col := formatColumn(f.Column)
	var s string
	switch f.Transform.Kind {
	case Identity:
		s = col
	default:
		s = f.Transform.String() + "(" + col + ")"
	}
	if f.Name != "" {
		s += " AS " + quoteName(f.Name)
	}
	return s
}

// Parse reads one partition field as users write it, in Iceberg's spec form
// (day(event_ts), bucket[16](customer_id), truncate[4](name), identity(x), void(x)), in
// Spark SQL's and Redpanda's (days(ts), hours(ts), bucket(16, customer_id),
// truncate(4, name)), in Trino's (bucket(customer_id, 16)), or a column alone for
// identity, each optionally followed by "AS name". Transform names and AS ignore case.
// A column is a dotted path of names; a name that is not letters, digits and _ is
// quoted in backticks or double quotes, the quote doubled inside (`my-col`.`a“b`).
func Parse(s string) (Field, error) {
	p := parser{s: s}
	f, err := p.field()
	if err != nil {
		return Field{}, err
	}
	p.space()
	if !p.done() {
		return Field{}, p.errorf("unexpected %q after the field", p.rest())
	}
	return f, nil
}

// ParseList reads fields separated by commas, optionally all in parentheses as Redpanda
// writes a spec: "day(ts), bucket[8](user_id)" or "(hour(_kafka_timestamp))".
func ParseList(s string) ([]Field, error) {
	p := parser{s: s}
	p.space()
	paren := false
	if p.peek() == '(' {
		// A list in parentheses, unless the parenthesis opens nothing but a field's own
		// arguments, which cannot begin a field.
		paren = true
		p.pos++
	}
	var fs []Field
	for {
		f, err := p.field()
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
		p.space()
		if p.peek() != ',' {
			break
		}
		p.pos++
	}
	if paren {
		if p.peek() != ')' {
			return nil, p.errorf("missing ) closing the list")
		}
		p.pos++
		p.space()
	}
	if !p.done() {
		return nil, p.errorf("unexpected %q after field %d", p.rest(), len(fs))
	}
	return fs, nil
}

// NewField makes a field of the admin API's three strings: the column as Iceberg names
// it (taken as it is, dots separating nested names), the transform (ParseTransform) and
// the name ("" for the default).
func NewField(column, transform, name string) (Field, error) {
	t, err := ParseTransform(transform)
	if err != nil {
		return Field{}, err
	}
	return Field{Column: column, Transform: t, Name: name}, nil
}

type parser struct {
	s   string
	pos int
}

func (p *parser) done() bool   { return p.pos >= len(p.s) }
func (p *parser) rest() string { return p.s[p.pos:] }

func (p *parser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.pos]
}

func (p *parser) space() {
	for !p.done() {
		r, n := utf8.DecodeRuneInString(p.s[p.pos:])
		if !unicode.IsSpace(r) {
			return
		}
		p.pos += n
	}
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("partition field %q: %s", strings.TrimSpace(p.s), fmt.Sprintf(format, args...))
}

// field reads "expr [AS name]".
func (p *parser) field() (Field, error) {
	p.space()
	start := p.pos
	first, quoted, err := p.name()
	if err != nil {
		return Field{}, err
	}
	var f Field
	p.space()
	k, isTransform := transformNames[strings.ToLower(first)]
	switch c := p.peek(); {
	case !quoted && isTransform && (c == '(' || c == '['):
		f, err = p.call(k, first)
	case !quoted && first != "" && (c == '(' || c == '['):
		return Field{}, p.errorf("unknown transform %q (want %s)", first, transformList)
	default:
		p.pos = start
		p.space()
		f.Transform = Transform{Kind: Identity}
		f.Column, err = p.column()
	}
	if err != nil {
		return Field{}, err
	}
	p.space()
	save := p.pos
	if word, q, err := p.name(); err == nil && !q && strings.EqualFold(word, "as") {
		p.space()
		name, _, err := p.name()
		if err != nil {
			return Field{}, p.errorf("AS needs a name")
		}
		if name == "" {
			return Field{}, p.errorf("AS needs a name")
		}
		f.Name = name
	} else {
		p.pos = save
	}
	return f, nil
}

// call reads a transform's arguments after its name: [N](column), (column),
// (N, column) or (column, N).
func (p *parser) call(k Kind, name string) (Field, error) {
	f := Field{Transform: Transform{Kind: k}}
	hasArg := k == Bucket || k == Truncate
	if p.peek() == '[' {
		p.pos++
		end := strings.IndexByte(p.s[p.pos:], ']')
		if end < 0 {
			return Field{}, p.errorf("missing ] after %s[", name)
		}
		arg := strings.TrimSpace(p.s[p.pos : p.pos+end])
		p.pos += end + 1
		if !hasArg {
			return Field{}, p.errorf("%s takes no [argument]", k)
		}
		if !isNumber(arg) {
			return Field{}, p.errorf("%s %s must be a whole number, as in %s[%d](column)", k, argName(k), k, exampleArg(k))
		}
		n, err := parseArg(k, arg)
		if err != nil {
			return Field{}, p.errorf("%v", err)
		}
		f.Transform.Arg = n
		p.space()
		if p.peek() != '(' {
			return Field{}, p.errorf("want (column) after %s", f.Transform)
		}
		p.pos++
		col, err := p.column()
		if err != nil {
			return Field{}, err
		}
		f.Column = col
		return f, p.close(name)
	}
	p.pos++ // (
	p.space()
	if save := p.pos; hasArg && isDigitOrSign(p.peek()) {
		// Spark and Redpanda: bucket(16, column); a column may begin with a digit too.
		arg := p.number()
		p.space()
		if p.peek() == ',' {
			n, err := parseArg(k, arg)
			if err != nil {
				return Field{}, p.errorf("%v", err)
			}
			f.Transform.Arg = n
			p.pos++
			if f.Column, err = p.column(); err != nil {
				return Field{}, err
			}
			return f, p.close(name)
		}
		p.pos = save
	}
	col, err := p.column()
	if err != nil {
		return Field{}, err
	}
	f.Column = col
	p.space()
	if p.peek() == ',' {
		// Trino: bucket(column, 16).
		p.pos++
		p.space()
		arg := p.number()
		if !hasArg {
			return Field{}, p.errorf("%s takes one column and no other argument", k)
		}
		if arg == "" {
			return Field{}, p.errorf("%s %s must be a whole number", k, argName(k))
		}
		n, err := parseArg(k, arg)
		if err != nil {
			return Field{}, p.errorf("%v", err)
		}
		f.Transform.Arg = n
	} else if hasArg && isNumber(col) {
		return Field{}, p.errorf("%s(%s) names no column: write %s[%s](column) or %s(%s, column)", k, col, k, col, k, col)
	} else if hasArg {
		return Field{}, p.errorf("%s needs its %s: %s[%d](%s) or %s(%d, %s)", k, argName(k),
			k, exampleArg(k), formatColumn(col), k, exampleArg(k), formatColumn(col))
	}
	return f, p.close(name)
}

func (p *parser) close(name string) error {
	p.space()
	if p.peek() != ')' {
		if p.done() {
			return p.errorf("missing ) closing %s(", name)
		}
		return p.errorf("unexpected %q in %s(...)", p.rest(), name)
	}
	p.pos++
	return nil
}

func isDigitOrSign(c byte) bool { return c >= '0' && c <= '9' || c == '-' || c == '+' }

// number reads an optionally signed run of digits ("" if there is none).
func (p *parser) number() string {
	start := p.pos
	if c := p.peek(); c == '-' || c == '+' {
		p.pos++
	}
	for c := p.peek(); c >= '0' && c <= '9'; c = p.peek() {
		p.pos++
	}
	return p.s[start:p.pos]
}

// column reads a dotted path of names, returning the names joined by dots.
func (p *parser) column() (string, error) {
	p.space()
	var parts []string
	for {
		name, quoted, err := p.name()
		if err != nil {
			return "", err
		}
		if name == "" && !quoted {
			if p.done() {
				return "", p.errorf("missing a column")
			}
			return "", p.errorf("want a column at %q", p.rest())
		}
		parts = append(parts, name)
		save := p.pos
		p.space()
		if p.peek() != '.' {
			p.pos = save
			return strings.Join(parts, "."), nil
		}
		p.pos++
		p.space()
	}
}

// name reads a bare name (letters, digits, _ and $) or a quoted one; quoted says which.
// A bare name may be empty; a quoted one too (“).
func (p *parser) name() (string, bool, error) {
	if c := p.peek(); c == '`' || c == '"' {
		p.pos++
		var b strings.Builder
		for {
			i := strings.IndexByte(p.s[p.pos:], c)
			if i < 0 {
				return "", true, p.errorf("missing closing %c", c)
			}
			b.WriteString(p.s[p.pos : p.pos+i])
			p.pos += i + 1
			if p.peek() != c {
				return b.String(), true, nil
			}
			b.WriteByte(c) // a doubled quote
			p.pos++
		}
	}
	start := p.pos
	for !p.done() {
		r, n := utf8.DecodeRuneInString(p.s[p.pos:])
		if !isNameRune(r) {
			break
		}
		p.pos += n
	}
	return p.s[start:p.pos], false, nil
}

func isNameRune(r rune) bool {
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// bare reports whether name can be written without quotes.
func bare(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r == utf8.RuneError || !isNameRune(r) {
			return false
		}
	}
	return true
}

// formatColumn writes a column path, quoting the names that need it. Names never hold
// the dots that separate them: a column is its names joined by dots.
func formatColumn(col string) string {
	parts := strings.Split(col, ".")
	for i, s := range parts {
		parts[i] = quoteName(s)
	}
	return strings.Join(parts, ".")
}

// quoteName writes a name bare if it can be, in backticks otherwise; "as" is quoted so
// that it does not read as the keyword.
func quoteName(s string) string {
	if bare(s) && !strings.EqualFold(s, "as") {
		return s
	}
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}
