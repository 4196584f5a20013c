package cluster

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// NoLeader is the leader id of a partition that has no live leader, as in
// Kafka's metadata responses.
const NoLeader int32 = -1

// BrokerInfo is a registered broker: its id, how to reach it, and where it
// is in its lifecycle (Kafka's KRaft broker registration).
//
// The lifecycle fields are all zero in snapshots and log entries written
// before brokers had one, which reads as alive: a data directory of a single
// broker from before keeps serving as it did.
type BrokerInfo struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`                  // 0 when the broker listens on a unix socket only
	UnixSocket string `json:"unix_socket,omitempty"` // path of the broker's unix socket listener, if any
	Rack       string `json:"rack,omitempty"`
	// Incarnation identifies one run of the broker process (Kafka's
	// incarnation id, drawn by the broker at start). A registration with a
	// new incarnation is a restarted broker.
	Incarnation string `json:"incarnation,omitempty"`
	// Epoch is the broker epoch: the raft index of the registration, set by
	// Apply. Every command the broker sends on its own behalf (heartbeat,
	// AlterPartition, controlled shutdown) carries it, so one from a
	// previous run of the broker is refused (STALE_BROKER_EPOCH).
	Epoch int64 `json:"epoch,omitempty"`
	// Fenced: the broker may not lead or join an ISR. A registration starts
	// fenced; the active controller unfences it once it heartbeats, and
	// fences it again when its session expires.
	Fenced bool `json:"fenced,omitempty"`
	// ShuttingDown: the broker asked for a controlled shutdown. It leads
	// only partitions nobody else can lead, and is never elected or placed.
	ShuttingDown bool `json:"shutting_down,omitempty"`
}

// BrokerState is where a broker is in its lifecycle, as `sluice cluster
// describe` prints it.
type BrokerState uint8

// The broker states. A fenced broker that also asked to shut down is fenced.
const (
	BrokerAlive BrokerState = iota
	BrokerFenced
	BrokerShuttingDown
)

func (s BrokerState) String() string {
	switch s {
	case BrokerAlive:
		return "alive"
	case BrokerFenced:
		return "fenced"
	case BrokerShuttingDown:
		return "shutting down"
	}
	return fmt.Sprintf("BrokerState(%d)", uint8(s))
}

// State is the broker's lifecycle state.
func (b BrokerInfo) State() BrokerState {
	switch {
	case b.Fenced:
		return BrokerFenced
	case b.ShuttingDown:
		return BrokerShuttingDown
	}
	return BrokerAlive
}

// eligible reports whether the broker may be elected leader, join an ISR or
// be placed: registered, unfenced and not shutting down.
func (b BrokerInfo) eligible() bool { return b.State() == BrokerAlive }

// TopicID is a topic's 16-byte UUID. It is drawn at random when the topic is
// created, so a deleted and re-created topic is distinguishable on disk and on
// the wire (Kafka's topic ids). The zero value is not a valid id.
type TopicID [16]byte

// NewTopicID draws a random version 4 UUID, skipping values Kafka avoids:
// zero, Kafka's reserved metadata-topic id 1, and ids whose string form
// starts with '-' (it would parse as a command-line flag).
func NewTopicID() TopicID {
	for {
		var id TopicID
		_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if !id.IsZero() && id != (TopicID{15: 1}) && !strings.HasPrefix(id.String(), "-") {
			return id
		}
	}
}

// IsZero reports whether id is the unset id.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// String is Kafka's form: URL-safe base64 without padding (22 characters).
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// MarshalText encodes id as String does, so ids read well in JSON.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the String form.
func (id *TopicID) UnmarshalText(b []byte) error {
	if base64.RawURLEncoding.DecodedLen(len(b)) != len(id) {
		return fmt.Errorf("cluster: topic id %q: want 22 base64url characters", b)
	}
	_, err := base64.RawURLEncoding.Decode(id[:], b)
	if err != nil {
		return fmt.Errorf("cluster: topic id %q: %w", b, err)
	}
	return nil
}

// PartitionMeta is the controller's view of one partition.
type PartitionMeta struct {
	Partition int32 `json:"partition"`
	// Replicas is the assignment (AR) in preference order: Replicas[0] is
	// the preferred leader.
	Replicas []int32 `json:"replicas"`
	// Leader is the current leader, or NoLeader.
	// Invariant: Leader == NoLeader or Leader ∈ Replicas.
	Leader int32 `json:"leader"`
	// LeaderEpoch increases by one on every leader change; replicas fence
	// requests from older epochs with it.
	LeaderEpoch int32 `json:"leader_epoch"`
	// ISR is the in-sync replica set. Invariant: ISR ⊆ Replicas, and
	// Leader ∈ ISR whenever Leader != NoLeader.
	ISR []int32 `json:"isr"`
	// PartitionEpoch increases by one on every change of the ISR or the
	// leader (Kafka's partition epoch). An AlterPartition names the epoch it
	// was computed from and is refused when the partition moved on since
	// (INVALID_UPDATE_VERSION).
	PartitionEpoch int32 `json:"partition_epoch,omitempty"`
	// AddingReplicas and RemovingReplicas describe a reassignment in progress
	// (reassign.go, Kafka's KIP-455): Replicas is then the target, in the
	// target's order, followed by the removing replicas in their old order;
	// AddingReplicas = target − original, RemovingReplicas = original −
	// target. Both empty when the partition is not being moved.
	// Invariant: both ⊆ Replicas, disjoint, RemovingReplicas is the tail of
	// Replicas, and the target (Replicas − RemovingReplicas) is not empty.
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
}

// Reassigning reports whether the partition is being moved.
func (p PartitionMeta) Reassigning() bool { return len(p.AddingReplicas)+len(p.RemovingReplicas) > 0 }

// TargetReplicas is where a move goes: Replicas − RemovingReplicas, in
// order; Replicas when the partition is not being moved.
func (p PartitionMeta) TargetReplicas() []int32 { return without(p.Replicas, p.RemovingReplicas) }

// OriginalReplicas is where a move started: Replicas − AddingReplicas, in
// order (a cancel returns to it); Replicas when the partition is not being
// moved.
func (p PartitionMeta) OriginalReplicas() []int32 { return without(p.Replicas, p.AddingReplicas) }

// without returns a new slice of the members of s not in drop, in order.
func without(s, drop []int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, r := range s {
		if !slices.Contains(drop, r) {
			out = append(out, r)
		}
	}
	return out
}

// TopicMeta is the controller's view of one topic.
type TopicMeta struct {
	Name     string  `json:"name"`
	ID       TopicID `json:"id"`
	Internal bool    `json:"internal,omitempty"`
	// Configs holds the topic's overrides as the user set them; resolve them
	// into typed values with ResolveTopicConfig.
	Configs map[string]string `json:"configs,omitempty"`
	// Partitions is indexed by partition number.
	Partitions []PartitionMeta `json:"partitions"`
}

// Partition returns partition p.
func (t TopicMeta) Partition(p int32) (PartitionMeta, bool) {
	if p < 0 || int(p) >= len(t.Partitions) {
		return PartitionMeta{}, false
	}
	return t.Partitions[p], true
}

// Clone returns a deep copy that the caller may modify.
func (t TopicMeta) Clone() TopicMeta {
	c := t
	if t.Configs != nil {
		c.Configs = make(map[string]string, len(t.Configs))
		for k, v := range t.Configs {
			c.Configs[k] = v
		}
	}
	c.Partitions = make([]PartitionMeta, len(t.Partitions))
	for i, p := range t.Partitions {
		p.Replicas = slices.Clone(p.Replicas)
		p.ISR = slices.Clone(p.ISR)
		p.AddingReplicas = slices.Clone(p.AddingReplicas)
		p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
		c.Partitions[i] = p
	}
	return c
}

// Metadata is an immutable snapshot of the cluster metadata. A *Metadata is
// never modified after it is published: each applied change builds a new one
// that shares unchanged topics with its predecessor (copy-on-write), so
// readers need no lock. Values returned by its methods share that memory:
// treat them as read-only, and Clone a TopicMeta before changing it.
type Metadata struct {
	// version is the raft index of the last command that changed the
	// metadata. Invariant: it only grows, including across restarts and
	// snapshot restores (it is part of the snapshot).
	version uint64
	// clusterID is set once, by the first initClusterCmd, and never changes.
	clusterID string
	// nextProducerID is the first producer id no block has given yet.
	// Invariant: ≥ 0, and it only grows (producerids.go).
	nextProducerID int64
	brokers        map[int32]BrokerInfo
	topics         map[string]*TopicMeta
	// brokerConfigs are the dynamic broker configs (brokerconfig.go): resource ("" or a
	// broker id) → key → value. Inner maps are never modified once published: replace them.
	brokerConfigs map[string]map[string]string

	// Derived indexes, rebuilt by reindex after every change.
	brokerIDs []int32  // sorted
	names     []string // sorted
	byID      map[TopicID]*TopicMeta
}

func emptyMetadata() *Metadata {
	m := &Metadata{brokers: map[int32]BrokerInfo{}, topics: map[string]*TopicMeta{}, brokerConfigs: map[string]map[string]string{}}
	m.reindex()
	return m
}

// Version is the raft index of the last change; 0 before the first.
func (m *Metadata) Version() uint64 { return m.version }

// ClusterID is the cluster's id, or "" before the first controller set it.
func (m *Metadata) ClusterID() string { return m.clusterID }

// Broker returns a registered broker.
func (m *Metadata) Broker(id int32) (BrokerInfo, bool) {
	b, ok := m.brokers[id]
	return b, ok
}

// Brokers returns the registered brokers sorted by id.
func (m *Metadata) Brokers() []BrokerInfo {
	out := make([]BrokerInfo, len(m.brokerIDs))
	for i, id := range m.brokerIDs {
		out[i] = m.brokers[id]
	}
	return out
}

// LiveBrokers returns the ids of the alive brokers (registered, unfenced,
// not shutting down), sorted: the brokers that may be placed and elected.
func (m *Metadata) LiveBrokers() []int32 {
	var out []int32
	for _, id := range m.brokerIDs {
		if m.brokers[id].eligible() {
			out = append(out, id)
		}
	}
	return out
}

// Eligible reports whether broker id may be elected, join an ISR or be placed: registered,
// not fenced, not shutting down.
func (m *Metadata) Eligible(id int32) bool { return m.eligible(id) }

// eligible reports whether broker id may be elected, join an ISR or be placed.
func (m *Metadata) eligible(id int32) bool {
	b, ok := m.brokers[id]
	return ok && b.eligible()
}

// Topic returns the topic with that name.
func (m *Metadata) Topic(name string) (TopicMeta, bool) {
	t, ok := m.topics[name]
	if !ok {
		return TopicMeta{}, false
	}
	return *t, true
}

// TopicByID returns the topic with that id.
func (m *Metadata) TopicByID(id TopicID) (TopicMeta, bool) {
	t, ok := m.byID[id]
	if !ok {
		return TopicMeta{}, false
	}
	return *t, true
}

// Topics returns every topic sorted by name.
func (m *Metadata) Topics() []TopicMeta {
	out := make([]TopicMeta, len(m.names))
	for i, n := range m.names {
		out[i] = *m.topics[n]
	}
	return out
}

// NumTopics returns the number of topics.
func (m *Metadata) NumTopics() int { return len(m.topics) }

// clone starts the next version: a shallow copy whose maps may be modified
// without touching m. Topic values stay shared; replace, never mutate, them.
func (m *Metadata) clone() *Metadata {
	n := &Metadata{
		version:        m.version,
		clusterID:      m.clusterID,
		nextProducerID: m.nextProducerID,
		brokers:        make(map[int32]BrokerInfo, len(m.brokers)+1),
		topics:         make(map[string]*TopicMeta, len(m.topics)+1),
		brokerConfigs:  maps.Clone(m.brokerConfigs),
	}
	if n.brokerConfigs == nil {
		n.brokerConfigs = map[string]map[string]string{}
	}
	for k, v := range m.brokers {
		n.brokers[k] = v
	}
	for k, v := range m.topics {
		n.topics[k] = v
	}
	return n
}

// reindex rebuilds the derived indexes after brokers or topics changed.
func (m *Metadata) reindex() {
	m.brokerIDs = m.brokerIDs[:0]
	for id := range m.brokers {
		m.brokerIDs = append(m.brokerIDs, id)
	}
	slices.Sort(m.brokerIDs)
	m.names = m.names[:0]
	m.byID = make(map[TopicID]*TopicMeta, len(m.topics))
	for name, t := range m.topics {
		m.names = append(m.names, name)
		m.byID[t.ID] = t
	}
	slices.Sort(m.names)
}
