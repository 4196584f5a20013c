package assign

type roundRobinAssignor struct{}

// RoundRobin returns Kafka's round-robin assignor: all partitions in (topic, partition) order
// are dealt to the members in member order, one cursor going round the circle; a member that
// does not subscribe to a partition's topic is skipped for it.
func RoundRobin() Assignor { return roundRobinAssignor{} }

func (roundRobinAssignor) Name() string       { return "roundrobin" }
func (roundRobinAssignor) Protocol() Protocol { return Eager }

func (roundRobinAssignor) Assign(members []Member, partitions map[string]int32) map[string][]TopicPartitions {
	ms := sortedMembers(members)
	out := emptyResult(ms)
	cursor := 0
	for _, topic := range subscribedTopics(ms, partitions) {
		for p := range partitions[topic] {
			// Some member subscribes to topic, so this ends within one turn of the circle.
			for !subscribes(ms[cursor], topic) {
				cursor = (cursor + 1) % len(ms)
			}
			out[ms[cursor].ID] = add(out[ms[cursor].ID], topic, p)
			cursor = (cursor + 1) % len(ms)
		}
	}
	return out
}
