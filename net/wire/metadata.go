package wire

// Metadata (key 3) tells a client which brokers exist, how to reach them, and
// which broker leads each partition of the topics it asks about.
//
// Behavior: Topics nil asks for every topic; an empty non-nil Topics asks for
// none (brokers only). An unknown topic is answered with
// ErrUnknownTopicOrPartition in its entry, unless AllowAutoTopicCreation is
// set and the broker has auto.create.topics.enable, in which case it is
// created and answered with ErrLeaderNotAvailable until its leaders exist.

// Versions: v1 adds corruptReplicas to each partition of the response; the request is the
// same in both.

// MetadataRequest asks for the cluster's brokers and some or all topics.
type MetadataRequest struct {
	// Version is the version to send (0 or 1); the response must be decoded in the same one.
	// Not encoded in the body: it goes in the request header.
	Version                int16
	Topics                 []string // nil = all topics (encoded as a null array)
	AllowAutoTopicCreation bool
}

// Key returns Metadata.
func (*MetadataRequest) Key() APIKey { return Metadata }

// APIVersion implements Versioned.
func (m *MetadataRequest) APIVersion() int16 { return m.Version }

// AppendTo appends the body's encoding.
func (m *MetadataRequest) AppendTo(dst []byte) []byte {
	dst = appendNullableStrings(dst, m.Topics)
	return appendBool(dst, m.AllowAutoTopicCreation)
}

// ReadFrom decodes b into m (see Message).
func (m *MetadataRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	m.Topics = r.nullableStrings(m.Topics)
	m.AllowAutoTopicCreation = r.bool()
	return r.done()
}

// MetadataResponse describes the brokers and the requested topics.
type MetadataResponse struct {
	// Version is the layout (0 or 1): the version of the request it answers. ReadFrom takes it
	// as given (set it before decoding) and leaves it as it is.
	Version      int16
	ThrottleMs   int32
	Brokers      []MetadataBroker
	ClusterID    *string
	ControllerID int32 // -1 if there is no active controller
	Topics       []MetadataTopic
}

// MetadataBroker is how to reach one broker.
type MetadataBroker struct {
	NodeID int32
	Host   string
	Port   int32
	// UnixPath is the broker's unix socket path, "" if it has none. A client
	// on the same host may use it instead of TCP.
	UnixPath string
}

// MetadataTopic is one topic's partitions, or the error that prevented
// describing it.
type MetadataTopic struct {
	ErrorCode  ErrorCode
	Topic      string
	IsInternal bool // e.g. the consumer offsets topic
	Partitions []MetadataPartition
}

// MetadataPartition is one partition's leadership and replica sets.
type MetadataPartition struct {
	ErrorCode   ErrorCode
	Partition   int32
	Leader      int32 // broker id, -1 if none
	LeaderEpoch int32
	Replicas    []int32 // assigned replicas (AR), preferred leader first
	ISR         []int32 // in-sync replicas
	// CorruptReplicas (v1) are the replicas whose log holds a batch that the scrub found bad
	// on the disk (reads that reach it fail with CORRUPT_MESSAGE), as far as the answering
	// broker knows: its own replicas. Empty in v0.
	CorruptReplicas []int32
}

const (
	minMetadataBroker    = sizeInt32 + sizeString + sizeInt32 + sizeString
	minMetadataTopic     = sizeInt16 + sizeString + sizeBool + sizeArray
	minMetadataPartition = sizeInt16 + sizeInt32*3 + sizeArray*2
)

// Key returns Metadata.
func (*MetadataResponse) Key() APIKey { return Metadata }

// AppendTo appends the body's encoding.
func (m *MetadataResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, m.ThrottleMs)
	dst = appendArray(dst, m.Brokers)
	dst = appendNullableString(dst, m.ClusterID)
	dst = appendInt32(dst, m.ControllerID)
	dst = appendArrayLen(dst, len(m.Topics))
	for i := range m.Topics {
		dst = m.Topics[i].appendVersion(dst, m.Version)
	}
	return dst
}

// ReadFrom decodes b into m (see Message), in the layout of m.Version.
func (m *MetadataResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	m.ThrottleMs = r.int32()
	m.Brokers = readSlice(&r, m.Brokers, minMetadataBroker)
	for i := range m.Brokers {
		m.Brokers[i].readFrom(&r)
	}
	m.ClusterID = r.nullableString()
	m.ControllerID = r.int32()
	m.Topics = readSlice(&r, m.Topics, minMetadataTopic)
	for i := range m.Topics {
		m.Topics[i].readVersion(&r, m.Version)
	}
	return r.done()
}

func (b *MetadataBroker) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, b.NodeID)
	dst = appendString(dst, b.Host)
	dst = appendInt32(dst, b.Port)
	return appendString(dst, b.UnixPath)
}

func (b *MetadataBroker) readFrom(r *reader) {
	b.NodeID = r.int32()
	b.Host = r.stringReuse(b.Host)
	b.Port = r.int32()
	b.UnixPath = r.stringReuse(b.UnixPath)
}

func (t *MetadataTopic) appendTo(dst []byte) []byte { return t.appendVersion(dst, 0) }

// appendVersion appends the topic in the layout of version v.
func (t *MetadataTopic) appendVersion(dst []byte, v int16) []byte {
	dst = appendInt16(dst, int16(t.ErrorCode))
	dst = appendString(dst, t.Topic)
	dst = appendBool(dst, t.IsInternal)
	if v >= 1 {
		dst = appendArrayLen(dst, len(t.Partitions))
		for i := range t.Partitions {
			dst = t.Partitions[i].appendTo(dst)
			dst = appendInt32s(dst, t.Partitions[i].CorruptReplicas)
		}
		return dst
	}
	return appendArray(dst, t.Partitions)
}

// readVersion decodes the topic in the layout of version v.
func (t *MetadataTopic) readVersion(r *reader, v int16) {
	t.ErrorCode = ErrorCode(r.int16())
	t.Topic = r.stringReuse(t.Topic)
	t.IsInternal = r.bool()
	t.Partitions = readSlice(r, t.Partitions, minMetadataPartition)
	for i := range t.Partitions {
		p := &t.Partitions[i]
		p.readFrom(r)
		if v >= 1 {
			p.CorruptReplicas = r.int32s(p.CorruptReplicas)
		} else {
			p.CorruptReplicas = p.CorruptReplicas[:0]
		}
	}
}

func (p *MetadataPartition) appendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(p.ErrorCode))
	dst = appendInt32(dst, p.Partition)
	dst = appendInt32(dst, p.Leader)
	dst = appendInt32(dst, p.LeaderEpoch)
	dst = appendInt32s(dst, p.Replicas)
	return appendInt32s(dst, p.ISR)
}

func (p *MetadataPartition) readFrom(r *reader) {
	p.ErrorCode = ErrorCode(r.int16())
	p.Partition = r.int32()
	p.Leader = r.int32()
	p.LeaderEpoch = r.int32()
	p.Replicas = r.int32s(p.Replicas)
	p.ISR = r.int32s(p.ISR)
}
