package cluster

import (
	"errors"
	"fmt"
	"slices"
)

// ElectLeaders (Kafka's KIP-460): an operator's, or the auto leader
// balance's, request to elect leaders now.
//
//	preferred  Replicas[0] becomes the leader if it is in the ISR and
//	           eligible; it leads already: ErrElectionNotNeeded; otherwise
//	           ErrPreferredLeaderNotAvailable
//	unclean    only a partition without a leader: ElectLeader with unclean
//	           set (an eligible ISR member first, else the first eligible
//	           replica, whose ISR is then just it); it has a leader:
//	           ErrElectionNotNeeded; nobody eligible:
//	           ErrEligibleLeadersNotAvailable
//
// Each partition's outcome is its own; the command fails only as a whole
// for a malformed request. For every partition (All), the partitions that
// need no election are left out of the results, as Kafka does.

// ElectionType is Kafka's election type.
type ElectionType int8

// The election types, with Kafka's numbers.
const (
	ElectionPreferred ElectionType = 0
	ElectionUnclean   ElectionType = 1
)

func (e ElectionType) String() string {
	switch e {
	case ElectionPreferred:
		return "preferred"
	case ElectionUnclean:
		return "unclean"
	}
	return fmt.Sprintf("ElectionType(%d)", int8(e))
}

// PartitionRef names a partition.
type PartitionRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// ElectionResult is one partition's outcome: Err nil when a leader was
// elected, else wrapping ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable,
// ErrEligibleLeadersNotAvailable, ErrUnknownTopic or ErrUnknownPartition.
type ElectionResult struct {
	Topic     string
	Partition int32
	Err       error
}

// maxElectPartitions bounds one request's partition list.
const maxElectPartitions = 1_000_000

type electLeadersCmd struct {
	Type ElectionType `json:"type"`
	// All: every partition; Partitions is then empty. A list, even an empty one, is just
	// those (an empty list elects nothing, as Kafka's).
	All        bool           `json:"all,omitempty"`
	Partitions []PartitionRef `json:"partitions,omitempty"`
}

func (c *electLeadersCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	switch {
	case c.Type != ElectionPreferred && c.Type != ElectionUnclean:
		return m, applyResult{Err: fmt.Errorf("elect leaders: %w: election type %d", ErrInvalidConfig, c.Type)}
	case c.All && len(c.Partitions) > 0:
		return m, applyResult{Err: fmt.Errorf("elect leaders: %w: every partition and a list", ErrInvalidConfig)}
	case len(c.Partitions) > maxElectPartitions:
		return m, applyResult{Err: fmt.Errorf("elect leaders: %w: %d partitions; at most %d", ErrInvalidConfig, len(c.Partitions), maxElectPartitions)}
	}
	refs := c.Partitions
	if c.All {
		for _, name := range m.names {
			for _, p := range m.topics[name].Partitions {
				refs = append(refs, PartitionRef{name, p.Partition})
			}
		}
	}
	next := m.clone()
	changed := map[string]*TopicMeta{}
	seen := make(map[PartitionRef]bool, len(refs))
	var res applyResult
	for _, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		t := changed[ref.Topic]
		if t == nil {
			old, ok := m.topics[ref.Topic]
			if !ok {
				res.ElectionResults = append(res.ElectionResults, ElectionResult{ref.Topic, ref.Partition, ErrUnknownTopic})
				continue
			}
			cp := *old
			t = &cp
		}
		p, ok := t.Partition(ref.Partition)
		if !ok {
			res.ElectionResults = append(res.ElectionResults, ElectionResult{ref.Topic, ref.Partition, ErrUnknownPartition})
			continue
		}
		ch := newPartitionChange(p)
		err := electOne(ch, c.Type, next.eligible)
		if err == nil {
			ch.completeReassignment(next.eligible)
		}
		if c.All && err != nil && errors.Is(err, ErrElectionNotNeeded) {
			continue
		}
		res.ElectionResults = append(res.ElectionResults, ElectionResult{ref.Topic, ref.Partition, err})
		if !ch.changed {
			continue
		}
		np, el := ch.result(ref.Topic)
		if changed[ref.Topic] == nil {
			t.Partitions = slices.Clone(t.Partitions)
			changed[ref.Topic] = t
			next.topics[ref.Topic] = t
		}
		t.Partitions[ref.Partition] = np
		if el != nil {
			res.Elections = append(res.Elections, *el)
		}
	}
	if len(changed) == 0 {
		return m, res
	}
	return next.finish(index), res
}

// electOne runs one partition's election on ch.
func electOne(ch *partitionChange, typ ElectionType, eligible func(int32) bool) error {
	p := ch.p
	if !epochsCanGrow(p) {
		return fmt.Errorf("%w: leader epoch %d or partition epoch %d cannot grow", ErrStaleLeaderEpoch, p.LeaderEpoch, p.PartitionEpoch)
	}
	if typ == ElectionUnclean {
		if p.Leader != NoLeader {
			return fmt.Errorf("%w: broker %d leads", ErrElectionNotNeeded, p.Leader)
		}
		l, unclean := ElectLeader(p.Replicas, p.ISR, eligible, true)
		if l == NoLeader {
			return fmt.Errorf("%w: no replica of %v is eligible", ErrEligibleLeadersNotAvailable, p.Replicas)
		}
		ch.setLeader(l, unclean)
		return nil
	}
	preferred := p.Replicas[0]
	switch {
	case p.Leader == preferred:
		return fmt.Errorf("%w: the preferred replica %d leads", ErrElectionNotNeeded, preferred)
	case !slices.Contains(p.ISR, preferred):
		return fmt.Errorf("%w: broker %d is not in the ISR %v", ErrPreferredLeaderNotAvailable, preferred, p.ISR)
	case !eligible(preferred):
		return fmt.Errorf("%w: broker %d is fenced, shutting down or not registered", ErrPreferredLeaderNotAvailable, preferred)
	}
	ch.setLeader(preferred, false)
	return nil
}
