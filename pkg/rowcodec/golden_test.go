package rowcodec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/record"
)

// goldenRows is the SHA-256 of the rows (and error texts) of goldenRecords, as the
// decoder before issue 17's faster paths made them. Rows feed files that other
// processes and later versions rebuild byte for byte, so a change here is a change of
// the file format: it needs a new parquetbuild.Settings.Version, not a new hash.
const goldenRows = "d679c2c5fcdd670d5dc52dcada5d73ed320c89c4f01dd22012017df8628e06af"

// goldenRecords are n records of allTypes' columns drawn from columnValues (mostly
// good values, some bad, some records cut short or with a byte changed), keys in any
// order, from a generator of our own so that they never change.
func goldenRecords(n int) [][]byte {
	x := uint64(0x9e3779b97f4a7c15)
	next := func(k int) int { // xorshift64*
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		return int((x * 0x2545f4914f6cdd1d) >> 33 % uint64(k))
	}
	shuffle := func(s []string) {
		for i := len(s) - 1; i > 0; i-- {
			j := next(i + 1)
			s[i], s[j] = s[j], s[i]
		}
	}
	pick := func(vs []string) string {
		if next(5) > 0 {
			return vs[0]
		}
		return vs[next(len(vs))]
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range columnValues {
			if !yield(k) {
				return
			}
		}
	})
	keys = append(keys, "user")
	out := make([][]byte, n)
	for i := range out {
		var members []string
		for _, k := range keys {
			if next(2) == 0 {
				continue
			}
			v := ""
			if k == "user" {
				var um []string
				for _, uk := range []string{"id", "name", "x"} {
					if next(2) == 0 {
						um = append(um, `"`+uk+`":`+pick(userFields[uk]))
					}
				}
				shuffle(um)
				v = "{" + strings.Join(um, ",") + "}"
			} else {
				v = pick(columnValues[k])
			}
			members = append(members, `"`+k+`":`+v)
		}
		shuffle(members)
		val := []byte("{" + strings.Join(members, ", ") + "}")
		switch next(20) {
		case 0:
			val = val[:next(len(val))]
		case 1:
			val[next(len(val))] = byte(next(256))
		case 2:
			val[next(len(val))] = "0123456789:-+TZ.,\"{}[] e"[next(24)]
		}
		out[i] = val
	}
	return out
}

// The decoder makes the same rows and error texts as it always did.
func TestDecodeGolden(t *testing.T) {
	d, err := NewDecoder(allTypes)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var row Row
	oks := 0
	for i, v := range goldenRecords(50_000) {
		ok := d.Decode(record.Record{Partition: 1, Offset: int64(i), Timestamp: time.UnixMilli(5), Value: v}, &row)
		if ok {
			oks++
		}
		fmt.Fprintf(h, "%v|%s\n", ok, dump(row))
	}
	if oks < 5_000 || oks > 45_000 {
		t.Errorf("%d of 50000 records decoded: the records test too little of one side", oks)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != goldenRows {
		t.Errorf("rows hash %s, want %s", got, goldenRows)
	}
}
