package wire

// OffsetForLeaderEpoch (key 23, Kafka's KIP-101 and KIP-279): a follower that starts following a
// new leader asks, per partition, for the end offset of the latest leader epoch its own log
// holds, and truncates to it before it fetches. Sluice's v0 is Kafka's v3 field layout without
// tagged fields (docs/protocol.md); Version is 0 for now and, as for the other versioned apis,
// rides in the request header, not the body.

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

const (
	minOffsetForLeaderEpochTopic           = sizeString + sizeArray
	minOffsetForLeaderEpochPartition       = sizeInt32 * 3
	minOffsetForLeaderEpochTopicResult     = sizeString + sizeArray
	minOffsetForLeaderEpochPartitionResult = sizeInt16 + sizeInt32*2 + sizeInt64
)

// Key returns OffsetForLeaderEpoch.
func (*OffsetForLeaderEpochRequest) Key() APIKey { return OffsetForLeaderEpoch }

// APIVersion implements Versioned.
func (o *OffsetForLeaderEpochRequest) APIVersion() int16 { return o.Version }

// AppendTo appends the body's encoding.
func (o *OffsetForLeaderEpochRequest) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, o.ReplicaID)
	return appendArray(dst, o.Topics)
}

// ReadFrom decodes b into o (see Message). Version is left as it is (set from the header).
func (o *OffsetForLeaderEpochRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	o.ReplicaID = r.int32()
	o.Topics = readSlice(&r, o.Topics, minOffsetForLeaderEpochTopic)
	for i := range o.Topics {
		o.Topics[i].readFrom(&r)
	}
	return r.done()
}

func (t *OffsetForLeaderEpochTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (t *OffsetForLeaderEpochTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minOffsetForLeaderEpochPartition)
	for i := range t.Partitions {
		t.Partitions[i].readFrom(r)
	}
}

func (p *OffsetForLeaderEpochPartition) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt32(dst, p.CurrentLeaderEpoch)
	return appendInt32(dst, p.LeaderEpoch)
}

func (p *OffsetForLeaderEpochPartition) readFrom(r *reader) {
	p.Partition = r.int32()
	p.CurrentLeaderEpoch = r.int32()
	p.LeaderEpoch = r.int32()
}

// Key returns OffsetForLeaderEpoch.
func (*OffsetForLeaderEpochResponse) Key() APIKey { return OffsetForLeaderEpoch }

// AppendTo appends the body's encoding.
func (o *OffsetForLeaderEpochResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, o.ThrottleMs)
	return appendArray(dst, o.Topics)
}

// ReadFrom decodes b into o (see Message). Version is left as it is.
func (o *OffsetForLeaderEpochResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	o.ThrottleMs = r.int32()
	o.Topics = readSlice(&r, o.Topics, minOffsetForLeaderEpochTopicResult)
	for i := range o.Topics {
		o.Topics[i].readFrom(&r)
	}
	return r.done()
}

func (t *OffsetForLeaderEpochTopicResult) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (t *OffsetForLeaderEpochTopicResult) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minOffsetForLeaderEpochPartitionResult)
	for i := range t.Partitions {
		t.Partitions[i].readFrom(r)
	}
}

func (p *OffsetForLeaderEpochPartitionResult) appendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(p.ErrorCode))
	dst = appendInt32(dst, p.Partition)
	dst = appendInt32(dst, p.LeaderEpoch)
	return appendInt64(dst, p.EndOffset)
}

func (p *OffsetForLeaderEpochPartitionResult) readFrom(r *reader) {
	p.ErrorCode = ErrorCode(r.int16())
	p.Partition = r.int32()
	p.LeaderEpoch = r.int32()
	p.EndOffset = r.int64()
}
