package client

import (
	"strconv"
	"time"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "topic-partition", as Kafka prints it.
func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

// Header is one record header. A nil Value is a null value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record: what Producer.Send takes (Topic, Partition, Key, Value, Headers,
// Timestamp) and what Consumer.Poll returns.
//
// Key, Value and header values alias the fetch response (uncompressed batches) or the batch's
// own decompression buffer (compressed batches). By default neither is ever reused by the
// consumer, so a record stays valid for as long as the application keeps it; keeping one
// record keeps its response (or decompressed batch) in memory. With
// ConsumerConfig.ReuseRecordBuffers the consumer reuses them: a record is valid only until the
// next Poll or Close.
type Record struct {
	Topic string
	// Partition, for Send, is the partition to write to when PartitionSet is true (OnPartition
	// sets both). Otherwise the producer chooses (by key, else sticky), as for Kafka's null
	// partition; so does PartitionAny (-1). A Record from Poll has both set.
	Partition int32
	// PartitionSet says that Partition is chosen: the zero Record goes where the partitioner
	// sends it, not to partition 0.
	PartitionSet bool
	Offset       int64
	// Timestamp is the producer's create time, or the broker's append time for a topic with
	// log.message.timestamp.type=LogAppendTime; millisecond precision.
	Timestamp time.Time
	Key       []byte // nil: null key
	Value     []byte // nil: null value
	Headers   []Header
	// LeaderEpoch is the partition leader epoch stamped on the record's batch.
	LeaderEpoch int32
}

// OnPartition returns r pinned to partition p (Partition and PartitionSet).
func (r Record) OnPartition(p int32) Record {
	r.Partition, r.PartitionSet = p, true
	return r
}
