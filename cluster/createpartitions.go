package cluster

import (
	"fmt"
	"slices"
)

// CreatePartitions (Kafka's KIP-195): a topic grows to Count partitions,
// never shrinks. The new partitions get the replication factor of the
// topic's partition 0 (its target, when it is being moved) and are placed
// as at creation (placement.go): partition p of the topic placed as if it
// had been created with Count partitions from the command's seed, drawn by
// the proposer; or an explicit assignment gives their replicas. Their ISR
// and leader are as a new topic's.

type createPartitionsCmd struct {
	Topic string `json:"topic"`
	// Count is the partition count wanted.
	Count int32 `json:"count"`
	// Assignment optionally fixes the new partitions' replicas, first the
	// preferred leader: Count − current entries, each of the topic's RF.
	Assignment [][]int32 `json:"assignment,omitempty"`
	// Placement is drawn by the proposer (ignored with an Assignment).
	Placement *PlacementSeed `json:"placement,omitempty"`
}

func (c *createPartitionsCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	t, err := c.build(m)
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("create partitions of topic %q: %w", c.Topic, err)}
	}
	next := m.clone()
	next.topics[c.Topic] = t
	return next.finish(index), applyResult{Topic: *t}
}

func (c *createPartitionsCmd) build(m *Metadata) (*TopicMeta, error) {
	old, ok := m.topics[c.Topic]
	if !ok {
		return nil, ErrUnknownTopic
	}
	cur := int32(len(old.Partitions))
	switch {
	case old.Internal:
		// The coordinators hash group and transaction ids over the partition count.
		return nil, fmt.Errorf("%w: the partition count of internal topic %q cannot change", ErrInvalidPartitions, c.Topic)
	case c.Count < cur:
		return nil, fmt.Errorf("%w: topic has %d partitions; partitions cannot be removed (wanted %d)", ErrInvalidPartitions, cur, c.Count)
	case c.Count == cur:
		return nil, fmt.Errorf("%w: topic already has %d partitions", ErrInvalidPartitions, cur)
	case c.Count > maxPartitions:
		return nil, fmt.Errorf("%w: %d partitions; want at most %d", ErrInvalidPartitions, c.Count, maxPartitions)
	}
	rf := len(old.Partitions[0].TargetReplicas())
	n := int(c.Count - cur)
	var assignment [][]int32
	if c.Assignment != nil {
		if len(c.Assignment) != n {
			return nil, fmt.Errorf("%w: %d new partitions but an assignment for %d", ErrInvalidReplicaAssignment, n, len(c.Assignment))
		}
		for i, replicas := range c.Assignment {
			p := int(cur) + i
			if len(replicas) != rf {
				return nil, fmt.Errorf("%w: partition %d has %d replicas, the topic's replication factor is %d", ErrInvalidReplicaAssignment, p, len(replicas), rf)
			}
			for j, b := range replicas {
				if _, ok := m.brokers[b]; !ok {
					return nil, fmt.Errorf("%w: partition %d: unknown broker %d", ErrInvalidReplicaAssignment, p, b)
				}
				if slices.Contains(replicas[:j], b) {
					return nil, fmt.Errorf("%w: partition %d: broker %d twice", ErrInvalidReplicaAssignment, p, b)
				}
			}
		}
		assignment = c.Assignment
	} else {
		live := m.LiveBrokers()
		if rf > len(live) {
			return nil, fmt.Errorf("%w: %d, with %d live brokers", ErrInvalidReplicationFactor, rf, len(live))
		}
		var start, shift int
		if s := c.Placement; s != nil {
			start, shift = mod(int(s.Start), len(live)), mod(int(s.Shift), len(live))
		}
		assignment = PlaceReplicas(live, int(c.Count), rf, start, shift)[cur:]
	}
	t := *old
	t.Partitions = slices.Grow(slices.Clone(old.Partitions), n)
	for i, replicas := range assignment {
		p := cur + int32(i)
		isr := slices.DeleteFunc(slices.Clone(replicas), func(r int32) bool { return !m.eligible(r) })
		if len(isr) == 0 {
			return nil, fmt.Errorf("%w: partition %d: every replica %v is fenced or shutting down", ErrInvalidReplicaAssignment, p, replicas)
		}
		leader, _ := ElectLeader(replicas, isr, m.eligible, false)
		t.Partitions = append(t.Partitions, PartitionMeta{Partition: p, Replicas: slices.Clone(replicas), Leader: leader, ISR: isr})
	}
	return &t, nil
}
