package wire

// OffsetFetch (key 9) reads a consumer group's committed positions.
//
// Behavior: the group coordinator answers (others: ErrNotCoordinator,
// ErrCoordinatorLoadInProgress while it loads). Topics nil asks for every
// partition the group has committed. A partition with no committed offset is
// answered with Offset -1 and NoError, not an error. A whole-request failure
// is in the top-level ErrorCode.

// OffsetFetchRequest asks for a group's committed offsets.
type OffsetFetchRequest struct {
	GroupID string
	Topics  []OffsetFetchRequestTopic // nil = every committed partition (encoded as a null array)
}

// OffsetFetchRequestTopic names the partitions wanted in one topic.
type OffsetFetchRequestTopic struct {
	Topic      string
	Partitions []int32
}

const minOffsetFetchRequestTopic = sizeString + sizeArray

// Key returns OffsetFetch.
func (*OffsetFetchRequest) Key() APIKey { return OffsetFetch }

// AppendTo appends the body's encoding.
func (o *OffsetFetchRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, o.GroupID)
	return appendNullableArray(dst, o.Topics)
}

// ReadFrom decodes b into o (see Message).
func (o *OffsetFetchRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	o.GroupID = r.stringReuse(o.GroupID)
	o.Topics = readNullableSlice(&r, o.Topics, minOffsetFetchRequestTopic)
	for i := range o.Topics {
		o.Topics[i].readFrom(&r)
	}
	return r.done()
}

func (t *OffsetFetchRequestTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendInt32s(dst, t.Partitions)
}

func (t *OffsetFetchRequestTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = r.int32s(t.Partitions)
}

// OffsetFetchResponse has the committed offsets.
type OffsetFetchResponse struct {
	ThrottleMs int32
	Topics     []OffsetFetchResponseTopic
	ErrorCode  ErrorCode // whole-request error
}

// OffsetFetchResponseTopic is one topic's committed offsets.
type OffsetFetchResponseTopic struct {
	Topic      string
	Partitions []OffsetFetchResponsePartition
}

// OffsetFetchResponsePartition is one partition's committed position.
type OffsetFetchResponsePartition struct {
	Partition   int32
	Offset      int64 // -1 if nothing is committed
	LeaderEpoch int32 // -1 if unknown
	Metadata    *string
	ErrorCode   ErrorCode
}

const (
	minOffsetFetchResponseTopic     = sizeString + sizeArray
	minOffsetFetchResponsePartition = sizeInt32 + sizeInt64 + sizeInt32 + sizeString + sizeInt16
)

// Key returns OffsetFetch.
func (*OffsetFetchResponse) Key() APIKey { return OffsetFetch }

// AppendTo appends the body's encoding.
func (o *OffsetFetchResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, o.ThrottleMs)
	dst = appendArray(dst, o.Topics)
	return appendInt16(dst, int16(o.ErrorCode))
}

// ReadFrom decodes b into o (see Message).
func (o *OffsetFetchResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	o.ThrottleMs = r.int32()
	o.Topics = readSlice(&r, o.Topics, minOffsetFetchResponseTopic)
	for i := range o.Topics {
		o.Topics[i].readFrom(&r)
	}
	o.ErrorCode = ErrorCode(r.int16())
	return r.done()
}

func (t *OffsetFetchResponseTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (t *OffsetFetchResponseTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minOffsetFetchResponsePartition)
	for i := range t.Partitions {
		t.Partitions[i].readFrom(r)
	}
}

func (p *OffsetFetchResponsePartition) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt64(dst, p.Offset)
	dst = appendInt32(dst, p.LeaderEpoch)
	dst = appendNullableString(dst, p.Metadata)
	return appendInt16(dst, int16(p.ErrorCode))
}

func (p *OffsetFetchResponsePartition) readFrom(r *reader) {
	p.Partition = r.int32()
	p.Offset = r.int64()
	p.LeaderEpoch = r.int32()
	p.Metadata = r.nullableString()
	p.ErrorCode = ErrorCode(r.int16())
}
