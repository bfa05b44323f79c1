package upsert

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestIndexDeleted: an Index's deletes of any file (a run of runs) up to any coverage,
// and with touches beyond it, are those of Merge and Deleted over the same runs, while
// runs are appended one by one (the index of a growing partition).
func TestIndexDeleted(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var keys []Keys
		var bounds []int64 // run i is [bounds[i], bounds[i+1])
		x := NewIndex()
		for _, run := range genRuns(t) {
			if len(run) == 0 {
				continue
			}
			l := NewLatest(KeyHash)
			for _, r := range run {
				l.Add(r)
			}
			_, k := l.Finish()
			if len(bounds) == 0 {
				bounds = append(bounds, run[0].Offset)
			}
			end := run[len(run)-1].Offset + 1
			if err := x.Append(bounds[len(bounds)-1], end, k); err != nil {
				t.Fatal(err)
			}
			keys, bounds = append(keys, k), append(bounds, end)
			n := len(keys)
			i := rapid.IntRange(0, n-1).Draw(t, "file start")
			j := rapid.IntRange(i+1, n).Draw(t, "file end")
			c := rapid.IntRange(j, n).Draw(t, "cover")
			// Touches beyond the cover: those of a later run made of some of the runs'.
			var extra Keys
			if c < n && rapid.Bool().Draw(t, "beyond") {
				extra = Merge(keys[c:])
			}
			touched := map[Hash]bool{}
			for _, h := range slices.Concat(extra.Live, extra.Dead) {
				touched[h] = true
			}
			beyond := func(h Hash) bool { return touched[h] }
			got, err := x.Deleted(3, bounds[i], bounds[j], bounds[c], beyond)
			if err != nil {
				t.Fatal(err)
			}
			want := Deleted(Merge(keys[i:j]), []Keys{Merge(keys[j:c]), extra})
			if !slices.Equal(got, want) {
				t.Fatalf("file runs [%d, %d) cover %d: Index deletes %v, Merge and Deleted %v", i, j, c, got, want)
			}
		}
	})
}

// TestIndexErrors: an Index refuses a run that is not adjacent or repeats a key, and
// spans its runs do not tile.
func TestIndexErrors(t *testing.T) {
	a, b := KeyHash([]byte("a")), KeyHash([]byte("b"))
	x := NewIndex()
	if err := x.Append(10, 20, Keys{Live: []Hash{a, b}}); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(21, 30, Keys{Live: []Hash{a}}); !errors.Is(err, ErrNotAdjacent) {
		t.Fatalf("a gap: %v, want ErrNotAdjacent", err)
	}
	if err := x.Append(20, 30, Keys{Live: []Hash{a}, Dead: []Hash{a}}); !errors.Is(err, ErrRepeatedKey) {
		t.Fatalf("a key twice: %v, want ErrRepeatedKey", err)
	}
	if err := x.Append(20, 30, Keys{Dead: []Hash{a}}); err != nil {
		t.Fatal(err)
	}
	if got, err := x.Deleted(0, 10, 20, 30, nil); err != nil || !slices.Equal(got, []int64{0}) {
		t.Fatalf("deletes of [10, 20) up to 30: %v, %v; want [0]", got, err)
	}
	if got, err := x.Deleted(0, 12, 20, 20, nil); err != nil || len(got) != 0 {
		t.Fatalf("a file from inside the first run: %v, %v; want none", got, err)
	}
	for _, c := range [][3]int64{{0, 20, 30}, {10, 25, 30}, {10, 20, 25}, {10, 20, 40}, {10, 20, 15}, {30, 40, 40}} {
		if _, err := x.Deleted(0, c[0], c[1], c[2], nil); err == nil {
			t.Errorf("file [%d, %d) cover %d: no error", c[0], c[1], c[2])
		}
	}
}
