package wire

// Fetch (key 1) reads record batches from partitions, for consumers and for
// follower replicas.
//
// Behavior: ReplicaID is -1 for a consumer, which reads up to the high
// watermark (ReadCommitted: up to the last stable offset); a follower sets
// its broker id and reads up to the log end offset, and its FetchOffset
// tells the leader how far it has replicated. The broker answers once
// MinBytes of records are available or MaxWaitMs has passed (long poll).
// MaxBytes bounds the whole response and PartitionMaxBytes each partition,
// except that the first batch of the first non-empty partition is always
// sent whole so a consumer can make progress past a batch larger than its
// limits (Kafka's rule).
//
// Records are the segment file's bytes from the batch that holds
// FetchOffset, sent with sendfile(2) and cut at the byte limit, so they may
// start before FetchOffset (the client skips records below it) and may END
// WITH A PARTIAL BATCH. The client must drop a trailing batch whose length
// runs past the end of Records; that is not corruption.

// Versions: v1 (KIP-951) adds to the response each partition's CurrentLeader, after its
// log start offset (the records stay last), and NodeEndpoints after the topics: the brokers
// the hints name. The request is the same in both (CurrentLeaderEpoch is in v0 already).
//
// v2 (KIP-227's fetch sessions, Kafka's Fetch v7 field order, and Sluice's DurableOffset) adds to
// the request SessionID and SessionEpoch after IsolationLevel, each partition's DurableOffset
// after its PartitionMaxBytes, and the Forgotten topics after the topics; to the response
// SessionID after its ErrorCode (the partitions' layout, records last, is v1's). A v0 or v1
// request decodes as Kafka reads its sessionless versions: SessionID 0, SessionEpoch
// FinalSessionEpoch (a full fetch that opens no session), no Forgotten topics, and DurableOffset
// -1; a v0 or v1 response decodes with SessionID 0.

// IsolationLevel says which records a Fetch or ListOffsets may see.
type IsolationLevel int8

// Isolation levels (Kafka's numbers).
const (
	ReadUncommitted IsolationLevel = 0 // up to the high watermark
	ReadCommitted   IsolationLevel = 1 // up to the last stable offset
)

// Fetch session epochs (KIP-227): InitialSessionEpoch with SessionID 0 asks the leader to open a
// session; FinalSessionEpoch is a full fetch outside any session (with a SessionID, it closes
// that session).
const (
	InitialSessionEpoch int32 = 0
	FinalSessionEpoch   int32 = -1
)

// ConsumerReplicaID is the ReplicaID of a request from a client rather than
// from a follower broker.
const ConsumerReplicaID int32 = -1

// FetchRequest asks for records from some partitions.
type FetchRequest struct {
	// Version is the version to send (0 to 2); the response must be decoded in the same one.
	// Not encoded in the body: it goes in the request header. A FetchShared request's is
	// FetchShared's version.
	Version        int16
	ReplicaID      int32 // ConsumerReplicaID, or the follower's broker id
	MaxWaitMs      int32
	MinBytes       int32
	MaxBytes       int32
	IsolationLevel IsolationLevel
	Topics         []FetchRequestTopic
	// Fetch sessions (v2, KIP-227; issue #23 stream C encodes them): SessionID 0 with
	// SessionEpoch 0 asks for a new session (the response's SessionID names it), -1 for none
	// (a full fetch, as v0 and v1); a session's later fetches send SessionEpoch 1, 2, ... and
	// list only the partitions whose fetch position changed, plus Forgotten ones to drop.
	// ("-1 for none" is SessionEpoch FinalSessionEpoch, Kafka's: with SessionID 0, a fetch
	// outside any session; with a session's id, a full fetch that closes it.) Encoded in v2
	// only; a v0/v1 decode sets SessionID 0, SessionEpoch FinalSessionEpoch, Forgotten empty.
	SessionID    int32
	SessionEpoch int32
	Forgotten    []FetchForgottenTopic
}

// FetchForgottenTopic names partitions a fetch session no longer fetches (v2).
type FetchForgottenTopic struct {
	Topic      string
	Partitions []int32
}

// FetchRequestTopic is one topic's partitions to fetch.
type FetchRequestTopic struct {
	Topic      string
	Partitions []FetchRequestPartition
}

// FetchRequestPartition is where to read one partition from.
type FetchRequestPartition struct {
	Partition          int32
	CurrentLeaderEpoch int32 // the fetcher's view of the leader epoch, -1 = unknown (not checked)
	FetchOffset        int64
	LogStartOffset     int64 // followers: their log start offset; consumers: -1
	PartitionMaxBytes  int32
	// DurableOffset (v2, Sluice's own) is a follower's fsynced log end: with write.caching=false
	// a replica counts toward the high watermark only up to it. -1 from consumers, and what a
	// v0/v1 request decodes to.
	DurableOffset int64
}

const (
	minFetchRequestTopic = sizeString + sizeArray
	// minFetchRequestPartition is v0's size, the smallest of the versions: a count bounded by
	// it is bounded for v2's larger partitions too.
	minFetchRequestPartition = sizeInt32*2 + sizeInt64*2 + sizeInt32
	minFetchForgottenTopic   = sizeString + sizeArray
)

// Key returns Fetch.
func (*FetchRequest) Key() APIKey { return Fetch }

// APIVersion implements Versioned.
func (f *FetchRequest) APIVersion() int16 { return f.Version }

// AppendTo appends the body's encoding.
func (f *FetchRequest) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, f.ReplicaID)
	dst = appendInt32(dst, f.MaxWaitMs)
	dst = appendInt32(dst, f.MinBytes)
	dst = appendInt32(dst, f.MaxBytes)
	dst = appendInt8(dst, int8(f.IsolationLevel))
	if f.Version >= 2 {
		dst = appendInt32(dst, f.SessionID)
		dst = appendInt32(dst, f.SessionEpoch)
	}
	dst = appendArrayLen(dst, len(f.Topics))
	for i := range f.Topics {
		dst = f.Topics[i].appendVersion(dst, f.Version)
	}
	if f.Version >= 2 {
		dst = appendArray(dst, f.Forgotten)
	}
	return dst
}

// ReadFrom decodes b into f (see Message).
func (f *FetchRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	f.readFrom(&r)
	return r.done()
}

func (f *FetchRequest) readFrom(r *reader) {
	f.ReplicaID = r.int32()
	f.MaxWaitMs = r.int32()
	f.MinBytes = r.int32()
	f.MaxBytes = r.int32()
	f.IsolationLevel = IsolationLevel(r.int8())
	if f.Version >= 2 {
		f.SessionID = r.int32()
		f.SessionEpoch = r.int32()
	} else {
		f.SessionID, f.SessionEpoch = 0, FinalSessionEpoch
	}
	f.Topics = readSlice(r, f.Topics, minFetchRequestTopic)
	for i := range f.Topics {
		f.Topics[i].readVersion(r, f.Version)
	}
	if f.Version >= 2 {
		f.Forgotten = readSlice(r, f.Forgotten, minFetchForgottenTopic)
		for i := range f.Forgotten {
			f.Forgotten[i].readFrom(r)
		}
	} else {
		f.Forgotten = f.Forgotten[:0]
	}
}

func (t *FetchForgottenTopic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendInt32s(dst, t.Partitions)
}

func (t *FetchForgottenTopic) readFrom(r *reader) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = r.int32s(t.Partitions)
}

func (t *FetchRequestTopic) appendTo(dst []byte) []byte { return t.appendVersion(dst, 0) }

func (t *FetchRequestTopic) appendVersion(dst []byte, v int16) []byte {
	dst = appendString(dst, t.Topic)
	dst = appendArrayLen(dst, len(t.Partitions))
	for i := range t.Partitions {
		dst = t.Partitions[i].appendVersion(dst, v)
	}
	return dst
}

func (t *FetchRequestTopic) readVersion(r *reader, v int16) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minFetchRequestPartition)
	for i := range t.Partitions {
		t.Partitions[i].readVersion(r, v)
	}
}

func (p *FetchRequestPartition) appendTo(dst []byte) []byte { return p.appendVersion(dst, 0) }

func (p *FetchRequestPartition) appendVersion(dst []byte, v int16) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt32(dst, p.CurrentLeaderEpoch)
	dst = appendInt64(dst, p.FetchOffset)
	dst = appendInt64(dst, p.LogStartOffset)
	dst = appendInt32(dst, p.PartitionMaxBytes)
	if v >= 2 {
		dst = appendInt64(dst, p.DurableOffset)
	}
	return dst
}

func (p *FetchRequestPartition) readVersion(r *reader, v int16) {
	p.Partition = r.int32()
	p.CurrentLeaderEpoch = r.int32()
	p.FetchOffset = r.int64()
	p.LogStartOffset = r.int64()
	p.PartitionMaxBytes = r.int32()
	if v >= 2 {
		p.DurableOffset = r.int64()
	} else {
		p.DurableOffset = -1
	}
}

// FetchResponse carries records and offsets per partition.
//
// Every partition's records field comes last in that partition's entry, so
// the encoding is a run of metadata "prefixes" separated by record blobs:
//
//	[throttleMs][errorCode][sessionId: v2][topics count]
//	  [topic][partitions count]
//	    [partition][errorCode][highWatermark][lastStableOffset][logStartOffset][records length]
//	    <records bytes: from the segment file>
//	    [partition]...[records length]
//	    <records bytes>
//	  [topic][partitions count]
//	    ...
//
// AppendSegments encodes the prefixes alone, given the records' lengths, so
// a server can write prefix, sendfile, prefix, sendfile, ... with the frame
// size known up front.
type FetchResponse struct {
	// Version is the layout (0 to 2): the version of the request it answers. ReadFrom takes it
	// as given (set it before decoding) and leaves it as it is.
	Version    int16
	ThrottleMs int32
	ErrorCode  ErrorCode // a whole-request error; partition errors are per partition
	// SessionID (v2) is the fetch session the response belongs to (0: none). An incremental
	// response lists only the partitions with news (records, a new high watermark or log
	// start, an error). Encoded in v2 only; a v0/v1 decode sets 0.
	SessionID int32
	Topics    []FetchResponseTopic
	// NodeEndpoints (v1) are the brokers named by the partitions' CurrentLeader hints, each
	// once. Empty in v0. Encoded after the last partition's records.
	NodeEndpoints []MetadataBroker
}

// FetchResponseTopic is one topic's partitions.
type FetchResponseTopic struct {
	Topic      string
	Partitions []FetchResponsePartition
}

// FetchResponsePartition is one partition's offsets and records.
type FetchResponsePartition struct {
	Partition        int32
	ErrorCode        ErrorCode
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// CurrentLeader (v1) is the partition's leader as the answering broker knows it, set with
	// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH; NoLeaderHint
	// otherwise. Not in v0.
	CurrentLeader LeaderHint
	Records       []byte // nil on error; aliases the frame when decoded; may end with a partial batch
}

const (
	minFetchResponseTopic     = sizeString + sizeArray
	minFetchResponsePartition = sizeInt32 + sizeInt16 + sizeInt64*3 + sizeBytes
)

// Key returns Fetch.
func (*FetchResponse) Key() APIKey { return Fetch }

// AppendTo appends the body's encoding with the records inline.
func (f *FetchResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, f.ThrottleMs)
	dst = appendInt16(dst, int16(f.ErrorCode))
	if f.Version >= 2 {
		dst = appendInt32(dst, f.SessionID)
	}
	dst = appendArrayLen(dst, len(f.Topics))
	for i := range f.Topics {
		dst = f.Topics[i].appendVersion(dst, f.Version)
	}
	if f.Version >= 1 {
		dst = appendNodeEndpoints(dst, f.NodeEndpoints)
	}
	return dst
}

// ReadFrom decodes b into f (see Message). Records alias b.
func (f *FetchResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	f.readFrom(&r)
	return r.done()
}

func (f *FetchResponse) readFrom(r *reader) {
	f.ThrottleMs = r.int32()
	f.ErrorCode = ErrorCode(r.int16())
	if f.Version >= 2 {
		f.SessionID = r.int32()
	} else {
		f.SessionID = 0
	}
	f.Topics = readSlice(r, f.Topics, minFetchResponseTopic)
	for i := range f.Topics {
		f.Topics[i].readVersion(r, f.Version)
	}
	f.NodeEndpoints = readNodeEndpoints(r, f.NodeEndpoints, f.Version)
}

// NumPartitions returns the number of partitions in f, across topics: the
// number of record lengths AppendSegments expects.
func (f *FetchResponse) NumPartitions() int {
	n := 0
	for i := range f.Topics {
		n += len(f.Topics[i].Partitions)
	}
	return n
}

// AppendSegments appends f's encoding with every partition's record bytes
// left out, for a server that sends the records from the segment files.
//
// recordLens[i] is the length of the i-th partition's records, counting
// partitions in encoding order (topic by topic), or -1 for null records; the
// partitions' Records fields are ignored. The encoding of each length is
// included; only the record bytes themselves are missing. For partition i,
// cuts[i] (appended to the cuts argument, which may be nil) is the offset in
// buf at which its record bytes belong, so the server sends:
//
//	buf[len(dst):cuts[0]], records 0, buf[cuts[0]:cuts[1]], records 1, ..., buf[cuts[n-1]:]
//
// Null and empty records send nothing between their cuts. The result is
// byte for byte what AppendTo produces with the records filled in. It fails
// with ErrRecordLens, leaving dst as it was, if len(recordLens) is not
// NumPartitions() or a length is below -1.
func (f *FetchResponse) AppendSegments(dst []byte, recordLens []int32, cuts []int) (buf []byte, cutsOut []int, err error) {
	if len(recordLens) != f.NumPartitions() {
		return dst, cuts, ErrRecordLens
	}
	for _, n := range recordLens {
		if n < -1 {
			return dst, cuts, ErrRecordLens
		}
	}
	buf = appendInt32(dst, f.ThrottleMs)
	buf = appendInt16(buf, int16(f.ErrorCode))
	if f.Version >= 2 {
		buf = appendInt32(buf, f.SessionID)
	}
	buf = appendArrayLen(buf, len(f.Topics))
	i := 0
	for ti := range f.Topics {
		t := &f.Topics[ti]
		buf = appendString(buf, t.Topic)
		buf = appendArrayLen(buf, len(t.Partitions))
		for pi := range t.Partitions {
			buf = t.Partitions[pi].appendPrefix(buf, f.Version)
			buf = appendInt32(buf, recordLens[i])
			cuts = append(cuts, len(buf))
			i++
		}
	}
	if f.Version >= 1 {
		buf = appendNodeEndpoints(buf, f.NodeEndpoints)
	}
	return buf, cuts, nil
}

// AppendFetchResponseFrame appends a complete Fetch response frame (size,
// correlation id, body) with the record bytes left out, as AppendSegments
// describes; the size field counts the missing record bytes, so once the
// server has sent the segments and the records in turn the peer has read
// exactly one frame. With dst empty:
//
//	prev := 0
//	for i, cut := range cuts {
//		conn.Write(buf[prev:cut])
//		sendfile(conn, file[i], pos[i], recordLens[i]) // nothing if <= 0
//		prev = cut
//	}
//	conn.Write(buf[prev:])
//
// It fails with ErrRecordLens as AppendSegments does, or ErrFrameTooLarge if
// the frame size would overflow the int32 size field.
func AppendFetchResponseFrame(dst []byte, correlationID int32, f *FetchResponse, recordLens []int32, cuts []int) (buf []byte, cutsOut []int, err error) {
	return appendFetchFrame(dst, correlationID, f, recordLens, cuts, nil, false)
}

// appendFetchFrame is AppendFetchResponseFrame, followed by spans (a FetchShared response) if
// withSpans is set.
func appendFetchFrame(dst []byte, correlationID int32, f *FetchResponse, recordLens []int32, cuts []int, spans []FileSpan, withSpans bool) (buf []byte, cutsOut []int, err error) {
	var total int64
	for _, n := range recordLens {
		if n > 0 {
			total += int64(n)
		}
	}
	buf, start := BeginFrame(dst)
	buf = appendInt32(buf, correlationID)
	buf, cutsOut, err = f.AppendSegments(buf, recordLens, cuts)
	if err == nil {
		if withSpans {
			buf = appendArray(buf, spans)
		}
		err = FinishFrame(buf, start, total)
	}
	if err != nil {
		return dst, cuts, err
	}
	return buf, cutsOut, nil
}

func (t *FetchResponseTopic) appendTo(dst []byte) []byte { return t.appendVersion(dst, 0) }

func (t *FetchResponseTopic) appendVersion(dst []byte, v int16) []byte {
	dst = appendString(dst, t.Topic)
	dst = appendArrayLen(dst, len(t.Partitions))
	for i := range t.Partitions {
		dst = t.Partitions[i].appendVersion(dst, v)
	}
	return dst
}

func (t *FetchResponseTopic) readVersion(r *reader, v int16) {
	t.Topic = r.stringReuse(t.Topic)
	t.Partitions = readSlice(r, t.Partitions, minFetchResponsePartition)
	for i := range t.Partitions {
		t.Partitions[i].readVersion(r, v)
	}
}

// appendPrefix appends every field of p before its records, in the layout of version v.
func (p *FetchResponsePartition) appendPrefix(dst []byte, v int16) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt16(dst, int16(p.ErrorCode))
	dst = appendInt64(dst, p.HighWatermark)
	dst = appendInt64(dst, p.LastStableOffset)
	dst = appendInt64(dst, p.LogStartOffset)
	if v >= 1 {
		dst = p.CurrentLeader.appendTo(dst)
	}
	return dst
}

func (p *FetchResponsePartition) appendTo(dst []byte) []byte { return p.appendVersion(dst, 0) }

func (p *FetchResponsePartition) appendVersion(dst []byte, v int16) []byte {
	dst = p.appendPrefix(dst, v)
	return appendBytes(dst, p.Records)
}

func (p *FetchResponsePartition) readVersion(r *reader, v int16) {
	p.Partition = r.int32()
	p.ErrorCode = ErrorCode(r.int16())
	p.HighWatermark = r.int64()
	p.LastStableOffset = r.int64()
	p.LogStartOffset = r.int64()
	if v >= 1 {
		p.CurrentLeader.readFrom(r)
	} else {
		p.CurrentLeader = NoLeaderHint
	}
	p.Records = r.bytes()
}
