package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/apierr"
)

var (
	// requestSchema is what names in a filter resolve in; planSchema, the schema of the
	// snapshot planned: it renamed msg to message and lacks f.
	requestSchema = iceberg.NewSchema(1,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "msg", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "Ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 4, Name: "b", Type: iceberg.PrimitiveTypes.Binary},
		iceberg.NestedField{ID: 5, Name: "f", Type: iceberg.PrimitiveTypes.Float64},
	)
	planSchema = iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "message", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "Ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 4, Name: "b", Type: iceberg.PrimitiveTypes.Binary},
	)
)

const (
	ltID5  = `{"type":"lt","term":"id","value":5}`
	fnEqX  = `{"type":"eq","left":{"type":"apply","function":"lower","arguments":[{"type":"reference","name":"msg"}]},"right":"x"}`
	idRefs = `{"type":"eq","left":{"type":"reference","name":"id"},"right":{"type":"reference","name":"f"}}`
)

// Every spelling of the spec's Expression JSON reads as the form iceberg-go parses; NOT
// is pushed down; what no statistics decide is true where it stands; names are the
// planning schema's.
func TestParseFilter(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		insensitive    bool
		inexact        bool
	}{
		{name: "none", in: ``, want: `true`},
		{name: "true", in: `true`, want: `true`},
		{name: "false", in: `false`, want: `false`},
		{name: "true object", in: `{"type":"true"}`, want: `true`},
		{name: "Java's literal", in: `{"type":"literal","value":false}`, want: `false`},
		{name: "legacy", in: ltID5, want: ltID5},
		{name: "left and right", in: `{"type":"lt","left":{"type":"reference","name":"id"},"right":5}`, want: ltID5},
		{name: "mirrored", in: `{"type":"lt","left":5,"right":{"type":"reference","name":"id"}}`, want: `{"type":"gt","term":"id","value":5}`},
		{name: "by id", in: `{"type":"lt","term":{"type":"reference","id":1},"value":5}`, want: ltID5},
		{name: "Java's reference", in: `{"type":"lt","term":{"type":"reference","term":"id"},"value":5}`, want: ltID5},
		{name: "typed literal", in: `{"type":"lt","term":"id","value":{"type":"literal","value":5,"data-type":"long"}}`, want: ltID5},
		{name: "set", in: `{"type":"in","term":"id","values":[1,2]}`, want: `{"type":"in","term":"id","values":[1,2]}`},
		{name: "typed set", in: `{"type":"not-in","child":{"type":"reference","name":"id"},"values":{"type":"literals","values":[1],"data-type":"long"}}`,
			want: `{"type":"not-in","term":"id","values":[1]}`},
		{name: "unary child", in: `{"type":"is-null","child":{"type":"reference","name":"id"}}`, want: `{"type":"is-null","term":"id"}`},
		{name: "transform", in: `{"type":"eq","term":{"type":"transform","transform":"bucket[4]","term":"id"},"value":1}`,
			want: `{"type":"eq","term":{"type":"transform","transform":"bucket[4]","term":"id"},"value":1}`},
		{name: "not pushed down", in: `{"type":"not","child":{"type":"and","left":` + ltID5 + `,"right":{"type":"starts-with","term":"b","value":"01"}}}`,
			want: `{"type":"or","left":{"type":"gt-eq","term":"id","value":5},"right":{"type":"not-starts-with","term":"b","value":"01"}}`},
		{name: "double not", in: `{"type":"not","child":{"type":"not","child":` + ltID5 + `}}`, want: ltID5},
		{name: "not false", in: `{"type":"not","child":false}`, want: `true`},
		{name: "function", in: `{"type":"and","left":` + fnEqX + `,"right":` + ltID5 + `}`,
			want: `{"type":"and","left":true,"right":` + ltID5 + `}`, inexact: true},
		{name: "negated function is true too", in: `{"type":"not","child":` + fnEqX + `}`, want: `true`, inexact: true},
		{name: "two columns", in: `{"type":"not","child":` + idRefs + `}`, want: `true`, inexact: true},
		{name: "literal prefix of a column", in: `{"type":"starts-with","left":"ab","right":{"type":"reference","name":"msg"}}`, want: `true`, inexact: true},
		{name: "renamed", in: `{"type":"eq","term":"msg","value":"a"}`, want: `{"type":"eq","term":"message","value":"a"}`, inexact: true},
		{name: "not in the planning schema", in: `{"type":"not","child":{"type":"gt","term":"f","value":1.5}}`, want: `true`, inexact: true},
		{name: "any case", in: `{"type":"eq","term":"ID","value":3}`, want: `{"type":"eq","term":"id","value":3}`, insensitive: true},
		{name: "timestamp", in: `{"type":"gt","term":"Ts","value":"2026-01-02T03:04:05.000006+00:00"}`, want: `{"type":"gt","term":"Ts","value":"2026-01-02T03:04:05.000006+00:00"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseFilter([]byte(c.in), requestSchema, planSchema, !c.insensitive)
			if err != nil {
				t.Fatal(err)
			}
			want, err := iceberg.ParseExpr([]byte(c.want), planSchema)
			if err != nil {
				t.Fatalf("want %s: %v", c.want, err)
			}
			// Equals, or the same text: a set's String follows map order.
			if !got.expr.Equals(want) && got.expr.String() != want.String() {
				t.Errorf("got %s\nwant %s", got.expr, want)
			}
			if got.exact == c.inexact {
				t.Errorf("exact = %v", got.exact)
			}
			if got.set != (c.in != "") {
				t.Errorf("set = %v", got.set)
			}
		})
	}
}

// A filter that is not one is a 400 naming where it is wrong.
func TestParseFilterRefusesBadFilters(t *testing.T) {
	for _, c := range []struct{ in, field, says string }{
		{`[1]`, "filter", "true, false or an object"},
		{`"id"`, "filter", "true, false or an object"},
		{`{"term":"id"}`, "filter", "no type"},
		{`{"type":"bogus"}`, "filter.type", `unknown expression type "bogus"`},
		{`{"type":"and","left":true}`, "filter", "and needs left and right"},
		{`{"type":"not"}`, "filter", "not has no child"},
		{`{"type":"and","left":true,"right":{"type":"lt","term":"nope","value":1}}`, "filter.right.term", `no column "nope"`},
		{`{"type":"eq","term":"ID","value":1}`, "filter.term", `no column "ID"`},
		{`{"type":"eq","term":{"type":"reference","id":99},"value":1}`, "filter.term.id", "no field with id 99"},
		{`{"type":"lt","term":"id"}`, "filter.value", "needs a value"},
		{`{"type":"lt","term":"id","value":null}`, "filter.value", "never null"},
		{`{"type":"lt","term":"id","value":[1]}`, "filter.value", "not a list"},
		{`{"type":"lt","term":"id","values":[1]}`, "filter", "takes value, not values"},
		{`{"type":"in","term":"id","value":1}`, "filter", "takes values, not value"},
		{`{"type":"in","term":"id","values":[1,null]}`, "filter.values[1]", "never null"},
		{`{"type":"is-null","term":"id","value":1}`, "filter", "takes no value"},
		{`{"type":"is-null"}`, "filter", "needs one operand"},
		{`{"type":"lt","term":"id","value":"five"}`, "filter", ""},
		{`{"type":"eq","term":"b","value":"not hex"}`, "filter", ""},
		{strings.Repeat(`{"type":"not","child":`, maxFilterDepth+2) + `true` + strings.Repeat(`}`, maxFilterDepth+2), "", "nested more than"},
	} {
		_, err := parseFilter([]byte(c.in), requestSchema, planSchema, true)
		var e *apierr.Error
		if !errors.As(err, &e) || e.Kind != apierr.InvalidArgument {
			t.Errorf("%.80s: %v, want InvalidArgument", c.in, err)
			continue
		}
		if c.field != "" && e.Field != c.field {
			t.Errorf("%.80s: field %q, want %q (%v)", c.in, e.Field, c.field, err)
		}
		if !strings.Contains(e.Msg, c.says) {
			t.Errorf("%.80s: %q does not say %q", c.in, e.Msg, c.says)
		}
	}
}
