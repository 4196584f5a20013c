package wire

// AlterPartitionReassignments (key 45) starts or cancels moves of partitions' replicas, and
// ListPartitionReassignments (key 46) lists the moves in progress: what
// `sluice reassign execute|cancel|list` and kafka-reassign-partitions send (KIP-455).
//
// Behavior: a partition's Replicas is its target replica list, preferred leader first; null
// cancels the partition's move. A move makes the replica set the old one and the target
// together (the adding replicas catch up by fetching from the leader), and once every target
// replica is in the ISR the controller drops the others (their data is deleted) and moves the
// leadership into the target if it was not there. Unlike Kafka, a request with any problem (an
// unknown topic or partition, a broker that is not registered, a replica twice, an empty list,
// a partition already being moved, a cancel of one that is not) is refused as a whole: nothing
// starts, the response's ErrorCode is INVALID_REPLICA_ASSIGNMENT (NO_REASSIGNMENT_IN_PROGRESS
// when every problem is a cancel of nothing), its ErrorMessage lists every problem, and each
// partition carries the code of its own problem (NONE for those without one). On success every
// partition's code is NONE.
//
// ListPartitionReassignments answers the moves in progress among the topics named (null:
// every topic; a named partition not being moved is left out), sorted by topic and partition.

// AlterPartitionReassignmentsRequest starts or cancels moves.
type AlterPartitionReassignmentsRequest struct {
	TimeoutMs int32
	Topics    []ReassignTopic
}

// ReassignTopic is one topic's partitions to move.
type ReassignTopic struct {
	Topic      string
	Partitions []ReassignPartition
}

// ReassignPartition is one partition's target replicas (nil: cancel its move).
type ReassignPartition struct {
	Partition int32
	Replicas  []int32
}

const (
	minReassignTopic         = sizeString + sizeArray
	minReassignPartition     = sizeInt32 + sizeArray
	minReassignTopicResult   = sizeString + sizeArray
	minReassignPartitionRes  = sizeInt32 + sizeInt16 + sizeString
	minListReassignTopic     = sizeString + sizeArray
	minListedReassignTopic   = sizeString + sizeArray
	minListedReassignPartRes = sizeInt32 + 3*sizeArray
)

// Key returns AlterPartitionReassignments.
func (*AlterPartitionReassignmentsRequest) Key() APIKey { return AlterPartitionReassignments }

// AppendTo appends the body's encoding.
func (a *AlterPartitionReassignmentsRequest) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, a.TimeoutMs)
	return appendArray(dst, a.Topics)
}

// ReadFrom decodes b into a (see Message).
func (a *AlterPartitionReassignmentsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	a.TimeoutMs = r.int32()
	a.Topics = readSlice(&r, a.Topics, minReassignTopic)
	for i := range a.Topics {
		t := &a.Topics[i]
		t.Topic = r.stringReuse(t.Topic)
		t.Partitions = readSlice(&r, t.Partitions, minReassignPartition)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.int32()
			p.Replicas = r.nullableInt32s(p.Replicas)
		}
	}
	return r.done()
}

func (t *ReassignTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (p *ReassignPartition) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	return appendNullableInt32s(dst, p.Replicas)
}

// AlterPartitionReassignmentsResponse is the request's outcome, and each partition's.
type AlterPartitionReassignmentsResponse struct {
	ThrottleMs   int32
	ErrorCode    ErrorCode
	ErrorMessage *string
	Topics       []ReassignTopicResult
}

// ReassignTopicResult is one topic's partitions' outcomes.
type ReassignTopicResult struct {
	Topic      string
	Partitions []ReassignPartitionResult
}

// ReassignPartitionResult is one partition's outcome.
type ReassignPartitionResult struct {
	Partition    int32
	ErrorCode    ErrorCode
	ErrorMessage *string
}

// Key returns AlterPartitionReassignments.
func (*AlterPartitionReassignmentsResponse) Key() APIKey { return AlterPartitionReassignments }

// AppendTo appends the body's encoding.
func (a *AlterPartitionReassignmentsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, a.ThrottleMs)
	dst = appendInt16(dst, int16(a.ErrorCode))
	dst = appendErrorMessage(dst, a.ErrorMessage)
	return appendArray(dst, a.Topics)
}

// ReadFrom decodes b into a (see Message).
func (a *AlterPartitionReassignmentsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	a.ThrottleMs = r.int32()
	a.ErrorCode = ErrorCode(r.int16())
	a.ErrorMessage = r.nullableString()
	a.Topics = readSlice(&r, a.Topics, minReassignTopicResult)
	for i := range a.Topics {
		t := &a.Topics[i]
		t.Topic = r.stringReuse(t.Topic)
		t.Partitions = readSlice(&r, t.Partitions, minReassignPartitionRes)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.int32()
			p.ErrorCode = ErrorCode(r.int16())
			p.ErrorMessage = r.nullableString()
		}
	}
	return r.done()
}

func (t *ReassignTopicResult) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (p *ReassignPartitionResult) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt16(dst, int16(p.ErrorCode))
	return appendErrorMessage(dst, p.ErrorMessage)
}

// ListPartitionReassignmentsRequest names the partitions to list; Topics nil: every topic.
type ListPartitionReassignmentsRequest struct {
	TimeoutMs int32
	Topics    []ListReassignTopic
}

// ListReassignTopic is one topic's partitions to list.
type ListReassignTopic struct {
	Topic      string
	Partitions []int32
}

// Key returns ListPartitionReassignments.
func (*ListPartitionReassignmentsRequest) Key() APIKey { return ListPartitionReassignments }

// AppendTo appends the body's encoding.
func (l *ListPartitionReassignmentsRequest) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, l.TimeoutMs)
	return appendNullableArray(dst, l.Topics)
}

// ReadFrom decodes b into l (see Message).
func (l *ListPartitionReassignmentsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	l.TimeoutMs = r.int32()
	l.Topics = readNullableSlice(&r, l.Topics, minListReassignTopic)
	for i := range l.Topics {
		t := &l.Topics[i]
		t.Topic = r.stringReuse(t.Topic)
		t.Partitions = r.int32s(t.Partitions)
	}
	return r.done()
}

func (t *ListReassignTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendInt32s(dst, t.Partitions)
}

// ListPartitionReassignmentsResponse lists the moves in progress.
type ListPartitionReassignmentsResponse struct {
	ThrottleMs   int32
	ErrorCode    ErrorCode
	ErrorMessage *string
	Topics       []ListedReassignTopic
}

// ListedReassignTopic is one topic's partitions being moved.
type ListedReassignTopic struct {
	Topic      string
	Partitions []ListedReassignPartition
}

// ListedReassignPartition is one move: Replicas is the whole replica set now (the target
// followed by the replicas being removed), AddingReplicas and RemovingReplicas its two sides.
type ListedReassignPartition struct {
	Partition        int32
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Key returns ListPartitionReassignments.
func (*ListPartitionReassignmentsResponse) Key() APIKey { return ListPartitionReassignments }

// AppendTo appends the body's encoding.
func (l *ListPartitionReassignmentsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, l.ThrottleMs)
	dst = appendInt16(dst, int16(l.ErrorCode))
	dst = appendErrorMessage(dst, l.ErrorMessage)
	return appendArray(dst, l.Topics)
}

// ReadFrom decodes b into l (see Message).
func (l *ListPartitionReassignmentsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	l.ThrottleMs = r.int32()
	l.ErrorCode = ErrorCode(r.int16())
	l.ErrorMessage = r.nullableString()
	l.Topics = readSlice(&r, l.Topics, minListedReassignTopic)
	for i := range l.Topics {
		t := &l.Topics[i]
		t.Topic = r.stringReuse(t.Topic)
		t.Partitions = readSlice(&r, t.Partitions, minListedReassignPartRes)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.int32()
			p.Replicas = r.int32s(p.Replicas)
			p.AddingReplicas = r.int32s(p.AddingReplicas)
			p.RemovingReplicas = r.int32s(p.RemovingReplicas)
		}
	}
	return r.done()
}

func (t *ListedReassignTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (p *ListedReassignPartition) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt32s(dst, p.Replicas)
	dst = appendInt32s(dst, p.AddingReplicas)
	return appendInt32s(dst, p.RemovingReplicas)
}
