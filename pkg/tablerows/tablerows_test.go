package tablerows

import (
	"encoding/json"
	"math"
	"testing"
)

func TestMapCellJSON(t *testing.T) {
	for _, tc := range []struct {
		m    Map
		want string
	}{
		{Map{{"a\"b", int64(1)}}, `{"a\"b":1}`},
		{Map{{true, "y"}, {false, nil}}, `{"true":"y","false":null}`},
		{Map{{uint64(18446744073709551615), Decimal("1.50")}}, `{"18446744073709551615":1.50}`},
		{Map{{Decimal("-0.05"), []any{int64(1)}}}, `{"-0.05":[1]}`},
		{Map{{[]byte{0, 1}, "b"}}, `{"AAE=":"b"}`},
		{Map{{float32(0.1), "f"}, {math.NaN(), "nan"}}, `{"0.1":"f","NaN":"nan"}`},
		{Map{{Object{{"a", int64(1)}}, "s"}}, `[{"key":{"a":1},"value":"s"}]`},
		{Map{{"x", int64(1)}, {[]any{"l"}, int64(2)}}, `[{"key":"x","value":1},{"key":["l"],"value":2}]`},
		{Map{}, `{}`},
	} {
		if got := string(AppendJSON(nil, tc.m)); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.m, got, tc.want)
		}
		var v any
		if err := json.Unmarshal(AppendJSON(nil, tc.m), &v); err != nil {
			t.Errorf("%v: not JSON: %v", tc.m, err)
		}
	}
}
