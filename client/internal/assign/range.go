package assign

type rangeAssignor struct{}

// Range returns Kafka's range assignor: per topic, the partitions are split into contiguous
// ranges over the members subscribed to it in member order, the first members getting one
// more when the count does not divide evenly.
func Range() Assignor { return rangeAssignor{} }

func (rangeAssignor) Name() string       { return "range" }
func (rangeAssignor) Protocol() Protocol { return Eager }

func (rangeAssignor) Assign(members []Member, partitions map[string]int32) map[string][]TopicPartitions {
	ms := sortedMembers(members)
	out := emptyResult(ms)
	for _, topic := range subscribedTopics(ms, partitions) {
		var subs []*Member
		for _, m := range ms {
			if subscribes(m, topic) {
				subs = append(subs, m)
			}
		}
		n := partitions[topic]
		per, extra := n/int32(len(subs)), n%int32(len(subs))
		next := int32(0)
		for i, m := range subs {
			k := per
			if int32(i) < extra {
				k++
			}
			for p := next; p < next+k; p++ {
				out[m.ID] = add(out[m.ID], topic, p)
			}
			next += k
		}
	}
	return out
}
