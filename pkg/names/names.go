// Package names is the one rule every name a request carries passes before anything
// looks it up or stores it: namespaces, tables, nodes and topics, wherever they enter
// (the admin API, the catalog's paths). What may be created is stricter still
// (tables.Validate, the --node-id flag); this is what may be asked for at all, so that
// a name no object can have is an InvalidArgument naming its field, never a database
// error.
package names

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/minkhq/mink/pkg/apierr"
)

// Kind is what a name names, and how long one may be.
type Kind struct {
	What string
	Max  int // bytes
}

// The kinds of names, with their bounds (README, "The admin API").
var (
	Namespace = Kind{"namespace", 128}
	Table     = Kind{"table", 128}
	View      = Kind{"view", 128}
	Node      = Kind{"node", 128}
	Topic     = Kind{"Kafka topic", 249} // Kafka's own bound
)

// Check is nil when s may be a name of kind k: at most k.Max bytes of UTF-8 without
// control characters (NUL included). An empty s passes: each request says what an empty
// name means (this node, the default namespace, every namespace) or that one is needed.
// Errors are InvalidArgument naming field, and quote at most the start of s.
func Check(field string, k Kind, s string) error {
	switch {
	case len(s) > k.Max:
		return apierr.Invalid(field, "%q... is %d bytes long: a %s name is at most %d bytes", cut(s), len(s), k.What, k.Max)
	case !utf8.ValidString(s):
		return apierr.Invalid(field, "%q is not valid UTF-8: no %s name is", cut(s), k.What)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return apierr.Invalid(field, "%q holds a control character (NUL, a newline, ...): no %s name does", cut(s), k.What)
	}
	return nil
}

// Storable reports whether Postgres stores s as given (text and jsonb): UTF-8 without
// NUL. What is not would be a driver's error, or silently changed.
func Storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// cut is the start of s, for a message.
func cut(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
