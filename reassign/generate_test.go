package reassign

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// cur builds a current assignment: "topic", then replica lists, one per partition.
func cur(spec ...any) Plan {
	var p Plan
	topic := ""
	next := int32(0)
	for _, s := range spec {
		switch v := s.(type) {
		case string:
			topic, next = v, 0
		case []int32:
			p.Partitions = append(p.Partitions, PartitionPlan{Topic: topic, Partition: next, Replicas: v})
			next++
		}
	}
	return p
}

func r(ids ...int32) []int32 { return ids }

// moved counts the replicas the plan adds: brokers in a partition's new list that are not in
// its current one (the data to copy).
func moved(current, got Plan) int {
	old := map[PartitionRef][]int32{}
	for _, pp := range current.Partitions {
		old[PartitionRef{pp.Topic, pp.Partition}] = pp.Replicas
	}
	n := 0
	for _, pp := range got.Partitions {
		for _, b := range pp.Replicas {
			if !slices.Contains(old[PartitionRef{pp.Topic, pp.Partition}], b) {
				n++
			}
		}
	}
	return n
}

// lowerBound is the fewest moves any balanced plan needs: every replica on a broker that is not
// listed moves, and so does every replica a broker holds beyond its ceiling share, counted
// over the whole plan or per topic, whichever is more.
func lowerBound(current Plan, brokers []int32) int {
	n := len(brokers)
	total, unlisted := 0, 0
	perBroker := map[int32]int{}
	perTopic := map[string]map[int32]int{}
	topicTotal := map[string]int{}
	for _, pp := range current.Partitions {
		if perTopic[pp.Topic] == nil {
			perTopic[pp.Topic] = map[int32]int{}
		}
		for _, b := range pp.Replicas {
			total++
			topicTotal[pp.Topic]++
			if !slices.Contains(brokers, b) {
				unlisted++
				continue
			}
			perBroker[b]++
			perTopic[pp.Topic][b]++
		}
	}
	ceil := func(x int) int { return (x + n - 1) / n }
	global := unlisted
	for _, c := range perBroker {
		global += max(0, c-ceil(total))
	}
	topic := unlisted
	for t, m := range perTopic {
		for _, c := range m {
			topic += max(0, c-ceil(topicTotal[t]))
		}
	}
	return max(global, topic)
}

// spread is max − min of counts over brokers (brokers with none count 0).
func spread(counts map[int32]int, brokers []int32) int {
	lo, hi := int(^uint(0)>>1), 0
	for _, b := range brokers {
		lo, hi = min(lo, counts[b]), max(hi, counts[b])
	}
	return hi - lo
}

type balance struct {
	replicas, leaders           map[int32]int
	topicReplicas, topicLeaders map[string]map[int32]int
}

func balanceOf(p Plan) balance {
	bl := balance{replicas: map[int32]int{}, leaders: map[int32]int{}, topicReplicas: map[string]map[int32]int{}, topicLeaders: map[string]map[int32]int{}}
	for _, pp := range p.Partitions {
		if bl.topicReplicas[pp.Topic] == nil {
			bl.topicReplicas[pp.Topic], bl.topicLeaders[pp.Topic] = map[int32]int{}, map[int32]int{}
		}
		for _, b := range pp.Replicas {
			bl.replicas[b]++
			bl.topicReplicas[pp.Topic][b]++
		}
		if len(pp.Replicas) > 0 {
			bl.leaders[pp.Replicas[0]]++
			bl.topicLeaders[pp.Topic][pp.Replicas[0]]++
		}
	}
	return bl
}

// checkPlan asserts what every generated plan keeps: the same partitions, sorted; each its
// replication factor, distinct listed brokers, "any" per replica; replicas balanced over all
// and per topic; and, if leaders is set, preferred leaders balanced the same way.
func checkPlan(t *testing.T, name string, current, got Plan, brokers []int32, leaders bool) {
	t.Helper()
	if got.Version != 1 || len(got.Partitions) != len(current.Partitions) {
		t.Fatalf("%s: version %d, %d partitions, want 1 and %d", name, got.Version, len(got.Partitions), len(current.Partitions))
	}
	want := slices.Clone(current.Partitions)
	sortParts(want)
	for i, pp := range got.Partitions {
		if pp.Topic != want[i].Topic || pp.Partition != want[i].Partition {
			t.Fatalf("%s: partition %d is %s, want %s", name, i, PartitionRef{pp.Topic, pp.Partition}, PartitionRef{want[i].Topic, want[i].Partition})
		}
		if len(pp.Replicas) != len(want[i].Replicas) || !reflect.DeepEqual(pp.LogDirs, anyDirs(len(pp.Replicas))) {
			t.Fatalf("%s: %s: replicas %v log dirs %v, want %d replicas", name, PartitionRef{pp.Topic, pp.Partition}, pp.Replicas, pp.LogDirs, len(want[i].Replicas))
		}
		for j, b := range pp.Replicas {
			if !slices.Contains(brokers, b) || slices.Contains(pp.Replicas[:j], b) {
				t.Fatalf("%s: %s: replicas %v: broker %d not listed or twice", name, PartitionRef{pp.Topic, pp.Partition}, pp.Replicas, b)
			}
		}
	}
	bl := balanceOf(got)
	if s := spread(bl.replicas, brokers); s > 1 {
		t.Errorf("%s: replica counts %v spread %d", name, bl.replicas, s)
	}
	for topic, m := range bl.topicReplicas {
		if s := spread(m, brokers); s > 1 {
			t.Errorf("%s: topic %s replica counts %v spread %d", name, topic, m, s)
		}
	}
	if !leaders {
		return
	}
	if s := spread(bl.leaders, brokers); s > 1 {
		t.Errorf("%s: leader counts %v spread %d", name, bl.leaders, s)
	}
	for topic, m := range bl.topicLeaders {
		if s := spread(m, brokers); s > 1 {
			t.Errorf("%s: topic %s leader counts %v spread %d", name, topic, m, s)
		}
	}
}

func TestGenerate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current Plan
		brokers []int32
		moves   int       // want exactly this many moved replicas
		want    [][]int32 // if set, the exact replica lists
	}{
		{
			name: "Kafka's docs: foo1 and foo2 to new brokers 5 and 6",
			current: cur("foo1", r(2, 1), r(1, 3), r(3, 4),
				"foo2", r(4, 2), r(2, 1), r(1, 3)),
			brokers: r(5, 6), moves: 12,
		},
		{
			name:    "balanced already: nothing moves, leaders kept",
			current: cur("t", r(0, 1), r(1, 2), r(2, 0)),
			brokers: r(0, 1, 2), moves: 0,
			want: [][]int32{{0, 1}, {1, 2}, {2, 0}},
		},
		{
			name:    "a broker added: a quarter of the replicas move to it",
			current: cur("t", r(0, 1), r(1, 2), r(2, 0), r(0, 1), r(1, 2), r(2, 0)),
			brokers: r(0, 1, 2, 3), moves: 3,
		},
		{
			name:    "a broker removed: only its replicas move",
			current: cur("t", r(0, 1), r(1, 2), r(2, 3), r(3, 0), r(0, 2), r(1, 3)),
			brokers: r(0, 1, 2), moves: 3,
		},
		{
			name:    "leaders all on broker 0, replicas balanced: no replica moves, leaders spread",
			current: cur("t", r(0, 1, 2), r(0, 2, 1), r(0, 1, 2)),
			brokers: r(0, 1, 2), moves: 0,
		},
		{
			name: "two topics on one broker each: balanced per topic and over all",
			current: cur("a", r(0), r(0), r(0), r(0),
				"b", r(1), r(1), r(1), r(1)),
			brokers: r(0, 1, 2, 3), moves: 6,
		},
		{
			name:    "replication factor differs per partition; a replaced replica keeps its place",
			current: cur("t", r(7, 1, 2), r(1)),
			brokers: r(1, 2, 3), moves: 1,
			want: [][]int32{{3, 1, 2}, {1}},
			// 3 and 1 lead: broker 2 leads nothing, as the totals allow (2 leaders, 3 brokers).
		},
		{
			name:    "one broker: everything on it",
			current: cur("t", r(4), r(5)),
			brokers: r(9), moves: 2,
			want: [][]int32{{9}, {9}},
		},
	} {
		got, err := Generate(tc.current, tc.brokers, 1)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkPlan(t, tc.name, tc.current, got, tc.brokers, true)
		lb := lowerBound(tc.current, tc.brokers)
		if m := moved(tc.current, got); m != tc.moves || m < lb {
			t.Errorf("%s: %d replicas moved, want %d (lower bound %d)\n%s", tc.name, m, tc.moves, lb, got.Format())
		}
		if lb != tc.moves {
			t.Errorf("%s: lower bound %d, the case says %d", tc.name, lb, tc.moves)
		}
		if tc.want != nil {
			var lists [][]int32
			for _, pp := range got.Partitions {
				lists = append(lists, pp.Replicas)
			}
			if !reflect.DeepEqual(lists, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, lists, tc.want)
			}
		}
	}
}

func TestGenerateRefuses(t *testing.T) {
	ok := cur("t", r(0, 1))
	for _, tc := range []struct {
		name    string
		current Plan
		brokers []int32
		is      error
		msg     string
	}{
		{"no brokers", ok, nil, ErrBrokers, "reassign: unusable broker list: no brokers"},
		{"a broker twice", ok, r(1, 2, 1), ErrBrokers, "reassign: unusable broker list: broker 1 listed twice"},
		{"a negative broker", ok, r(1, -2), ErrBrokers, "reassign: unusable broker list: negative broker id -2"},
		{"RF above the brokers", cur("t", r(0, 1, 2), r(0, 1), "u", r(3, 4, 5)), r(0, 1), ErrBrokers,
			"reassign: unusable broker list: t-0 has 3 replicas, u-0 has 3 replicas, more than the 2 brokers listed"},
		{"an empty and a repeated replica list, a partition twice", Plan{Partitions: []PartitionPlan{
			{Topic: "t", Partition: 0, Replicas: r(1, 1)}, {Topic: "t", Partition: 1}, {Topic: "t", Partition: 0, Replicas: r(2)}}}, r(1, 2), ErrInvalidPlan,
			"reassign: invalid plan: t-0: broker 1 twice; t-0: listed twice; t-1: empty replica list"},
	} {
		_, err := Generate(tc.current, tc.brokers, 0)
		if !errors.Is(err, tc.is) || err.Error() != tc.msg {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.msg)
		}
	}
	if got, err := Generate(Plan{}, r(1), 0); err != nil || got.Version != 1 || len(got.Partitions) != 0 {
		t.Errorf("nothing to place: %+v, %v", got, err)
	}
}

// randomCluster makes a current assignment over brokers 0..9 (some of them not among the listed
// ones, so their replicas must move) and a list of brokers to use.
func randomCluster(rng *rand.Rand, maxTopics, maxPartitions int) (Plan, []int32) {
	listed := rng.Perm(10)[:1+rng.IntN(6)]
	brokers := make([]int32, len(listed))
	for i, b := range listed {
		brokers[i] = int32(b)
	}
	maxRF := min(len(brokers), 4)
	var p Plan
	for ti := range 1 + rng.IntN(maxTopics) {
		rf := 1 + rng.IntN(maxRF)
		for pi := range 1 + rng.IntN(maxPartitions) {
			prf := rf
			if rng.IntN(5) == 0 { // now and then a partition whose RF was changed
				prf = 1 + rng.IntN(maxRF)
			}
			// Current replicas drawn from a few brokers, so the cluster starts unbalanced.
			pool := rng.Perm(10)[:max(prf, 1+rng.IntN(10))]
			reps := make([]int32, prf)
			for i := range reps {
				reps[i] = int32(pool[i])
			}
			p.Partitions = append(p.Partitions, PartitionPlan{Topic: fmt.Sprintf("t%d", ti), Partition: int32(pi), Replicas: reps})
		}
	}
	rng.Shuffle(len(p.Partitions), func(i, j int) { p.Partitions[i], p.Partitions[j] = p.Partitions[j], p.Partitions[i] })
	return p, brokers
}

// Random clusters: every plan keeps the invariants (checkPlan, leaders included when every
// partition of the cluster has the same replication factor), moves no fewer than the lower
// bound, is the same for the same seed, and another seed's plan is as good (same moves).
func TestGenerateProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 27))
	for i := range 300 {
		current, brokers := randomCluster(rng, 4, 12)
		name := fmt.Sprintf("cluster %d over %v: %s", i, brokers, current.Format())
		got, err := Generate(current, brokers, int64(i))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkPlan(t, name, current, got, brokers, sameRF(current))
		m := moved(current, got)
		if lb := lowerBound(current, brokers); m < lb {
			t.Fatalf("%s: %d moves, below the lower bound %d", name, m, lb)
		}
		again, _ := Generate(current, brokers, int64(i))
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("%s: not deterministic:\n%s\n%s", name, got.Format(), again.Format())
		}
		other, _ := Generate(current, brokers, int64(i)+1000)
		checkPlan(t, name+" (other seed)", current, other, brokers, sameRF(current))
		if mo := moved(current, other); mo != m {
			t.Fatalf("%s: seed %d moves %d, seed %d moves %d", name, i, m, i+1000, mo)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

func sameRF(p Plan) bool {
	for _, pp := range p.Partitions {
		if len(pp.Replicas) != len(p.Partitions[0].Replicas) {
			return false
		}
	}
	return true
}

// On clusters small enough to try every balanced plan, Generate moves exactly as few replicas
// as the best of them.
func TestGenerateMovesFewestExhaustively(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	tried := 0
	for tried < 150 {
		current, brokers := randomCluster(rng, 2, 3)
		if len(brokers) > 5 || len(current.Partitions) > 5 {
			continue
		}
		tried++
		got, err := Generate(current, brokers, int64(tried))
		if err != nil {
			t.Fatal(err)
		}
		best := fewestMoves(current, brokers)
		if m := moved(current, got); m != best {
			t.Fatalf("%s over %v: %d moves, the best balanced plan has %d:\n%s", current.Format(), brokers, m, best, got.Format())
		}
	}
}

// fewestMoves tries every choice of replica sets and returns the fewest moves of those that
// are balanced over all and per topic.
func fewestMoves(current Plan, brokers []int32) int {
	parts := current.Partitions
	best := -1
	chosen := make([][]int32, len(parts))
	var try func(i, movedSoFar int)
	try = func(i, movedSoFar int) {
		if best >= 0 && movedSoFar >= best {
			return
		}
		if i == len(parts) {
			p := Plan{Partitions: make([]PartitionPlan, len(parts))}
			for j, pp := range parts {
				p.Partitions[j] = PartitionPlan{Topic: pp.Topic, Partition: pp.Partition, Replicas: chosen[j]}
			}
			bl := balanceOf(p)
			if spread(bl.replicas, brokers) > 1 {
				return
			}
			for _, m := range bl.topicReplicas {
				if spread(m, brokers) > 1 {
					return
				}
			}
			best = movedSoFar
			return
		}
		for _, set := range subsets(brokers, len(parts[i].Replicas)) {
			add := 0
			for _, b := range set {
				if !slices.Contains(parts[i].Replicas, b) {
					add++
				}
			}
			chosen[i] = set
			try(i+1, movedSoFar+add)
		}
	}
	try(0, 0)
	return best
}

func subsets(of []int32, k int) [][]int32 {
	if k == 0 {
		return [][]int32{{}}
	}
	var out [][]int32
	for i := range of {
		for _, rest := range subsets(of[i+1:], k-1) {
			out = append(out, append([]int32{of[i]}, rest...))
		}
	}
	return out
}
