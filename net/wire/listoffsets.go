package wire

// ListOffsets (key 2) finds an offset in each partition by timestamp: the
// earliest offset, the latest, or the first offset whose record timestamp is
// at or after a given time.
//
// Behavior: Timestamp LatestTimestamp (-1) answers the high watermark
// (ReadCommitted: the last stable offset), EarliestTimestamp (-2) the log
// start offset, MaxTimestamp (-3) the offset of the record with the largest
// timestamp; a time in ms answers the first offset with a timestamp >= it
// (via the time index), or Offset -1 and Timestamp -1 if there is none.
// Only the leader answers (others: ErrNotLeaderOrFollower); a new leader
// whose high watermark has not caught up answers ErrOffsetNotAvailable.

// Special ListOffsets timestamps.
const (
	LatestTimestamp   int64 = -1
	EarliestTimestamp int64 = -2
	MaxTimestamp      int64 = -3
)

// ListOffsetsRequest asks for one offset per partition.
type ListOffsetsRequest struct {
	ReplicaID      int32 // ConsumerReplicaID for clients
	IsolationLevel IsolationLevel
	Topics         []ListOffsetsRequestTopic
}

// ListOffsetsRequestTopic is one topic's partitions.
type ListOffsetsRequestTopic struct {
	Topic      string
	Partitions []ListOffsetsRequestPartition
}

// ListOffsetsRequestPartition asks for the offset of one partition at
// Timestamp.
type ListOffsetsRequestPartition struct {
	Partition          int32
	CurrentLeaderEpoch int32 // -1 = unknown (not checked)
	Timestamp          int64 // ms since the epoch, or LatestTimestamp, EarliestTimestamp, MaxTimestamp
}

const (
	minListOffsetsRequestTopic     = sizeString + sizeArray
	minListOffsetsRequestPartition = sizeInt32*2 + sizeInt64
)

// Key returns ListOffsets.
func (*ListOffsetsRequest) Key() APIKey { return ListOffsets }

// AppendTo appends the body's encoding.
func (l *ListOffsetsRequest) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, l.ReplicaID)
	dst = appendInt8(dst, int8(l.IsolationLevel))
	return appendArray(dst, l.Topics)
}

// ReadFrom decodes b into l (see Message).
func (l *ListOffsetsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	l.ReplicaID = r.int32()
	l.IsolationLevel = IsolationLevel(r.int8())
	l.Topics = readSlice(&r, l.Topics, minListOffsetsRequestTopic)
	for i := range l.Topics {
		l.Topics[i].readFrom(&r)
	}
	return r.done()
}

func (t *ListOffsetsRequestTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (t *ListOffsetsRequestTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minListOffsetsRequestPartition)
	for i := range t.Partitions {
		t.Partitions[i].readFrom(r)
	}
}

func (p *ListOffsetsRequestPartition) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt32(dst, p.CurrentLeaderEpoch)
	return appendInt64(dst, p.Timestamp)
}

func (p *ListOffsetsRequestPartition) readFrom(r *reader) {
	p.Partition = r.int32()
	p.CurrentLeaderEpoch = r.int32()
	p.Timestamp = r.int64()
}

// ListOffsetsResponse has one answer per partition.
type ListOffsetsResponse struct {
	ThrottleMs int32
	Topics     []ListOffsetsResponseTopic
}

// ListOffsetsResponseTopic is one topic's answers.
type ListOffsetsResponseTopic struct {
	Topic      string
	Partitions []ListOffsetsResponsePartition
}

// ListOffsetsResponsePartition is the offset found for one partition.
type ListOffsetsResponsePartition struct {
	Partition   int32
	ErrorCode   ErrorCode
	Timestamp   int64 // timestamp of the record found, -1 for the special queries
	Offset      int64 // -1 if none
	LeaderEpoch int32 // epoch of the leader that wrote Offset's batch, -1 if unknown
}

const (
	minListOffsetsResponseTopic     = sizeString + sizeArray
	minListOffsetsResponsePartition = sizeInt32 + sizeInt16 + sizeInt64*2 + sizeInt32
)

// Key returns ListOffsets.
func (*ListOffsetsResponse) Key() APIKey { return ListOffsets }

// AppendTo appends the body's encoding.
func (l *ListOffsetsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, l.ThrottleMs)
	return appendArray(dst, l.Topics)
}

// ReadFrom decodes b into l (see Message).
func (l *ListOffsetsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	l.ThrottleMs = r.int32()
	l.Topics = readSlice(&r, l.Topics, minListOffsetsResponseTopic)
	for i := range l.Topics {
		l.Topics[i].readFrom(&r)
	}
	return r.done()
}

func (t *ListOffsetsResponseTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (t *ListOffsetsResponseTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minListOffsetsResponsePartition)
	for i := range t.Partitions {
		t.Partitions[i].readFrom(r)
	}
}

func (p *ListOffsetsResponsePartition) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt16(dst, int16(p.ErrorCode))
	dst = appendInt64(dst, p.Timestamp)
	dst = appendInt64(dst, p.Offset)
	return appendInt32(dst, p.LeaderEpoch)
}

func (p *ListOffsetsResponsePartition) readFrom(r *reader) {
	p.Partition = r.int32()
	p.ErrorCode = ErrorCode(r.int16())
	p.Timestamp = r.int64()
	p.Offset = r.int64()
	p.LeaderEpoch = r.int32()
}
