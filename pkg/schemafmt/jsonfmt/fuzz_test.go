package jsonfmt

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
)

// FuzzDecode reads arbitrary bytes with the rich schema: no panics, the same result from
// a used decoder as from a fresh one, valid UTF-8 reasons, and only valid JSON accepted.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{}`, `null`, `[]`, `{"id":1,"tags":["a"],"attrs":{"a":1,"a":2}}`,
		`{"created":"2024-01-01T00:00:00Z","day":"2024-02-29","at":"10:00:00+01:00","ref":"00000000-0000-0000-0000-000000000000"}`,
		`{"free":{"a":[1,2,{"b":null}]},"lines":[{"sku":"x","qty":1e2}],"matrix":[[1.5],[]]}`,
		`{"id":1.5}`, `{"id":"x"}`, `{"customer":"\ud83d\ude00\u0000"}`, `{"id":1,}`, `{"a":[[[[`,
	} {
		f.Add([]byte(seed))
	}
	s := mustCompile(f, richSchema)
	used := newReader(f, s, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		fresh := newReader(t, s, used.target)
		var v rowcodec.Value
		reason := fresh.dec.Decode(data, &v)
		want := "error: " + reason
		if reason == "" {
			want = render(used.target, v)
		}
		if got := used.read(string(data)); got != want {
			t.Fatalf("used decoder: %s\nfresh decoder: %s", got, want)
		}
		if !utf8.ValidString(reason) {
			t.Fatalf("reason is not UTF-8: %q", reason)
		}
		syntax := strings.HasPrefix(reason, "malformed JSON") || strings.HasPrefix(reason, "JSON nested deeper")
		if valid := json.Valid(data); valid == syntax && !(valid && strings.HasPrefix(reason, "JSON nested deeper")) {
			t.Fatalf("encoding/json says valid %v, reason %q", valid, reason)
		}
	})
}

// FuzzCompile compiles arbitrary schema texts: an error or a schema, never a panic, and
// a schema binds to its own root.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		richSchema, v1Schema, `{}`, `true`, `{"type":["string","null"]}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{}],"$defs":{"a":{"$ref":"#"}}}`,
		`{"allOf":[{"$ref":"#/definitions/a"}],"definitions":{"a":{"properties":{"x":{"oneOf":[{"type":"null"},{"$ref":"#"}]}}}}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Compile(schemafmt.Source{Text: text})
		if err != nil {
			return
		}
		d, err := s.Bind(withIDs(s.Root()))
		if err != nil {
			t.Fatalf("binding its own root: %v", err)
		}
		var v rowcodec.Value
		d.Decode([]byte(text), &v)
	})
}
