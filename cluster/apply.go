package cluster

import (
	"fmt"
	"github.com/sluicemq/sluice/net/wire"
	"maps"
	"slices"
	"strings"
)

// Limits on what a command may ask for. They bound allocation in Apply, so a
// bad request cannot make every controller allocate without limit.
const (
	maxPartitions = 100_000 // per topic; far above any sensible topic
)

// IsInternalTopicName reports whether name is reserved for topics the broker
// creates itself, such as __consumer_offsets.
func IsInternalTopicName(name string) bool { return strings.HasPrefix(name, "__") }

// ValidateTopicName applies Kafka's rules: 1 to 249 characters from
// [a-zA-Z0-9._-], and neither "." nor "..". Errors wrap ErrInvalidTopic.
func ValidateTopicName(name string) error {
	if err := wire.CheckTopicName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTopic, err)
	}
	return nil
}

// collisionKey maps '.' to '_': Kafka's metric names cannot tell them apart,
// so two topics that differ only there are refused.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

func (c *createTopicCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	if t, ok := m.topics[c.Name]; ok && !c.ID.IsZero() && t.ID == c.ID {
		// The same command again: a broker retrying a create that committed
		// while the controller it asked failed over. It succeeds, unchanged.
		return m, applyResult{Topic: *t}
	}
	t, err := c.build(m)
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("create topic %q: %w", c.Name, err)}
	}
	next := m.clone()
	next.topics[t.Name] = t
	return next.finish(index), applyResult{Topic: *t}
}

func (c *createTopicCmd) build(m *Metadata) (*TopicMeta, error) {
	if err := ValidateTopicName(c.Name); err != nil {
		return nil, err
	}
	if IsInternalTopicName(c.Name) != c.Internal {
		if c.Internal {
			return nil, fmt.Errorf("%w: internal topic names start with \"__\"", ErrInvalidTopic)
		}
		return nil, fmt.Errorf("%w: names starting with \"__\" are reserved for internal topics", ErrInvalidTopic)
	}
	if _, ok := m.topics[c.Name]; ok {
		return nil, ErrTopicExists
	}
	if key := collisionKey(c.Name); key != c.Name || strings.Contains(c.Name, "_") {
		for _, name := range m.names {
			if collisionKey(name) == key {
				return nil, fmt.Errorf("%w: collides with existing topic %q ('.' and '_' are treated as equal)", ErrInvalidTopic, name)
			}
		}
	}
	if c.ID.IsZero() {
		return nil, fmt.Errorf("%w: missing topic id", ErrInvalidTopic)
	}
	if _, ok := m.byID[c.ID]; ok {
		return nil, fmt.Errorf("%w: topic id %s already in use", ErrInvalidTopic, c.ID)
	}
	if err := ValidateTopicConfigs(c.Configs); err != nil {
		return nil, err
	}
	assignment, err := c.assignment(m)
	if err != nil {
		return nil, err
	}
	if c.CheckMinISR {
		if err := CheckMinInsyncReplicas(c.Configs, replicationFactor(assignment)); err != nil {
			return nil, err
		}
	}
	t := &TopicMeta{Name: c.Name, ID: c.ID, Internal: c.Internal, Partitions: make([]PartitionMeta, len(assignment))}
	if len(c.Configs) > 0 {
		t.Configs = maps.Clone(c.Configs)
	}
	for p, replicas := range assignment {
		// The ISR is the replicas that may be in it: all of them when placed,
		// and an explicit assignment naming a fenced broker leaves it out
		// (Kafka's createTopic), so a fenced broker is never a leader or an
		// ISR member beside others.
		isr := slices.DeleteFunc(slices.Clone(replicas), func(r int32) bool { return !m.eligible(r) })
		if len(isr) == 0 {
			return nil, fmt.Errorf("%w: partition %d: every replica %v is fenced or shutting down", ErrInvalidReplicaAssignment, p, replicas)
		}
		leader, _ := ElectLeader(replicas, isr, m.eligible, false)
		t.Partitions[p] = PartitionMeta{
			Partition: int32(p),
			Replicas:  replicas,
			Leader:    leader,
			ISR:       isr,
		}
	}
	return t, nil
}

func (c *deleteTopicCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	t, ok := m.topics[c.Name]
	var err error
	switch {
	case !ok:
		err = ErrUnknownTopic
	case !c.ID.IsZero() && c.ID != t.ID:
		err = fmt.Errorf("%w: id %s is not the current topic's %s", ErrUnknownTopic, c.ID, t.ID)
	case t.Internal && !c.Internal:
		err = fmt.Errorf("%w: internal topics cannot be deleted", ErrInvalidTopic)
	}
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("delete topic %q: %w", c.Name, err)}
	}
	next := m.clone()
	delete(next.topics, c.Name)
	return next.finish(index), applyResult{Topic: *t}
}

func (c *alterTopicConfigsCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	t, err := c.build(m)
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("alter configs of topic %q: %w", c.Name, err)}
	}
	if maps.Equal(t.Configs, m.topics[c.Name].Configs) {
		return m, applyResult{Topic: *t}
	}
	next := m.clone()
	next.topics[c.Name] = t
	return next.finish(index), applyResult{Topic: *t}
}

func (c *alterTopicConfigsCmd) build(m *Metadata) (*TopicMeta, error) {
	old, ok := m.topics[c.Name]
	if !ok {
		return nil, ErrUnknownTopic
	}
	if err := ValidateTopicConfigs(c.Set); err != nil {
		return nil, err
	}
	configs := maps.Clone(old.Configs)
	if configs == nil {
		configs = map[string]string{}
	}
	maps.Copy(configs, c.Set)
	for _, k := range c.Delete {
		if _, ok := LookupTopicConfig(k); !ok {
			return nil, fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, k)
		}
		if _, ok := c.Set[k]; ok {
			return nil, fmt.Errorf("%w: %q is both set and deleted", ErrInvalidConfig, k)
		}
		delete(configs, k)
	}
	// The merged overrides too: a change can break a rule that ties two keys together
	// (min.compaction.lag.ms over an existing max.compaction.lag.ms).
	if err := ValidateTopicConfigs(configs); err != nil {
		return nil, err
	}
	// Only a min.insync.replicas this change sets: another change to a topic whose old
	// override is above its replication factor (set before the check existed) still applies.
	if c.CheckMinISR {
		rf := make([][]int32, len(old.Partitions))
		for i, p := range old.Partitions {
			rf[i] = p.Replicas
		}
		if err := CheckMinInsyncReplicas(c.Set, replicationFactor(rf)); err != nil {
			return nil, err
		}
	}
	if len(configs) == 0 {
		configs = nil // one representation of "no overrides", so snapshots compare equal
	}
	t := *old // partitions stay shared: they are immutable
	t.Configs = configs
	return &t, nil
}

func (c *setPartitionLeaderCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	t, err := c.build(m)
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("set leader of %s-%d: %w", c.Topic, c.Partition, err)}
	}
	was, np := m.topics[c.Topic].Partitions[c.Partition], t.Partitions[c.Partition]
	el := Election{
		Topic: c.Topic, Partition: c.Partition, From: was.Leader, To: np.Leader,
		LeaderEpoch: np.LeaderEpoch, PartitionEpoch: np.PartitionEpoch,
		Unclean: np.Leader != NoLeader && !slices.Contains(was.ISR, np.Leader),
	}
	next := m.clone()
	next.topics[c.Topic] = t
	return next.finish(index), applyResult{Topic: *t, Partition: np, Elections: []Election{el}}
}

func (c *setPartitionLeaderCmd) build(m *Metadata) (*TopicMeta, error) {
	old, ok := m.topics[c.Topic]
	if !ok {
		return nil, ErrUnknownTopic
	}
	p, ok := old.Partition(c.Partition)
	if !ok {
		return nil, ErrUnknownPartition
	}
	if c.LeaderEpoch != p.LeaderEpoch {
		return nil, fmt.Errorf("%w: change based on epoch %d, partition is at %d", ErrStaleLeaderEpoch, c.LeaderEpoch, p.LeaderEpoch)
	}
	if c.Leader != NoLeader {
		switch {
		case !slices.Contains(p.Replicas, c.Leader):
			return nil, fmt.Errorf("%w: broker %d is not a replica %v", ErrIneligibleReplica, c.Leader, p.Replicas)
		case !m.eligible(c.Leader):
			return nil, fmt.Errorf("%w: broker %d is %s", ErrIneligibleReplica, c.Leader, m.brokers[c.Leader].State())
		case slices.Contains(p.ISR, c.Leader):
		case c.Unclean:
			p.ISR = []int32{c.Leader} // an unclean leader's log defines the partition now
		default:
			return nil, fmt.Errorf("%w: broker %d is not in the ISR %v and unclean election is off", ErrIneligibleReplica, c.Leader, p.ISR)
		}
	}
	if !epochsCanGrow(p) {
		// Replicas refuse a leader whose epoch is not above the one they know: an epoch
		// that wrapped would make every replica refuse every later leader.
		return nil, fmt.Errorf("%w: leader epoch %d or partition epoch %d cannot grow", ErrStaleLeaderEpoch, p.LeaderEpoch, p.PartitionEpoch)
	}
	p.Leader = c.Leader
	if p.Reassigning() {
		// The new leader (or an unclean one's ISR) may let the move end: in this change.
		ch := newPartitionChange(p)
		ch.completeReassignment(m.eligible)
		p = ch.p
	}
	p.LeaderEpoch++
	if c.PartitionEpochs {
		p.PartitionEpoch++
	}
	t := *old
	t.Partitions = slices.Clone(old.Partitions)
	t.Partitions[c.Partition] = p
	return &t, nil
}

// finish stamps the version of a changed metadata and rebuilds its indexes.
func (m *Metadata) finish(index uint64) *Metadata {
	m.version = index
	m.reindex()
	return m
}
