package wire

// OffsetDelete (key 47) deletes a group's committed offsets of some partitions.
//
// Behavior: the group's coordinator answers (others: NOT_COORDINATOR in ErrorCode).
// GROUP_ID_NOT_FOUND for a group it does not know; NON_EMPTY_GROUP for a group with members
// whose protocol is not "consumer" (the coordinator cannot read their subscriptions). Per
// partition: GROUP_SUBSCRIBED_TO_TOPIC when a member subscribes to the topic,
// UNKNOWN_TOPIC_OR_PARTITION when it does not exist, otherwise deleted (NoError also when
// nothing was committed). The tombstones are written acks=all before the answer.

// OffsetDeleteRequest names the partitions.
type OffsetDeleteRequest struct {
	GroupID string
	Topics  []OffsetDeleteRequestTopic
}

// OffsetDeleteRequestTopic is one topic's partitions.
type OffsetDeleteRequestTopic struct {
	Topic      string
	Partitions []int32
}

const (
	minOffsetDeleteRequestTopic  = sizeString + sizeArray
	minOffsetDeleteResponseTopic = sizeString + sizeArray
)

// Key returns OffsetDelete.
func (*OffsetDeleteRequest) Key() APIKey { return OffsetDelete }

// AppendTo appends the body's encoding.
func (o *OffsetDeleteRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, o.GroupID)
	return appendArray(dst, o.Topics)
}

// ReadFrom decodes b into o (see Message).
func (o *OffsetDeleteRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	o.GroupID = r.stringReuse(o.GroupID)
	o.Topics = readSlice(&r, o.Topics, minOffsetDeleteRequestTopic)
	for i := range o.Topics {
		t := &o.Topics[i]
		t.Topic = r.stringReuse(t.Topic)
		t.Partitions = r.int32s(t.Partitions)
	}
	return r.done()
}

func (t *OffsetDeleteRequestTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendInt32s(dst, t.Partitions)
}

// OffsetDeleteResponse has a top-level error and one result per partition.
type OffsetDeleteResponse struct {
	ErrorCode  ErrorCode
	ThrottleMs int32
	Topics     []OffsetDeleteResponseTopic
}

// OffsetDeleteResponseTopic is one topic's results.
type OffsetDeleteResponseTopic struct {
	Topic      string
	Partitions []PartitionResult
}

// Key returns OffsetDelete.
func (*OffsetDeleteResponse) Key() APIKey { return OffsetDelete }

// AppendTo appends the body's encoding.
func (o *OffsetDeleteResponse) AppendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(o.ErrorCode))
	dst = appendInt32(dst, o.ThrottleMs)
	return appendArray(dst, o.Topics)
}

// ReadFrom decodes b into o (see Message).
func (o *OffsetDeleteResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	o.ErrorCode = ErrorCode(r.int16())
	o.ThrottleMs = r.int32()
	o.Topics = readSlice(&r, o.Topics, minOffsetDeleteResponseTopic)
	for i := range o.Topics {
		t := &o.Topics[i]
		t.Topic = r.stringReuse(t.Topic)
		t.Partitions = readSlice(&r, t.Partitions, minPartitionResult)
		for j := range t.Partitions {
			t.Partitions[j].Partition = r.int32()
			t.Partitions[j].ErrorCode = ErrorCode(r.int16())
		}
	}
	return r.done()
}

func (t *OffsetDeleteResponseTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}
