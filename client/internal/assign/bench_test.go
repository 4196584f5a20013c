package assign

import (
	"fmt"
	"testing"
)

// BenchmarkCooperativeSticky is the rebalance after a 100th member joins a balanced group of 99
// sharing 1000 partitions (10 topics of 100).
func BenchmarkCooperativeSticky(b *testing.B) {
	partitions := map[string]int32{}
	var topics []string
	for t := range 10 {
		topic := fmt.Sprintf("topic-%d", t)
		topics = append(topics, topic)
		partitions[topic] = 100
	}
	var members []Member
	for m := range 99 {
		members = append(members, Member{ID: fmt.Sprintf("member-%03d", m), Topics: topics, Generation: -1})
	}
	first := CooperativeSticky().Assign(members, partitions)
	for i := range members {
		members[i].Owned, members[i].Generation = first[members[i].ID], 1
	}
	members = append(members, Member{ID: "member-new", Topics: topics, Generation: -1})
	b.ReportAllocs()
	for b.Loop() {
		CooperativeSticky().Assign(members, partitions)
	}
}
