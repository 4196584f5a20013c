package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// snapshotFormat is the version of the snapshot encoding below. Bump it, and
// keep reading the old one, when the encoding changes incompatibly.
const snapshotFormat = 1

// snapshotFile is a whole Metadata as JSON, brokers and topics sorted so the
// same state always encodes to the same bytes.
//
// Fields added since format 1 (the cluster id, the brokers' lifecycle, the
// partition epochs, the next producer id) are optional: a snapshot without
// them decodes as a cluster with no id yet, every broker alive, every
// partition epoch 0 and no producer-id block given.
type snapshotFile struct {
	Format    int    `json:"format"`
	Version   uint64 `json:"version"`
	ClusterID string `json:"cluster_id,omitempty"`
	// NextProducerID: Metadata.NextProducerID.
	NextProducerID int64        `json:"next_producer_id,omitempty"`
	Brokers        []BrokerInfo `json:"brokers"`
	Topics         []TopicMeta  `json:"topics"`
	// BrokerConfigs: the dynamic broker configs, by resource ("" or a broker id); JSON
	// writes map keys sorted.
	BrokerConfigs map[string]map[string]string `json:"broker_configs,omitempty"`
}

// fsm adapts the pure transitions to raft.FSM. Raft calls Apply, Snapshot
// and Restore from one goroutine; Persist may run concurrently with later
// Applies, which is safe because published Metadata is immutable.
type fsm struct {
	state    atomic.Pointer[Metadata]
	onChange func() // called after a new state is published; must not block
	// log receives every leader election Apply makes, on every node, so
	// each node's log tells the partition's history. Set it before raft starts.
	log *slog.Logger
}

func newFSM(onChange func()) *fsm {
	f := &fsm{onChange: onChange, log: slog.Default().With("component", "controller")}
	f.state.Store(emptyMetadata())
	return f
}

// Apply decodes and applies one committed entry. Every outcome, including a
// decode failure, is a deterministic function of the entry and the state, so
// all nodes agree on the state and on which commands were rejected.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	c, err := decodeCommand(l.Data)
	if err != nil {
		return applyResult{Err: err}
	}
	cur := f.state.Load()
	next, res := c.apply(cur, l.Index)
	if next != cur {
		f.state.Store(next)
		f.onChange()
	}
	f.logElections(res.Elections, l.Index)
	return res
}

// logElections logs each leader change: an unclean one at Warn, as Kafka
// does, because records the old ISR had and the new leader lacks are lost.
func (f *fsm) logElections(elections []Election, index uint64) {
	for _, e := range elections {
		level, msg := slog.LevelInfo, "partition leader elected"
		if e.Unclean {
			level, msg = slog.LevelWarn, "unclean leader election: the new leader was not in the ISR; records only the old ISR had are lost"
		}
		f.log.Log(context.Background(), level, msg, "topic", e.Topic, "partition", e.Partition,
			"from", e.From, "to", e.To, "leader_epoch", e.LeaderEpoch, "partition_epoch", e.PartitionEpoch, "index", index)
	}
}

// Snapshot captures the current state; the encoding happens in Persist,
// off raft's FSM goroutine.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return fsmSnapshot{md: f.state.Load()}, nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	md, err := decodeSnapshot(bufio.NewReader(rc))
	if err != nil {
		return err
	}
	f.state.Store(md)
	f.onChange()
	return nil
}

type fsmSnapshot struct{ md *Metadata }

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriter(sink)
	err := encodeSnapshot(w, s.md)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("cluster: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}

func encodeSnapshot(w io.Writer, m *Metadata) error {
	return json.NewEncoder(w).Encode(snapshotFile{
		Format:         snapshotFormat,
		Version:        m.version,
		ClusterID:      m.clusterID,
		NextProducerID: m.nextProducerID,
		Brokers:        m.Brokers(),
		Topics:         m.Topics(),
		BrokerConfigs:  m.brokerConfigs,
	})
}

// decodeSnapshot reads a snapshot and checks the invariants that Apply
// maintains, so a damaged or foreign file is refused rather than served.
func decodeSnapshot(r io.Reader) (*Metadata, error) {
	var f snapshotFile
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return nil, fmt.Errorf("cluster: decode snapshot: %w", err)
	}
	if f.Format != snapshotFormat {
		return nil, fmt.Errorf("cluster: snapshot format %d, want %d", f.Format, snapshotFormat)
	}
	if len(f.ClusterID) > maxClusterIDLen {
		return nil, fmt.Errorf("cluster: snapshot: cluster id of %d bytes", len(f.ClusterID))
	}
	if f.NextProducerID < 0 {
		return nil, fmt.Errorf("cluster: snapshot: next producer id %d is negative", f.NextProducerID)
	}
	if err := checkBrokerConfigs(f.BrokerConfigs); err != nil {
		return nil, fmt.Errorf("cluster: snapshot: %w", err)
	}
	m := emptyMetadata()
	if f.BrokerConfigs != nil {
		m.brokerConfigs = f.BrokerConfigs
	}
	m.version = f.Version
	m.clusterID = f.ClusterID
	m.nextProducerID = f.NextProducerID
	for _, b := range f.Brokers {
		if _, dup := m.brokers[b.ID]; dup {
			return nil, fmt.Errorf("cluster: snapshot: broker %d twice", b.ID)
		}
		m.brokers[b.ID] = b
	}
	ids := make(map[TopicID]bool, len(f.Topics))
	keys := make(map[string]string, len(f.Topics)) // collisionKey → name
	for i := range f.Topics {
		t := &f.Topics[i]
		if err := checkTopic(t); err != nil {
			return nil, fmt.Errorf("cluster: snapshot: topic %q: %w", t.Name, err)
		}
		if _, dup := m.topics[t.Name]; dup || ids[t.ID] {
			return nil, fmt.Errorf("cluster: snapshot: topic %q or its id twice", t.Name)
		}
		// What create enforces, so that a state restored is one Apply could have built.
		if IsInternalTopicName(t.Name) != t.Internal {
			return nil, fmt.Errorf("cluster: snapshot: topic %q: internal is %v", t.Name, t.Internal)
		}
		if other, clash := keys[collisionKey(t.Name)]; clash {
			return nil, fmt.Errorf("cluster: snapshot: topics %q and %q differ only in '.' and '_'", other, t.Name)
		}
		keys[collisionKey(t.Name)] = t.Name
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				if _, ok := m.brokers[r]; !ok {
					return nil, fmt.Errorf("cluster: snapshot: topic %q partition %d: replica %d is not a registered broker", t.Name, p.Partition, r)
				}
			}
		}
		ids[t.ID] = true
		if len(t.Configs) == 0 {
			t.Configs = nil
		}
		for i := range t.Partitions { // one representation of "not moving", as Apply builds
			p := &t.Partitions[i]
			p.AddingReplicas, p.RemovingReplicas = nilIfEmpty(p.AddingReplicas), nilIfEmpty(p.RemovingReplicas)
		}
		m.topics[t.Name] = t
	}
	m.reindex()
	return m, nil
}

// checkTopic verifies a topic's structural invariants.
func checkTopic(t *TopicMeta) error {
	if err := ValidateTopicName(t.Name); err != nil {
		return err
	}
	if t.ID.IsZero() || len(t.Partitions) == 0 {
		return fmt.Errorf("missing id or partitions")
	}
	for i, p := range t.Partitions {
		if p.Partition != int32(i) || len(p.Replicas) == 0 {
			return fmt.Errorf("partition %d: bad index or no replicas", i)
		}
		if p.Leader != NoLeader && !slices.Contains(p.ISR, p.Leader) {
			return fmt.Errorf("partition %d: leader %d not in the ISR %v", i, p.Leader, p.ISR)
		}
		if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
			return fmt.Errorf("partition %d: negative leader epoch %d or partition epoch %d", i, p.LeaderEpoch, p.PartitionEpoch)
		}
		for j, r := range p.Replicas {
			if slices.Contains(p.Replicas[:j], r) {
				return fmt.Errorf("partition %d: replica %d twice", i, r)
			}
		}
		for _, r := range p.ISR {
			if !slices.Contains(p.Replicas, r) {
				return fmt.Errorf("partition %d: ISR member %d not a replica", i, r)
			}
		}
		if err := checkReassignment(p); err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
	}
	return nil
}

// checkReassignment verifies the layout of a move in progress (reassign.go):
// the adding and removing replicas are distinct replicas, the removing ones
// the tail of Replicas, and the target is not empty.
func checkReassignment(p PartitionMeta) error {
	if !p.Reassigning() {
		return nil
	}
	n, k := len(p.Replicas), len(p.RemovingReplicas)
	if k >= n || !slices.Equal(p.Replicas[n-k:], p.RemovingReplicas) {
		return fmt.Errorf("removing replicas %v are not the tail of the replicas %v, before a target", p.RemovingReplicas, p.Replicas)
	}
	for j, r := range p.AddingReplicas {
		if !slices.Contains(p.Replicas[:n-k], r) || slices.Contains(p.AddingReplicas[:j], r) {
			return fmt.Errorf("adding replicas %v are not distinct target replicas of %v", p.AddingReplicas, p.Replicas)
		}
	}
	return nil
}
