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
	"slices"

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
// records are let go at once, so it holds at most one record per key.
type Latest struct {
	hash func(key []byte) Hash
	last map[Hash]record.Record
}

// NewLatest is an empty Latest whose keys are identified by hash: KeyHash for keys as
// bytes, the table's decoder's (tablecodec.Decoder.KeyHash) for decoded keys. Every
// build of the same offsets must use the same one.
func NewLatest(hash func(key []byte) Hash) *Latest {
	return &Latest{hash: hash, last: map[Hash]record.Record{}}
}

// Add records r, superseding the record of its key added before.
func (l *Latest) Add(r record.Record) { l.last[l.hash(r.Key)] = r }

// Len is the number of keys added so far.
func (l *Latest) Len() int { return len(l.last) }

// Finish returns the rows (the latest record of each key whose latest is not a
// tombstone) in offset order, and the keys the records touched. l is empty after.
func (l *Latest) Finish() ([]record.Record, Keys) {
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
