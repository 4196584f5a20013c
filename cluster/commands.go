package cluster

import (
	"encoding/json"
	"fmt"
)

// cmdType is the first byte of every raft log entry this package writes.
// The values are part of the on-disk format: never renumber them.
type cmdType uint8

const (
	cmdRegisterBroker      cmdType = 1
	cmdCreateTopic         cmdType = 2
	cmdDeleteTopic         cmdType = 3
	cmdAlterTopicConfigs   cmdType = 4
	cmdSetPartitionLeader  cmdType = 5
	cmdAllocateProducerIDs cmdType = 6
	cmdAlterPartition      cmdType = 7
	cmdFenceBroker         cmdType = 8
	cmdUnfenceBroker       cmdType = 9
	cmdControlledShutdown  cmdType = 10
	cmdInitCluster         cmdType = 11
	// Issue 27: moving replicas.
	cmdAlterReassignments cmdType = 12
	cmdElectLeaders       cmdType = 13
	cmdCreatePartitions   cmdType = 14
	cmdAlterBrokerConfigs cmdType = 15
)

// TopicSpec is a request to create a topic.
type TopicSpec struct {
	Name string `json:"name"`
	// NumPartitions must be ≥ 1, unless Assignment is given (then it must
	// be len(Assignment), or zero or negative: "from the assignment", as
	// Kafka's -1). The broker substitutes its num.partitions default for
	// Kafka's -1 before calling the controller when there is no Assignment.
	NumPartitions int32 `json:"num_partitions"`
	// ReplicationFactor must be in [1, live brokers], unless
	// Assignment is given (then the assignment's width, or zero or negative).
	ReplicationFactor int16 `json:"replication_factor"`
	// Assignment optionally fixes the replicas of each partition, indexed
	// by partition, first replica preferred leader.
	Assignment [][]int32 `json:"assignment,omitempty"`
	// Configs are topic config overrides (Kafka names).
	Configs map[string]string `json:"configs,omitempty"`
	// Internal marks a topic created by the broker itself (names starting
	// with "__", such as __consumer_offsets); users cannot set it.
	Internal bool `json:"internal,omitempty"`
}

// LeaderChange is a request to move a partition's leadership.
type LeaderChange struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Leader is the new leader (a replica of the partition) or NoLeader.
	Leader int32 `json:"leader"`
	// LeaderEpoch is the epoch the decision was based on: if the partition
	// has moved on since, the change is stale and rejected.
	LeaderEpoch int32 `json:"leader_epoch"`
	// Unclean allows a leader outside the ISR (the topic's or broker's
	// unclean.leader.election.enable, decided by the caller); the ISR then
	// becomes just the new leader.
	Unclean bool `json:"unclean,omitempty"`
}

// AlterPartitionRequest is a partition leader's proposal of a new ISR
// (Kafka's AlterPartition), fenced by the broker epoch, the leader epoch and
// the partition epoch it was computed from.
type AlterPartitionRequest struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// BrokerID and BrokerEpoch are the proposing leader's.
	BrokerID    int32 `json:"broker_id"`
	BrokerEpoch int64 `json:"broker_epoch"`
	// LeaderEpoch and PartitionEpoch are the partition's as the leader knows them.
	LeaderEpoch    int32 `json:"leader_epoch"`
	PartitionEpoch int32 `json:"partition_epoch"`
	// ISR is the proposed in-sync replica set; it must hold the leader.
	ISR []int32 `json:"isr"`
}

// command is a decoded log entry: a pure transition of the metadata.
type command interface {
	// apply returns the next metadata (m itself when nothing changed) and
	// the result for the proposer. It must depend only on m, index and the
	// command: no clock, randomness or map iteration order.
	apply(m *Metadata, index uint64) (*Metadata, applyResult)
}

// applyResult is what Apply hands back through the raft ApplyFuture.
type applyResult struct {
	Err       error
	Topic     TopicMeta
	Partition PartitionMeta
	// BrokerEpoch is the broker's epoch after a registration (the new one)
	// or a fence, unfence or controlled shutdown.
	BrokerEpoch int64
	// Elections are the leader changes the command made, in topic and
	// partition order.
	Elections []Election
	// ProducerIDs is the block an AllocateProducerIDs handed out.
	ProducerIDs ProducerIDBlock
	// ElectionResults are an ElectLeaders' outcomes, one per partition.
	ElectionResults []ElectionResult
}

type registerBrokerCmd struct {
	Broker BrokerInfo `json:"broker"`
}

type createTopicCmd struct {
	TopicSpec
	// ID is drawn by the proposer, not by Apply, so every node agrees on it.
	ID TopicID `json:"id"`
	// Placement carries the random start index and shift of Kafka's
	// replica placement, drawn by the proposer. nil in entries written
	// before it existed: those keep the placement they had (placement.go).
	Placement *PlacementSeed `json:"placement,omitempty"`
	// CheckMinISR is set in every entry written since min.insync.replicas is checked against
	// the replication factor (CheckMinInsyncReplicas). An entry without it (an old log,
	// replayed) is applied as it was when it committed, so a topic created then survives.
	CheckMinISR bool `json:"check_min_isr,omitempty"`
}

type deleteTopicCmd struct {
	Name string `json:"name"`
	// ID, when set, must match the current topic's id: a delete aimed at a
	// topic that was since re-created under the same name is rejected.
	ID       TopicID `json:"id,omitzero"`
	Internal bool    `json:"internal,omitempty"`
}

type alterTopicConfigsCmd struct {
	Name   string            `json:"name"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
	// CheckMinISR: as createTopicCmd's, for a min.insync.replicas the entry sets.
	CheckMinISR bool `json:"check_min_isr,omitempty"`
}

type setPartitionLeaderCmd struct {
	LeaderChange
	// PartitionEpochs is set in every entry written since partitions have
	// a partition epoch. An entry without it (an old log, replayed) leaves
	// the partition epoch alone, as the snapshot the old code wrote did:
	// a node that replays the old log and one that restores the old
	// snapshot must reach the same state.
	PartitionEpochs bool `json:"partition_epochs,omitempty"`
}

type alterPartitionCmd struct {
	AlterPartitionRequest
}

type initClusterCmd struct {
	ClusterID string `json:"cluster_id"`
}

func cmdTypeOf(c command) cmdType {
	switch c.(type) {
	case *registerBrokerCmd:
		return cmdRegisterBroker
	case *createTopicCmd:
		return cmdCreateTopic
	case *deleteTopicCmd:
		return cmdDeleteTopic
	case *alterTopicConfigsCmd:
		return cmdAlterTopicConfigs
	case *setPartitionLeaderCmd:
		return cmdSetPartitionLeader
	case *alterPartitionCmd:
		return cmdAlterPartition
	case *fenceBrokerCmd:
		return cmdFenceBroker
	case *unfenceBrokerCmd:
		return cmdUnfenceBroker
	case *controlledShutdownCmd:
		return cmdControlledShutdown
	case *initClusterCmd:
		return cmdInitCluster
	case *allocateProducerIDsCmd:
		return cmdAllocateProducerIDs
	case *alterReassignmentsCmd:
		return cmdAlterReassignments
	case *electLeadersCmd:
		return cmdElectLeaders
	case *createPartitionsCmd:
		return cmdCreatePartitions
	case *alterBrokerConfigsCmd:
		return cmdAlterBrokerConfigs
	}
	panic(fmt.Sprintf("cluster: unknown command %T", c))
}

// encodeCommand writes a log entry: the type byte, then the command as JSON.
func encodeCommand(c command) ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode %T: %w", c, err)
	}
	return append([]byte{byte(cmdTypeOf(c))}, body...), nil
}

// decodeCommand parses a log entry written by encodeCommand.
func decodeCommand(b []byte) (command, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrUnknownCommand)
	}
	var c command
	switch cmdType(b[0]) {
	case cmdRegisterBroker:
		c = new(registerBrokerCmd)
	case cmdCreateTopic:
		c = new(createTopicCmd)
	case cmdDeleteTopic:
		c = new(deleteTopicCmd)
	case cmdAlterTopicConfigs:
		c = new(alterTopicConfigsCmd)
	case cmdSetPartitionLeader:
		c = new(setPartitionLeaderCmd)
	case cmdAlterPartition:
		c = new(alterPartitionCmd)
	case cmdFenceBroker:
		c = new(fenceBrokerCmd)
	case cmdUnfenceBroker:
		c = new(unfenceBrokerCmd)
	case cmdControlledShutdown:
		c = new(controlledShutdownCmd)
	case cmdInitCluster:
		c = new(initClusterCmd)
	case cmdAllocateProducerIDs:
		c = new(allocateProducerIDsCmd)
	case cmdAlterReassignments:
		c = new(alterReassignmentsCmd)
	case cmdElectLeaders:
		c = new(electLeadersCmd)
	case cmdCreatePartitions:
		c = new(createPartitionsCmd)
	case cmdAlterBrokerConfigs:
		c = new(alterBrokerConfigsCmd)
	default:
		return nil, fmt.Errorf("%w: type %d", ErrUnknownCommand, b[0])
	}
	if err := json.Unmarshal(b[1:], c); err != nil {
		return nil, fmt.Errorf("%w: type %d: %v", ErrUnknownCommand, b[0], err)
	}
	return c, nil
}
