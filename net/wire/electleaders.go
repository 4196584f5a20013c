package wire

// ElectLeaders (key 43) elects partitions' leaders: what `sluice leader-election` and
// kafka-leader-election send (KIP-460).
//
// Behavior (Kafka's): ElectionType 0 (preferred) makes each partition's first replica its
// leader when that replica is in the ISR and can lead (ELECTION_NOT_NEEDED if it leads
// already, PREFERRED_LEADER_NOT_AVAILABLE if it cannot); 1 (unclean) elects a leader for a
// partition that has none from any live replica, in or out of the ISR
// (ELECTION_NOT_NEEDED if it has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE if no replica is
// live). Topics null: every partition (the answer then lists only the partitions an election
// was tried for, as Kafka's). Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION. Results come per
// topic and partition, in the request's order.

// Election types.
const (
	ElectionPreferred int8 = 0
	ElectionUnclean   int8 = 1
)

// ElectLeadersRequest names the partitions to elect leaders for (Topics nil: all).
type ElectLeadersRequest struct {
	ElectionType int8
	Topics       []ElectLeadersTopic
	TimeoutMs    int32
}

// ElectLeadersTopic is one topic's partitions.
type ElectLeadersTopic struct {
	Topic      string
	Partitions []int32
}

const (
	minElectLeadersTopic     = sizeString + sizeArray
	minElectLeadersResult    = sizeString + sizeArray
	minElectLeadersPartition = sizeInt32 + sizeInt16 + sizeString
)

// Key returns ElectLeaders.
func (*ElectLeadersRequest) Key() APIKey { return ElectLeaders }

// AppendTo appends the body's encoding.
func (e *ElectLeadersRequest) AppendTo(dst []byte) []byte {
	dst = appendInt8(dst, e.ElectionType)
	dst = appendNullableArray(dst, e.Topics)
	return appendInt32(dst, e.TimeoutMs)
}

// ReadFrom decodes b into e (see Message).
func (e *ElectLeadersRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	e.ElectionType = r.int8()
	e.Topics = readNullableSlice(&r, e.Topics, minElectLeadersTopic)
	for i := range e.Topics {
		t := &e.Topics[i]
		t.Topic = r.stringReuse(t.Topic)
		t.Partitions = r.int32s(t.Partitions)
	}
	e.TimeoutMs = r.int32()
	return r.done()
}

func (t *ElectLeadersTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendInt32s(dst, t.Partitions)
}

// ElectLeadersResponse is the outcome per partition; ErrorCode is for the whole request.
type ElectLeadersResponse struct {
	ThrottleMs int32
	ErrorCode  ErrorCode
	Topics     []ElectLeadersResult
}

// ElectLeadersResult is one topic's partitions' outcomes.
type ElectLeadersResult struct {
	Topic      string
	Partitions []ElectLeadersPartitionResult
}

// ElectLeadersPartitionResult is one partition's outcome.
type ElectLeadersPartitionResult struct {
	Partition    int32
	ErrorCode    ErrorCode
	ErrorMessage *string
}

// Key returns ElectLeaders.
func (*ElectLeadersResponse) Key() APIKey { return ElectLeaders }

// AppendTo appends the body's encoding.
func (e *ElectLeadersResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, e.ThrottleMs)
	dst = appendInt16(dst, int16(e.ErrorCode))
	return appendArray(dst, e.Topics)
}

// ReadFrom decodes b into e (see Message).
func (e *ElectLeadersResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	e.ThrottleMs = r.int32()
	e.ErrorCode = ErrorCode(r.int16())
	e.Topics = readSlice(&r, e.Topics, minElectLeadersResult)
	for i := range e.Topics {
		t := &e.Topics[i]
		t.Topic = r.stringReuse(t.Topic)
		t.Partitions = readSlice(&r, t.Partitions, minElectLeadersPartition)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.int32()
			p.ErrorCode = ErrorCode(r.int16())
			p.ErrorMessage = r.nullableString()
		}
	}
	return r.done()
}

func (t *ElectLeadersResult) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (p *ElectLeadersPartitionResult) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt16(dst, int16(p.ErrorCode))
	return appendErrorMessage(dst, p.ErrorMessage)
}
