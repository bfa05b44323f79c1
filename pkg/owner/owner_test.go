package owner

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestGolden freezes Score and Of: a change here moves cached files across a cluster at
// upgrade, so it must be deliberate.
func TestGolden(t *testing.T) {
	golden := []struct {
		key   string
		nodes []string
		want  string
	}{
		{"default/orders/data/_kafka_partition=0/00000000000000000000-00000000000000000100-0123456789abcdef.parquet", []string{"fs-a", "fs-b", "fs-c"}, "fs-a"},
		{"default/orders/metadata/v1-3f2b.metadata.json", []string{"fs-a", "fs-b", "fs-c"}, "fs-c"},
		{"anything", nil, ""},
		{"anything", []string{"only"}, "only"},
	}
	for _, g := range golden {
		if got := Of(g.key, g.nodes); got != g.want {
			t.Errorf("Of(%q, %v) = %q, want %q", g.key, g.nodes, got, g.want)
		}
	}
	if got := Score("fs-a", "k"); got != 0xcd272fb9cd3f4717 {
		t.Errorf("Score(fs-a, k) = %#x, want 0xcd272fb9cd3f4717", got)
	}
}

// TestMembershipChangeMovesOnlyWhatItMust is the issue's "membership changes move only the
// files whose owner changed", over many keys: a joining node takes only files that it now
// owns (about 1/n of them), a leaving node's files alone move, and the rest stay put.
func TestMembershipChangeMovesOnlyWhatItMust(t *testing.T) {
	const keys = 20000
	nodes := []string{"fs-1", "fs-2", "fs-3", "fs-4"}
	before := make([]string, keys)
	for i := range keys {
		before[i] = Of(key(i), nodes)
	}

	joined := append(slices.Clone(nodes), "fs-5")
	moved := 0
	for i := range keys {
		after := Of(key(i), joined)
		if after != before[i] {
			moved++
			if after != "fs-5" {
				t.Fatalf("key %d moved from %s to %s, not to the joining node", i, before[i], after)
			}
		}
	}
	// The joining node should take about 1/5 of the keys.
	if want := keys / 5; math.Abs(float64(moved-want)) > 0.1*float64(want) {
		t.Errorf("join moved %d of %d keys, want about %d", moved, keys, want)
	}

	left := []string{"fs-1", "fs-2", "fs-4"} // fs-3 leaves
	moved = 0
	for i := range keys {
		after := Of(key(i), left)
		if before[i] == "fs-3" {
			moved++
			if after == "fs-3" {
				t.Fatalf("key %d still owned by the departed node", i)
			}
		} else if after != before[i] {
			t.Fatalf("key %d moved from %s to %s though its owner did not leave", i, before[i], after)
		}
	}
	if want := keys / 4; math.Abs(float64(moved-want)) > 0.1*float64(want) {
		t.Errorf("leave moved %d of %d keys, want about %d", moved, keys, want)
	}
}

// TestProperties: for any member list, the owner is a member, does not depend on order,
// and adding a node moves a key only to that node.
func TestProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z0-9-]{1,12}`), 1, 12, rapid.ID[string]).Draw(t, "nodes")
		k := rapid.String().Draw(t, "key")
		o := Of(k, nodes)
		if !slices.Contains(nodes, o) {
			t.Fatalf("owner %q is not a member of %v", o, nodes)
		}
		shuffled := rapid.Permutation(nodes).Draw(t, "shuffled")
		if o2 := Of(k, shuffled); o2 != o {
			t.Fatalf("owner depends on order: %q vs %q", o, o2)
		}
		extra := rapid.StringMatching(`[A-Z]{1,5}`).Draw(t, "joining")
		if o3 := Of(k, append(slices.Clone(nodes), extra)); o3 != o && o3 != extra {
			t.Fatalf("a join moved key %q from %q to %q", k, o, o3)
		}
	})
}

// TestBalance: files spread evenly over nodes.
func TestBalance(t *testing.T) {
	nodes := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	count := map[string]int{}
	const keys = 40000
	for i := range keys {
		count[Of(key(i), nodes)]++
	}
	for _, n := range nodes {
		if want := keys / len(nodes); math.Abs(float64(count[n]-want)) > 0.08*float64(want) {
			t.Errorf("node %s owns %d of %d keys, want about %d", n, count[n], keys, want)
		}
	}
}

func key(i int) string {
	return fmt.Sprintf("ns/t/data/_kafka_partition=%d/%020d-%020d-x.parquet", i%7, i*100, i*100+100)
}

func BenchmarkOf(b *testing.B) {
	nodes := []string{"fs-1", "fs-2", "fs-3", "fs-4", "fs-5", "fs-6"}
	for i := 0; b.Loop(); i++ {
		Of(key(i), nodes)
	}
}
