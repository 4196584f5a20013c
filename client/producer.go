package client

// # Producer
//
// A Producer sends records to partition leaders, batching them as Kafka's producer does; its
// configuration uses Kafka's names, meanings and defaults (ProducerConfig).
//
//	Send ─> Partitioner ─> accumulator: one open batch.Builder per partition
//	          (explicit,      closed at batch.size, or sent after linger.ms;
//	           murmur2(key),  buffer.memory bounds the bytes held: Send blocks up to max.block.ms)
//	           sticky)              │
//	                                ▼
//	        one sender goroutine per broker: the ready batches of the partitions it leads go
//	        into one Produce request (up to max.request.size); up to max.in.flight requests
//	        outstanding on the broker connection ─> one receiver goroutine per broker matches
//	        responses, runs callbacks, or requeues retriable failures after a backoff
//	        (retry.backoff.ms, doubled per failed attempt up to retry.backoff.max.ms)
//
// A request carries every batch of a partition that is ready to go, in order, not only the
// oldest (Kafka's producer sends one batch per partition per request): while the in-flight
// window is full, batches of batch.size pile up, and sending them together costs the broker
// one read, one append (one write) and one response instead of one per batch. With Kafka's
// 16 KiB batch.size this triples the throughput of a producer that outruns its window (see
// BENCHMARKS.md, Produce, 1 KiB records). The broker appends a partition's batches in one write and answers with the
// first one's offset; the next ones follow it.
//
// Records are copied into their partition's batch by Send, so the caller may reuse a Record
// and its byte slices as soon as Send returns. A batch is compressed once, when it is drained
// for sending; a retry resends the same bytes.
//
// Delivery: a retriable failure (a wire error code whose Retriable() is true, a connection
// failure, no response within request.timeout.ms) sends the batch again after a backoff that
// grows with the batch's failed attempts as Kafka's since KIP-580: retry.backoff.ms doubled
// per attempt after the first, at most retry.backoff.max.ms, ±20 % jitter (so that a broker
// that keeps refusing, with a full disk say, gets a retry a second, not ten). Metadata is
// refreshed first when the error says the leader moved (NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE) or the connection failed; refreshes that
// keep failing or finding nothing new back off the same way. A batch's backoff holds only
// while the metadata names no newer leader for its partition than the one it failed on (a
// newer leader epoch; another broker where epochs are unknown): once a refresh finds the
// leader moved, the batch goes to the new one at once (KIP-951), so a failover costs at most
// one refresh wait (retry.backoff.max.ms + 20 % once they have backed off), not that plus the
// batch's own. Retrying stops when the batch
// succeeds, fails with a non-retriable error, has been retried `retries` times, or when
// delivery.timeout.ms has passed since the batch was opened: its callbacks then get an error
// wrapping ErrDeliveryTimeout and the last error. Batches waiting to go expire on time even
// while every in-flight slot is held by a request the broker does not answer (the sender
// looks for them while it waits for a slot), and so do batches in flight, as in Kafka (the
// receiver, which holds every request in flight, times their deadlines): their callbacks run
// and Flush stops waiting for them, but their request keeps them, with their memory (and
// their shared-memory buffer, which the broker may still read), until it is answered (the
// answer is then ignored for them) or reaches request.timeout.ms.
//
// Ordering: records of one partition are appended to batches in Send order and batches are
// sent in order. The idempotent producer (the default; idempotence.go) keeps that order across
// retries and never has a batch appended twice. Without idempotence, with MaxInFlight > 1 a
// batch that failed and was retried can land after a later batch that was already in flight:
// the log then holds the later records first (and a batch whose response was lost but which
// was appended can be appended twice). This is Kafka's guarantee without enable.idempotence.
// With MaxInFlight = 1 a partition never has more than one request in flight (its batches in it
// are appended all or none, in order) and retries go back to the head of its queue in order,
// so order is preserved (duplicates remain possible).
//
// Callbacks run on the producer's goroutines (a receiver or sender, or the caller of Send for
// an error Send detects itself), for one partition in the order its batches complete: Send
// order unless a retry or an expiry intervenes. They must be quick and must not call Flush,
// Close or SendSync, which wait for callbacks.
//
// Goroutines: the housekeeper (metadata refreshes; partitions without a leader) and, if
// idempotent, the producer-id goroutine (pidLoop), started by NewProducer; and per broker
// that leads a partition the producer writes to, a sender and a receiver, started on first
// use. Close stops and waits for all of them.
//
// Lock order: accPartition.mu, then brokerSender.mu, bufferMemory.mu, batchPool.mu,
// Producer.pidMu or Producer.sendersMu (leaves). Producer.topicsMu and flushMu are leaves too.
// No lock is held across network I/O or a callback.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/producerstate"
)

// Errors of the producer. Failures of a record reach its callback wrapped with context.
var (
	// ErrProducerClosed: Send after Close, or a record still undelivered when Close gave up.
	ErrProducerClosed = errors.New("client: producer closed")
	// ErrProducerConfig: NewProducer was given an invalid ProducerConfig.
	ErrProducerConfig = errors.New("client: invalid producer config")
	// ErrBufferFull: buffer.memory stayed full for max.block.ms; it wraps
	// context.DeadlineExceeded (or the Send context's error).
	ErrBufferFull = errors.New("client: producer buffer full")
	// ErrDeliveryTimeout: the record was not acknowledged within delivery.timeout.ms; it wraps
	// context.DeadlineExceeded and the last error of the record's batch.
	ErrDeliveryTimeout = errors.New("client: delivery timeout")
	// ErrRecordTooLarge: the record is larger than max.request.size or buffer.memory.
	ErrRecordTooLarge = errors.New("client: record too large")
	// ErrInvalidPartition: Record.Partition is set (PartitionSet) and neither PartitionAny nor a partition of the
	// topic; Consumer.Assign wraps it for a negative partition.
	ErrInvalidPartition = errors.New("client: invalid partition")
	// ErrInvalidTimestamp: Record.Timestamp is before 1970 (Kafka's timestamps are milliseconds
	// since then, and a negative one means "none").
	ErrInvalidTimestamp = errors.New("client: invalid timestamp")
	// ErrNilRecord: Send or SendSync was given a nil *Record.
	ErrNilRecord = errors.New("client: nil record")
)

// Acks is Kafka's acks: how many replicas must have a batch before the broker answers. Its
// values are AcksAll (-1), AcksLeader (1) and AcksNone (0); the zero Acks is "not set", which
// a Producer takes as Kafka's default, all. No value reads as a bare number, so acks=0 cannot
// be written by mistake for the default (as Acks(0) could, when it meant all).
type Acks struct {
	n   int16 // Kafka's number
	set bool
}

// Acks values.
var (
	AcksAll    = Acks{n: wire.AcksAll, set: true}    // acks=all (-1): the in-sync replicas have it (and, with write.caching=false, it is fsynced)
	AcksLeader = Acks{n: wire.AcksLeader, set: true} // acks=1: the leader has appended it
	AcksNone   = Acks{n: wire.AcksNone, set: true}   // acks=0: no response; offsets are unknown (-1) and failures after the write go unseen
)

// ParseAcks parses Kafka's spellings: "all" or "-1", "1", "0".
func ParseAcks(s string) (Acks, error) {
	switch s {
	case "all", "-1":
		return AcksAll, nil
	case "1":
		return AcksLeader, nil
	case "0":
		return AcksNone, nil
	}
	return Acks{}, fmt.Errorf("%w: acks %q: want all, -1, 1 or 0", ErrProducerConfig, s)
}

// IsSet reports whether a is a value (not the zero Acks, which means the default, all).
func (a Acks) IsSet() bool { return a.set }

// String returns Kafka's spelling: "all", "1" or "0" ("all" for the unset Acks).
func (a Acks) String() string {
	switch a.wire() {
	case wire.AcksLeader:
		return "1"
	case wire.AcksNone:
		return "0"
	}
	return "all"
}

// wire is the Produce request's acks: Kafka's number, -1 (all) when not set.
func (a Acks) wire() int16 {
	if !a.set {
		return wire.AcksAll
	}
	return a.n
}

// ProducerConfig configures a Producer. Field comments give the Kafka property and its
// default. A zero field takes the default; where zero is a meaningful Kafka value (Linger,
// Retries, RetryBackoff, RetryBackoffMax) a negative value selects it, and elsewhere a negative
// value is an error (ErrProducerConfig).
type ProducerConfig struct {
	Config

	// Acks is acks (all).
	Acks Acks
	// Linger is linger.ms (5 ms): how long a batch waits for more records after its first.
	// Negative: 0, send as soon as the sender is free.
	Linger time.Duration
	// BatchSize is batch.size (16384): a batch is closed when the next record would take its
	// uncompressed size past this. A larger record gets a batch of its own.
	BatchSize int
	// BufferMemory is buffer.memory (32 MiB): bytes of batches held by the producer, from
	// Send until acknowledged or failed. An open batch holds BatchSize (or its one large
	// record) until it is closed, then its actual uncompressed size.
	BufferMemory int64
	// MaxBlock is max.block.ms (60 s): how long Send may block waiting for a topic's metadata
	// and buffer memory, in total.
	MaxBlock time.Duration
	// Compression is compression.type (none); CompressionLevel is compression.<codec>.level
	// (0: the codec's default).
	Compression      batch.Codec
	CompressionLevel int
	// Retries is retries (MaxInt32): how many times a batch is resent after a retriable error;
	// delivery.timeout.ms usually ends retrying first. Negative: no retries.
	Retries int
	// RetryBackoff is retry.backoff.ms (100 ms): the wait before resending a failed batch the
	// first time, and between metadata refreshes. Negative: no wait.
	RetryBackoff time.Duration
	// RetryBackoffMax is retry.backoff.max.ms (1 s): a batch that keeps failing waits
	// RetryBackoff doubled per failed attempt, up to this, with ±20 % jitter (KIP-580); so do
	// metadata refreshes that keep failing or finding nothing new (a partition still without
	// a leader), and the lookups of a topic Send waits for. A value below RetryBackoff counts
	// as RetryBackoff, as in ConsumerConfig (Kafka would back off by it, fixed); negative
	// selects 0, so that every retry waits RetryBackoff, as before KIP-580.
	RetryBackoffMax time.Duration
	// DeliveryTimeout is delivery.timeout.ms (120 s, or Linger + RequestTimeout if that is
	// longer): the bound on the time from Send to the callback, counted from the opening of
	// the record's batch, whether the batch is waiting to be sent or in flight (as in Kafka: a
	// batch whose request is not answered in time fails then, and the late answer is
	// ignored; the request keeps the batch's memory until it ends). Set, it must exceed
	// Linger.
	DeliveryTimeout time.Duration
	// MaxInFlight is max.in.flight.requests.per.connection (5): outstanding Produce requests
	// per broker. 1 keeps each partition's records in order across retries; so does
	// idempotence, which allows at most 5.
	MaxInFlight int
	// EnableIdempotence is enable.idempotence (nil: on, unless Acks is not all, MaxInFlight
	// is above 5 or Retries is negative, which turn it off, as in Kafka 3.x): the producer
	// takes a producer id (InitProducerId) and numbers each partition's batches, so that the
	// broker appends a retried batch only once and in order (see PRODUCER.md). Set to true,
	// any of those settings is an error (ErrProducerConfig); set to false, batches carry no
	// producer id, as before idempotence.
	EnableIdempotence *bool
	// MaxRequestSize is max.request.size (1 MiB): the largest record (with batch overhead) and
	// the bound on a request's batches (a request always carries at least one batch).
	MaxRequestSize int
	// Partitioner chooses partitions for records sent with PartitionAny (DefaultPartitioner).
	Partitioner Partitioner
}

func (c ProducerConfig) withDefaults() (ProducerConfig, error) {
	c.Config = c.Config.withDefaults()
	if !c.Acks.set {
		c.Acks = AcksAll // Kafka's default
	}
	// Where a negative value means nothing, it is refused, as Kafka refuses it, rather than
	// taken for the default: a computed size that went negative is a bug to hear of.
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"batch.size", int64(c.BatchSize)}, {"buffer.memory", c.BufferMemory}, {"max.block.ms", int64(c.MaxBlock)},
		{"delivery.timeout.ms", int64(c.DeliveryTimeout)}, {"max.in.flight.requests.per.connection", int64(c.MaxInFlight)},
		{"max.request.size", int64(c.MaxRequestSize)},
	} {
		if f.v < 0 {
			return c, fmt.Errorf("%w: %s is negative (zero takes the default)", ErrProducerConfig, f.name)
		}
	}
	switch {
	case c.Linger == 0:
		c.Linger = 5 * time.Millisecond
	case c.Linger < 0:
		c.Linger = 0
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 16384
	}
	if c.BufferMemory <= 0 {
		c.BufferMemory = 32 << 20
	}
	if c.MaxBlock <= 0 {
		c.MaxBlock = 60 * time.Second
	}
	switch {
	case c.Retries == 0:
		c.Retries = math.MaxInt32
	case c.Retries < 0:
		c.Retries = 0
	}
	switch {
	case c.RetryBackoff == 0:
		c.RetryBackoff = 100 * time.Millisecond
	case c.RetryBackoff < 0:
		c.RetryBackoff = 0
	}
	switch {
	case c.RetryBackoffMax == 0:
		c.RetryBackoffMax = time.Second
	case c.RetryBackoffMax < 0:
		c.RetryBackoffMax = 0
	}
	c.RetryBackoffMax = max(c.RetryBackoffMax, c.RetryBackoff) // as ConsumerConfig
	if c.DeliveryTimeout <= 0 {
		// As Kafka, the default leaves room for the linger and one request.
		c.DeliveryTimeout = max(120*time.Second, c.Linger+c.RequestTimeout)
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 5
	}
	if c.MaxRequestSize <= 0 {
		c.MaxRequestSize = 1 << 20
	}
	if err := c.resolveIdempotence(); err != nil {
		return c, err
	}
	if c.Partitioner == nil {
		c.Partitioner = DefaultPartitioner{}
	}
	if _, err := batch.ParseCodec(c.Compression.String()); err != nil {
		return c, fmt.Errorf("%w: compression.type: %w", ErrProducerConfig, err)
	}
	if c.SharedMemoryBytes == 0 {
		// A buffer, with its guard, for every batch buffer.memory can hold.
		c.SharedMemoryBytes = int(min(c.BufferMemory/int64(c.BatchSize)*int64(slotStride(slotSize(c))), defaultSharedMemoryLimit))
	}
	if int64(c.BatchSize) > c.BufferMemory {
		return c, fmt.Errorf("%w: batch.size %d exceeds buffer.memory %d", ErrProducerConfig, c.BatchSize, c.BufferMemory)
	}
	if c.Linger >= c.DeliveryTimeout {
		// A batch would wait out its whole delivery time before it could go: every record
		// would fail unsent. (Kafka also wants room for request.timeout.ms on top of an
		// explicit delivery.timeout.ms.)
		return c, fmt.Errorf("%w: linger.ms %v must be less than delivery.timeout.ms %v", ErrProducerConfig, c.Linger, c.DeliveryTimeout)
	}
	return c, nil
}

// maxIdempotentInFlight is the most requests an idempotent producer keeps in flight per broker
// (Kafka's rule for max.in.flight.requests.per.connection).
const maxIdempotentInFlight = 5

// idempotentWindow is the most requests carrying batches of a partition an idempotent producer
// has out (counted from the one that carried its first unacknowledged batch; accBatch.ordinal):
// the broker remembers a producer's last producerstate.Window runs of batches per partition,
// each append of a request one run at most, and a retry older than those could not be
// recognized. A request carries every batch of the partition that is ready (the backlog behind
// a slow round trip), as without idempotence.
const idempotentWindow = producerstate.Window

// resolveIdempotence settles EnableIdempotence (to a non-nil value) once the other fields have
// their defaults, and refuses an explicit true that acks, max.in.flight or retries contradict.
func (c *ProducerConfig) resolveIdempotence() error {
	var conflict string
	switch {
	case c.Acks.wire() != wire.AcksAll:
		conflict = "acks must be all, not " + c.Acks.String()
	case c.MaxInFlight > maxIdempotentInFlight:
		conflict = fmt.Sprintf("max.in.flight.requests.per.connection must be at most %d, not %d", maxIdempotentInFlight, c.MaxInFlight)
	case c.Retries == 0:
		conflict = "retries must be above 0"
	}
	if c.EnableIdempotence == nil {
		on := conflict == "" // Kafka 3.x: a default that these settings contradict gives way
		c.EnableIdempotence = &on
		return nil
	}
	on := *c.EnableIdempotence
	c.EnableIdempotence = &on // a copy: the caller's variable may change
	if on && conflict != "" {
		return fmt.Errorf("%w: enable.idempotence=true: %s", ErrProducerConfig, conflict)
	}
	return nil
}

// idempotent reports whether the (defaulted) config makes an idempotent producer.
func (c *ProducerConfig) idempotent() bool { return c.EnableIdempotence != nil && *c.EnableIdempotence }

// retryDelay is the wait before the next try after failures failed ones in a row (at least
// one): RetryBackoff doubled per failure after the first, at most RetryBackoffMax, with a
// jitter in [0, 1) for ±20 % (retryBackoff, as the consumer).
func (c *ProducerConfig) retryDelay(failures int, jitter float64) time.Duration {
	return retryBackoff(c.RetryBackoff, c.RetryBackoffMax, failures, jitter)
}

// RecordMetadata is what the broker said about a record.
type RecordMetadata struct {
	Topic     string
	Partition int32
	// Offset is the record's offset, or -1 when unknown (acks=0, or the send failed).
	Offset int64
	// Timestamp is the record's create time exactly as Send took it (Record.Timestamp, or the
	// time Send stamped on a record without one; the log keeps it to the millisecond), or the
	// broker's append time, in milliseconds, for a topic with
	// message.timestamp.type=LogAppendTime.
	Timestamp time.Time
	// KeySize and ValueSize are the lengths of the record's key and value, -1 for a null one
	// (Kafka's serializedKeySize and serializedValueSize).
	KeySize, ValueSize int
}

// Producer sends records to a cluster. It is safe for concurrent use; see the Producer section
// at the top of producer.go (and PRODUCER.md) for batching, delivery and ordering.
type Producer struct {
	cfg         ProducerConfig
	acks        int16
	client      *Client
	region      *SharedRegion // batch buffers shared with brokers on this host, or nil
	builderOpts batch.BuilderOptions
	mem         bufferMemory
	// lastRetryWarn (Unix ns) rate-limits the warning a failed batch that will be retried logs
	// (retryOrFail): without it a producer whose broker went away said nothing until its
	// records timed out, two minutes later; with one per batch it would flood the log.
	lastRetryWarn atomic.Int64

	// topics maps a topic name to its accumulator state; copy on write under topicsMu, so the
	// Send path reads it with one atomic load. Invariant: topics and their partition slices only
	// grow.
	topicsMu sync.Mutex
	topics   atomic.Pointer[map[string]*accTopic]

	// senders maps a broker id to its sender; copy on write under sendersMu. limbo holds the
	// partitions without a known leader; the housekeeper serves it.
	sendersMu sync.Mutex
	senders   atomic.Pointer[map[int32]*brokerSender]
	limbo     *brokerSender

	// Idempotence (idempotence.go): idem is the resolved EnableIdempotence; pid the current
	// producer id and epoch, nil until InitProducerId answers (and while a new id is asked
	// for); pidErr the last failure to get one, nil once one came. pidMu serializes bumps;
	// pidWake asks the producer-id goroutine for an id.
	idem       bool
	pid        atomic.Pointer[producerID]
	pidErr     atomic.Pointer[error]
	pidMu      sync.Mutex
	pidWake    chan struct{}
	epochBumps atomic.Int64

	batches  batchPool
	requests sync.Pool // *produceRequest
	clock    recordClock

	// Counters for Stats, raised by the senders as they write requests.
	sentRequests, sentBatches, sentBytes, sentShared atomic.Int64
	splits                                           atomic.Int64 // batches split after MESSAGE_TOO_LARGE

	// Flush waiters sleep on flushCh, which completions close (and replace) while
	// flushWaiters > 0.
	flushWaiters atomic.Int32
	flushMu      sync.Mutex
	flushCh      chan struct{}

	metaWake chan struct{} // asks the housekeeper for a metadata refresh

	closed  atomic.Bool
	closing chan struct{}   // closed first by Close: blocked Sends give up
	stop    chan struct{}   // closed by Close after flushing: goroutines exit
	ctx     context.Context // cancelled when Close gives up on flushing
	cancel  context.CancelFunc
	done    chan struct{} // closed when Close has finished
	// closeErr is what the first Close returned; written before done is closed.
	closeErr error
	wg       sync.WaitGroup
}

// NewProducer connects to the cluster (loading its metadata) and starts the producer.
func NewProducer(ctx context.Context, cfg ProducerConfig) (*Producer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	region := newProducerRegion(cfg)
	cfg.Config.region = region
	cl, err := NewClient(ctx, cfg.Config)
	if err != nil {
		if region != nil {
			region.Close()
		}
		return nil, err
	}
	p := &Producer{
		cfg:      cfg,
		region:   region,
		acks:     cfg.Acks.wire(),
		client:   cl,
		flushCh:  make(chan struct{}),
		metaWake: make(chan struct{}, 1),
		closing:  make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		idem:     cfg.idempotent(),
		pidWake:  make(chan struct{}, 1),
	}
	p.builderOpts = batch.DefaultBuilderOptions()
	p.builderOpts.Compression = cfg.Compression
	p.builderOpts.CompressionLevel = cfg.CompressionLevel
	p.mem.init(cfg.BufferMemory)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.topics.Store(&map[string]*accTopic{})
	p.senders.Store(&map[int32]*brokerSender{})
	p.batches.max = int(cfg.BufferMemory / int64(cfg.BatchSize))
	p.requests.New = func() any { return new(produceRequest) }
	p.limbo = newBrokerSender(p, -1)
	p.wg.Add(1)
	go p.housekeep()
	if p.idem {
		p.pidWake <- struct{}{} // the first id, before the first batch goes
		p.wg.Add(1)
		go p.pidLoop()
	}
	return p, nil
}

// newProducerRegion creates the shared-memory region of a producer whose bootstrap address is
// a unix socket, carved into batch.size buffers, or returns nil (not a unix socket, turned off,
// too small for one batch, a batch.size below a batch header's, or no memfds here: then
// batches are built and sent as usual). With a codec, the slots take the compressed batches.
func newProducerRegion(cfg ProducerConfig) *SharedRegion {
	if cfg.SharedMemoryBytes < slotStride(slotSize(cfg)) || cfg.BatchSize < batch.HeaderSize || len(cfg.Brokers) == 0 {
		return nil // a batch.size below a header's size gives every record a batch of its own
	}
	if network, _, err := ParseAddress(cfg.Brokers[0]); err != nil || network != "unix" {
		return nil
	}
	r, err := NewSharedRegion(cfg.SharedMemoryBytes)
	if err != nil {
		cfg.Logger.Info("sluice producer: batches go through the socket", "err", err)
		return nil
	}
	r.carve(slotSize(cfg))
	return r
}

// slotSize is the size of the region's batch buffers: batch.size, or with a codec room for the
// codecs' worst case (they reserve their output bound before compressing: snappy's is the
// largest, n + n/6 + 32), so that a compressed batch is written in its slot.
func slotSize(cfg ProducerConfig) int {
	if cfg.Compression == batch.None {
		return cfg.BatchSize
	}
	return cfg.BatchSize + cfg.BatchSize/4 + 4<<10
}

// ProducerStats are a Producer's counters since NewProducer, summed over brokers (Requests is
// Kafka's producer metric request-total). Batches / Requests is how many batches a request
// carried.
type ProducerStats struct {
	Requests int64 // Produce requests written to a connection (a resent batch's request counts again)
	Batches  int64 // record batches in those requests
	Bytes    int64 // bytes of those batches, as sent (compressed)
	// SharedRequests counts the Requests that pointed to their batches (some or all) in the
	// producer's shared-memory region (Config.SharedMemoryBytes) instead of carrying them.
	SharedRequests int64
	// Splits counts batches of several records split in two after the broker refused them as
	// too large (MESSAGE_TOO_LARGE: the topic's max.message.bytes is below batch.size).
	Splits int64
	// EpochBumps counts the idempotent producer's epoch bumps (a partition started its
	// sequences over: KIP-360), including those that asked for a new producer id.
	EpochBumps int64
}

// Stats returns the producer's counters.
func (p *Producer) Stats() ProducerStats {
	return ProducerStats{Requests: p.sentRequests.Load(), Batches: p.sentBatches.Load(), Bytes: p.sentBytes.Load(), SharedRequests: p.sentShared.Load(),
		Splits: p.splits.Load(), EpochBumps: p.epochBumps.Load()}
}

// Send hands r to the producer and returns once it is in a batch; cb (which may be nil) is
// called once with the outcome. Send reads r's Topic, Partition (if PartitionSet; else, or
// PartitionAny, the Partitioner chooses), Key, Value, Headers and Timestamp (zero: now), copies them, and keeps no
// reference to r or its slices. It blocks only while the topic's metadata is unknown or
// buffer.memory is full, up to max.block.ms or until ctx ends; errors found here (closed
// producer, unknown topic, invalid partition, record too large, buffer full, nil record) are
// passed to cb before Send returns.
func (p *Producer) Send(ctx context.Context, r *Record, cb func(RecordMetadata, error)) {
	if r == nil {
		// A programming error, but one the application should see as the error of that
		// record, as every other bad record's, not as a panic on the producer's path.
		if cb != nil {
			cb(RecordMetadata{Partition: PartitionAny, Offset: -1, KeySize: -1, ValueSize: -1}, ErrNilRecord)
		}
		return
	}
	if err := p.send(ctx, r, cb); err != nil && cb != nil {
		cb(RecordMetadata{Topic: r.Topic, Partition: r.Partition, Offset: -1, Timestamp: r.Timestamp,
			KeySize: nullableLen(r.Key), ValueSize: nullableLen(r.Value)}, err)
	}
}

type sendResult struct {
	md  RecordMetadata
	err error
}

// SendSync sends r and waits for its outcome. If ctx ends first it returns ctx's error, and
// the record may still be delivered.
func (p *Producer) SendSync(ctx context.Context, r *Record) (RecordMetadata, error) {
	ch := make(chan sendResult, 1)
	p.Send(ctx, r, func(md RecordMetadata, err error) { ch <- sendResult{md, err} })
	// A Send that failed has run the callback before returning, often because ctx ended: its
	// error (unknown topic, buffer full) says more than ctx's, and a select would pick either.
	select {
	case res := <-ch:
		return res.md, res.err
	default:
	}
	select {
	case res := <-ch:
		return res.md, res.err
	case <-ctx.Done():
		return RecordMetadata{Topic: r.Topic, Partition: r.Partition, Offset: -1}, ctx.Err()
	}
}

// blockBudget measures max.block.ms across the slow paths of one Send.
type blockBudget struct{ deadline time.Time }

func (b *blockBudget) until(p *Producer) time.Time {
	if b.deadline.IsZero() {
		b.deadline = time.Now().Add(p.cfg.MaxBlock)
	}
	return b.deadline
}

func (p *Producer) send(ctx context.Context, r *Record, cb func(RecordMetadata, error)) error {
	if p.closed.Load() {
		return ErrProducerClosed
	}
	var budget blockBudget
	t := (*p.topics.Load())[r.Topic]
	if t == nil {
		var err error
		if t, err = p.addTopic(ctx, r.Topic, &budget); err != nil {
			return err
		}
	}
	parts := *t.parts.Load()
	n := min(int32(len(parts)), t.live.Load())
	size := recordBound(r)
	if size+batch.HeaderSize > p.cfg.MaxRequestSize || int64(size+batch.HeaderSize) > p.cfg.BufferMemory {
		return fmt.Errorf("%w: %d bytes encoded, max.request.size %d, buffer.memory %d",
			ErrRecordTooLarge, size, p.cfg.MaxRequestSize, p.cfg.BufferMemory)
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = p.clock.now()
	} else if ts.UnixMilli() < 0 {
		// As Kafka's producer: stored, it would read back as "no timestamp" or a
		// negative one that SeekToTimestamp and the time index cannot find.
		return fmt.Errorf("%w: %v is before 1970", ErrInvalidTimestamp, ts)
	}

	part, sticky := PartitionAny, false
	if r.PartitionSet {
		part = r.Partition
	}
	if part == PartitionAny {
		part = p.cfg.Partitioner.Partition(r.Topic, r.Key, n)
		if part == PartitionAny {
			part, sticky = t.sticky.cur.Load(), true
			if part >= n && n > 0 { // the topic has fewer partitions than when it stuck
				part = rand.Int32N(n)
				t.sticky.cur.Store(part)
			}
		}
	}
	if part < 0 || part >= n {
		return fmt.Errorf("%w: %s has %d partitions, record has %d", ErrInvalidPartition, r.Topic, n, part)
	}
	ap := parts[part]
	if ok, err := ap.tryAppend(r, ts, cb, size, nil); ok || err != nil {
		return err
	}
	if sticky {
		// KIP-480: a keyless record that would open a new batch on the sticky partition moves
		// the topic to another partition first.
		part = t.sticky.next(part, n, func(c int32) bool { return p.hasLeader(t.name, c) })
		ap = parts[part]
		if ok, err := ap.tryAppend(r, ts, cb, size, nil); ok || err != nil {
			return err
		}
	}
	need := int64(max(p.cfg.BatchSize, batch.HeaderSize+size))
	if err := p.mem.reserve(ctx, need, budget.until(p), p.cfg.MaxBlock, p.closing); err != nil {
		return err
	}
	_, err := ap.tryAppend(r, ts, cb, size, p.newBatch(ap, need))
	return err
}

// recordBound is an upper bound of r's encoded size in a batch (each varint at its widest).
func recordBound(r *Record) int {
	const varint, varlong = 5, 10
	n := varint + 1 + varlong + varint + varint + len(r.Key) + varint + len(r.Value) + varint
	for i := range r.Headers {
		n += varint + len(r.Headers[i].Key) + varint + len(r.Headers[i].Value)
	}
	return n
}

// addTopic waits (up to max.block.ms) for the topic to appear in the metadata and adds its
// accumulator state.
func (p *Producer) addTopic(ctx context.Context, name string, budget *blockBudget) (*accTopic, error) {
	if err := wire.CheckTopicName(name); err != nil {
		// No such topic can ever appear: fail now, not after max.block.ms.
		return nil, fmt.Errorf("client: topic %.300q: %w: %w", name, wire.ErrInvalidTopicException, err)
	}
	deadline := budget.until(p)
	var last error
	for tries := 1; ; tries++ {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		tm, err := p.client.Topic(wctx, name)
		cancel()
		if err == nil && len(tm.Partitions) > 0 {
			return p.addTopicState(name, len(tm.Partitions))
		}
		if err == nil {
			err = fmt.Errorf("%w: %s has no partitions", ErrUnknownTopic, name)
		}
		if last == nil || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			// A lookup cut off by max.block.ms says nothing about the topic: the error
			// reported stays the last one that did (unknown topic, a broker refusing).
			last = err
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, fmt.Errorf("%w: topic %s not in metadata after max.block.ms %v: %w: %w",
				ErrUnknownTopic, name, p.cfg.MaxBlock, context.DeadlineExceeded, last)
		}
		// Each lookup of a topic the metadata lacks is a Metadata request: they back off as
		// retries do (a Send to a topic that is never created makes a few dozen over
		// max.block.ms, not one per retry.backoff.ms).
		timer := time.NewTimer(min(wait, max(p.cfg.retryDelay(tries, rand.Float64()), time.Millisecond)))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("client: waiting for metadata of %s: %w (last error: %w)", name, ctx.Err(), last)
		case <-p.closing:
			timer.Stop()
			return nil, ErrProducerClosed
		}
	}
}

func (p *Producer) addTopicState(name string, numPartitions int) (*accTopic, error) {
	p.topicsMu.Lock()
	defer p.topicsMu.Unlock()
	if p.closed.Load() {
		return nil, ErrProducerClosed
	}
	old := *p.topics.Load()
	if t := old[name]; t != nil {
		return t, nil
	}
	t := &accTopic{name: name}
	t.grow(p, numPartitions)
	t.live.Store(int32(numPartitions))
	t.sticky.init(int32(numPartitions))
	m := make(map[string]*accTopic, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = t
	p.topics.Store(&m)
	return t, nil
}

// syncTopics grows each topic's partitions to what the metadata says, and has Send use the
// count the metadata says (live), which is smaller after a topic was created again.
func (p *Producer) syncTopics() {
	md := p.client.meta.Load()
	p.topicsMu.Lock()
	defer p.topicsMu.Unlock()
	for name, t := range *p.topics.Load() {
		tm, ok := md.topics[name]
		if !ok || len(tm.Partitions) == 0 {
			continue // gone for now: keep what Send knew
		}
		if len(tm.Partitions) > len(*t.parts.Load()) {
			t.grow(p, len(tm.Partitions))
		}
		t.live.Store(int32(len(tm.Partitions)))
	}
}

// allPartitions returns every partition the producer has state for.
func (p *Producer) allPartitions() []*accPartition {
	var out []*accPartition
	for _, t := range *p.topics.Load() {
		out = append(out, *t.parts.Load()...)
	}
	return out
}

// hasLeader reports whether the metadata knows a leader for the partition.
func (p *Producer) hasLeader(topic string, partition int32) bool {
	tm, ok := p.client.meta.Load().topics[topic]
	return ok && int(partition) < len(tm.Partitions) && tm.Partitions[partition].Leader >= 0
}

// Flush sends every batch now, ignoring linger.ms, and waits until every record whose Send
// returned before Flush was called has completed (its callback has returned), or ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	p.flushWaiters.Add(1)
	defer p.flushWaiters.Add(-1)
	type target struct {
		ap  *accPartition
		seq uint64
	}
	var targets []target
	for _, ap := range p.allPartitions() {
		ap.mu.Lock()
		if seq := ap.mu.nextSeq - 1; !ap.doneThroughLocked(seq) {
			ap.mu.flushTo = max(ap.mu.flushTo, seq)
			targets = append(targets, target{ap, seq})
		}
		ap.mu.Unlock()
		if s := ap.owner.Load(); s != nil {
			s.signal()
		}
	}
	for {
		p.flushMu.Lock()
		ch := p.flushCh
		p.flushMu.Unlock()
		for len(targets) > 0 {
			t := targets[len(targets)-1]
			t.ap.mu.Lock()
			done := t.ap.doneThroughLocked(t.seq)
			t.ap.mu.Unlock()
			if !done {
				break
			}
			targets = targets[:len(targets)-1]
		}
		if len(targets) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("client: flush: %w", ctx.Err())
		}
	}
}

// batchCompleted wakes Flush waiters.
func (p *Producer) batchCompleted() {
	if p.flushWaiters.Load() == 0 {
		return
	}
	p.flushMu.Lock()
	close(p.flushCh)
	p.flushCh = make(chan struct{})
	p.flushMu.Unlock()
}

// Close stops accepting records, flushes (within ctx), stops every goroutine of the producer
// and waits for them, and closes its connections. If ctx ends before everything is delivered,
// the records left get ErrProducerClosed and Close returns the flush error. Every callback has
// run when Close returns. Close is idempotent; later calls wait for the first to finish and
// return its result.
func (p *Producer) Close(ctx context.Context) error {
	if !p.closed.CompareAndSwap(false, true) {
		<-p.done
		return p.closeErr // the first call's result, as Consumer.Close
	}
	close(p.closing)
	// Flush locks every partition once: an append in progress finishes before it, and every
	// append after it sees closed.
	err := p.Flush(ctx)
	if err != nil {
		p.cancel()
		_ = p.client.Close() // fails the requests in flight
	}
	p.sendersMu.Lock() // senderFor starts no goroutine once stop is closed
	close(p.stop)
	p.sendersMu.Unlock()
	// A flush that succeeded can leave requests in flight whose batches all expired there
	// (delivery.timeout.ms, expireInFlight): nobody wants their answers, and a broker that
	// does not answer would hold their receivers until request.timeout.ms. Closing the
	// connections ends them (the sender sends nothing more: every batch has completed).
	_ = p.client.Close()
	p.wg.Wait()
	p.cancel()
	p.sweep(err)
	_ = p.client.Close()
	if p.region != nil {
		_ = p.region.Close()
	}
	if err != nil {
		p.closeErr = fmt.Errorf("client: producer close: %w", err)
	}
	close(p.done) // publishes closeErr
	return p.closeErr
}

// sweep fails every batch still held once the goroutines have stopped.
func (p *Producer) sweep(cause error) {
	err := ErrProducerClosed
	if cause != nil {
		err = fmt.Errorf("%w before delivery: %w", ErrProducerClosed, cause)
	}
	var left []*accBatch
	for _, ap := range p.allPartitions() {
		ap.mu.Lock()
		left = append(left, ap.mu.ready...)
		clear(ap.mu.ready)
		ap.mu.ready = ap.mu.ready[:0]
		if ap.mu.open != nil {
			left = append(left, ap.mu.open)
			ap.mu.open = nil
		}
		ap.mu.Unlock()
	}
	for _, b := range left {
		p.complete(b, -1, -1, err, false)
	}
}

// stopping reports whether Close has finished flushing (or given up): failures are final.
func (p *Producer) stopping() bool {
	select {
	case <-p.stop:
		return true
	default:
		return p.ctx.Err() != nil
	}
}
