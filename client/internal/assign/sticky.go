package assign

import (
	"cmp"
	"fmt"
	"slices"
)

type cooperativeStickyAssignor struct{}

// CooperativeSticky returns Kafka's cooperative-sticky assignor: a balanced assignment that
// keeps as many owned partitions as balance allows, with the cooperative adjustment that leaves
// unassigned, for this round, every partition whose owner changes (see the package comment).
func CooperativeSticky() Assignor { return cooperativeStickyAssignor{} }

func (cooperativeStickyAssignor) Name() string       { return "cooperative-sticky" }
func (cooperativeStickyAssignor) Protocol() Protocol { return Cooperative }

func (cooperativeStickyAssignor) Assign(members []Member, partitions map[string]int32) map[string][]TopicPartitions {
	return assignSticky(members, partitions, true)
}

// assignSticky computes the sticky target and, when cooperative, withholds the partitions whose
// owner changes. Tests call it with cooperative false to see the target.
func assignSticky(members []Member, partitions map[string]int32, cooperative bool) map[string][]TopicPartitions {
	s := newSticky(sortedMembers(members), partitions)
	s.keepOwned()
	s.assignFree()
	s.balance()
	s.restore()
	return s.result(cooperative)
}

// sticky is the working state of one sticky assignment. Partitions are numbered densely:
// topic t's partition p is first[t]+p, so partition numbers follow (topic, partition) order.
// Members are numbered by their position in member order.
type sticky struct {
	members []*Member
	topics  []string
	counts  []int32  // partition count per topic
	first   []int    // number of each topic's partition 0
	topicOf []int    // topic of each partition
	subs    [][]bool // subs[member][topic]
	// class numbers the distinct subscriptions (over the topics here): members with the same
	// class are interchangeable.
	class []int
	// eligible lists, per topic, the subscribed members in member order.
	eligible [][]int
	// owner is the member whose claim on the partition won, -1 when nobody in the group
	// claims it.
	owner []int
	// Invariant: assigned[i] == m exactly when i is in held[m]; -1 when unassigned.
	assigned []int
	held     [][]int
	// sideways is how many more sideways moves balance may make (see takeSideways).
	sideways int
}

func newSticky(ms []*Member, partitions map[string]int32) *sticky {
	s := &sticky{members: ms, topics: subscribedTopics(ms, partitions)}
	topicIndex := make(map[string]int, len(s.topics))
	n := 0
	for t, topic := range s.topics {
		topicIndex[topic] = t
		s.counts = append(s.counts, partitions[topic])
		s.first = append(s.first, n)
		for range partitions[topic] {
			s.topicOf = append(s.topicOf, t)
		}
		n += int(partitions[topic])
	}
	s.subs = make([][]bool, len(ms))
	s.eligible = make([][]int, len(s.topics))
	for j, m := range ms {
		s.subs[j] = make([]bool, len(s.topics))
		for _, topic := range m.Topics {
			if t, ok := topicIndex[topic]; ok && !s.subs[j][t] {
				s.subs[j][t] = true
				s.eligible[t] = append(s.eligible[t], j)
			}
		}
	}
	s.class = make([]int, len(ms))
	classes := map[string]int{}
	for j := range ms {
		k := fmt.Sprint(s.subs[j])
		if _, ok := classes[k]; !ok {
			classes[k] = len(classes)
		}
		s.class[j] = classes[k]
	}
	s.owner = make([]int, n)
	s.assigned = make([]int, n)
	for i := range n {
		s.owner[i], s.assigned[i] = -1, -1
	}
	s.held = make([][]int, len(ms))
	s.sideways = n

	// Resolve claims: the highest generation wins; members are visited in member order and
	// an equal generation does not displace, so ties go to the first member.
	gen := make([]int32, n)
	for j, m := range ms {
		for _, tp := range m.Owned {
			t, ok := topicIndex[tp.Topic]
			if !ok {
				continue
			}
			for _, p := range tp.Partitions {
				if p < 0 || p >= s.counts[t] {
					continue
				}
				i := s.first[t] + int(p)
				if s.owner[i] == -1 || m.Generation > gen[i] {
					s.owner[i], gen[i] = j, m.Generation
				}
			}
		}
	}
	return s
}

func (s *sticky) give(i, m int) {
	s.assigned[i] = m
	s.held[m] = append(s.held[m], i)
}

// keepOwned gives every owner the partitions it still subscribes to.
func (s *sticky) keepOwned() {
	for i, o := range s.owner {
		if o >= 0 && s.subs[o][s.topicOf[i]] {
			s.give(i, o)
		}
	}
}

// assignFree gives each unassigned partition to the least loaded member subscribed to its topic
// (the first in member order on ties). Topics with fewer subscribers go first: their
// partitions have fewer places to go.
func (s *sticky) assignFree() {
	order := make([]int, len(s.topics))
	for t := range order {
		order[t] = t
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(len(s.eligible[a]), len(s.eligible[b]))
	})
	for _, t := range order {
		for i := s.first[t]; i < s.first[t]+int(s.counts[t]); i++ {
			if s.assigned[i] >= 0 {
				continue
			}
			best := -1
			for _, m := range s.eligible[t] {
				if best < 0 || len(s.held[m]) < len(s.held[best]) {
					best = m
				}
			}
			s.give(i, best)
		}
	}
}

// balance moves one partition at a time from a most loaded member to a least loaded one that
// subscribes to its topic and holds at least two fewer, until no such move exists. Between
// members of different subscriptions only partitions the donor does not own move: balance
// across subscriptions is best effort and never costs a revocation, which is what lets a second
// rebalance converge. Each move lowers the sum of squared counts, so the loop ends.
func (s *sticky) balance() {
	byLoad := make([]int, len(s.members))
	for m := range byLoad {
		byLoad[m] = m
	}
	load := func(a, b int) int {
		if c := cmp.Compare(len(s.held[a]), len(s.held[b])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	for s.moveOne(byLoad, load) {
	}
}

func (s *sticky) moveOne(byLoad []int, load func(a, b int) int) bool {
	slices.SortFunc(byLoad, load) // ascending load
	if len(byLoad) < 2 {
		return false
	}
	least := len(s.held[byLoad[0]])
	for k := len(byLoad) - 1; k > 0; k-- {
		d := byLoad[k]
		if len(s.held[d]) <= least+1 {
			return false
		}
		for _, r := range byLoad[:k] {
			if len(s.held[r]) >= len(s.held[d])-1 {
				break
			}
			at, rank := s.pick(d, r)
			if at < 0 {
				continue
			}
			if rank == 1 && s.sideways > 0 && s.takeSideways(byLoad, r) {
				s.sideways--
				return true
			}
			s.move(s.held[d][at], r)
			return true
		}
	}
	return false
}

// takeSideways is the alternative to taking an owned partition from a donor: r takes a partition
// its holder does not own from a member holding at least one more than r. That never raises
// the sum of squared counts; s.sideways bounds how often it is tried, so balance still ends.
func (s *sticky) takeSideways(byLoad []int, r int) bool {
	for k := len(byLoad) - 1; k >= 0; k-- {
		x := byLoad[k]
		if len(s.held[x]) <= len(s.held[r]) {
			return false
		}
		if at, rank := s.pick(x, r); at >= 0 && rank > 1 {
			s.move(s.held[x][at], r)
			return true
		}
	}
	return false
}

// move reassigns partition i to m.
func (s *sticky) move(i, m int) {
	from := s.assigned[i]
	at := slices.Index(s.held[from], i)
	s.held[from] = slices.Delete(s.held[from], at, at+1)
	s.give(i, m)
}

// restore hands partitions that balance moved away from their owner back to it where a chain
// of free partitions can make up for it: the owner passes a partition it does not own to a
// member subscribed to its topic, that member passes one it does not own on, and so on until
// the member that had taken the owner's partition is reached. Counts do not change, so balance
// holds; each hand-back lowers the number of partitions away from their owner (a partition
// passed on was away from its owner already, or reaches it), so the loop ends.
func (s *sticky) restore() {
	for changed := true; changed; {
		changed = false
		for i, o := range s.owner {
			r := s.assigned[i]
			if o < 0 || o == r || !s.subs[o][s.topicOf[i]] {
				continue
			}
			hops := s.freePath(o, r)
			if hops == nil {
				continue
			}
			s.move(i, o)
			for _, h := range hops {
				s.move(h.partition, h.to)
			}
			changed = true
		}
	}
}

type hop struct{ partition, to int }

// freePath finds, breadth first, a chain of hops from member from to member to, each passing a
// partition its holder does not own to a member subscribed to its topic; nil if there is none.
func (s *sticky) freePath(from, to int) []hop {
	prev := make([]hop, len(s.members)) // how each reached member was reached
	seen := make([]bool, len(s.members))
	seen[from] = true
	queue := []int{from}
	for len(queue) > 0 && !seen[to] {
		c := queue[0]
		queue = queue[1:]
		for _, i := range s.held[c] {
			if s.owner[i] == c {
				continue
			}
			for _, m := range s.eligible[s.topicOf[i]] {
				if !seen[m] {
					seen[m], prev[m] = true, hop{partition: i, to: m}
					queue = append(queue, m)
				}
			}
		}
	}
	if !seen[to] {
		return nil
	}
	var hops []hop
	for m := to; m != from; m = s.assigned[prev[m].partition] {
		hops = append(hops, prev[m])
	}
	slices.Reverse(hops)
	return hops
}

// pick returns the position in held[d] of the partition to move to r, -1 if r can take none.
// Cheapest first: one r owns (moving it back costs nothing), then one d does not own, then one
// d owns (the cooperative protocol will withhold it this round); within a rank the highest
// partition.
func (s *sticky) pick(d, r int) (at, rank int) {
	best, bestRank := -1, 0
	for at, i := range s.held[d] {
		if !s.subs[r][s.topicOf[i]] {
			continue
		}
		rank = 1
		switch s.owner[i] {
		case r:
			return at, 3
		case d:
		default:
			rank = 2
		}
		if rank == 1 && s.class[d] != s.class[r] {
			continue
		}
		if rank >= bestRank { // the last of a rank: owners keep their lower partitions
			best, bestRank = at, rank
		}
	}
	return best, bestRank
}

// result lists each member's partitions; cooperative leaves out those assigned away from their
// owner.
func (s *sticky) result(cooperative bool) map[string][]TopicPartitions {
	out := emptyResult(s.members)
	for m, held := range s.held {
		slices.Sort(held)
		id := s.members[m].ID
		for _, i := range held {
			if cooperative && s.owner[i] >= 0 && s.owner[i] != m {
				continue
			}
			t := s.topicOf[i]
			out[id] = add(out[id], s.topics[t], int32(i-s.first[t]))
		}
	}
	return out
}
