package wire

// DescribeReplicas (key 9003) describes the replication state of partitions a broker leads:
// the offsets, the ISR and each replica's progress as the leader sees it. Sluice's own api
// (Kafka shows the same in metrics and in kafka-replica-verification); `sluice topic describe
// --verbose` sends it to each partition's leader.
//
// Behavior: the request names topics (none: every partition the broker leads). Only a leader
// answers for a partition: a named topic's partitions that the broker does not lead are
// answered NOT_LEADER_OR_FOLLOWER (their other fields -1 and empty), and a topic it does not
// know UNKNOWN_TOPIC_OR_PARTITION. For a partition it leads the broker answers its leader epoch,
// partition epoch, high watermark, log start, log end and durable (fsynced) end offsets, the
// committed ISR, the ISR of a proposal the controller has not answered yet (null if none), and
// one entry per replica, the leader's own first: its log end and durable end offsets as the
// leader last learnt them (-1 before the replica has fetched at this epoch), its lag in offsets
// (the leader's log end minus the replica's, -1 if unknown), the milliseconds since it was last
// caught up (-1: never at this epoch) and whether it is in the committed ISR. Topics and
// partitions come sorted.

// DescribeReplicas is Sluice's api key for DescribeReplicas.
const DescribeReplicas APIKey = 9003

// DescribeReplicasRequest names the topics to describe; empty: every partition the broker leads.
type DescribeReplicasRequest struct {
	Version int16 // 0, or 1: each replica's lag in bytes too
	Topics  []string
}

// Key returns DescribeReplicas.
func (*DescribeReplicasRequest) Key() APIKey { return DescribeReplicas }

// APIVersion implements Versioned.
func (d *DescribeReplicasRequest) APIVersion() int16 { return d.Version }

// AppendTo appends the body's encoding.
func (d *DescribeReplicasRequest) AppendTo(dst []byte) []byte { return appendStrings(dst, d.Topics) }

// ReadFrom decodes b into d (see Message).
func (d *DescribeReplicasRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.Topics = r.strings(d.Topics)
	return r.done()
}

// DescribeReplicasResponse answers per topic and partition.
type DescribeReplicasResponse struct {
	Version    int16 // the layout: the version of the request it answers
	ThrottleMs int32
	Topics     []DescribeReplicasTopic
}

// DescribeReplicasTopic is one topic's partitions.
type DescribeReplicasTopic struct {
	Topic      string
	ErrorCode  ErrorCode // UNKNOWN_TOPIC_OR_PARTITION for a topic the broker does not know
	Partitions []DescribeReplicasPartition
}

// DescribeReplicasPartition is one partition's replication state at its leader.
type DescribeReplicasPartition struct {
	Partition      int32
	ErrorCode      ErrorCode // NOT_LEADER_OR_FOLLOWER where the broker does not lead it
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	DurableOffset  int64   // the leader's fsynced end
	ISR            []int32 // committed
	PendingISR     []int32 // an outstanding proposal's ISR; nil if none (a nullable array)
	Replicas       []DescribeReplicasReplica
}

// DescribeReplicasReplica is one replica's progress as the leader sees it.
type DescribeReplicasReplica struct {
	ReplicaID       int32
	LogEndOffset    int64 // -1 until it has fetched at this epoch
	DurableOffset   int64
	Lag             int64 // the leader's log end minus the replica's, in offsets; -1 if unknown
	SinceCaughtUpMs int64 // since it was last caught up; -1: never at this epoch
	InISR           bool
	// LagBytes (v1) is how many bytes of the leader's log lie past the replica's log end: what
	// it has left to fetch (0 for the leader itself; -1 if unknown).
	LagBytes int64
}

const (
	minDescribeReplicasTopic     = sizeString + sizeInt16 + sizeArray
	minDescribeReplicasPartition = sizeInt32 + sizeInt16 + sizeInt32*3 + sizeInt64*4 + sizeArray*3
	minDescribeReplicasReplica   = sizeInt32 + sizeInt64*4 + sizeInt8
)

// Key returns DescribeReplicas.
func (*DescribeReplicasResponse) Key() APIKey { return DescribeReplicas }

// AppendTo appends the body's encoding, in the layout of d.Version.
func (d *DescribeReplicasResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, d.ThrottleMs)
	dst = appendArrayLen(dst, len(d.Topics))
	for i := range d.Topics {
		dst = d.Topics[i].appendTo(dst, d.Version)
	}
	return dst
}

// ReadFrom decodes b into d (see Message), in the layout of d.Version.
func (d *DescribeReplicasResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.ThrottleMs = r.int32()
	d.Topics = readSlice(&r, d.Topics, minDescribeReplicasTopic)
	for i := range d.Topics {
		d.Topics[i].readFrom(&r, d.Version)
	}
	return r.done()
}

func (t *DescribeReplicasTopic) appendTo(dst []byte, v int16) []byte {
	dst = appendString(dst, t.Topic)
	dst = appendInt16(dst, int16(t.ErrorCode))
	dst = appendArrayLen(dst, len(t.Partitions))
	for i := range t.Partitions {
		dst = t.Partitions[i].appendTo(dst, v)
	}
	return dst
}

func (t *DescribeReplicasTopic) readFrom(r *reader, v int16) {
	t.Topic = r.stringReuse(t.Topic)
	t.ErrorCode = ErrorCode(r.int16())
	t.Partitions = readSlice(r, t.Partitions, minDescribeReplicasPartition)
	for i := range t.Partitions {
		t.Partitions[i].readFrom(r, v)
	}
}

func (p *DescribeReplicasPartition) appendTo(dst []byte, v int16) []byte {
	dst = appendInt32(dst, p.Partition)
	dst = appendInt16(dst, int16(p.ErrorCode))
	dst = appendInt32(dst, p.Leader)
	dst = appendInt32(dst, p.LeaderEpoch)
	dst = appendInt32(dst, p.PartitionEpoch)
	dst = appendInt64(dst, p.HighWatermark)
	dst = appendInt64(dst, p.LogStartOffset)
	dst = appendInt64(dst, p.LogEndOffset)
	dst = appendInt64(dst, p.DurableOffset)
	dst = appendInt32s(dst, p.ISR)
	dst = appendNullableArrayLen(dst, p.PendingISR == nil, len(p.PendingISR))
	for _, id := range p.PendingISR {
		dst = appendInt32(dst, id)
	}
	dst = appendArrayLen(dst, len(p.Replicas))
	for i := range p.Replicas {
		dst = p.Replicas[i].appendTo(dst, v)
	}
	return dst
}

func (p *DescribeReplicasPartition) readFrom(r *reader, v int16) {
	p.Partition = r.int32()
	p.ErrorCode = ErrorCode(r.int16())
	p.Leader = r.int32()
	p.LeaderEpoch = r.int32()
	p.PartitionEpoch = r.int32()
	p.HighWatermark = r.int64()
	p.LogStartOffset = r.int64()
	p.LogEndOffset = r.int64()
	p.DurableOffset = r.int64()
	p.ISR = r.int32s(p.ISR)
	p.PendingISR = resizeNullable(p.PendingISR, r.count(sizeInt32, true))
	for i := range p.PendingISR {
		p.PendingISR[i] = r.int32()
	}
	p.Replicas = readSlice(r, p.Replicas, minDescribeReplicasReplica)
	for i := range p.Replicas {
		p.Replicas[i].readFrom(r, v)
	}
}

func (rp *DescribeReplicasReplica) appendTo(dst []byte, v int16) []byte {
	dst = appendInt32(dst, rp.ReplicaID)
	dst = appendInt64(dst, rp.LogEndOffset)
	dst = appendInt64(dst, rp.DurableOffset)
	dst = appendInt64(dst, rp.Lag)
	dst = appendInt64(dst, rp.SinceCaughtUpMs)
	dst = appendBool(dst, rp.InISR)
	if v >= 1 {
		dst = appendInt64(dst, rp.LagBytes)
	}
	return dst
}

func (rp *DescribeReplicasReplica) readFrom(r *reader, v int16) {
	rp.ReplicaID = r.int32()
	rp.LogEndOffset = r.int64()
	rp.DurableOffset = r.int64()
	rp.Lag = r.int64()
	rp.SinceCaughtUpMs = r.int64()
	rp.InISR = r.bool()
	rp.LagBytes = -1
	if v >= 1 {
		rp.LagBytes = r.int64()
	}
}
