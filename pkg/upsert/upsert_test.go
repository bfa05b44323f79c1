package upsert

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/minkhq/mink/pkg/record"
)

// genRuns draws records of a few keys (some without a key, some tombstones) cut into
// adjacent runs.
func genRuns(t *rapid.T) [][]record.Record {
	n := rapid.IntRange(0, 60).Draw(t, "records")
	var runs [][]record.Record
	var cur []record.Record
	for off := range n {
		r := record.Record{Offset: int64(off), Value: []byte(fmt.Sprint("v", off))}
		switch k := rapid.IntRange(-1, 6).Draw(t, "key"); k {
		case -1: // no key
		default:
			r.Key = []byte(fmt.Sprint("k", k))
		}
		if k := rapid.IntRange(0, 3).Draw(t, "tombstone"); k == 0 {
			r.Value = nil
		}
		cur = append(cur, r)
		if rapid.IntRange(0, 4).Draw(t, "cut") == 0 {
			runs = append(runs, cur)
			cur = nil
		}
	}
	return append(runs, cur)
}

// model is the table a map from Kafka gives: key -> latest record, tombstones removed.
func model(recs []record.Record) map[string]int64 {
	m := map[string]int64{}
	for _, r := range recs {
		k := "nil"
		if r.Key != nil {
			k = "k" + string(r.Key)
		}
		if r.Value == nil {
			delete(m, k)
		} else {
			m[k] = r.Offset
		}
	}
	return m
}

func offsetsOf(m map[string]int64) []int64 {
	var out []int64
	for _, o := range m {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

// TestLatestMergeDeleted: per-run rows minus each run's deletes (by later runs) are the
// model's rows; merging runs' keys is the keys of one run over all their records; and
// keys survive Encode and DecodeKeys.
func TestLatestMergeDeleted(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		runs := genRuns(t)
		var all []record.Record
		var keys []Keys
		var rows [][]record.Record
		for _, run := range runs {
			all = append(all, run...)
			l := NewLatest(KeyHash)
			for _, r := range run {
				l.Add(r)
			}
			rs, k := l.Finish()
			if len(rs) != len(k.Live) {
				t.Fatalf("%d rows, %d live keys", len(rs), len(k.Live))
			}
			back, err := DecodeKeys(k.Encode())
			if err != nil || !slices.Equal(back.Live, k.Live) || !slices.Equal(back.Dead, k.Dead) {
				t.Fatalf("keys do not round trip: %v", err)
			}
			keys = append(keys, k)
			rows = append(rows, rs)
		}
		var got []int64
		for i, rs := range rows {
			del := Deleted(keys[i], keys[i+1:])
			for pos, r := range rs {
				if !slices.Contains(del, int64(pos)) {
					got = append(got, r.Offset)
				}
			}
		}
		slices.Sort(got)
		want := offsetsOf(model(all))
		if !slices.Equal(got, want) {
			t.Fatalf("rows after deletes %v, want %v", got, want)
		}
		l := NewLatest(KeyHash)
		for _, r := range all {
			l.Add(r)
		}
		whole, wk := l.Finish()
		var wo []int64
		for _, r := range whole {
			wo = append(wo, r.Offset)
		}
		if !slices.Equal(wo, want) {
			t.Fatalf("one run's rows %v, want %v", wo, want)
		}
		mk := Merge(keys)
		if !slices.Equal(mk.Live, wk.Live) || !slices.Equal(mk.Dead, wk.Dead) {
			t.Fatalf("merged keys differ from one run's: %v / %v", mk, wk)
		}
	})
}

func TestDecodeKeysMalformed(t *testing.T) {
	for _, b := range [][]byte{nil, {0, 0, 0}, {0, 0, 0, 1}, append([]byte{0, 0, 0, 2}, make([]byte, 16)...), make([]byte, 21)} {
		if _, err := DecodeKeys(b); err == nil {
			t.Errorf("DecodeKeys(%d bytes) took malformed input", len(b))
		}
	}
	if KeyHash(nil) == KeyHash([]byte{}) {
		t.Error("no key and the empty key hash alike")
	}
}
