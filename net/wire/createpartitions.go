package wire

// CreatePartitions (key 37) adds partitions to topics: what `sluice topic alter --partitions`
// and kafka-topics --alter --partitions send.
//
// Behavior (Kafka's): Count is the topic's new total, never fewer than it has
// (INVALID_PARTITIONS, also for the same count). Assignments, if not null, place the new
// partitions (one replica list per new partition, each of the topic's replication factor;
// else INVALID_REPLICA_ASSIGNMENT); null places them as topic creation does. ValidateOnly
// checks and changes nothing. Results come per topic, in the request's order.

// CreatePartitionsRequest grows topics.
type CreatePartitionsRequest struct {
	Topics       []CreatePartitionsTopic
	TimeoutMs    int32
	ValidateOnly bool
}

// CreatePartitionsTopic is one topic's new partition count.
type CreatePartitionsTopic struct {
	Topic       string
	Count       int32
	Assignments []CreatePartitionsAssignment // null: placed by the controller
}

// CreatePartitionsAssignment is one new partition's replicas, preferred leader first.
type CreatePartitionsAssignment struct {
	BrokerIDs []int32
}

const (
	minCreatePartitionsTopic      = sizeString + sizeInt32 + sizeArray
	minCreatePartitionsAssignment = sizeArray
	minCreatePartitionsResult     = sizeString + sizeInt16 + sizeString
)

// Key returns CreatePartitions.
func (*CreatePartitionsRequest) Key() APIKey { return CreatePartitions }

// AppendTo appends the body's encoding.
func (c *CreatePartitionsRequest) AppendTo(dst []byte) []byte {
	dst = appendArray(dst, c.Topics)
	dst = appendInt32(dst, c.TimeoutMs)
	return appendBool(dst, c.ValidateOnly)
}

// ReadFrom decodes b into c (see Message).
func (c *CreatePartitionsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	c.Topics = readSlice(&r, c.Topics, minCreatePartitionsTopic)
	for i := range c.Topics {
		t := &c.Topics[i]
		t.Topic = r.stringReuse(t.Topic)
		t.Count = r.int32()
		t.Assignments = readNullableSlice(&r, t.Assignments, minCreatePartitionsAssignment)
		for j := range t.Assignments {
			t.Assignments[j].BrokerIDs = r.int32s(t.Assignments[j].BrokerIDs)
		}
	}
	c.TimeoutMs = r.int32()
	c.ValidateOnly = r.bool()
	return r.done()
}

func (t *CreatePartitionsTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	dst = appendInt32(dst, t.Count)
	return appendNullableArray(dst, t.Assignments)
}

func (a *CreatePartitionsAssignment) appendTo(dst []byte) []byte {
	return appendInt32s(dst, a.BrokerIDs)
}

// CreatePartitionsResponse has one result per topic asked for.
type CreatePartitionsResponse struct {
	ThrottleMs int32
	Results    []CreatePartitionsResult
}

// CreatePartitionsResult is one topic's outcome.
type CreatePartitionsResult struct {
	Topic        string
	ErrorCode    ErrorCode
	ErrorMessage *string
}

// Key returns CreatePartitions.
func (*CreatePartitionsResponse) Key() APIKey { return CreatePartitions }

// AppendTo appends the body's encoding.
func (c *CreatePartitionsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, c.ThrottleMs)
	return appendArray(dst, c.Results)
}

// ReadFrom decodes b into c (see Message).
func (c *CreatePartitionsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	c.ThrottleMs = r.int32()
	c.Results = readSlice(&r, c.Results, minCreatePartitionsResult)
	for i := range c.Results {
		res := &c.Results[i]
		res.Topic = r.stringReuse(res.Topic)
		res.ErrorCode = ErrorCode(r.int16())
		res.ErrorMessage = r.nullableString()
	}
	return r.done()
}

func (res *CreatePartitionsResult) appendTo(dst []byte) []byte {
	dst = appendString(dst, res.Topic)
	dst = appendInt16(dst, int16(res.ErrorCode))
	return appendErrorMessage(dst, res.ErrorMessage)
}
