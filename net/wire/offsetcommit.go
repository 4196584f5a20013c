package wire

// OffsetCommit (key 8) stores a consumer group's positions.
//
// Behavior: the group coordinator answers (others: ErrNotCoordinator). With
// GenerationID -1 and an empty MemberID the commit is a simple one, from a
// consumer that assigns partitions itself, and is accepted only if the group
// has no active members; otherwise the generation and member must be current
// (ErrIllegalGeneration, ErrUnknownMemberID, ErrRebalanceInProgress). The
// committed offset is the NEXT offset to consume. Results are per
// partition.
//
// Versions: v1 adds GroupInstanceID after MemberID (a static member's commit, KIP-345: a
// member id replaced by a newer instance is FENCED_INSTANCE_ID).

// OffsetCommitRequest commits offsets for a group.
type OffsetCommitRequest struct {
	// Version is the version to send (0 or 1).
	Version         int16
	GroupID         string
	GenerationID    int32 // -1 for a simple (group-less) commit
	MemberID        string
	GroupInstanceID *string // v1+
	Topics          []OffsetCommitRequestTopic
}

// APIVersion implements Versioned.
func (o *OffsetCommitRequest) APIVersion() int16 { return o.Version }

// OffsetCommitRequestTopic is one topic's offsets.
type OffsetCommitRequestTopic struct {
	Topic      string
	Partitions []OffsetCommitRequestPartition
}

// OffsetCommitRequestPartition is one partition's committed position.
type OffsetCommitRequestPartition struct {
	Partition   int32
	Offset      int64   // the next offset to consume
	LeaderEpoch int32   // epoch of the last consumed record, -1 if unknown
	Metadata    *string // opaque to the broker; bounded by offset.metadata.max.bytes
}

const (
	minOffsetCommitRequestTopic     = sizeString + sizeArray
	minOffsetCommitRequestPartition = sizeInt32 + sizeInt64 + sizeInt32 + sizeString
)

// Key returns OffsetCommit.
func (*OffsetCommitRequest) Key() APIKey { return OffsetCommit }

// AppendTo appends the body's encoding.
func (o *OffsetCommitRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, o.GroupID)
	dst = appendInt32(dst, o.GenerationID)
	dst = appendString(dst, o.MemberID)
	if o.Version >= 1 {
		dst = appendNullableString(dst, o.GroupInstanceID)
	}
	return appendArray(dst, o.Topics)
}

// ReadFrom decodes b into o (see Message).
func (o *OffsetCommitRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	o.GroupID = r.stringReuse(o.GroupID)
	o.GenerationID = r.int32()
	o.MemberID = r.stringReuse(o.MemberID)
	o.GroupInstanceID = nil
	if o.Version >= 1 {
		o.GroupInstanceID = r.nullableString()
	}
	o.Topics = readSlice(&r, o.Topics, minOffsetCommitRequestTopic)
	for i := range o.Topics {
		o.Topics[i].readFrom(&r)
	}
	return r.done()
}

func (t *OffsetCommitRequestTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (t *OffsetCommitRequestTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minOffsetCommitRequestPartition)
	for i := range t.Partitions {
		t.Partitions[i].readFrom(r)
	}
}

func (p *OffsetCommitRequestPartition) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt64(dst, p.Offset)
	dst = appendInt32(dst, p.LeaderEpoch)
	return appendNullableString(dst, p.Metadata)
}

func (p *OffsetCommitRequestPartition) readFrom(r *reader) {
	p.Partition = r.int32()
	p.Offset = r.int64()
	p.LeaderEpoch = r.int32()
	p.Metadata = r.nullableString()
}

// OffsetCommitResponse has one result per committed partition.
type OffsetCommitResponse struct {
	ThrottleMs int32
	Topics     []OffsetCommitResponseTopic
}

// OffsetCommitResponseTopic is one topic's results.
type OffsetCommitResponseTopic struct {
	Topic      string
	Partitions []PartitionResult
}

// PartitionResult is a per-partition error code, for responses that carry
// nothing else per partition.
type PartitionResult struct {
	Partition int32
	ErrorCode ErrorCode
}

const (
	minOffsetCommitResponseTopic = sizeString + sizeArray
	minPartitionResult           = sizeInt32 + sizeInt16
)

// Key returns OffsetCommit.
func (*OffsetCommitResponse) Key() APIKey { return OffsetCommit }

// AppendTo appends the body's encoding.
func (o *OffsetCommitResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, o.ThrottleMs)
	return appendArray(dst, o.Topics)
}

// ReadFrom decodes b into o (see Message).
func (o *OffsetCommitResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	o.ThrottleMs = r.int32()
	o.Topics = readSlice(&r, o.Topics, minOffsetCommitResponseTopic)
	for i := range o.Topics {
		o.Topics[i].readFrom(&r)
	}
	return r.done()
}

func (t *OffsetCommitResponseTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (t *OffsetCommitResponseTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minPartitionResult)
	for i := range t.Partitions {
		t.Partitions[i].readFrom(r)
	}
}

func (p *PartitionResult) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	return appendInt16(dst, int16(p.ErrorCode))
}

func (p *PartitionResult) readFrom(r *reader) {
	p.Partition = r.int32()
	p.ErrorCode = ErrorCode(r.int16())
}
