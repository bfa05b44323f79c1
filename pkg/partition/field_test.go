package partition

import (
	"encoding/json"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseTransform(t *testing.T) {
	for in, want := range map[string]Transform{
		"identity": {Kind: Identity}, "": {Kind: Identity}, "void": {Kind: Void},
		"year": {Kind: Year}, "years": {Kind: Year}, "YEAR": {Kind: Year},
		"month": {Kind: Month}, "months": {Kind: Month},
		"day": {Kind: Day}, "days": {Kind: Day}, "date": {Kind: Day}, " Day ": {Kind: Day},
		"hour": {Kind: Hour}, "hours": {Kind: Hour}, "date_hour": {Kind: Hour},
		"bucket[16]": {Kind: Bucket, Arg: 16}, "BUCKET[16]": {Kind: Bucket, Arg: 16}, "bucket(16)": {Kind: Bucket, Arg: 16},
		"truncate[4]": {Kind: Truncate, Arg: 4}, "truncate( 4 )": {Kind: Truncate, Arg: 4},
		"bucket[2147483647]": {Kind: Bucket, Arg: MaxArg},
	} {
		got, err := ParseTransform(in)
		if err != nil || got != want {
			t.Errorf("ParseTransform(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, wantErr := range map[string]string{
		"hourly":               `unknown transform "hourly"`,
		"bucket":               "bucket needs its N (the number of buckets), as in bucket[16]",
		"bucket[0]":            "bucket N must be 1..2147483647, not 0",
		"bucket[-3]":           "bucket N must be 1..2147483647, not -3",
		"truncate[2147483648]": "truncate W must be 1..2147483647, not 2147483648",
		"bucket[x]":            "bucket N (the number of buckets) must be a whole number",
		"bucket[16":            "want identity, year",
		"day(event_ts)":        `transform "day(event_ts)" holds a column: give the column on its own and the transform as day`,
		"bucket(16, id)":       `transform "bucket(16, id)" holds a column`,
		"day[3]":               "day takes no argument",
	} {
		_, err := ParseTransform(in)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseTransform(%q) = %v; want an error holding %q", in, err, wantErr)
		}
	}
}

func TestTransformText(t *testing.T) {
	for _, tr := range []Transform{{Kind: Identity}, {Kind: Year}, {Kind: Month}, {Kind: Day}, {Kind: Hour},
		{Kind: Bucket, Arg: 16}, {Kind: Truncate, Arg: 4}, {Kind: Void}} {
		b, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		var back Transform
		if err := json.Unmarshal(b, &back); err != nil || back != tr {
			t.Errorf("%v: JSON %s reads back as %v, %v", tr, b, back, err)
		}
		// Iceberg's own name for it is the same text.
		if tr.Iceberg().String() != tr.String() {
			t.Errorf("%v is %v in iceberg-go", tr, tr.Iceberg())
		}
	}
	if _, err := json.Marshal(Transform{Kind: Bucket}); err == nil {
		t.Error("bucket[0] marshals")
	}
}

func TestParse(t *testing.T) {
	id := func(col string) Field { return Field{Column: col, Transform: Transform{Kind: Identity}} }
	for in, want := range map[string]Field{
		"day(event_ts)":              {Column: "event_ts", Transform: Transform{Kind: Day}},
		"  day ( event_ts )  ":       {Column: "event_ts", Transform: Transform{Kind: Day}},
		"days(event_ts)":             {Column: "event_ts", Transform: Transform{Kind: Day}},
		"hours(_kafka_timestamp)":    {Column: "_kafka_timestamp", Transform: Transform{Kind: Hour}},
		"months(ts)":                 {Column: "ts", Transform: Transform{Kind: Month}},
		"years(ts)":                  {Column: "ts", Transform: Transform{Kind: Year}},
		"bucket[16](customer_id)":    {Column: "customer_id", Transform: Transform{Kind: Bucket, Arg: 16}},
		"bucket[ 16 ] (customer_id)": {Column: "customer_id", Transform: Transform{Kind: Bucket, Arg: 16}},
		"bucket(16, customer_id)":    {Column: "customer_id", Transform: Transform{Kind: Bucket, Arg: 16}},
		"bucket(customer_id, 16)":    {Column: "customer_id", Transform: Transform{Kind: Bucket, Arg: 16}},
		"bucket(16, 2fa)":            {Column: "2fa", Transform: Transform{Kind: Bucket, Arg: 16}},
		"bucket(2fa, 16)":            {Column: "2fa", Transform: Transform{Kind: Bucket, Arg: 16}},
		"truncate[4](name)":          {Column: "name", Transform: Transform{Kind: Truncate, Arg: 4}},
		"truncate(4, name)":          {Column: "name", Transform: Transform{Kind: Truncate, Arg: 4}},
		"identity(x)":                id("x"),
		"x":                          id("x"),
		"day":                        id("day"), // a column named like a transform
		"identity(day)":              id("day"),
		"void(x)":                    {Column: "x", Transform: Transform{Kind: Void}},
		"user.id":                    id("user.id"),
		"bucket[8](user . id)":       {Column: "user.id", Transform: Transform{Kind: Bucket, Arg: 8}},
		"`my-col`.`a``b`":            id("my-col.a`b"),
		`"quoted ""name"""`:          id(`quoted "name"`),
		"day(event_ts) AS d":         {Column: "event_ts", Transform: Transform{Kind: Day}, Name: "d"},
		"day(event_ts) as d":         {Column: "event_ts", Transform: Transform{Kind: Day}, Name: "d"},
		"x AS `the name`":            {Column: "x", Transform: Transform{Kind: Identity}, Name: "the name"},
		"`as`":                       id("as"),
		"DAY(Event_TS)":              {Column: "Event_TS", Transform: Transform{Kind: Day}},
		"hour(événement)":            {Column: "événement", Transform: Transform{Kind: Hour}},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, wantErr := range map[string]string{
		"":                 "missing a column",
		"day()":            "want a column",
		"day(ts":           "missing ) closing day(",
		"day(ts, 3)":       "day takes one column and no other argument",
		"bucket(ts)":       "bucket needs its N (the number of buckets): bucket[16](ts) or bucket(16, ts)",
		"bucket(16)":       "bucket(16) names no column: write bucket[16](column) or bucket(16, column)",
		"bucket[0](ts)":    "bucket N must be 1..2147483647, not 0",
		"bucket(-1, ts)":   "bucket N must be 1..2147483647, not -1",
		"bucket[x](ts)":    "bucket N (the number of buckets) must be a whole number",
		"bucket[16]ts":     "want (column) after bucket[16]",
		"day[3](ts)":       "day takes no [argument]",
		"hourly(ts)":       `unknown transform "hourly"`,
		"day(ts) AS":       "AS needs a name",
		"day(ts) extra":    `unexpected "extra" after the field`,
		"day(ts),":         `unexpected ","`,
		"`unterminated":    "missing closing `",
		"truncate(4, name": "missing ) closing truncate(",
		"bucket(16, a b)":  `unexpected "b)" in bucket(...)`,
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("Parse(%q) = %v; want an error holding %q", in, err, wantErr)
		}
	}
}

func TestParseList(t *testing.T) {
	for in, want := range map[string][]Field{
		"day(event_ts), bucket[8](user_id)": {
			{Column: "event_ts", Transform: Transform{Kind: Day}},
			{Column: "user_id", Transform: Transform{Kind: Bucket, Arg: 8}}},
		"(hour(_kafka_timestamp))": {{Column: "_kafka_timestamp", Transform: Transform{Kind: Hour}}},
		"( a , bucket(4, b) AS bb )": {
			{Column: "a", Transform: Transform{Kind: Identity}},
			{Column: "b", Transform: Transform{Kind: Bucket, Arg: 4}, Name: "bb"}},
	} {
		got, err := ParseList(in)
		if err != nil || len(got) != len(want) {
			t.Errorf("ParseList(%q) = %+v, %v; want %+v", in, got, err, want)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("ParseList(%q)[%d] = %+v; want %+v", in, i, got[i], want[i])
			}
		}
	}
	for in, wantErr := range map[string]string{
		"(day(ts)":     "missing ) closing the list",
		"day(ts) x":    `unexpected "x" after field 1`,
		"a, , b":       "want a column",
		"day(ts), (b)": "want a column",
	} {
		if _, err := ParseList(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseList(%q) = %v; want an error holding %q", in, err, wantErr)
		}
	}
}

// A field written by String reads back as the same field, whatever its column's names
// (quotes, dots, keywords, non-ASCII) and its transform.
func TestParseFormatRoundTrip(t *testing.T) {
	name := rapid.OneOf(
		rapid.StringMatching(`[A-Za-z_][A-Za-z0-9_]{0,8}`),
		rapid.SampledFrom([]string{"day", "bucket", "AS", "as", "identity", "16", "2fa", "a`b", `a"b`, "a b", "é", "", " ", "a(b)", "x,y"}),
		rapid.String(),
	)
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOfN(name.Filter(func(s string) bool { return !strings.Contains(s, ".") }), 1, 3).Draw(t, "parts")
		tr := Transform{Kind: Kind(rapid.IntRange(int(Identity), int(Void)).Draw(t, "kind"))}
		if tr.Kind == Bucket || tr.Kind == Truncate {
			tr.Arg = rapid.IntRange(1, MaxArg).Draw(t, "arg")
		}
		f := Field{Column: strings.Join(parts, "."), Transform: tr}
		if rapid.Bool().Draw(t, "named") {
			f.Name = name.Draw(t, "name")
		}
		// A column whose first name is empty cannot be told from none.
		if parts[0] == "" && len(parts) == 1 {
			t.Skip("empty column")
		}
		s := f.String()
		got, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q) of %+v: %v", s, f, err)
		}
		if got != f {
			t.Fatalf("Parse(%q) = %+v; want %+v", s, got, f)
		}
		list, err := ParseList(s + ", " + s)
		if err != nil || len(list) != 2 || list[0] != f || list[1] != f {
			t.Fatalf("ParseList(%q, %q) = %+v, %v", s, s, list, err)
		}
	})
}

func TestNewField(t *testing.T) {
	f, err := NewField("event_ts", "day", "")
	if err != nil || f != (Field{Column: "event_ts", Transform: Transform{Kind: Day}}) {
		t.Errorf("NewField = %+v, %v", f, err)
	}
	f, err = NewField("a.b", "", "ab")
	if err != nil || f != (Field{Column: "a.b", Transform: Transform{Kind: Identity}, Name: "ab"}) {
		t.Errorf("NewField = %+v, %v", f, err)
	}
	if _, err := NewField("", "day(event_ts)", ""); err == nil || !strings.Contains(err.Error(), "holds a column") {
		t.Errorf("NewField with the column in the transform: %v", err)
	}
}
