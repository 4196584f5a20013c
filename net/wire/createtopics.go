package wire

// CreateTopics (key 19) creates topics on the controller.
//
// Behavior: each topic gives either NumPartitions and ReplicationFactor
// (-1 for the broker defaults, num.partitions and
// default.replication.factor), or an explicit Assignments list with both
// counts set to -1. ValidateOnly checks everything and creates nothing.
// TimeoutMs bounds how long the controller waits for the new partitions to
// have leaders; a topic created but not yet led when it expires is answered
// with ErrRequestTimedOut. Results are per topic, in request order.

// CreateTopicsRequest creates one or more topics.
type CreateTopicsRequest struct {
	Topics       []CreateTopicsRequestTopic
	TimeoutMs    int32
	ValidateOnly bool
}

// CreateTopicsRequestTopic is one topic to create.
type CreateTopicsRequestTopic struct {
	Topic             string
	NumPartitions     int32 // -1: broker default, or taken from Assignments
	ReplicationFactor int16 // -1: broker default, or taken from Assignments
	Assignments       []CreateTopicsAssignment
	Configs           []ConfigEntry
}

// CreateTopicsAssignment places one partition's replicas explicitly.
type CreateTopicsAssignment struct {
	Partition int32
	Replicas  []int32 // broker ids, preferred leader first
}

const (
	minCreateTopicsRequestTopic = sizeString + sizeInt32 + sizeInt16 + sizeArray*2
	minCreateTopicsAssignment   = sizeInt32 + sizeArray
)

// Key returns CreateTopics.
func (*CreateTopicsRequest) Key() APIKey { return CreateTopics }

// AppendTo appends the body's encoding.
func (c *CreateTopicsRequest) AppendTo(dst []byte) []byte {
	dst = appendArray(dst, c.Topics)
	dst = appendInt32(dst, c.TimeoutMs)
	return appendBool(dst, c.ValidateOnly)
}

// ReadFrom decodes b into c (see Message).
func (c *CreateTopicsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	c.Topics = readSlice(&r, c.Topics, minCreateTopicsRequestTopic)
	for i := range c.Topics {
		c.Topics[i].readFrom(&r)
	}
	c.TimeoutMs = r.int32()
	c.ValidateOnly = r.bool()
	return r.done()
}

func (t *CreateTopicsRequestTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	dst = appendInt32(dst, t.NumPartitions)
	dst = appendInt16(dst, t.ReplicationFactor)
	dst = appendArray(dst, t.Assignments)
	return appendArray(dst, t.Configs)
}

func (t *CreateTopicsRequestTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.NumPartitions = r.int32()
	t.ReplicationFactor = r.int16()
	t.Assignments = readSlice(r, t.Assignments, minCreateTopicsAssignment)
	for i := range t.Assignments {
		t.Assignments[i].readFrom(r)
	}
	t.Configs = readSlice(r, t.Configs, minConfigEntry)
	for i := range t.Configs {
		t.Configs[i].readFrom(r)
	}
}

func (a *CreateTopicsAssignment) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, a.Partition)
	return appendInt32s(dst, a.Replicas)
}

func (a *CreateTopicsAssignment) readFrom(r *reader) {
	a.Partition = r.int32()
	a.Replicas = r.int32s(a.Replicas)
}

// CreateTopicsResponse has one result per requested topic.
type CreateTopicsResponse struct {
	ThrottleMs int32
	Topics     []TopicResult
}

// TopicResult is the outcome of creating or deleting one topic.
type TopicResult struct {
	Topic        string
	ErrorCode    ErrorCode
	ErrorMessage *string // detail for a human, nil if none
}

const minTopicResult = sizeString + sizeInt16 + sizeString

// Key returns CreateTopics.
func (*CreateTopicsResponse) Key() APIKey { return CreateTopics }

// AppendTo appends the body's encoding.
func (c *CreateTopicsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, c.ThrottleMs)
	return appendArray(dst, c.Topics)
}

// ReadFrom decodes b into c (see Message).
func (c *CreateTopicsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	c.ThrottleMs = r.int32()
	c.Topics = readSlice(&r, c.Topics, minTopicResult)
	for i := range c.Topics {
		c.Topics[i].readFrom(&r)
	}
	return r.done()
}

func (t *TopicResult) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	dst = appendInt16(dst, int16(t.ErrorCode))
	return appendErrorMessage(dst, t.ErrorMessage)
}

func (t *TopicResult) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.ErrorCode = ErrorCode(r.int16())
	t.ErrorMessage = r.nullableString()
}
