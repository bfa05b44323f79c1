package upsert

import (
	"errors"
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

// reread is the Reread of a run held in memory, counting the records it yields.
func reread(run []record.Record, read *int) Reread {
	return func(from, to int64, fn func(record.Record) error) error {
		for _, r := range run {
			if r.Offset >= from && r.Offset < to {
				*read++
				if err := fn(r); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// TestBoundedEmit: a bounded Latest gives the rows and keys of one that holds every
// record, whatever its budget, never holds more than the budget plus one record, and
// reads the run again only when it let its records go.
func TestBoundedEmit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var run []record.Record
		for _, rs := range genRuns(t) {
			run = append(run, rs...)
		}
		for i := range run {
			// Values of varied sizes, so the budget is crossed at varied records.
			if run[i].Value != nil && rapid.Bool().Draw(t, "big") {
				run[i].Value = append(run[i].Value, make([]byte, 200)...)
				run[i].Headers = []record.Header{{Key: "h", Value: []byte("x")}}
			}
		}
		hold := rapid.Int64Range(0, 3000).Draw(t, "hold")
		all := NewLatest(KeyHash)
		b := NewBounded(KeyHash, hold)
		var biggest int64
		for _, r := range run {
			all.Add(r)
			b.Add(r)
			biggest = max(biggest, HeldBytes(r))
		}
		if b.Peak() > hold+biggest {
			t.Fatalf("held %d bytes at most, budget %d (+%d, one record)", b.Peak(), hold, biggest)
		}
		wantRows, wantKeys := all.Finish()
		var got []record.Record
		read := 0
		keys, err := b.Emit(reread(run, &read), func(r record.Record) error {
			got = append(got, r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(wantRows) {
			t.Fatalf("%d rows, want %d", len(got), len(wantRows))
		}
		for i := range got {
			if got[i].Offset != wantRows[i].Offset || string(got[i].Value) != string(wantRows[i].Value) || (got[i].Key == nil) != (wantRows[i].Key == nil) || len(got[i].Headers) != len(wantRows[i].Headers) {
				t.Fatalf("row %d: offset %d, want %d", i, got[i].Offset, wantRows[i].Offset)
			}
		}
		if !slices.Equal(keys.Live, wantKeys.Live) || !slices.Equal(keys.Dead, wantKeys.Dead) {
			t.Fatalf("keys %d live %d dead, want %d and %d", len(keys.Live), len(keys.Dead), len(wantKeys.Live), len(wantKeys.Dead))
		}
		if let := b.Peak() > hold; !let && read > 0 {
			t.Fatalf("read the run again (%d records) though it held its records (peak %d, budget %d)", read, b.Peak(), hold)
		}
	})
}

// TestBoundedEmitChanged: a second read that lacks a row's record is an error, not a
// file without that row.
func TestBoundedEmitChanged(t *testing.T) {
	var run []record.Record
	for i := range 50 {
		run = append(run, record.Record{Offset: int64(i), Key: fmt.Appendf(nil, "k%d", i), Value: make([]byte, 100)})
	}
	b := NewBounded(KeyHash, 1000)
	for _, r := range run {
		b.Add(r)
	}
	if b.Held() != 0 {
		t.Fatalf("held %d bytes of 50 records past a budget of 1000", b.Held())
	}
	read := 0
	compacted := slices.Delete(slices.Clone(run), 20, 21)
	_, err := b.Emit(reread(compacted, &read), func(record.Record) error { return nil })
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("Emit over a second read without offset 20: %v, want ErrChanged", err)
	}
}

// A bounded Latest holds copies: the caller's buffer may change after Add.
func TestBoundedCopies(t *testing.T) {
	buf := []byte("key-value")
	b := NewBounded(KeyHash, 1<<20)
	b.Add(record.Record{Offset: 7, Key: buf[:3], Value: buf[4:], Headers: []record.Header{{Key: "h", Value: buf[:1]}}})
	copy(buf, "XXXXXXXXX")
	var got record.Record
	if _, err := b.Emit(nil, func(r record.Record) error { got = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if string(got.Key) != "key" || string(got.Value) != "value" || string(got.Headers[0].Value) != "k" {
		t.Fatalf("held %q=%q (%q), want copies of what was added", got.Key, got.Value, got.Headers[0].Value)
	}
}
