package reassign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Generate proposes where the partitions of current should live on brokers: see the package
// comment for what it promises and how. The result lists current's partitions sorted by topic
// and partition, each with as many replicas as it has now (preferred leader first) and
// AnyLogDir per replica. It refuses (ErrBrokers) an empty broker list, a broker twice, a
// negative id, or a partition with more replicas than there are brokers, and (ErrInvalidPlan)
// a current assignment with a partition twice or an empty or repeated replica list.
func Generate(current Plan, brokers []int32, seed int64) (Plan, error) {
	if err := checkBrokers(brokers); err != nil {
		return Plan{}, err
	}
	parts := slices.Clone(current.Partitions)
	slices.SortStableFunc(parts, comparePartitions)
	if err := checkCurrent(parts, len(brokers)); err != nil {
		return Plan{}, err
	}
	if len(parts) == 0 {
		return Plan{Version: 1, Partitions: []PartitionPlan{}}, nil
	}

	// The seed orders the brokers and the partitions as the network sees them: among
	// assignments that are equally good, which one the solver finds depends on that order
	// only.
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed_a551_6e00_0001))
	order := rng.Perm(len(brokers)) // node k is brokers[order[k]]
	bs := make([]int32, len(brokers))
	for k, i := range order {
		bs[k] = brokers[i]
	}
	visit := rng.Perm(len(parts))

	group := make([]int, len(parts)) // partition -> topic index
	for i := 1; i < len(parts); i++ {
		group[i] = group[i-1]
		if parts[i].Topic != parts[i-1].Topic {
			group[i]++
		}
	}

	// Step 1: the replica sets. A replica on broker b costs 1 unless b holds it now.
	items := make([]choiceItem, len(parts))
	for n, i := range visit {
		it := choiceItem{group: group[i], need: len(parts[i].Replicas)}
		for k, b := range bs {
			c := int64(1)
			if slices.Contains(parts[i].Replicas, b) {
				c = 0
			}
			it.allowed = append(it.allowed, k)
			it.cost = append(it.cost, c)
		}
		items[n] = it
	}
	sets := balancedChoice(items, len(bs))

	out := make([]PartitionPlan, len(parts))
	for n, i := range visit {
		chosen := make([]int32, len(sets[n]))
		for j, k := range sets[n] {
			chosen[j] = bs[k]
		}
		out[i] = PartitionPlan{Topic: parts[i].Topic, Partition: parts[i].Partition, Replicas: keepPositions(parts[i].Replicas, chosen)}
	}

	// Step 2: the preferred leaders, among each partition's new replicas. Keeping the current
	// preferred leader costs 0, another replica 1.
	for n, i := range visit {
		it := choiceItem{group: group[i], need: 1}
		for k, b := range bs {
			if !slices.Contains(out[i].Replicas, b) {
				continue
			}
			c := int64(1)
			if b == parts[i].Replicas[0] {
				c = 0
			}
			it.allowed = append(it.allowed, k)
			it.cost = append(it.cost, c)
		}
		items[n] = it
	}
	leaders := balancedChoice(items, len(bs))
	for n, i := range visit {
		out[i].Replicas = leaderFirst(out[i].Replicas, bs[leaders[n][0]])
		out[i].LogDirs = anyDirs(len(out[i].Replicas))
	}
	return Plan{Version: 1, Partitions: out}, nil
}

func checkBrokers(brokers []int32) error {
	if len(brokers) == 0 {
		return fmt.Errorf("%w: no brokers", ErrBrokers)
	}
	for i, b := range brokers {
		if b < 0 {
			return fmt.Errorf("%w: negative broker id %d", ErrBrokers, b)
		}
		if slices.Contains(brokers[:i], b) {
			return fmt.Errorf("%w: broker %d listed twice", ErrBrokers, b)
		}
	}
	return nil
}

// checkCurrent lists every problem of a (sorted) current assignment.
func checkCurrent(parts []PartitionPlan, brokers int) error {
	var probs []string
	var tooMany []string
	for i, pp := range parts {
		ref := PartitionRef{pp.Topic, pp.Partition}
		probs = append(probs, partitionProblems(PartitionPlan{Topic: pp.Topic, Partition: pp.Partition, Replicas: pp.Replicas})...)
		if i > 0 && comparePartitions(parts[i-1], pp) == 0 {
			probs = append(probs, ref.String()+": listed twice")
		}
		if len(pp.Replicas) > brokers {
			tooMany = append(tooMany, fmt.Sprintf("%s has %d replicas", ref, len(pp.Replicas)))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidPlan, strings.Join(probs, "; "))
	}
	if len(tooMany) > 0 {
		return fmt.Errorf("%w: %s, more than the %d brokers listed", ErrBrokers, strings.Join(tooMany, ", "), brokers)
	}
	return nil
}

// keepPositions orders chosen after old: a broker of both keeps its place in old, and the new
// ones take, in ascending id order, the places of the old ones that left.
func keepPositions(old, chosen []int32) []int32 {
	var added []int32
	for _, b := range chosen {
		if !slices.Contains(old, b) {
			added = append(added, b)
		}
	}
	slices.Sort(added)
	out := make([]int32, 0, len(chosen))
	for _, b := range old {
		switch {
		case slices.Contains(chosen, b):
			out = append(out, b)
		case len(added) > 0:
			out = append(out, added[0])
			added = added[1:]
		}
	}
	return append(out, added...)
}

// leaderFirst moves leader to the front of replicas, the others keeping their order.
func leaderFirst(replicas []int32, leader int32) []int32 {
	out := []int32{leader}
	for _, b := range replicas {
		if b != leader {
			out = append(out, b)
		}
	}
	return out
}

// choiceItem is one partition's choice: need distinct brokers among allowed (broker node
// indices), cost[j] the cost of allowed[j].
type choiceItem struct {
	group   int // the topic: counts are balanced per group as well as overall
	need    int
	allowed []int
	cost    []int64
}

// balancedChoice picks need distinct allowed brokers for every item so that, first, the number
// of picks per broker is balanced (floor or ceiling of the even share) within each group and
// over all groups, as far as the allowed sets permit, and second, the sum of the costs is
// least. It returns the picks per item, as broker indices in ascending order.
//
// The network, every unit of flow one pick:
//
//	source ─need─▶ item ─1, cost─▶ (group, broker) ─tiers─▶ broker ─tiers─▶ sink
//
// Each tiered link is three parallel edges: the floor of the even share at cost 0, one more
// unit at cost big if the share is not whole, and the rest at cost 2·big. big exceeds the
// costs of all picks together, so the least-cost flow fills every floor before it gives any
// broker a ceiling unit, never overflows when a balanced choice exists, and among balanced
// choices has the least cost.
func balancedChoice(items []choiceItem, brokers int) [][]int {
	groups := 0
	total := 0
	var big int64 = 1
	for _, it := range items {
		groups = max(groups, it.group+1)
		total += it.need
		for _, c := range it.cost {
			big += c
		}
	}
	groupTotal := make([]int, groups)
	for _, it := range items {
		groupTotal[it.group] += it.need
	}
	// Nodes: source, items, (group, broker) pairs, brokers, sink.
	source := 0
	itemNode := func(i int) int { return 1 + i }
	pairNode := func(g, b int) int { return 1 + len(items) + g*brokers + b }
	brokerNode := func(b int) int { return 1 + len(items) + groups*brokers + b }
	sink := 1 + len(items) + groups*brokers + brokers
	g := newFlowGraph(sink + 1)
	tiers := func(from, to, share int) {
		floor, rem := share/brokers, share%brokers
		if floor > 0 {
			g.add(from, to, floor, 0)
		}
		if rem > 0 {
			g.add(from, to, 1, big)
		}
		g.add(from, to, share, 2*big)
	}
	picks := make([][]edgeRef, len(items))
	for i, it := range items {
		g.add(source, itemNode(i), it.need, 0)
		for j, b := range it.allowed {
			picks[i] = append(picks[i], g.add(itemNode(i), pairNode(it.group, b), 1, it.cost[j]))
		}
	}
	for gr := range groups {
		for b := range brokers {
			tiers(pairNode(gr, b), brokerNode(b), groupTotal[gr])
		}
	}
	for b := range brokers {
		tiers(brokerNode(b), sink, total)
	}
	g.solve(source, sink, total)
	out := make([][]int, len(items))
	for i, it := range items {
		for j, e := range picks[i] {
			if g.flow(e) > 0 {
				out[i] = append(out[i], it.allowed[j])
			}
		}
		slices.Sort(out[i])
	}
	return out
}
