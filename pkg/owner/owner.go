// Package owner decides which file server owns a file: rendezvous (highest random weight)
// hashing of the file key over the live file servers. Every node computes the same owner
// from the same member list, with no coordination, and a change of membership moves only
// the files whose top-scoring node joined or left: about 1/n of them when one of n nodes
// joins, exactly the departed node's files when one leaves.
package owner

import (
	"crypto/sha256"
	"encoding/binary"
)

// Score is how much node wants key: a hash of both. It is frozen (a golden test pins it):
// changing it would move every cached file in a running cluster at upgrade.
func Score(node, key string) uint64 {
	h := sha256.New()
	h.Write([]byte(node))
	h.Write([]byte{0}) // node ids cannot contain NUL, so (node, key) pairs never collide
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// Of returns the owner of key among nodes: the node with the highest Score, ties (never
// seen with a 64-bit hash, but possible) going to the smallest node id so that every
// node agrees. It returns "" when nodes is empty. The order of nodes does not matter.
func Of(key string, nodes []string) string {
	best, bestScore := "", uint64(0)
	for _, n := range nodes {
		s := Score(n, key)
		if best == "" || s > bestScore || s == bestScore && n < best {
			best, bestScore = n, s
		}
	}
	return best
}
