package cluster

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
)

// Replica placement for a topic created without an explicit assignment, as
// Kafka's AdminUtils.assignReplicasToBrokers does without racks: partition
// p's first replica is live broker (start+p) mod n, in id order, and its
// followers follow at an offset that grows by one every time p wraps the
// broker count, so that follower sets differ too. Kafka draws start and
// the initial shift at random; here the proposer draws them (PlacementSeed)
// and Apply reduces them modulo the live broker count it sees, so every
// node computes the same assignment.

// PlacementSeed is the randomness of one placement, drawn by the proposer.
// Any non-negative values do: Apply takes them modulo the live broker count.
type PlacementSeed struct {
	Start int32 `json:"start"`
	Shift int32 `json:"shift"`
}

// DrawPlacementSeed draws a seed for a new topic.
func DrawPlacementSeed() *PlacementSeed {
	return &PlacementSeed{Start: rand.Int32(), Shift: rand.Int32()}
}

// PlaceReplicas is Kafka's rack-unaware placement of partitions over brokers
// (sorted ids) from start index start and replica shift shift, both in
// [0, len(brokers)). rf must be in [1, len(brokers)].
func PlaceReplicas(brokers []int32, partitions, rf, start, shift int) [][]int32 {
	n := len(brokers)
	out := make([][]int32, partitions)
	for p := range partitions {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (start + p) % n
		replicas := make([]int32, rf)
		replicas[0] = brokers[first]
		for j := 1; j < rf; j++ {
			// n > 1 here: rf ≤ n, so a single broker never gets a follower.
			replicas[j] = brokers[(first+1+(shift+j-1)%(n-1))%n]
		}
		out[p] = replicas
	}
	return out
}

// assignment validates an explicit assignment or computes one.
func (c *createTopicCmd) assignment(m *Metadata) ([][]int32, error) {
	if len(c.Assignment) == 0 {
		return c.place(m)
	}
	n := len(c.Assignment)
	if n > maxPartitions {
		return nil, fmt.Errorf("%w: %d partitions; want at most %d", ErrInvalidPartitions, n, maxPartitions)
	}
	if c.NumPartitions > 0 && int(c.NumPartitions) != n {
		return nil, fmt.Errorf("%w: %d partitions but an assignment for %d", ErrInvalidReplicaAssignment, c.NumPartitions, n)
	}
	rf := len(c.Assignment[0])
	if c.ReplicationFactor > 0 && int(c.ReplicationFactor) != rf {
		return nil, fmt.Errorf("%w: replication factor %d but the assignment has %d replicas", ErrInvalidReplicaAssignment, c.ReplicationFactor, rf)
	}
	out := make([][]int32, n)
	for p, replicas := range c.Assignment {
		switch {
		case len(replicas) == 0:
			return nil, fmt.Errorf("%w: partition %d has no replicas", ErrInvalidReplicaAssignment, p)
		case len(replicas) != rf:
			return nil, fmt.Errorf("%w: partition %d has %d replicas, partition 0 has %d", ErrInvalidReplicaAssignment, p, len(replicas), rf)
		}
		for i, b := range replicas {
			if _, ok := m.brokers[b]; !ok {
				return nil, fmt.Errorf("%w: partition %d: unknown broker %d", ErrInvalidReplicaAssignment, p, b)
			}
			if slices.Contains(replicas[:i], b) {
				return nil, fmt.Errorf("%w: partition %d: broker %d twice", ErrInvalidReplicaAssignment, p, b)
			}
		}
		out[p] = slices.Clone(replicas)
	}
	return out, nil
}

// place computes the assignment of a topic created without one, over the
// live brokers: a fenced or shutting-down broker is never placed.
func (c *createTopicCmd) place(m *Metadata) ([][]int32, error) {
	if c.NumPartitions < 1 || c.NumPartitions > maxPartitions {
		return nil, fmt.Errorf("%w: %d partitions; want 1 to %d", ErrInvalidPartitions, c.NumPartitions, maxPartitions)
	}
	live := m.LiveBrokers()
	if c.ReplicationFactor < 1 || int(c.ReplicationFactor) > len(live) {
		return nil, fmt.Errorf("%w: %d, with %d live brokers", ErrInvalidReplicationFactor, c.ReplicationFactor, len(live))
	}
	n := len(live)
	var start, shift int
	if s := c.Placement; s != nil {
		start, shift = mod(int(s.Start), n), mod(int(s.Shift), n)
	} else {
		// An entry from before the proposer drew the seed: the start came
		// from a hash of the name and the shift from 0, and a replayed log
		// must place as it did then.
		h := fnv.New32a()
		h.Write([]byte(c.Name))
		start = int(h.Sum32() % uint32(n))
	}
	return PlaceReplicas(live, int(c.NumPartitions), int(c.ReplicationFactor), start, shift), nil
}

// mod is x modulo n in [0, n), also for negative x.
func mod(x, n int) int { return (x%n + n) % n }
