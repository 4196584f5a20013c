package wire

// Produce (key 0) appends record batches to partition logs.
//
// Behavior: Records of a partition is one or more record batches (the batch
// package's format) back to back, exactly as the producer built and
// compressed them; the broker validates and appends them without
// re-encoding. Acks is 0 (no response at all: the server sends nothing and
// the client does not wait), 1 (answer after the leader's append) or -1 (all:
// answer once the in-sync replicas have the batches, and only if they number
// at least min.insync.replicas); any other value gets
// ErrInvalidRequiredAcks. TimeoutMs bounds the acks=-1 wait. Results are per
// partition; one failing partition does not fail the others.
//
// Decoding aliases: each partition's Records is a sub-slice of the frame
// buffer, so a decoded request is valid only while that buffer is, and the
// broker appends straight from the frame (no copy of the records).

// Versions: v1 (KIP-951) adds to the response each partition's CurrentLeader (what the
// answering broker knows of the partition's leader, for a client told
// NOT_LEADER_OR_FOLLOWER to reroute at once) and NodeEndpoints (how to reach the brokers the
// hints name). The request is the same in both.

// Acks values.
const (
	AcksNone   int16 = 0
	AcksLeader int16 = 1
	AcksAll    int16 = -1
)

// ProduceRequest appends records to partitions.
type ProduceRequest struct {
	// Version is the version to send (0 or 1); the response must be decoded in the same one.
	// Not encoded in the body: it goes in the request header.
	Version         int16
	TransactionalID *string // nil unless transactional (not yet supported)
	Acks            int16
	TimeoutMs       int32
	Topics          []ProduceRequestTopic
}

// ProduceRequestTopic is one topic's share of a Produce request.
type ProduceRequestTopic struct {
	Topic      string
	Partitions []ProduceRequestPartition
}

// ProduceRequestPartition carries the record batches for one partition.
type ProduceRequestPartition struct {
	Partition int32
	Records   []byte // concatenated record batches; aliases the frame when decoded
	// Batches is for encoding only: when it is not empty, the partition's records are these
	// batches back to back and Records must be nil. A client sends several batches of one
	// partition this way without joining them into one buffer (one copy of every byte less).
	// Decoding never sets it.
	Batches [][]byte
}

// recordsLen is the length of the partition's records as encoded.
func (p *ProduceRequestPartition) recordsLen() int {
	if len(p.Batches) == 0 {
		return len(p.Records)
	}
	n := 0
	for _, b := range p.Batches {
		n += len(b)
	}
	return n
}

const (
	minProduceRequestTopic     = sizeString + sizeArray
	minProduceRequestPartition = sizeInt32 + sizeBytes
)

// Key returns Produce.
func (*ProduceRequest) Key() APIKey { return Produce }

// APIVersion implements Versioned.
func (p *ProduceRequest) APIVersion() int16 { return p.Version }

// AppendTo appends the body's encoding.
func (p *ProduceRequest) AppendTo(dst []byte) []byte {
	dst = appendNullableString(dst, p.TransactionalID)
	dst = appendInt16(dst, p.Acks)
	dst = appendInt32(dst, p.TimeoutMs)
	return appendArray(dst, p.Topics)
}

// ReadFrom decodes b into p (see Message). Records alias b. Decoding into a
// reused ProduceRequest allocates nothing once its slices have grown to the
// shape of the traffic.
func (p *ProduceRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	p.TransactionalID = r.nullableString()
	p.Acks = r.int16()
	p.TimeoutMs = r.int32()
	p.Topics = readSlice(&r, p.Topics, minProduceRequestTopic)
	for i := range p.Topics {
		p.Topics[i].readFrom(&r)
	}
	return r.done()
}

func (t *ProduceRequestTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendArray(dst, t.Partitions)
}

func (t *ProduceRequestTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minProduceRequestPartition)
	for i := range t.Partitions {
		t.Partitions[i].readFrom(r)
	}
}

func (p *ProduceRequestPartition) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	if len(p.Batches) == 0 {
		return appendBytes(dst, p.Records)
	}
	dst = appendArrayLen(dst, p.recordsLen())
	for _, b := range p.Batches {
		dst = append(dst, b...)
	}
	return dst
}

func (p *ProduceRequestPartition) readFrom(r *reader) {
	p.Partition = r.int32()
	p.Records = r.bytes()
}

// ProduceResponse has one result per partition of the request.
type ProduceResponse struct {
	// Version is the layout (0 or 1): the version of the request it answers. ReadFrom takes it
	// as given (set it before decoding) and leaves it as it is.
	Version    int16
	Topics     []ProduceResponseTopic
	ThrottleMs int32
	// NodeEndpoints (v1) are the brokers named by the partitions' CurrentLeader hints, each
	// once. Empty in v0.
	NodeEndpoints []MetadataBroker
}

// ProduceResponseTopic is one topic's results.
type ProduceResponseTopic struct {
	Topic      string
	Partitions []ProduceResponsePartition
}

// ProduceResponsePartition is the outcome of one partition's append.
type ProduceResponsePartition struct {
	Partition       int32
	ErrorCode       ErrorCode
	BaseOffset      int64   // offset given to the first record, -1 on error
	LogAppendTimeMs int64   // broker time stamped on the batches if the topic uses LogAppendTime, else -1
	LogStartOffset  int64   // the partition's log start offset after the append
	ErrorMessage    *string // detail for a human (e.g. which CRC failed), nil if none
	// CurrentLeader (v1) is the partition's leader as the answering broker knows it, set with
	// NOT_LEADER_OR_FOLLOWER (and FENCED_LEADER_EPOCH); NoLeaderHint otherwise. Not in v0.
	CurrentLeader LeaderHint
}

// LeaderHint is a partition's leader as a broker that is not its leader knows it (KIP-951's
// CurrentLeader): a client that reads one with a newer epoch than its own may send there
// without waiting for a metadata refresh. Broker id 0 is a real broker, so "no hint" is
// NoLeaderHint (-1, -1), never the zero value; a broker building a response sets it.
type LeaderHint struct {
	LeaderID    int32 // broker id, -1 if unknown
	LeaderEpoch int32 // -1 if unknown
}

// NoLeaderHint is the hint of a partition whose leader the broker does not know.
var NoLeaderHint = LeaderHint{LeaderID: -1, LeaderEpoch: -1}

// Known reports whether h names a leader.
func (h LeaderHint) Known() bool { return h.LeaderID >= 0 && h.LeaderEpoch >= 0 }

func (h LeaderHint) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, h.LeaderID)
	return appendInt32(dst, h.LeaderEpoch)
}

func (h *LeaderHint) readFrom(r *reader) {
	h.LeaderID = r.int32()
	h.LeaderEpoch = r.int32()
}

// appendNodeEndpoints appends the v1 NodeEndpoints array.
func appendNodeEndpoints(dst []byte, bs []MetadataBroker) []byte {
	return appendArray(dst, bs)
}

// readNodeEndpoints reads the NodeEndpoints array of a v1 response into bs's storage; in v0 it
// reads nothing and empties bs.
func readNodeEndpoints(r *reader, bs []MetadataBroker, v int16) []MetadataBroker {
	if v < 1 {
		return bs[:0]
	}
	bs = readSlice(r, bs, minMetadataBroker)
	for i := range bs {
		bs[i].readFrom(r)
	}
	return bs
}

const (
	minProduceResponseTopic     = sizeString + sizeArray
	minProduceResponsePartition = sizeInt32 + sizeInt16 + sizeInt64*3 + sizeString
)

// Key returns Produce.
func (*ProduceResponse) Key() APIKey { return Produce }

// AppendTo appends the body's encoding.
func (p *ProduceResponse) AppendTo(dst []byte) []byte {
	dst = appendArrayLen(dst, len(p.Topics))
	for i := range p.Topics {
		dst = p.Topics[i].appendVersion(dst, p.Version)
	}
	dst = appendInt32(dst, p.ThrottleMs)
	if p.Version >= 1 {
		dst = appendNodeEndpoints(dst, p.NodeEndpoints)
	}
	return dst
}

// ReadFrom decodes b into p (see Message), in the layout of p.Version.
func (p *ProduceResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	p.readFrom(&r)
	return r.done()
}

func (p *ProduceResponse) readFrom(r *reader) {
	p.Topics = readSlice(r, p.Topics, minProduceResponseTopic)
	for i := range p.Topics {
		p.Topics[i].readVersion(r, p.Version)
	}
	p.ThrottleMs = r.int32()
	p.NodeEndpoints = readNodeEndpoints(r, p.NodeEndpoints, p.Version)
}

func (t *ProduceResponseTopic) appendTo(dst []byte) []byte { return t.appendVersion(dst, 0) }

func (t *ProduceResponseTopic) appendVersion(dst []byte, v int16) []byte {
	dst = appendString(dst, t.Topic)
	dst = appendArrayLen(dst, len(t.Partitions))
	for i := range t.Partitions {
		dst = t.Partitions[i].appendTo(dst)
		if v >= 1 {
			dst = t.Partitions[i].CurrentLeader.appendTo(dst)
		}
	}
	return dst
}

func (t *ProduceResponseTopic) readVersion(r *reader, v int16) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minProduceResponsePartition)
	for i := range t.Partitions {
		p := &t.Partitions[i]
		p.readFrom(r)
		if v >= 1 {
			p.CurrentLeader.readFrom(r)
		} else {
			p.CurrentLeader = NoLeaderHint
		}
	}
}

func (p *ProduceResponsePartition) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt16(dst, int16(p.ErrorCode))
	dst = appendInt64(dst, p.BaseOffset)
	dst = appendInt64(dst, p.LogAppendTimeMs)
	dst = appendInt64(dst, p.LogStartOffset)
	return appendErrorMessage(dst, p.ErrorMessage)
}

func (p *ProduceResponsePartition) readFrom(r *reader) {
	p.Partition = r.int32()
	p.ErrorCode = ErrorCode(r.int16())
	p.BaseOffset = r.int64()
	p.LogAppendTimeMs = r.int64()
	p.LogStartOffset = r.int64()
	p.ErrorMessage = r.nullableString()
}

// AppendSegments appends the request's encoding without the record bytes, so a client can
// write the records from the batches where they already are (writev) instead of copying them
// into the frame. cuts gets one position per partition, in request order: the full encoding is
// buf[:cuts[0]] + Records₀ + buf[cuts[0]:cuts[1]] + Records₁ + ... + buf[cuts[n-1]:], where a
// partition's records are its Batches back to back when it has any. It returns
// the number of record bytes left out, for the frame size. The result is byte for byte what
// AppendTo writes, with the records cut out.
func (p *ProduceRequest) AppendSegments(dst []byte, cuts []int) (buf []byte, cutsOut []int, recordBytes int64) {
	dst = appendNullableString(dst, p.TransactionalID)
	dst = appendInt16(dst, p.Acks)
	dst = appendInt32(dst, p.TimeoutMs)
	dst = appendArrayLen(dst, len(p.Topics))
	for i := range p.Topics {
		t := &p.Topics[i]
		dst = appendString(dst, t.Topic)
		dst = appendArrayLen(dst, len(t.Partitions))
		for j := range t.Partitions {
			part := &t.Partitions[j]
			dst = appendInt32(dst, part.Partition)
			n := part.recordsLen()
			if part.Records == nil && len(part.Batches) == 0 {
				dst = appendInt32(dst, -1)
			} else {
				dst = appendArrayLen(dst, n)
			}
			cuts = append(cuts, len(dst))
			recordBytes += int64(n)
		}
	}
	return dst, cuts, recordBytes
}
