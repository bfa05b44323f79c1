// Package upsert is what makes an upsert table: the latest record per key of a run of
// one partition's offsets (a range, an assembled span, a live tail), the keys it
// touches as 16-byte hashes (what the index keeps per range), and, from those hashes
// alone, the positions of a data file that later records of its partition supersede
// (its position deletes). Everything here is a pure function of the records or hashes
// given, so a rebuild gives the same rows, the same hashes, the same deletes.
package upsert

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/minkhq/mink/pkg/record"
)

// HashSize is the bytes the index keeps per key per range.
const HashSize = 16

// Hash is a key's 128-bit hash: collisions are negligible (2^-64 at 2^32 keys), so
// two keys with one hash are taken as one key.
type Hash [HashSize]byte

// KeyHash hashes a record's key: its bytes, or "no key" (nil), which differs from the
// empty key.
func KeyHash(key []byte) Hash {
	h := sha256.New()
	if key == nil {
		h.Write([]byte{0})
	} else {
		h.Write([]byte{1})
		h.Write(key)
	}
	var out Hash
	copy(out[:], h.Sum(nil))
	return out
}

// Latest keeps the latest record per key of records added in offset order. Superseded
// records are let go at once, so it holds at most one record per key; a bounded Latest
// (NewBounded) holds records only while they stay within its budget, and past it keeps
// of each key only the offset of its latest record (Emit then reads the run again).
type Latest struct {
	hash func(key []byte) Hash
	last map[Hash]record.Record // while records are held
	// offs replaces last once its records passed the budget: each key's latest offset,
	// ^offset (negative) when that record is a tombstone.
	offs map[Hash]int64
	// hold is the budget of held bytes (HeldBytes of each held record); copy is set for
	// a bounded Latest, which copies what it holds out of the caller's buffers (a Kafka
	// fetch), so that a held record keeps only its own bytes in memory.
	hold, held, peak int64
	copy             bool
}

const (
	// DefaultHold is the budget of a bounded Latest (what an indexer's open upsert range
	// and a file server's build of an upsert file hold of records at most).
	DefaultHold = 4 << 20
	// DefaultMaxKeys is how many distinct keys an indexer's upsert range has at most: it
	// is closed at that many, so the offsets a range keeps past DefaultHold are bounded
	// too (about 44 bytes a key). Assembly merges such ranges later.
	DefaultMaxKeys = 100_000
	// heldOverhead is what a held record costs beyond its bytes: its map slot (hash and
	// record.Record, with the map's spare room) and its copy's allocation.
	heldOverhead = 160
)

// NewLatest is an empty Latest whose keys are identified by hash: KeyHash for keys as
// bytes, the table's decoder's (tablecodec.Decoder.KeyHash) for decoded keys. Every
// build of the same offsets must use the same one. It holds every latest record,
// whatever their size.
func NewLatest(hash func(key []byte) Hash) *Latest {
	return &Latest{hash: hash, last: map[Hash]record.Record{}, hold: math.MaxInt64}
}

// NewBounded is NewLatest that holds latest records while their HeldBytes stay within
// hold bytes, and past that only their offsets.
func NewBounded(hash func(key []byte) Hash, hold int64) *Latest {
	return &Latest{hash: hash, last: map[Hash]record.Record{}, hold: hold, copy: true}
}

// HeldBytes is what holding r costs a Latest: its key, value and headers, and a fixed
// overhead.
func HeldBytes(r record.Record) int64 {
	n := int64(heldOverhead + len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// Add records r, superseding the record of its key added before.
func (l *Latest) Add(r record.Record) {
	h := l.hash(r.Key)
	if l.offs != nil {
		l.offs[h] = lastOffset(r)
		return
	}
	if old, ok := l.last[h]; ok {
		l.held -= HeldBytes(old)
	}
	if l.copy {
		r = clone(r)
	}
	l.last[h] = r
	l.held += HeldBytes(r)
	l.peak = max(l.peak, l.held)
	if l.held > l.hold {
		l.letGo()
	}
}

// letGo keeps only the offsets of the latest records from here on.
func (l *Latest) letGo() {
	l.offs = make(map[Hash]int64, len(l.last))
	for h, r := range l.last {
		l.offs[h] = lastOffset(r)
	}
	l.last, l.held = nil, 0
}

func lastOffset(r record.Record) int64 {
	if r.Value == nil {
		return ^r.Offset
	}
	return r.Offset
}

// clone copies r's bytes into one allocation of its own.
func clone(r record.Record) record.Record {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Value)
	}
	buf := make([]byte, 0, n)
	dup := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	r.Key, r.Value = dup(r.Key), dup(r.Value)
	if r.Headers != nil {
		hs := make([]record.Header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = record.Header{Key: strings.Clone(h.Key), Value: dup(h.Value)}
		}
		r.Headers = hs
	}
	return r
}

// Len is the number of keys added so far.
func (l *Latest) Len() int { return len(l.last) + len(l.offs) }

// Holding reports whether l still holds its records: Emit then reads nothing again.
func (l *Latest) Holding() bool { return l.offs == nil }

// Held is the bytes of records held now (0 once they were let go).
func (l *Latest) Held() int64 { return l.held }

// Peak is the most bytes of records l held at any time.
func (l *Latest) Peak() int64 { return l.peak }

// Reread calls fn, in offset order, for the records of offsets [from, to) of the run
// that was added, as the first read gave them.
type Reread func(from, to int64, fn func(record.Record) error) error

// ErrChanged: a second read of a run lacks a record the first read had (Kafka
// compacted it or deleted its offsets in between). Nothing built from it may be used.
var ErrChanged = errors.New("upsert: a record of the first read is missing from the second")

// Emit calls add with the rows Finish returns, in offset order, and returns the keys
// the records touched. When l let its records go, it reads the run again with reread,
// from the first row's offset to the last's, adding the records whose offset is their
// key's latest: the same rows in the same order, so the file built is the same. l is
// empty after.
func (l *Latest) Emit(reread Reread, add func(record.Record) error) (Keys, error) {
	if l.offs == nil {
		rows, k := l.Finish()
		for _, r := range rows {
			if err := add(r); err != nil {
				return Keys{}, err
			}
		}
		return k, nil
	}
	type row struct {
		off int64
		h   Hash
	}
	rows := make([]row, 0, len(l.offs))
	var dead []Hash
	for h, o := range l.offs {
		if o < 0 {
			dead = append(dead, h)
		} else {
			rows = append(rows, row{o, h})
		}
	}
	l.offs = nil // the map's memory goes before the second read
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.off, b.off) })
	slices.SortFunc(dead, func(a, b Hash) int { return cmp.Compare(string(a[:]), string(b[:])) })
	k := Keys{Live: make([]Hash, len(rows)), Dead: dead}
	for i, r := range rows {
		k.Live[i] = r.h
	}
	if len(rows) == 0 {
		return k, nil
	}
	i := 0
	err := reread(rows[0].off, rows[len(rows)-1].off+1, func(r record.Record) error {
		if r.Offset > rows[i].off {
			return fmt.Errorf("%w: offset %d", ErrChanged, rows[i].off)
		}
		if r.Offset < rows[i].off {
			return nil
		}
		i++
		return add(r)
	})
	if err != nil {
		return Keys{}, err
	}
	if i != len(rows) {
		return Keys{}, fmt.Errorf("%w: offset %d", ErrChanged, rows[i].off)
	}
	return k, nil
}

// Finish returns the rows (the latest record of each key whose latest is not a
// tombstone) in offset order, and the keys the records touched, of a Latest that holds
// them all (NewLatest; a bounded one is finished with Emit). l is empty after.
func (l *Latest) Finish() ([]record.Record, Keys) {
	if l.offs != nil {
		panic("upsert: Finish of a Latest that let its records go (use Emit)")
	}
	type keyed struct {
		h Hash
		r record.Record
	}
	live := make([]keyed, 0, len(l.last))
	var dead []Hash
	for h, r := range l.last {
		if r.Value == nil {
			dead = append(dead, h)
			continue
		}
		live = append(live, keyed{h, r})
	}
	slices.SortFunc(live, func(a, b keyed) int { return cmp.Compare(a.r.Offset, b.r.Offset) })
	slices.SortFunc(dead, func(a, b Hash) int { return cmp.Compare(string(a[:]), string(b[:])) })
	rows := make([]record.Record, len(live))
	k := Keys{Live: make([]Hash, len(live)), Dead: dead}
	for i, e := range live {
		rows[i], k.Live[i] = e.r, e.h
	}
	clear(l.last)
	l.held = 0
	return rows, k
}

// Keys are the keys a run of offsets touches: Live are its file's rows' keys in position
// order (row i has key Live[i]); Dead are the keys whose latest record in the run is a
// tombstone, sorted.
type Keys struct {
	Live, Dead []Hash
}

// Encode is Keys as the index stores them: the count of live keys (4 bytes, big
// endian), then the live hashes, then the dead ones, 16 bytes each.
func (k Keys) Encode() []byte {
	out := make([]byte, 4, 4+HashSize*(len(k.Live)+len(k.Dead)))
	binary.BigEndian.PutUint32(out, uint32(len(k.Live)))
	for _, h := range k.Live {
		out = append(out, h[:]...)
	}
	for _, h := range k.Dead {
		out = append(out, h[:]...)
	}
	return out
}

// ErrBadKeys: stored key hashes that do not decode.
var ErrBadKeys = errors.New("upsert: stored key hashes are malformed")

// DecodeKeys reads what Encode wrote.
func DecodeKeys(b []byte) (Keys, error) {
	if len(b) < 4 || (len(b)-4)%HashSize != 0 {
		return Keys{}, fmt.Errorf("%w: %d bytes", ErrBadKeys, len(b))
	}
	live := int(binary.BigEndian.Uint32(b))
	n := (len(b) - 4) / HashSize
	if live > n {
		return Keys{}, fmt.Errorf("%w: %d live keys of %d", ErrBadKeys, live, n)
	}
	all := make([]Hash, n)
	for i := range all {
		copy(all[i][:], b[4+i*HashSize:])
	}
	return Keys{Live: all[:live:live], Dead: all[live:]}, nil
}

// Merge is the Keys of the run made of runs rs, adjacent and in offset order: the
// rows a rebuild of the whole run has (each run's rows whose key no later run
// touches, in order), and the keys whose latest record is a tombstone.
func Merge(rs []Keys) Keys {
	later := map[Hash]bool{}
	var out Keys
	var live [][]Hash
	for i := len(rs) - 1; i >= 0; i-- {
		var keep []Hash
		for _, h := range rs[i].Live {
			if !later[h] {
				keep = append(keep, h)
			}
		}
		for _, h := range rs[i].Dead {
			if !later[h] {
				out.Dead = append(out.Dead, h)
			}
		}
		live = append(live, keep)
		for _, h := range rs[i].Live {
			later[h] = true
		}
		for _, h := range rs[i].Dead {
			later[h] = true
		}
	}
	for i := len(live) - 1; i >= 0; i-- {
		out.Live = append(out.Live, live[i]...)
	}
	slices.SortFunc(out.Dead, func(a, b Hash) int { return cmp.Compare(string(a[:]), string(b[:])) })
	return out
}

// Deleted returns the positions of a file whose rows have keys file.Live that a later
// run touches (its position deletes once those runs are in the snapshot), ascending.
func Deleted(file Keys, later []Keys) []int64 {
	touched := map[Hash]bool{}
	for _, k := range later {
		for _, h := range k.Live {
			touched[h] = true
		}
		for _, h := range k.Dead {
			touched[h] = true
		}
	}
	var out []int64
	for i, h := range file.Live {
		if touched[h] {
			out = append(out, int64(i))
		}
	}
	return out
}
