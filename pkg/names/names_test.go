package names

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/minkhq/mink/pkg/apierr"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		s    string
		kind Kind
		ok   bool
	}{
		{"", Table, true}, {"orders", Table, true}, {"indexer-2.example:7070", Node, true}, {"ünïcode", Namespace, true},
		{strings.Repeat("n", 128), Table, true}, {strings.Repeat("n", 129), Table, false},
		{strings.Repeat("t", 249), Topic, true}, {strings.Repeat("t", 250), Topic, false},
		{"a\x00", Node, false}, {"a\nb", Table, false}, {"a\u0085b", Table, false}, {"a\xff", Namespace, false},
	} {
		err := Check("field", c.kind, c.s)
		if (err == nil) != c.ok {
			t.Errorf("Check(%q, %s): %v", c.s, c.kind.What, err)
		}
		if err != nil && (apierr.Classify(err) != apierr.InvalidArgument || !strings.HasPrefix(err.Error(), "field: ") || len(err.Error()) > 200) {
			t.Errorf("Check(%q): %v", c.s, err)
		}
	}
	// A long name is quoted by its start only, cut at a character's boundary.
	err := Check("name", Table, strings.Repeat("é", 100))
	if err == nil || !utf8.ValidString(err.Error()) || strings.Count(err.Error(), "é") > 32 {
		t.Errorf("a long name's message: %v", err)
	}
	if !Storable("ünïcode\n") || Storable("a\x00") || Storable("\xff") {
		t.Error("Storable")
	}
}
