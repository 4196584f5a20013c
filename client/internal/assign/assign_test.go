package assign

import (
	"reflect"
	"testing"
)

// These tests pin the assignors to Kafka's documented examples and to the edges of the input
// contract: unknown topics, topics nobody subscribes to, members with nothing, member order.

func tp(topic string, ps ...int32) TopicPartitions {
	return TopicPartitions{Topic: topic, Partitions: ps}
}

func TestKafkaExamples(t *testing.T) {
	two := []Member{
		{ID: "C1", Topics: []string{"t0", "t1"}},
		{ID: "C0", Topics: []string{"t0", "t1"}},
	}
	t01 := map[string]int32{"t0": 3, "t1": 3}
	four := map[string]int32{"t0": 2, "t1": 2, "t2": 2, "t3": 2}
	all := []string{"t0", "t1", "t2", "t3"}
	three := []Member{{ID: "C0", Topics: all}, {ID: "C1", Topics: all}, {ID: "C2", Topics: all}}
	for _, tc := range []struct {
		name       string
		assignor   Assignor
		members    []Member
		partitions map[string]int32
		want       map[string][]TopicPartitions
	}{
		{
			// RangeAssignor javadoc: C0 [t0p0, t0p1, t1p0, t1p1], C1 [t0p2, t1p2].
			name: "range", assignor: Range(), members: two, partitions: t01,
			want: map[string][]TopicPartitions{
				"C0": {tp("t0", 0, 1), tp("t1", 0, 1)},
				"C1": {tp("t0", 2), tp("t1", 2)},
			},
		},
		{
			// RoundRobinAssignor javadoc: C0 [t0p0, t0p2, t1p1], C1 [t0p1, t1p0, t1p2].
			name: "roundrobin", assignor: RoundRobin(), members: two, partitions: t01,
			want: map[string][]TopicPartitions{
				"C0": {tp("t0", 0, 2), tp("t1", 1)},
				"C1": {tp("t0", 1), tp("t1", 0, 2)},
			},
		},
		{
			// RoundRobinAssignor javadoc, unequal subscriptions: C0 [t0], C1 [t0, t1],
			// C2 [t0, t1, t2] with 1, 2 and 3 partitions: C0 [t0p0], C1 [t1p0],
			// C2 [t1p1, t2p0, t2p1, t2p2].
			name: "roundrobin unequal", assignor: RoundRobin(),
			members: []Member{
				{ID: "C0", Topics: []string{"t0"}},
				{ID: "C1", Topics: []string{"t0", "t1"}},
				{ID: "C2", Topics: []string{"t0", "t1", "t2"}},
			},
			partitions: map[string]int32{"t0": 1, "t1": 2, "t2": 3},
			want: map[string][]TopicPartitions{
				"C0": {tp("t0", 0)},
				"C1": {tp("t1", 0)},
				"C2": {tp("t1", 1), tp("t2", 0, 1, 2)},
			},
		},
		{
			// StickyAssignor javadoc: three consumers, t0..t3 with two partitions each.
			name: "sticky", assignor: CooperativeSticky(), members: three, partitions: four,
			want: map[string][]TopicPartitions{
				"C0": {tp("t0", 0), tp("t1", 1), tp("t3", 0)},
				"C1": {tp("t0", 1), tp("t2", 0), tp("t3", 1)},
				"C2": {tp("t1", 0), tp("t2", 1)},
			},
		},
		{
			// StickyAssignor javadoc, C1 leaves: the survivors keep theirs and split C1's.
			name: "sticky after leave", assignor: CooperativeSticky(),
			members: []Member{
				{ID: "C0", Topics: all, Generation: 1, Owned: []TopicPartitions{tp("t0", 0), tp("t1", 1), tp("t3", 0)}},
				{ID: "C2", Topics: all, Generation: 1, Owned: []TopicPartitions{tp("t1", 0), tp("t2", 1)}},
			},
			partitions: four,
			want: map[string][]TopicPartitions{
				"C0": {tp("t0", 0), tp("t1", 1), tp("t2", 0), tp("t3", 0)},
				"C2": {tp("t0", 1), tp("t1", 0), tp("t2", 1), tp("t3", 1)},
			},
		},
		{
			// A member joins: it gets its share only after the owners revoke it.
			name: "cooperative join withholds", assignor: CooperativeSticky(),
			members: []Member{
				{ID: "C0", Topics: []string{"t0"}, Generation: 1, Owned: []TopicPartitions{tp("t0", 0, 1, 2, 3)}},
				{ID: "C1", Topics: []string{"t0"}, Generation: -1},
			},
			partitions: map[string]int32{"t0": 4},
			want: map[string][]TopicPartitions{
				"C0": {tp("t0", 0, 1)},
				"C1": {},
			},
		},
		{
			// Conflicting claims: the higher generation keeps the partition, the stale
			// claimant's claim counts for nothing (it is not withheld from the winner).
			name: "conflict higher generation wins", assignor: CooperativeSticky(),
			members: []Member{
				{ID: "A", Topics: []string{"t0"}, Generation: 3, Owned: []TopicPartitions{tp("t0", 0)}},
				{ID: "B", Topics: []string{"t0"}, Generation: 4, Owned: []TopicPartitions{tp("t0", 0, 1)}},
			},
			partitions: map[string]int32{"t0": 2},
			want: map[string][]TopicPartitions{
				"A": {},
				"B": {tp("t0", 0)},
			},
		},
		{
			// Unknown topics and partitions are ignored; every member appears.
			name: "ignored input", assignor: Range(),
			members: []Member{
				{ID: "A", Topics: []string{"gone", "t0"}},
				{ID: "B", Topics: []string{"gone"}},
			},
			partitions: map[string]int32{"t0": 2, "unsubscribed": 5},
			want:       map[string][]TopicPartitions{"A": {tp("t0", 0, 1)}, "B": {}},
		},
		{
			// KIP-345 order: members with an instance id first, by instance id.
			name: "instance id order", assignor: Range(),
			members: []Member{
				{ID: "a", Topics: []string{"t0"}},
				{ID: "z", InstanceID: "i2", Topics: []string{"t0"}},
				{ID: "y", InstanceID: "i1", Topics: []string{"t0"}},
			},
			partitions: map[string]int32{"t0": 4},
			want: map[string][]TopicPartitions{
				"y": {tp("t0", 0, 1)}, "z": {tp("t0", 2)}, "a": {tp("t0", 3)},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.assignor.Assign(tc.members, tc.partitions)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestByName(t *testing.T) {
	for _, tc := range []struct {
		name     string
		protocol Protocol
	}{{"range", Eager}, {"roundrobin", Eager}, {"cooperative-sticky", Cooperative}} {
		a, ok := ByName(tc.name)
		if !ok || a.Name() != tc.name || a.Protocol() != tc.protocol {
			t.Errorf("ByName(%q) = %v, %v", tc.name, a, ok)
		}
	}
	if _, ok := ByName("sticky"); ok {
		t.Error(`ByName("sticky") found an assignor`)
	}
}

func TestNoMembers(t *testing.T) {
	for _, a := range []Assignor{Range(), RoundRobin(), CooperativeSticky()} {
		if got := a.Assign(nil, map[string]int32{"t0": 3}); len(got) != 0 {
			t.Errorf("%s: %v", a.Name(), got)
		}
	}
}
