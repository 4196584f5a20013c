package bench

import (
	"context"
	"time"
)

// Driver is one system under test: Sluice through its Go client, or a peer (a Kafka-API broker
// through franz-go, NATS JetStream through nats.go) so that the same workload runs against what
// users have today. Implementations live in this package (Sluice) and in bench/peers (peers, kept
// out of the broker's import graph).
type Driver interface {
	// Name is how reports label the driver ("sluice-tcp", "sluice-unix", "kfake", "jetstream").
	Name() string
	// CreateTopic makes a topic (a JetStream stream for NATS) with the given partitions.
	CreateTopic(ctx context.Context, topic string, partitions int) error
	// NewProducer returns a producer configured by opts.
	NewProducer(ctx context.Context, opts ProducerOptions) (Producer, error)
	// NewConsumer returns a consumer of every partition of topic from the beginning.
	NewConsumer(ctx context.Context, opts ConsumerOptions) (Consumer, error)
	// Close releases the driver (and stops a peer it started in-process).
	Close() error
}

// TopicDeleter is implemented by drivers that can delete a topic (a stream for NATS). The
// harness deletes what its probes wrote (Config.RateOfMax) with it, so that a long-lived
// broker does not keep gigabytes of probe records, and the measured run does not share the
// page cache with them.
type TopicDeleter interface {
	DeleteTopic(ctx context.Context, topic string) error
}

// ProducerOptions are the knobs the harness sets on every driver, with Kafka's meanings.
type ProducerOptions struct {
	Topic       string
	Acks        int    // -1 all, 1 leader, 0 none
	Compression string // none, gzip, snappy, lz4, zstd
	BatchSize   int    // batch.size in bytes
	LingerMs    int    // linger.ms
	// NoSharedMemory keeps a Sluice producer's requests on the unix socket instead of a
	// shared-memory region (client.Config.SharedMemoryBytes); other drivers ignore it.
	NoSharedMemory bool
	// Idempotence is a Sluice producer's client.ProducerConfig.EnableIdempotence (nil: the
	// client's default, on with acks all); other drivers ignore it.
	Idempotence *bool
	// Ack is called exactly once per record sent, on any goroutine, when the record is
	// acknowledged as Acks asks (err nil) or has failed.
	Ack AckFunc
}

// AckFunc reports the outcome of one record: sent is the time given to Send for it, n the
// length of its value.
//
// One function per producer rather than a closure per record: at millions of records a
// second, a closure per record is an allocation the harness would add to the system it
// measures. Drivers carry sent through the client's own per-record state instead (the Sluice
// client returns the record's timestamp exactly in its RecordMetadata; kgo hands the record
// back to its promise).
type AckFunc func(sent time.Time, n int, err error)

// Producer sends records asynchronously and reports each one to its ProducerOptions.Ack.
type Producer interface {
	// Send sends one record. sent is the time its latency is measured from; drivers also use
	// it as the record's timestamp, so that the client does not read the clock a second time.
	Send(ctx context.Context, key, value []byte, sent time.Time)
	// Flush waits until every record sent so far is acknowledged.
	Flush(ctx context.Context) error
	Close() error
}

// RequestCounter is a Producer that can say how many produce requests it has written so far
// and how many record batches they carried (Kafka's producer metrics request-total and
// records-per-request-avg tell the same story): how the records travelled, which explains
// much of a run's speed.
type RequestCounter interface {
	SentRequests() (requests, batches int64)
}

// BrokerCPUReader is a Driver whose broker runs in a process of its own on this machine
// (Sluice's --broker-process): a run's CPU time then counts that process's too, so that it
// stays comparable with a run against an in-process broker, and reports it apart, with the
// process's peak RSS.
type BrokerCPUReader interface {
	BrokerCPU() (time.Duration, bool)
	BrokerRSSPeakMB() float64 // 0 if unknown
}

// brokerCPUOf returns d's BrokerCPU, or nil.
func brokerCPUOf(d Driver) func() (time.Duration, bool) {
	if r, ok := driverAs[BrokerCPUReader](d); ok {
		return r.BrokerCPU
	}
	return nil
}

// brokerRSSPeakMB returns the peak RSS of d's broker process, or 0.
func brokerRSSPeakMB(d Driver) float64 {
	if r, ok := driverAs[BrokerCPUReader](d); ok {
		return r.BrokerRSSPeakMB()
	}
	return 0
}

// driverAs returns d as a T (one of the optional interfaces above), looking through the
// drivers that wrap others (WithClose: an embedded system's driver): a wrapper's own method
// set hides the optional methods of the driver it wraps.
func driverAs[T any](d Driver) (T, bool) {
	for d != nil {
		if t, ok := d.(T); ok {
			return t, true
		}
		w, ok := d.(interface{ Unwrap() Driver })
		if !ok {
			break
		}
		d = w.Unwrap()
	}
	var zero T
	return zero, false
}

// SharedRequestCounter is a Producer that can say how many of its produce requests went through
// shared memory rather than the socket (Sluice's producer over a unix socket).
type SharedRequestCounter interface {
	SharedRequests() int64
}

// ConsumerOptions configure a consumer.
type ConsumerOptions struct {
	Topic string
	Group string // empty: no group, no commits
	// FetchBytes is how many bytes one fetch may bring per partition (Kafka's
	// max.partition.fetch.bytes); 0 keeps the driver's default (Kafka's 1 MiB for Sluice and
	// the Kafka driver). A driver without an equivalent refuses a non-zero one.
	FetchBytes int
	// NoFileReads makes a Sluice consumer over a unix socket fetch every record through the
	// socket instead of reading the broker's segment files (client.ConsumerConfig.FileReads);
	// other drivers ignore it.
	NoFileReads bool
}

// FileReadCounter is a Consumer that can say how many bytes it read from the broker's files
// rather than through the socket (Sluice's consumer over a unix socket).
type FileReadCounter interface {
	FileReadBytes() int64
}

// fileReadBytes sums the consumers' FileReadCounter figures.
func fileReadBytes(consumers []Consumer) int64 {
	var n int64
	for _, cs := range consumers {
		if fc, ok := cs.(FileReadCounter); ok {
			n += fc.FileReadBytes()
		}
	}
	return n
}

// Consumer reads records; Poll returns a batch of them (their values may be reused after the
// next Poll). It returns ctx.Err() when ctx ends. A consumer in a group (ConsumerOptions.Group)
// commits on Close what its Polls returned, less what Rewind gave back: a group's next run
// starts right after the records this one counted.
type Consumer interface {
	Poll(ctx context.Context) ([]Message, error)
	Close() error
}

// Rewinder is a Consumer that can give back the end of its last Poll. A run of Records stops
// counting in the middle of a Poll (a Poll brings whole fetches); the harness then calls
// Rewind(n) with the number of that Poll's records it counted (0 to all but one) and polls
// no more. The consumer's commit on Close is then, for each partition, one past the last
// record counted (nothing for a partition none of whose records was counted), and not the
// records given back, which a group's next run reads first. A group consumer that cannot
// (the JetStream driver acknowledges each Poll as it returns) is refused for a run of
// Records: the harness would otherwise silently skip the rest of that Poll in the next run.
//
// Rewind is called at most once, after the consumer's last Poll, so that a consumer keeps
// only its last Poll's records (no per-record bookkeeping on the hot path) and works out the
// commit when told.
type Rewinder interface {
	Rewind(n int)
}

// Message is one consumed record: the harness needs its size and, for end-to-end latency, the
// send time the producer wrote into the value.
type Message struct {
	Value     []byte
	Timestamp int64 // ms, as the broker stored it
}
