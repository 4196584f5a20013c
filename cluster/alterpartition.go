package cluster

import (
	"fmt"
	"slices"
)

// AlterPartition (Kafka's KIP-497, with KIP-841's eligibility rule): the
// partition leader proposes a new ISR, shrinking it when a follower falls
// behind and growing it when one catches up. Every check is against the
// state at commit, so a proposal computed from a state that moved on (a new
// leader, another ISR change, a restarted broker) is refused and never
// applied; the leader re-reads the metadata and proposes again if it still
// wants to. An ISR that comes to hold the whole target of a move completes
// the move in the same change (reassign.go).

// maxISR bounds a proposed ISR before it is compared with the replicas.
const maxISR = 1024

func (c *alterPartitionCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	t, p, el, err := c.build(m)
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("alter ISR of %s-%d: %w", c.Topic, c.Partition, err)}
	}
	old := m.topics[c.Topic]
	if t == old {
		return m, applyResult{Topic: *old, Partition: p} // nothing to change
	}
	next := m.clone()
	next.topics[c.Topic] = t
	res := applyResult{Topic: *t, Partition: p}
	if el != nil {
		res.Elections = []Election{*el}
	}
	return next.finish(index), res
}

func (c *alterPartitionCmd) build(m *Metadata) (*TopicMeta, PartitionMeta, *Election, error) {
	b, ok := m.brokers[c.BrokerID]
	switch {
	case !ok:
		return nil, PartitionMeta{}, nil, fmt.Errorf("%w: broker %d", ErrUnknownBroker, c.BrokerID)
	case b.Epoch != c.BrokerEpoch:
		return nil, PartitionMeta{}, nil, fmt.Errorf("%w: broker %d is at epoch %d, not %d", ErrStaleBrokerEpoch, c.BrokerID, b.Epoch, c.BrokerEpoch)
	}
	old, ok := m.topics[c.Topic]
	if !ok {
		return nil, PartitionMeta{}, nil, ErrUnknownTopic
	}
	p, ok := old.Partition(c.Partition)
	if !ok {
		return nil, PartitionMeta{}, nil, ErrUnknownPartition
	}
	switch {
	case p.Leader != c.BrokerID:
		return nil, p, nil, fmt.Errorf("%w: broker %d proposed, the leader is %d", ErrNotPartitionLeader, c.BrokerID, p.Leader)
	case c.LeaderEpoch != p.LeaderEpoch:
		return nil, p, nil, fmt.Errorf("%w: proposal at leader epoch %d, partition is at %d", ErrStaleLeaderEpoch, c.LeaderEpoch, p.LeaderEpoch)
	case c.PartitionEpoch != p.PartitionEpoch:
		return nil, p, nil, fmt.Errorf("%w: proposal at partition epoch %d, partition is at %d", ErrInvalidUpdateVersion, c.PartitionEpoch, p.PartitionEpoch)
	case len(c.ISR) > maxISR:
		return nil, p, nil, fmt.Errorf("%w: ISR of %d members", ErrIneligibleReplica, len(c.ISR))
	case !slices.Contains(c.ISR, p.Leader):
		return nil, p, nil, fmt.Errorf("%w: ISR %v lacks the leader %d", ErrIneligibleReplica, c.ISR, p.Leader)
	case !epochsCanGrow(p):
		return nil, p, nil, fmt.Errorf("%w: partition epoch %d cannot grow", ErrInvalidUpdateVersion, p.PartitionEpoch)
	}
	for i, r := range c.ISR {
		switch {
		case !slices.Contains(p.Replicas, r):
			return nil, p, nil, fmt.Errorf("%w: broker %d is not a replica %v", ErrIneligibleReplica, r, p.Replicas)
		case slices.Contains(c.ISR[:i], r):
			return nil, p, nil, fmt.Errorf("%w: broker %d twice in the ISR %v", ErrIneligibleReplica, r, c.ISR)
		case !slices.Contains(p.ISR, r) && !m.eligible(r):
			// Only a growing ISR is checked: a shrink may keep a member that
			// is being fenced, which the fence takes out itself.
			return nil, p, nil, fmt.Errorf("%w: broker %d is %s and may not join the ISR", ErrIneligibleReplica, r, m.brokers[r].State())
		}
	}
	if slices.Equal(c.ISR, p.ISR) {
		return old, p, nil, nil
	}
	// The ISR change and, when it completes a move, the move's end: one change, one epoch bump.
	ch := newPartitionChange(p)
	ch.p.ISR = slices.Clone(c.ISR)
	ch.changed = true
	ch.completeReassignment(m.eligible)
	np, el := ch.result(c.Topic)
	t := *old
	t.Partitions = slices.Clone(old.Partitions)
	t.Partitions[c.Partition] = np
	return &t, np, el, nil
}
