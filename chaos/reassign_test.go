package chaos

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMoveTarget: a move's target is a set of distinct brokers of the cluster, of
// min.insync.replicas to replication-factor of them; over many seeds every size and several
// orders come, and the target is never the partition's current list.
func TestMoveTarget(t *testing.T) {
	for _, tc := range []struct {
		nodes      []int32
		rf, minISR int
		orders     int // at least this many lists come
	}{
		{[]int32{0, 1, 2}, 3, 2, 11}, // 6 pairs and 6 orders of three, less the current
		{[]int32{0, 1, 2, 3, 4}, 3, 2, 40},
		{[]int32{0, 1, 2}, 3, 1, 12},
		{[]int32{0, 1}, 3, 2, 1}, // fewer brokers than the factor: [1 0] is the only move
	} {
		current := tc.nodes[:min(tc.rf, len(tc.nodes))]
		sizes, orders := map[int]bool{}, map[string]bool{}
		for seed := range uint64(200) {
			target := moveTarget(rand.New(rand.NewPCG(seed, 1)), tc.nodes, current, tc.rf, tc.minISR)
			if len(target) < min(tc.minISR, len(tc.nodes)) || len(target) > min(tc.rf, len(tc.nodes)) {
				t.Fatalf("%v rf %d min.insync %d: target %v", tc.nodes, tc.rf, tc.minISR, target)
			}
			for i, id := range target {
				if !slices.Contains(tc.nodes, id) || slices.Contains(target[:i], id) {
					t.Fatalf("%v: target %v names a broker twice or outside the cluster", tc.nodes, target)
				}
			}
			if slices.Equal(target, current) {
				t.Fatalf("%v: target %v is the current list", tc.nodes, target)
			}
			sizes[len(target)] = true
			orders[idList(target)] = true
		}
		if want := min(tc.rf, len(tc.nodes)) - min(tc.minISR, len(tc.nodes)) + 1; len(sizes) != want || len(orders) < tc.orders {
			t.Errorf("%v rf %d min.insync %d: sizes %v, %d orders; want %d sizes and %d orders at least", tc.nodes, tc.rf, tc.minISR, sizes, len(orders), want, tc.orders)
		}
	}
}

// TestRestoreTarget: a shrunk list grows back to the factor with brokers it lacks, keeping
// its own in order; a full one stays.
func TestRestoreTarget(t *testing.T) {
	nodes := []int32{0, 1, 2, 3, 4}
	for seed := range uint64(50) {
		got := restoreTarget(rand.New(rand.NewPCG(seed, 2)), nodes, []int32{3, 1}, 3)
		if len(got) != 3 || got[0] != 3 || got[1] != 1 || slices.Contains([]int32{3, 1}, got[2]) || !slices.Contains(nodes, got[2]) {
			t.Fatalf("restore [3 1] to 3 of %v: %v", nodes, got)
		}
	}
	if got := restoreTarget(rand.New(rand.NewPCG(1, 2)), nodes, []int32{2, 0, 4}, 3); !slices.Equal(got, []int32{2, 0, 4}) {
		t.Fatalf("restore a full list: %v", got)
	}
}
