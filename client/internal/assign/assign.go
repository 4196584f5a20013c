package assign

import (
	"cmp"
	"slices"
)

// TopicPartitions is a set of partitions of one topic, sorted ascending.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// Member is one group member as the leader sees it in a rebalance.
type Member struct {
	ID, InstanceID string
	// Topics is the subscription.
	Topics []string
	// Owned lists the partitions owned going into this rebalance (cooperative); nil for eager.
	Owned []TopicPartitions
	// Generation is the generation of Owned, -1 when unknown. On conflicting claims the
	// highest wins.
	Generation int32
}

// Protocol is the rebalance protocol an assignor needs.
type Protocol uint8

const (
	// Eager: every member revokes everything before rejoining.
	Eager Protocol = iota
	// Cooperative: members keep their partitions through a rebalance and revoke only those the
	// assignment takes away.
	Cooperative
)

func (p Protocol) String() string {
	switch p {
	case Eager:
		return "eager"
	case Cooperative:
		return "cooperative"
	}
	return "unknown"
}

// Assignor computes a group's assignment. Assign returns member id -> assigned partitions, with
// every member present.
type Assignor interface {
	Name() string
	Protocol() Protocol
	Assign(members []Member, partitions map[string]int32) map[string][]TopicPartitions
}

// ByName returns the assignor with Kafka's protocol name.
func ByName(name string) (Assignor, bool) {
	switch name {
	case "range":
		return Range(), true
	case "roundrobin":
		return RoundRobin(), true
	case "cooperative-sticky":
		return CooperativeSticky(), true
	}
	return nil, false
}

// compareMembers is Kafka's member order (KIP-345): members with an instance id first, by
// instance id; then by member id.
func compareMembers(a, b *Member) int {
	switch {
	case a.InstanceID != "" && b.InstanceID != "":
		if c := cmp.Compare(a.InstanceID, b.InstanceID); c != 0 {
			return c
		}
	case a.InstanceID != "":
		return -1
	case b.InstanceID != "":
		return 1
	}
	return cmp.Compare(a.ID, b.ID)
}

// sortedMembers returns pointers to members in Kafka's order; the input is not modified.
func sortedMembers(members []Member) []*Member {
	out := make([]*Member, len(members))
	for i := range members {
		out[i] = &members[i]
	}
	slices.SortStableFunc(out, compareMembers)
	return out
}

// subscribes reports whether m subscribes to topic.
func subscribes(m *Member, topic string) bool {
	return slices.Contains(m.Topics, topic)
}

// subscribedTopics returns the topics of the map that some member subscribes to, sorted.
func subscribedTopics(members []*Member, partitions map[string]int32) []string {
	var topics []string
	for _, m := range members {
		for _, t := range m.Topics {
			if n, ok := partitions[t]; ok && n > 0 {
				topics = append(topics, t)
			}
		}
	}
	slices.Sort(topics)
	return slices.Compact(topics)
}

// emptyResult returns a result with every member present and no partitions.
func emptyResult(members []*Member) map[string][]TopicPartitions {
	out := make(map[string][]TopicPartitions, len(members))
	for _, m := range members {
		out[m.ID] = []TopicPartitions{}
	}
	return out
}

// add appends partition p of topic to the member's list, which is built in (topic, partition)
// order.
func add(list []TopicPartitions, topic string, p int32) []TopicPartitions {
	if n := len(list); n > 0 && list[n-1].Topic == topic {
		list[n-1].Partitions = append(list[n-1].Partitions, p)
		return list
	}
	return append(list, TopicPartitions{Topic: topic, Partitions: []int32{p}})
}
