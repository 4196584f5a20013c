package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestPlaceReplicasKafkaLayout is the layout of Kafka's AdminUtils doc
// comment: 5 brokers, 10 partitions, replication factor 3, start index 0,
// shift 0.
func TestPlaceReplicasKafkaLayout(t *testing.T) {
	got := PlaceReplicas([]int32{0, 1, 2, 3, 4}, 10, 3, 0, 0)
	want := [][]int32{
		{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1},
		{0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	// Broker ids need not be dense: placement indexes the sorted list.
	sparse := PlaceReplicas([]int32{10, 20, 30}, 3, 2, 1, 1)
	if want := [][]int32{{20, 10}, {30, 20}, {10, 30}}; !slices.EqualFunc(sparse, want, slices.Equal) {
		t.Fatalf("sparse ids: %v, want %v", sparse, want)
	}
}

// TestPlacementBalance: for every start and shift, leaders and replicas
// are spread evenly over the brokers, and no partition repeats a broker.
func TestPlacementBalance(t *testing.T) {
	brokers := []int32{0, 1, 2, 3, 4, 5}
	for start := range len(brokers) {
		for shift := range len(brokers) {
			layout := PlaceReplicas(brokers, 12, 3, start, shift)
			leaders, replicas := map[int32]int{}, map[int32]int{}
			for p, rs := range layout {
				leaders[rs[0]]++
				for i, r := range rs {
					replicas[r]++
					if slices.Contains(rs[:i], r) {
						t.Fatalf("start %d shift %d: partition %d repeats broker %d: %v", start, shift, p, r, rs)
					}
				}
			}
			for _, b := range brokers {
				if leaders[b] != 2 || replicas[b] != 6 {
					t.Fatalf("start %d shift %d: broker %d leads %d, holds %d (want 2, 6)", start, shift, b, leaders[b], replicas[b])
				}
			}
		}
	}
}

// TestCreateTopicPlacement: the seed comes from the command, reduced
// modulo the live broker count, and only live brokers are placed.
func TestCreateTopicPlacement(t *testing.T) {
	m := newMachine(t, 0, 1, 2, 3)
	m.ok(&fenceBrokerCmd{brokerEpochCmd{ID: 2, Epoch: 0}})
	c := create("t", 3, 2)
	c.Placement = &PlacementSeed{Start: 4, Shift: 7} // 4 mod 3 = 1, 7 mod 3 = 1
	res := m.ok(c)
	want := PlaceReplicas([]int32{0, 1, 3}, 3, 2, 1, 1)
	for p, pm := range res.Topic.Partitions {
		if !slices.Equal(pm.Replicas, want[p]) || pm.Leader != want[p][0] || !slices.Equal(pm.ISR, want[p]) {
			t.Fatalf("partition %d: %+v, want replicas %v", p, pm, want[p])
		}
	}
	// An explicit assignment naming the fenced broker leaves it out of the
	// ISR and elects the first eligible replica; all fenced is refused.
	res = m.ok(&createTopicCmd{TopicSpec: TopicSpec{Name: "x", Assignment: [][]int32{{2, 3}}}, ID: idOf(40)})
	if p := res.Topic.Partitions[0]; p.Leader != 3 || !slices.Equal(p.ISR, []int32{3}) {
		t.Fatalf("assignment with a fenced broker: %+v", p)
	}
	m.fails(&createTopicCmd{TopicSpec: TopicSpec{Name: "y", Assignment: [][]int32{{2}}}, ID: idOf(41)}, ErrInvalidReplicaAssignment)

	// The refusals name what is wrong.
	for _, tc := range []struct {
		c    *createTopicCmd
		want error
		says string
	}{
		{create("rf4", 1, 4), ErrInvalidReplicationFactor, "4, with 3 live brokers"},
		{create("rf0", 1, 0), ErrInvalidReplicationFactor, "0, with 3 live brokers"},
		{&createTopicCmd{TopicSpec: TopicSpec{Name: "u", Assignment: [][]int32{{0, 9}}}, ID: idOf(42)}, ErrInvalidReplicaAssignment, "unknown broker 9"},
		{&createTopicCmd{TopicSpec: TopicSpec{Name: "d", Assignment: [][]int32{{0, 1}, {3, 3}}}, ID: idOf(43)}, ErrInvalidReplicaAssignment, "partition 1: broker 3 twice"},
		{&createTopicCmd{TopicSpec: TopicSpec{Name: "r", Assignment: [][]int32{{0, 1}, {3}}}, ID: idOf(44)}, ErrInvalidReplicaAssignment, "partition 1 has 1 replicas"},
	} {
		res := m.apply(tc.c)
		if !errors.Is(res.Err, tc.want) || !strings.Contains(res.Err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.c.Name, res.Err, tc.want, tc.says)
		}
	}

	// A retried create (same id) returns the topic, unchanged; a new id
	// for the same name is refused.
	tp, _ := m.md.Topic("t")
	v := m.md.Version()
	retry := create("t", 3, 2)
	retry.ID = tp.ID
	if res := m.ok(retry); res.Topic.ID != tp.ID || m.md.Version() != v {
		t.Fatalf("retry: %+v, version %d -> %d", res.Topic, v, m.md.Version())
	}
	other := create("t", 3, 2)
	other.ID = idOf(99)
	m.fails(other, ErrTopicExists)
}
