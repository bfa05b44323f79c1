package plan

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/tables"
)

func testToken() token {
	start := int64(7)
	return token{scanKey: scanKey{Table: 42, Metadata: "default/t/metadata/live/x.metadata.json", Start: &start, End: 9, Schema: 3,
		Filter: json.RawMessage(`{"type":"lt","term":"id","value":5}`), CaseInsensitive: true, Stats: []int{1, 4}},
		Expires: time.Now().Add(time.Hour).UnixMilli(), Batch: 2}
}

// A token reads back as it was made; an edited one reads as no token, or as the same.
func TestTokenRoundTripAndTampering(t *testing.T) {
	tok := testToken()
	s, err := tok.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeToken(s)
	if err != nil || !reflect.DeepEqual(got, tok) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, tok)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
	for i := range len(s) {
		for _, c := range []byte(alphabet) {
			if c == s[i] {
				continue
			}
			edited := s[:i] + string(c) + s[i+1:]
			if got, err := decodeToken(edited); err == nil && !reflect.DeepEqual(got, tok) {
				t.Fatalf("edited token %q decoded as another one: %+v", edited, got)
			}
		}
	}
	for _, bad := range []string{"", "p1", "p1.", "p1..", "p2." + s[3:], s + ".x", "p1.!!!.AAAA"} {
		if _, err := decodeToken(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

// No input makes the decoder panic; whatever it accepts encodes to itself again.
func FuzzDecodeToken(f *testing.F) {
	s, err := testToken().encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s)
	f.Add("p1.AAAA.AAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeToken(s)
		if err != nil {
			return
		}
		again, err := tok.encode()
		if err != nil {
			t.Fatal(err)
		}
		if back, err := decodeToken(again); err != nil || !reflect.DeepEqual(back, tok) {
			t.Fatalf("%+v encoded and decoded as %+v, %v", tok, back, err)
		}
	})
}

// A token is answered for its own table until it expires; else it is a 404 that says
// why, never another table's plan.
func TestTokenOfItsTableUntilItExpires(t *testing.T) {
	now := time.Now()
	p := &Planner{o: Options{TokenTTL: time.Hour}, now: func() time.Time { return now }}
	tok := testToken()
	tok.Expires = now.Add(time.Minute).UnixMilli()
	s, err := tok.encode()
	if err != nil {
		t.Fatal(err)
	}
	mine, other := tables.Table{ID: 42, Namespace: "default", Name: "t"}, tables.Table{ID: 43, Namespace: "default", Name: "u"}
	if got, err := p.token(mine, s, "plan id"); err != nil || !reflect.DeepEqual(got, tok) {
		t.Fatalf("%+v %v", got, err)
	}
	for _, c := range []struct {
		t     tables.Table
		s     string
		after time.Duration
		says  string
	}{
		{other, s, 0, "of another table"},
		{mine, s, time.Minute, "has expired"},
		{mine, s[:len(s)-2], 0, "does not exist"},
		{mine, "", 0, "does not exist"},
	} {
		now = time.Now().Add(c.after)
		_, err := p.token(c.t, c.s, "plan id")
		var e *apierr.Error
		if !errors.As(err, &e) || e.Kind != apierr.NotFound || !strings.Contains(e.Msg, c.says) {
			t.Errorf("table %d, %.20s, %s later: %v; want NotFound saying %q", c.t.ID, c.s, c.after, err, c.says)
		}
	}
}
