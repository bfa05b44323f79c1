package rangefile

import (
	"slices"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/upsert"
)

func keysOf(t *testing.T, start int64, keys ...string) KeyedRange {
	t.Helper()
	l := upsert.NewLatest(upsert.KeyHash)
	for i, k := range keys {
		r := record.Record{Offset: start + int64(i), Key: []byte(strings.TrimPrefix(k, "-")), Value: []byte("v")}
		if strings.HasPrefix(k, "-") {
			r.Value = nil
		}
		l.Add(r)
	}
	_, ks := l.Finish()
	return KeyedRange{Start: start, End: start + int64(len(keys)), Keys: ks}
}

// TestDeletePositions: a file's deletes are its rows whose key a later range up to the
// coverage touches (an update or a tombstone); an assembled file spanning ranges counts
// positions of its merged rows; an index with a gap in the span is an error.
func TestDeletePositions(t *testing.T) {
	rs := []KeyedRange{keysOf(t, 0, "a", "b", "c"), keysOf(t, 3, "b", "d"), keysOf(t, 5, "-a", "e")}
	for _, tc := range []struct {
		start, end, cover int64
		want              []int64
	}{
		{0, 3, 3, nil},
		{0, 3, 5, []int64{1}},    // b updated
		{0, 3, 7, []int64{0, 1}}, // and a deleted
		{3, 5, 7, nil},
		{0, 5, 7, []int64{0}}, // merged rows a, c, b, d: a deleted
	} {
		got, err := DeletePositions(rs, Deletes{Start: tc.start, End: tc.end, CoverEnd: tc.cover, DataKey: "f"})
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("file [%d, %d) at %d: %v %v, want %v", tc.start, tc.end, tc.cover, got, err, tc.want)
		}
	}
	if _, err := DeletePositions(rs[:1], Deletes{Start: 0, End: 3, CoverEnd: 7, DataKey: "f"}); err == nil {
		t.Error("an index ending before the coverage gave deletes")
	}
	if _, err := DeletePositions([]KeyedRange{rs[0], rs[2]}, Deletes{Start: 0, End: 3, CoverEnd: 7, DataKey: "f"}); err == nil {
		t.Error("an index with a gap gave deletes")
	}
	// A file that begins at Kafka's log start inside a range reads that range's keys
	// (re-derived by the writer from what Kafka holds).
	if got, err := DeletePositions(rs, Deletes{Start: 1, End: 3, CoverEnd: 7, DataKey: "f"}); err != nil || !slices.Equal(got, []int64{0, 1}) {
		t.Errorf("a file from inside a range: %v %v", got, err)
	}
}

// TestWithTail: tail files stand for the offsets they span in place of the ranges that
// overlap them (indexed meanwhile, or cut otherwise), so a live load's deletes read one
// tiling of the partition: the ranges before the tail, then the tail files.
func TestWithTail(t *testing.T) {
	rs := []ranges.RangeKeys{{Start: 0, End: 3}, {Start: 3, End: 5}, {Start: 5, End: 8}, {Start: 8, End: 9}}
	tail := []ranges.RangeKeys{{Start: 5, End: 7}, {Start: 7, End: 10}}
	got := WithTail(rs, tail)
	want := []ranges.RangeKeys{{Start: 0, End: 3}, {Start: 3, End: 5}, {Start: 5, End: 7}, {Start: 7, End: 10}}
	if !slices.EqualFunc(got, want, func(a, b ranges.RangeKeys) bool { return a.Start == b.Start && a.End == b.End }) {
		t.Fatalf("WithTail = %v, want %v", got, want)
	}
	if got := WithTail(rs, nil); len(got) != len(rs) {
		t.Fatalf("no tail: %v", got)
	}
	// The keys of a tail file supersede a committed file's rows like a range's.
	krs := []KeyedRange{keysOf(t, 0, "a", "b"), keysOf(t, 2, "-a", "c")}
	if got, err := DeletePositions(krs, Deletes{Start: 0, End: 2, CoverEnd: 4, DataKey: "f", Tail: []string{"tail"}}); err != nil || !slices.Equal(got, []int64{0}) {
		t.Errorf("a tombstone in the tail: %v %v", got, err)
	}
}
