package assign

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Property tests over seeded random groups (up to 10 members, 5 topics of up to 30 partitions,
// varied subscriptions, stale and conflicting ownership claims). They prove the invariants of
// the package comment: exactly-once (eager) and at-most-once (cooperative) assignment, with the
// withheld partitions exactly those moving away from their owner; subscriptions respected;
// balance; determinism under member order; stickiness on join and leave; and convergence in
// two rebalances.

const cases = 300

type group struct {
	members    []Member
	partitions map[string]int32
}

func (g group) String() string {
	return fmt.Sprintf("members %+v partitions %v", g.members, g.partitions)
}

// randomGroup draws a group; with owned it also draws ownership: a previous assignment,
// partly stale, with some conflicting and some meaningless claims.
func randomGroup(r *rand.Rand, owned bool) group {
	g := group{partitions: map[string]int32{}}
	nt := 1 + r.IntN(5)
	var topics []string
	for t := range nt {
		topic := fmt.Sprintf("t%d", t)
		topics = append(topics, topic)
		g.partitions[topic] = int32(r.IntN(31))
	}
	topics = append(topics, "missing") // subscribed sometimes, never in the map
	nm := 1 + r.IntN(10)
	same := r.IntN(4) == 0 // a quarter of the groups: one subscription for all
	for m := range nm {
		mem := Member{ID: fmt.Sprintf("m%02d", r.IntN(100)*100+m), Generation: -1}
		if r.IntN(4) == 0 {
			mem.InstanceID = fmt.Sprintf("i%d", r.IntN(20)*100+m)
		}
		switch {
		case same || r.IntN(3) == 0: // everything
			mem.Topics = slices.Clone(topics[:nt])
		default:
			for _, topic := range topics {
				if r.IntN(2) == 0 {
					mem.Topics = append(mem.Topics, topic)
				}
			}
		}
		g.members = append(g.members, mem)
	}
	if !owned {
		return g
	}
	claims := make([]map[string][]int32, nm)
	for m := range claims {
		claims[m] = map[string][]int32{}
		g.members[m].Generation = int32(r.IntN(3))
	}
	for _, topic := range topics[:nt] {
		for p := range g.partitions[topic] + 2 { // two past the end: ignored
			for range r.IntN(3) { // zero, one or two claimants
				m := r.IntN(nm)
				claims[m][topic] = append(claims[m][topic], p)
			}
		}
	}
	for m, c := range claims {
		for _, topic := range topics[:nt] {
			if ps := c[topic]; len(ps) > 0 {
				slices.Sort(ps)
				g.members[m].Owned = append(g.members[m].Owned, TopicPartitions{topic, slices.Compact(ps)})
			}
		}
	}
	return g
}

type key struct {
	topic string
	p     int32
}

// owners maps each assigned partition to its member, failing on a partition assigned twice.
func owners(t *testing.T, got map[string][]TopicPartitions) map[key]string {
	t.Helper()
	out := map[key]string{}
	for id, tps := range got {
		if !slices.IsSortedFunc(tps, func(a, b TopicPartitions) int { return compareStrings(a.Topic, b.Topic) }) {
			t.Fatalf("%s: topics not sorted: %v", id, tps)
		}
		for _, tp := range tps {
			if !slices.IsSorted(tp.Partitions) {
				t.Fatalf("%s: partitions not sorted: %v", id, tps)
			}
			for _, p := range tp.Partitions {
				k := key{tp.Topic, p}
				if prev, dup := out[k]; dup {
					t.Fatalf("%v assigned to %s and %s", k, prev, id)
				}
				out[k] = id
			}
		}
	}
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkBasic: every member present, partitions assigned at most once and only to subscribers,
// and (when complete) every subscribed partition assigned.
func checkBasic(t *testing.T, g group, got map[string][]TopicPartitions, complete bool) map[key]string {
	t.Helper()
	if len(got) != len(g.members) {
		t.Fatalf("%d members in result, want %d", len(got), len(g.members))
	}
	subs := map[string][]string{}
	for _, m := range g.members {
		if _, ok := got[m.ID]; !ok {
			t.Fatalf("member %s missing from result", m.ID)
		}
		subs[m.ID] = m.Topics
	}
	own := owners(t, got)
	for k, id := range own {
		if !slices.Contains(subs[id], k.topic) {
			t.Fatalf("%s got %v without subscribing", id, k)
		}
		if k.p < 0 || k.p >= g.partitions[k.topic] {
			t.Fatalf("%s got nonexistent %v", id, k)
		}
	}
	if complete {
		for topic, n := range g.partitions {
			subscribed := slices.ContainsFunc(g.members, func(m Member) bool { return slices.Contains(m.Topics, topic) })
			for p := range n {
				if _, ok := own[key{topic, p}]; subscribed && !ok {
					t.Fatalf("%s-%d unassigned", topic, p)
				}
			}
		}
	}
	return own
}

// checkBalanced: counts differ by at most one among members with identical subscriptions.
func checkBalanced(t *testing.T, g group, got map[string][]TopicPartitions) {
	t.Helper()
	count := func(id string) int {
		n := 0
		for _, tp := range got[id] {
			n += len(tp.Partitions)
		}
		return n
	}
	subKey := func(m Member) string {
		var ts []string
		for _, topic := range m.Topics {
			if g.partitions[topic] > 0 {
				ts = append(ts, topic)
			}
		}
		slices.Sort(ts)
		return fmt.Sprint(slices.Compact(ts))
	}
	for _, a := range g.members {
		for _, b := range g.members {
			if subKey(a) == subKey(b) && count(a.ID) > count(b.ID)+1 {
				t.Fatalf("unbalanced: %s has %d, %s has %d, same subscription %s", a.ID, count(a.ID), b.ID, count(b.ID), subKey(a))
			}
		}
	}
}

// claimWinners resolves ownership claims independently of the implementation: highest
// generation, ties to the first member in Kafka's order.
func claimWinners(g group) map[key]string {
	ms := sortedMembers(g.members)
	out := map[key]string{}
	gen := map[key]int32{}
	for _, m := range ms {
		for _, tp := range m.Owned {
			n, ok := g.partitions[tp.Topic]
			subscribed := slices.ContainsFunc(g.members, func(x Member) bool { return slices.Contains(x.Topics, tp.Topic) })
			if !ok || !subscribed {
				continue
			}
			for _, p := range tp.Partitions {
				k := key{tp.Topic, p}
				if p >= n {
					continue
				}
				if _, claimed := out[k]; !claimed || m.Generation > gen[k] {
					out[k], gen[k] = m.ID, m.Generation
				}
			}
		}
	}
	return out
}

func shuffled(r *rand.Rand, ms []Member) []Member {
	out := slices.Clone(ms)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func TestEagerProperties(t *testing.T) {
	for seed := range uint64(cases) {
		r := rand.New(rand.NewPCG(seed, 1))
		g := randomGroup(r, false)
		for _, a := range []Assignor{Range(), RoundRobin()} {
			got := a.Assign(g.members, g.partitions)
			checkBasic(t, g, got, true)
			if again := a.Assign(shuffled(r, g.members), g.partitions); !reflect.DeepEqual(got, again) {
				t.Fatalf("seed %d %s: member order changed the result:\n%v\n%v", seed, a.Name(), got, again)
			}
			if a.Name() == "roundrobin" && allSame(g) {
				checkBalanced(t, g, got)
			}
		}
	}
}

func allSame(g group) bool {
	for _, m := range g.members {
		if !reflect.DeepEqual(m.Topics, g.members[0].Topics) {
			return false
		}
	}
	return true
}

func TestCooperativeStickyProperties(t *testing.T) {
	for seed := range uint64(cases) {
		r := rand.New(rand.NewPCG(seed, 2))
		g := randomGroup(r, r.IntN(5) != 0)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			target := assignSticky(g.members, g.partitions, false)
			targetOwn := checkBasic(t, g, target, true)
			checkBalanced(t, g, target)

			got := CooperativeSticky().Assign(g.members, g.partitions)
			gotOwn := checkBasic(t, g, got, false)
			winners := claimWinners(g)
			for k, id := range targetOwn {
				prev, owned := winners[k]
				moves := owned && prev != id
				if _, given := gotOwn[k]; given == moves {
					t.Fatalf("%v: target %s, owner %q (owned %v), given %v\n%v", k, id, prev, owned, given, g)
				}
			}
			for k, id := range gotOwn {
				if targetOwn[k] != id {
					t.Fatalf("%v given to %s, target %s", k, id, targetOwn[k])
				}
			}
			if again := CooperativeSticky().Assign(shuffled(r, g.members), g.partitions); !reflect.DeepEqual(got, again) {
				t.Fatalf("member order changed the result:\n%v\n%v", got, again)
			}

			// Next rebalance with the first result as ownership: complete and balanced. With
			// identical subscriptions the second rebalance always is; with differing ones the
			// third may be needed (about 1 group in 500 of this generator).
			next := applied(g, got, 10)
			rounds := 3
			if allSame(g) {
				rounds = 2
			}
			for round := 2; ; round++ {
				second := CooperativeSticky().Assign(next.members, next.partitions)
				if len(checkBasic(t, next, second, false)) == len(targetOwn) {
					checkBalanced(t, next, second)
					break
				}
				if round == rounds {
					checkBasic(t, next, second, true) // fails, naming a partition
				}
				next = applied(next, second, int32(10+round))
			}
		})
	}
}

// applied returns g with each member owning what got assigned it, at generation gen.
func applied(g group, got map[string][]TopicPartitions, gen int32) group {
	next := group{partitions: g.partitions}
	for _, m := range g.members {
		m.Owned, m.Generation = got[m.ID], gen
		next.members = append(next.members, m)
	}
	return next
}

func homogeneous(r *rand.Rand, n int) group {
	g := group{partitions: map[string]int32{}}
	var topics []string
	for t := range 1 + r.IntN(5) {
		topic := fmt.Sprintf("t%d", t)
		topics = append(topics, topic)
		g.partitions[topic] = int32(r.IntN(31))
	}
	for m := range n {
		g.members = append(g.members, Member{ID: fmt.Sprintf("m%02d", m), Topics: topics, Generation: -1})
	}
	return g
}

func total(g group) int {
	n := 0
	for _, c := range g.partitions {
		n += int(c)
	}
	return n
}

func TestStickyJoinAndLeave(t *testing.T) {
	for seed := range uint64(cases) {
		r := rand.New(rand.NewPCG(seed, 3))
		n := 1 + r.IntN(9)
		g := homogeneous(r, n)
		p := total(g)
		g = applied(g, CooperativeSticky().Assign(g.members, g.partitions), 1)

		// Join: the newcomer's share, and only that, moves.
		join := g
		join.members = append(slices.Clone(g.members), Member{ID: "new", Topics: g.members[0].Topics, Generation: -1})
		target := owners(t, assignSticky(join.members, join.partitions, false))
		got := owners(t, CooperativeSticky().Assign(join.members, join.partitions))
		moved := 0
		for k, id := range target {
			if _, given := got[k]; !given {
				moved++
				if id != "new" {
					t.Fatalf("seed %d: %v withheld for %s, not the newcomer", seed, k, id)
				}
			}
		}
		if lo, hi := p/(n+1), (p+n)/(n+1); moved < lo || moved > hi {
			t.Fatalf("seed %d: %d of %d partitions moved to the %dth member, want %d..%d", seed, moved, p, n+1, lo, hi)
		}

		// The next rebalance completes the join, balanced.
		joined := applied(join, CooperativeSticky().Assign(join.members, join.partitions), 2)
		done := CooperativeSticky().Assign(joined.members, joined.partitions)
		checkBasic(t, joined, done, true)
		checkBalanced(t, joined, done)

		// Leave: the survivors keep all they had; nothing is withheld.
		leaver := r.IntN(n)
		leave := group{partitions: g.partitions}
		leave.members = slices.Delete(slices.Clone(g.members), leaver, leaver+1)
		if len(leave.members) == 0 {
			continue
		}
		after := CooperativeSticky().Assign(leave.members, leave.partitions)
		afterOwn := checkBasic(t, leave, after, true)
		checkBalanced(t, leave, after)
		for _, m := range leave.members {
			for _, tp := range m.Owned {
				for _, p := range tp.Partitions {
					if afterOwn[key{tp.Topic, p}] != m.ID {
						t.Fatalf("seed %d: %s lost %s-%d when %s left", seed, m.ID, tp.Topic, p, g.members[leaver].ID)
					}
				}
			}
		}
	}
}
