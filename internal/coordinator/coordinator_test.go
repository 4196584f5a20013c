package coordinator

import (
	"math"
	"testing"
)

// The hash is Java's String.hashCode (the values are Java's), and the partition Kafka's
// Utils.abs(hash) % partitions, so that a Kafka client and a Sluice broker find the same
// coordinator.
func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		group string
		hash  int32
	}{
		{"", 0},
		{"a", 97},
		{"hello", 99162322},
		{"polygenelubricants", math.MinInt32}, // Utils.abs maps it to 0
		{"é", 233},                            // one UTF-16 unit
		{"😀", 0xD83D*31 + 0xDE00},             // a surrogate pair, as Java counts it
	} {
		if got := javaHashCode(tc.group); got != tc.hash {
			t.Errorf("javaHashCode(%q) = %d, want %d", tc.group, got, tc.hash)
		}
		want := int32(0)
		if tc.hash != math.MinInt32 {
			want = int32(math.Abs(float64(tc.hash))) % 50
		}
		if got := Partition(tc.group, 50); got != want {
			t.Errorf("Partition(%q, 50) = %d, want %d", tc.group, got, want)
		}
	}
	if got := Partition("g", 0); got != 0 {
		t.Errorf("Partition with no partitions = %d, want 0", got)
	}
}
