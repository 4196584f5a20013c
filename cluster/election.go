package cluster

import (
	"math"
	"slices"
)

// ElectLeader picks a partition's leader as Kafka's controller does: the
// first replica in assignment (AR) order that is eligible (alive, not
// shutting down) and in the ISR. When there is none and unclean is set (the
// topic's unclean.leader.election.enable), the first eligible replica
// outside the ISR, and wasUnclean reports it: the caller then makes the ISR
// just that replica, whose log defines the partition from now on (records
// the old ISR had and it lacks are lost). Otherwise NoLeader.
//
// AR order rather than ISR order makes the preferred (first) replica win
// whenever it can, so leadership returns to where placement spread it.
func ElectLeader(replicas, isr []int32, eligible func(int32) bool, unclean bool) (leader int32, wasUnclean bool) {
	for _, r := range replicas {
		if eligible(r) && slices.Contains(isr, r) {
			return r, false
		}
	}
	if unclean {
		for _, r := range replicas {
			if eligible(r) {
				return r, true
			}
		}
	}
	return NoLeader, false
}

// Election is one leader change Apply made, handed back to the proposer
// and logged by the fsm (an unclean one at Warn: it can lose records).
type Election struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int32  `json:"from"` // the previous leader, or NoLeader
	To        int32  `json:"to"`   // the new leader, or NoLeader
	// LeaderEpoch and PartitionEpoch are the partition's epochs after the change.
	LeaderEpoch    int32 `json:"leader_epoch"`
	PartitionEpoch int32 `json:"partition_epoch"`
	Unclean        bool  `json:"unclean,omitempty"`
}

// uncleanElection is the topic's resolved unclean.leader.election.enable.
// Only the topic's override counts, over Kafka's default (false): Apply must
// not depend on a node's own broker config, which may differ between nodes.
func uncleanElection(t *TopicMeta) bool {
	c, err := ResolveTopicConfig(t.Configs, DefaultTopicConfig())
	return err == nil && c.UncleanLeaderElect
}

// partitionChange builds the next state of one partition: a new leader
// and/or a new ISR, with the epochs Kafka bumps for each.
type partitionChange struct {
	p       PartitionMeta
	changed bool
	elected bool // the leader changed
	unclean bool
	from    int32
}

func newPartitionChange(p PartitionMeta) *partitionChange {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	return &partitionChange{p: p, from: p.Leader}
}

// epochsCanGrow reports whether the partition's epochs have room for one
// more change. Replicas refuse a leader epoch that is not above the one they
// know, so an epoch that wrapped would fence every later leader; 2^31
// changes of one partition is not reachable in practice, and such a
// partition is left as it is rather than given a wrapped epoch.
func epochsCanGrow(p PartitionMeta) bool {
	return p.LeaderEpoch < math.MaxInt32 && p.PartitionEpoch < math.MaxInt32
}

func (c *partitionChange) setLeader(l int32, unclean bool) {
	if l == c.p.Leader {
		return
	}
	c.p.Leader = l
	c.changed, c.elected = true, true
	c.unclean = c.unclean || unclean
	if unclean {
		c.p.ISR = []int32{l}
	}
}

// removeFromISR drops id from the ISR unless it is the last member (Kafka
// keeps the last one, so that it can be elected cleanly when it returns) or
// the leader.
func (c *partitionChange) removeFromISR(id int32) {
	if len(c.p.ISR) <= 1 || c.p.Leader == id || !slices.Contains(c.p.ISR, id) {
		return
	}
	c.p.ISR = slices.DeleteFunc(c.p.ISR, func(r int32) bool { return r == id })
	c.changed = true
}

// result returns the partition with its epochs bumped, and the election
// to report if the leader changed.
func (c *partitionChange) result(topic string) (PartitionMeta, *Election) {
	if !c.changed {
		return c.p, nil
	}
	c.p.PartitionEpoch++
	if !c.elected {
		return c.p, nil
	}
	c.p.LeaderEpoch++
	return c.p, &Election{
		Topic: topic, Partition: c.p.Partition, From: c.from, To: c.p.Leader,
		LeaderEpoch: c.p.LeaderEpoch, PartitionEpoch: c.p.PartitionEpoch, Unclean: c.unclean,
	}
}
