package cluster

import (
	"fmt"
	"github.com/sluicemq/sluice/net/wire"
	"hash/fnv"
	"maps"
	"math"
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

func (c *registerBrokerCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	b := c.Broker
	var err error
	switch {
	case b.ID < 0:
		err = fmt.Errorf("%w: id %d is negative", ErrInvalidBroker, b.ID)
	case b.Port < 0 || b.Port > 65535:
		err = fmt.Errorf("%w: broker %d: port %d out of range", ErrInvalidBroker, b.ID, b.Port)
	case (b.Host == "") != (b.Port == 0):
		err = fmt.Errorf("%w: broker %d: host and port go together", ErrInvalidBroker, b.ID)
	case b.Host == "" && b.UnixSocket == "":
		err = fmt.Errorf("%w: broker %d: no endpoint", ErrInvalidBroker, b.ID)
	}
	if err != nil {
		return m, applyResult{Err: err}
	}
	if old, ok := m.brokers[b.ID]; ok && old == b {
		return m, applyResult{} // a re-registration with nothing new
	}
	// A known id with new endpoints is a restarted broker: take the new ones.
	// TODO(liveness): fence a second live broker claiming the same id.
	next := m.clone()
	next.brokers[b.ID] = b
	return next.finish(index), applyResult{}
}

func (c *createTopicCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
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
	t := &TopicMeta{Name: c.Name, ID: c.ID, Internal: c.Internal, Partitions: make([]PartitionMeta, len(assignment))}
	if len(c.Configs) > 0 {
		t.Configs = maps.Clone(c.Configs)
	}
	for p, replicas := range assignment {
		t.Partitions[p] = PartitionMeta{
			Partition: int32(p),
			Replicas:  replicas,
			Leader:    replicas[0],
			ISR:       slices.Clone(replicas),
		}
	}
	return t, nil
}

// assignment validates an explicit assignment or computes one.
func (c *createTopicCmd) assignment(m *Metadata) ([][]int32, error) {
	if len(c.Assignment) == 0 {
		if c.NumPartitions < 1 || c.NumPartitions > maxPartitions {
			return nil, fmt.Errorf("%w: %d partitions; want 1 to %d", ErrInvalidPartitions, c.NumPartitions, maxPartitions)
		}
		if c.ReplicationFactor < 1 || int(c.ReplicationFactor) > len(m.brokerIDs) {
			return nil, fmt.Errorf("%w: %d with %d registered brokers", ErrInvalidReplicationFactor, c.ReplicationFactor, len(m.brokerIDs))
		}
		return assignReplicas(m.brokerIDs, int(c.NumPartitions), int(c.ReplicationFactor), c.Name), nil
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

// assignReplicas spreads partitions over brokers as Kafka's rack-unaware
// assignment does: partition p's first replica is broker (start+p) mod n,
// followers follow at a shift that grows every n partitions so that follower
// sets differ too. Kafka draws start and shift at random; here start comes
// from a hash of the name so that every node computes the same assignment
// and leaders of different topics still spread out.
func assignReplicas(brokers []int32, partitions, rf int, name string) [][]int32 {
	n := len(brokers)
	h := fnv.New32a()
	h.Write([]byte(name))
	start := int(h.Sum32() % uint32(n))
	out := make([][]int32, partitions)
	shift := 0
	for p := range partitions {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (start + p) % n
		replicas := make([]int32, rf)
		replicas[0] = brokers[first]
		for j := 1; j < rf; j++ {
			replicas[j] = brokers[(first+1+(shift+j-1)%(n-1))%n]
		}
		out[p] = replicas
	}
	return out
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
	next := m.clone()
	next.topics[c.Topic] = t
	return next.finish(index), applyResult{Topic: *t, Partition: t.Partitions[c.Partition]}
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
		case slices.Contains(p.ISR, c.Leader):
		case c.Unclean:
			p.ISR = []int32{c.Leader} // an unclean leader's log defines the partition now
		default:
			return nil, fmt.Errorf("%w: broker %d is not in the ISR %v and unclean election is off", ErrIneligibleReplica, c.Leader, p.ISR)
		}
	}
	if p.LeaderEpoch == math.MaxInt32 {
		// Replicas refuse a leader whose epoch is not above the one they know: an epoch
		// that wrapped would make every replica refuse every later leader.
		return nil, fmt.Errorf("%w: leader epoch %d cannot grow", ErrStaleLeaderEpoch, p.LeaderEpoch)
	}
	p.Leader = c.Leader
	p.LeaderEpoch++
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
