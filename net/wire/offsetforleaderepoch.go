package wire

// OffsetForLeaderEpoch (key 23, Kafka's KIP-101 and KIP-279): a follower that starts following a
// new leader asks, per partition, for the end offset of the latest leader epoch its own log
// holds, and truncates to it before it fetches. Issue #23 stream C writes the codec (Kafka's v3
// field order, without tagged fields) and its fuzz test.

// OffsetForLeaderEpochRequest asks for epochs' end offsets.
type OffsetForLeaderEpochRequest struct {
	Version   int16
	ReplicaID int32 // the follower's broker id; -2 for a debugging client (Kafka's DEBUGGING_REPLICA_ID)
	Topics    []OffsetForLeaderEpochTopic
}

// OffsetForLeaderEpochTopic is one topic's partitions.
type OffsetForLeaderEpochTopic struct {
	Topic      string
	Partitions []OffsetForLeaderEpochPartition
}

// OffsetForLeaderEpochPartition asks for LeaderEpoch's end offset; CurrentLeaderEpoch is the
// asker's view of the partition's epoch (checked as Fetch checks it: FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH).
type OffsetForLeaderEpochPartition struct {
	Partition          int32
	CurrentLeaderEpoch int32
	LeaderEpoch        int32
}

// OffsetForLeaderEpochResponse answers per partition.
type OffsetForLeaderEpochResponse struct {
	Version    int16
	ThrottleMs int32
	Topics     []OffsetForLeaderEpochTopicResult
}

// OffsetForLeaderEpochTopicResult is one topic's answers.
type OffsetForLeaderEpochTopicResult struct {
	Topic      string
	Partitions []OffsetForLeaderEpochPartitionResult
}

// OffsetForLeaderEpochPartitionResult is the largest epoch ≤ the one asked that the leader's log
// holds and where it ends (-1, -1 when none).
type OffsetForLeaderEpochPartitionResult struct {
	ErrorCode   ErrorCode
	Partition   int32
	LeaderEpoch int32
	EndOffset   int64
}
