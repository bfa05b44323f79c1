package rowcodec

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// checkTimestamp checks parseTimestamp against time.Parse (parseTimestampSlow) on b:
// what the fast path reads, time.Parse reads to the same instant.
func checkTimestamp(t interface{ Fatalf(string, ...any) }, b []byte) (fast bool) {
	us, zone, ok := parseTimestamp(b)
	if !ok {
		return false
	}
	slow, msg := parseTimestampSlow(b, false)
	if msg != "" || slow != us {
		t.Fatalf("%q: fast %d (zone %v), time.Parse %d %q", b, us, zone, slow, msg)
	}
	if _, msg := parseTimestampSlow(b, true); (msg == "") != zone {
		t.Fatalf("%q: fast says zone %v, time.Parse as timestamptz %q", b, zone, msg)
	}
	return true
}

func TestParseTimestampIsTimeParse(t *testing.T) {
	for _, s := range []string{
		"2024-05-01T00:00:00Z", "2024-05-01T00:00:00.123Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
		"1969-12-31T23:59:59.9999999Z", "1600-02-29T12:00:00+23:59", "2000-02-29T00:00:00-00:30", "2024-01-02T03:04:05.123456789",
		"2024-01-02T03:04:05.1234567891234", "1970-01-01T00:00:00.000001-01:00",
	} {
		if !checkTimestamp(t, []byte(s)) {
			t.Errorf("%s: not read by the fast path", s)
		}
	}
	for _, s := range []string{
		"2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2024-04-31T00:00:00Z", "2024-13-01T00:00:00Z", "2024-00-01T00:00:00Z",
		"2024-01-01T24:00:00Z", "2024-01-01T00:60:00Z", "2024-01-01T00:00:60Z", "2024-01-01T00:00:00+24:00", "2024-01-01T00:00:00+01:60",
		"2024-01-01t00:00:00Z", "2024-01-01T00:00:00z", "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00,5Z", "2024-01-01T0:00:00Z",
		"2024-01-01T00:00:00+0100", "2024-01-01T00:00:00 ", "-024-01-01T00:00:00Z", "2024-01-01T00:00:00+01:00Z",
	} {
		if checkTimestamp(t, []byte(s)) {
			t.Errorf("%s: read by the fast path", s)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		ts := time.Unix(rapid.Int64Range(-62167219200, 253402300799).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec")).UTC()
		s := ts.Format("2006-01-02T15:04:05")
		if digits := rapid.IntRange(0, 12).Draw(t, "frac"); digits > 0 {
			s += "." + fmt.Sprintf("%012d", rapid.Int64Range(0, 999999999999).Draw(t, "f"))[:digits]
		}
		switch rapid.IntRange(0, 2).Draw(t, "zone") {
		case 1:
			s += "Z"
		case 2:
			s += fmt.Sprintf("%c%02d:%02d", rapid.SampledFrom([]byte("+-")).Draw(t, "sign"), rapid.IntRange(0, 23).Draw(t, "hh"), rapid.IntRange(0, 59).Draw(t, "mm"))
		}
		b := []byte(s)
		if !rapid.Bool().Draw(t, "mutate") {
			if !checkTimestamp(t, b) {
				t.Fatalf("%s: not read by the fast path", b)
			}
			return
		}
		// One byte changed: whatever the fast path still reads, time.Parse reads alike.
		b[rapid.IntRange(0, len(b)-1).Draw(t, "at")] = rapid.SampledFrom([]byte("0123456789:-+TZ.,tz ")).Draw(t, "c")
		checkTimestamp(t, b)
	})
}

func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2024-05-01T00:00:00Z", "2024-01-02T03:04:05.123456789+02:00", "0000-02-29T00:00:00", "2024-01-01T00:00:00.Z"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkTimestamp(t, b) })
}
