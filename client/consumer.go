package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client/internal/assign"
	"github.com/sluicemq/sluice/net/wire"
)

// Values of ConsumerConfig.AutoOffsetReset (auto.offset.reset).
const (
	OffsetResetLatest   = "latest"
	OffsetResetEarliest = "earliest"
	OffsetResetNone     = "none"
)

// ConsumerConfig configures a Consumer. Field comments name the Kafka property and its default,
// which a zero value takes; a negative value is an error (ErrConsumerConfig).
type ConsumerConfig struct {
	Config

	// GroupID is group.id: the consumer group whose committed offsets the consumer starts from
	// and commits to. Empty: no group, no commits, start from AutoOffsetReset.
	GroupID string

	// Group membership (Subscribe; see group.go and CONSUMER.md). Assign ignores these.

	// GroupInstanceID is group.instance.id (unset): a static member (KIP-345). One that
	// restarts within SessionTimeout gets its partitions back with no rebalance, and Close does
	// not leave the group (the coordinator waits SessionTimeout for it).
	GroupInstanceID string
	// SessionTimeout is session.timeout.ms (45 s): a member the coordinator does not hear from
	// for this long is removed and its partitions move.
	SessionTimeout time.Duration
	// HeartbeatInterval is heartbeat.interval.ms (3 s): how often a member tells the
	// coordinator it is alive, and learns of a rebalance.
	HeartbeatInterval time.Duration
	// MaxPollInterval is max.poll.interval.ms (5 min), also the rebalance timeout: a member
	// that does not call Poll for this long leaves the group (its partitions move), and the
	// next Poll rejoins.
	MaxPollInterval time.Duration
	// Assignors is partition.assignment.strategy (["range", "cooperative-sticky"], as Kafka
	// 3.x): "range", "roundrobin", "cooperative-sticky". They are offered in order and the
	// coordinator picks one every member supports.
	Assignors []string
	// RebalanceListener (nil: none) is told of the partitions a rebalance takes away or gives;
	// it runs inside Poll, on the caller's goroutine, so it may call CommitSync.
	RebalanceListener RebalanceListener

	// FetchMinBytes is fetch.min.bytes (1): the broker answers a fetch once this many bytes are
	// available, or after FetchMaxWait.
	FetchMinBytes int
	// FetchMaxWait is fetch.max.wait.ms (500 ms): how long the broker holds a fetch waiting for
	// FetchMinBytes (long polling).
	FetchMaxWait time.Duration
	// MaxPartitionFetchBytes is max.partition.fetch.bytes (1 MiB) per partition per fetch; the
	// first batch of a fetch is returned whole even if larger, so progress is always possible.
	MaxPartitionFetchBytes int
	// FetchMaxBytes is fetch.max.bytes (50 MiB): the bound on one fetch response.
	FetchMaxBytes int
	// MaxPollRecords is max.poll.records (500): the most records one Poll returns.
	MaxPollRecords int

	// AutoOffsetReset is auto.offset.reset ("latest"): where to start a partition that has no
	// committed offset, or whose position is out of the log's range: "earliest", "latest", or
	// "none" (Poll returns an error naming the partition).
	AutoOffsetReset string
	// EnableAutoCommit is enable.auto.commit: nil means true when GroupID is set (Kafka's
	// default); new(false) turns it off. Setting it to true without a GroupID is an error.
	// Auto-commit commits in the background what Poll has returned, processed or not: see
	// CONSUMER.md for what a crash then costs.
	EnableAutoCommit *bool
	// AutoCommitInterval is auto.commit.interval.ms (5 s).
	AutoCommitInterval time.Duration
	// DefaultAPITimeout is default.api.timeout.ms (60 s): the bound on Position, CommitSync,
	// CommitOffsets and PartitionsFor when their context has no deadline, so that a call made
	// with context.Background() against a broker that is gone, or for a partition that does
	// not exist, ends (with an error matching context.DeadlineExceeded) instead of waiting for
	// ever. Poll is bounded by its context alone, as franz-go's PollFetches.
	DefaultAPITimeout time.Duration
	// RetryBackoff is retry.backoff.ms (100 ms): the wait before retrying a failed fetch, offset
	// lookup or commit.
	RetryBackoff time.Duration
	// RetryBackoffMax is retry.backoff.max.ms (1 s): fetches and offset or leader lookups that
	// keep failing (a broker that is down) wait RetryBackoff doubled per failure up to this,
	// with ±20 % jitter (KIP-580), and only the first failure of a run is logged as a warning.
	RetryBackoffMax time.Duration

	// MaxDecompressed caps the decompressed size of one batch's records (batch.IterOptions);
	// 0 is batch.DefaultMaxDecompressed (64 MiB).
	MaxDecompressed int

	// ReuseRecordBuffers (Sluice only, default false) trades the records' lifetime for speed:
	// the records a Poll returns, that is the []Record slice and every record's Key, Value,
	// Headers slice and header values, are valid only until the next call to Poll (from any
	// goroutine) or Close. Then their memory is reused for later records: copy what must
	// outlive the next Poll. Header keys are strings and stay valid. In exchange the consumer
	// reads fetch responses into a few reused buffers and decompresses into reused buffers,
	// instead of allocating (and the garbage collector reclaiming) a buffer per response and
	// per compressed batch. The next fetch is still in flight while the application
	// processes the current records. See CONSUMER.md.
	//
	// With the default, records stay valid for as long as the application keeps them.
	ReuseRecordBuffers bool

	// FileReads (Sluice only; nil means true) lets a consumer whose broker it reaches over a
	// unix socket, so on the broker's host, read records from the broker's segment files
	// instead of through the socket: it asks with FetchShared, which answers a partition with
	// 64 KiB or more to read with where the records lie in a file, and reads them from the file
	// with pread, twice max.partition.fetch.bytes at a time (up to four such pieces ahead of
	// Poll, 8 × max.partition.fetch.bytes, within the partition's share of fetch.max.bytes;
	// pieces of max.partition.fetch.bytes where that share holds fewer than two of the larger
	// ones), checking every batch as for a fetch.
	// It needs permission to read the broker's data directory; a consumer that lacks it, or
	// whose broker does not know FetchShared, fetches through the socket. new(false) always
	// fetches through the socket. Other transports ignore it.
	FileReads *bool

	// assignors are Assignors resolved (groupDefaults).
	assignors []assign.Assignor

	// hooks are file reads' test seams (fileReadHooks), nil but in this package's tests.
	hooks *fileReadHooks
}

// ConsumerStats are a consumer's counters since it was made.
type ConsumerStats struct {
	Fetches int64 // Fetch and FetchShared requests answered
	// FileReads counts the pieces read from the broker's segment files (ConsumerConfig.FileReads)
	// and FileReadBytes their bytes, whole batches or not.
	FileReads     int64
	FileReadBytes int64
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() ConsumerStats {
	return ConsumerStats{Fetches: c.fetches.Load(), FileReads: c.fileReads.Load(), FileReadBytes: c.fileReadBytes.Load()}
}

// fileReads reports whether the consumer may read the broker's files (FileReads).
func (c *ConsumerConfig) fileReads() bool { return c.FileReads == nil || *c.FileReads }

func (c ConsumerConfig) withDefaults() (ConsumerConfig, error) {
	c.Config = c.Config.withDefaults()
	// A negative value means nothing: refused, as Kafka refuses it, rather than taken for the
	// default.
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"fetch.min.bytes", int64(c.FetchMinBytes)}, {"fetch.max.wait.ms", int64(c.FetchMaxWait)},
		{"max.partition.fetch.bytes", int64(c.MaxPartitionFetchBytes)}, {"fetch.max.bytes", int64(c.FetchMaxBytes)},
		{"max.poll.records", int64(c.MaxPollRecords)}, {"auto.commit.interval.ms", int64(c.AutoCommitInterval)},
		{"retry.backoff.ms", int64(c.RetryBackoff)}, {"retry.backoff.max.ms", int64(c.RetryBackoffMax)},
		{"MaxDecompressed", int64(c.MaxDecompressed)}, {"default.api.timeout.ms", int64(c.DefaultAPITimeout)},
	} {
		if f.v < 0 {
			return c, fmt.Errorf("%w: %s is negative (zero takes the default)", ErrConsumerConfig, f.name)
		}
	}
	clamp := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
		*v = min(*v, math.MaxInt32)
	}
	clamp(&c.FetchMinBytes, 1)
	clamp(&c.MaxPartitionFetchBytes, 1<<20)
	clamp(&c.FetchMaxBytes, 50<<20)
	clamp(&c.MaxPollRecords, 500)
	if c.FetchMaxWait <= 0 {
		c.FetchMaxWait = 500 * time.Millisecond
	}
	c.FetchMaxWait = min(c.FetchMaxWait, math.MaxInt32*time.Millisecond)
	if c.AutoCommitInterval <= 0 {
		c.AutoCommitInterval = 5 * time.Second
	}
	if c.DefaultAPITimeout <= 0 {
		c.DefaultAPITimeout = 60 * time.Second
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.RetryBackoffMax <= 0 {
		c.RetryBackoffMax = time.Second
	}
	c.RetryBackoffMax = max(c.RetryBackoffMax, c.RetryBackoff)
	switch c.AutoOffsetReset {
	case "":
		c.AutoOffsetReset = OffsetResetLatest
	case OffsetResetLatest, OffsetResetEarliest, OffsetResetNone:
	default:
		return c, fmt.Errorf("%w: auto.offset.reset %q: want earliest, latest or none", ErrConsumerConfig, c.AutoOffsetReset)
	}
	if err := c.groupDefaults(); err != nil {
		return c, err
	}
	if c.EnableAutoCommit != nil && *c.EnableAutoCommit && c.GroupID == "" {
		return c, fmt.Errorf("%w: enable.auto.commit needs a group.id", ErrConsumerConfig)
	}
	return c, nil
}

func (c *ConsumerConfig) autoCommit() bool {
	return c.GroupID != "" && (c.EnableAutoCommit == nil || *c.EnableAutoCommit)
}

// Errors of the consumer. Partition errors wrap them (or a wire.ErrorCode) with the partition's
// name; test with errors.Is.
var (
	ErrConsumerClosed = errors.New("client: consumer closed")
	ErrConsumerConfig = errors.New("client: invalid consumer config")
	ErrNotAssigned    = errors.New("client: partition not assigned")
	ErrNoAssignment   = errors.New("client: no partitions assigned")
	// ErrNoOffset: auto.offset.reset is "none" and the partition has no committed offset.
	ErrNoOffset = errors.New("client: no committed offset and auto.offset.reset is none")
	ErrNoGroup  = errors.New("client: consumer has no group.id")
)

// Consumer reads records from partitions it assigns itself (Assign, Kafka's assign()) or that
// its group gives it (Subscribe, Kafka's subscribe(): group membership and rebalancing, in
// group.go, rebalance.go and subscribe.go).
//
// Goroutines: one fetcher per partition leader (started on first need), one committer that
// sends every commit in the order it was asked for, with auto-commit one ticker, and with
// Subscribe one heartbeat goroutine (group.go). Each fetcher keeps one Fetch (a long poll) in
// flight for the partitions it leads, and queues the responses undecoded; Poll decodes and
// decompresses them on the caller's goroutine. A partition goes into the next fetch while
// fewer than responsesAhead (2) of its responses wait for Poll, so fetches go on while the
// application processes the current records, and at most three responses per partition are
// held (the one Poll is draining and two more, waiting or in flight). A response that ends in
// an error is not fetched past (until a seek), nor one that ends in a reset until Poll
// applies it.
// Close stops and waits for every goroutine.
//
// Positions: a partition's position is the offset of the next record Poll will return
// (Kafka's position()); Poll advances it, Seek sets it, commits send it. Every position change
// that is not Poll's own progress bumps the partition's epoch, and fetches and buffered
// responses of an older epoch are dropped.
//
// Locks: pollMu serialises Poll; maintMu serialises position maintenance (committed-offset and
// ListOffsets lookups, leader lookups); mu guards the partition table, the response queue and
// the fetchers. Order: pollMu, then maintMu, then mu. mu is never held across I/O.
//
// All methods are safe for concurrent use; Poll calls are serialised.
type Consumer struct {
	cfg      ConsumerConfig
	cl       *Client
	iterOpts batch.IterOptions

	ctx    context.Context // cancelled by Close (after the final commit) or a crash
	cancel context.CancelFunc
	wg     sync.WaitGroup // fetchers and the auto-commit ticker

	// ready is signalled (never blocking) when a response is queued or a partition needs
	// maintenance; Poll waits on it.
	ready chan struct{}

	pollMu     sync.Mutex
	scratch    batch.Record      // reused by the record iterator; guarded by pollMu
	cur        *chunk            // the response Poll is draining; guarded by pollMu
	headerKeys map[string]string // interned header keys; guarded by pollMu
	headers    []Header          // records' headers are carved from it; guarded by pollMu
	bufs       *pollBufs         // ReuseRecordBuffers only; guarded by pollMu
	// spanFetchers is readFiles's scratch; guarded by pollMu.
	spanFetchers []*fetcher

	maintMu sync.Mutex
	// maintFailures counts the maintenance rounds in a row that failed (set by maintain): the
	// retries back off by it.
	maintFailures atomic.Int32

	// Counters for Stats.
	fetches, fileReads, fileReadBytes atomic.Int64

	commits     committer
	autoPending atomic.Bool // an auto-commit is queued or running

	closeOnce sync.Once
	closeErr  error

	mu struct {
		sync.Mutex
		parts map[TopicPartition]*partState
		queue []*chunk // fetched responses, oldest first
		// freeChunks are chunks Poll is done with, for the fetcher's next responses: a
		// chunk per partition per fetch was a quarter of the consumer's garbage.
		freeChunks []*chunk
		fetchers   map[int32]*fetcher
		epochSeq   uint64
		closed     bool
		// manual: Assign was called; group: Subscribe was (group membership). At most one.
		manual bool
		group  *groupMember
	}
}

// partState is one assigned partition. Guarded by Consumer.mu.
type partState struct {
	tp TopicPartition
	// Invariant: position <= fetchOffset when hasPos.
	hasPos      bool
	position    int64 // next offset Poll returns
	leaderEpoch int32 // epoch of the last record Poll returned, -1 unknown
	fetchOffset int64 // next offset to fetch
	epoch       uint64

	needCommitted bool  // look up the group's committed offset first
	needReset     bool  // look up resetTs with ListOffsets
	resetTs       int64 // wire.LatestTimestamp, wire.EarliestTimestamp or a time in ms

	leader int32 // -1: look it up
	// currentLeaderEpoch is leader's epoch as the metadata (or a leader hint) gave it, -1
	// unknown: sent in each fetch (CurrentLeaderEpoch), so that a broker whose leadership is
	// older or newer says so (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH) instead of serving.
	currentLeaderEpoch int32
	inflight           bool // in a fetcher's outstanding request, or being read from a file (spanRead)
	spanRead           bool // the in-flight mark is a file read's (readSpan), not a request's
	buffered           int  // responses queued that Poll has not started on (at most responsesAhead)
	// stopAhead: a queued response ends in an error or a reset; fetch no further. A reset
	// clears it when Poll applies it (the position moves), an error only with a seek: Poll
	// stops there, and a fetch from the same offset could only bring the error again.
	stopAhead bool
	// spanAhead: while the partition is read from the broker's files, how many pieces may
	// wait for Poll (0: responsesAhead); Poll wakes the fetcher only once half are drained.
	spanAhead int
	err       error // sticky until the next Seek: Poll returns it

	committed int64 // last offset committed by this consumer or read from the group, -1 none
}

// NewConsumer connects to the cluster. It assigns nothing; call Assign or Subscribe.
func NewConsumer(ctx context.Context, cfg ConsumerConfig) (*Consumer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cl, err := NewClient(ctx, cfg.Config)
	if err != nil {
		return nil, err
	}
	return newConsumer(cfg, cl), nil
}

// newConsumer makes a consumer of cl with cfg (defaults applied) and starts its background
// goroutines (committer, auto-commit).
func newConsumer(cfg ConsumerConfig, cl *Client) *Consumer {
	c := &Consumer{
		cfg:        cfg,
		cl:         cl,
		iterOpts:   batch.IterOptions{MaxDecompressed: cfg.MaxDecompressed},
		ready:      make(chan struct{}, 1),
		headerKeys: map[string]string{},
	}
	if cfg.ReuseRecordBuffers {
		c.bufs = &pollBufs{}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.parts = map[TopicPartition]*partState{}
	c.mu.fetchers = map[int32]*fetcher{}
	c.commits.start(c)
	if cfg.autoCommit() {
		c.wg.Add(1)
		go c.autoCommitLoop()
	}
	return c
}

func (c *Consumer) signal() {
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// nextEpochLocked returns a consumer-wide unique epoch, so that a partition unassigned and
// assigned again never matches its old responses.
func (c *Consumer) nextEpochLocked() uint64 {
	c.mu.epochSeq++
	return c.mu.epochSeq
}

// isClosed reports whether Close has been called.
func (c *Consumer) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.closed
}

// apiContext bounds ctx by DefaultAPITimeout if it has no deadline.
func (c *Consumer) apiContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return apiContext(ctx, c.cfg.DefaultAPITimeout)
}

// PartitionsFor returns every partition of topic (Kafka's partitionsFor), for Assign; a topic
// that does not exist is an error wrapping ErrUnknownTopic. A ctx without a deadline is bounded
// by DefaultAPITimeout.
func (c *Consumer) PartitionsFor(ctx context.Context, topic string) ([]TopicPartition, error) {
	if c.isClosed() {
		return nil, ErrConsumerClosed // not the closed client's "no bootstrap broker reachable"
	}
	ctx, cancel := c.apiContext(ctx)
	defer cancel()
	t, err := c.cl.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([]TopicPartition, len(t.Partitions))
	for i, p := range t.Partitions {
		out[i] = TopicPartition{topic, p.Partition}
	}
	return out, nil
}

// Assign replaces the set of partitions the consumer reads. Partitions that stay assigned keep
// their positions; new ones start from the group's committed offset (with a GroupID) or
// AutoOffsetReset, resolved by the next Poll or Position. With auto-commit, the positions of
// the old assignment are committed (asynchronously) first, as Kafka does. A topic name the
// broker would refuse (wire.CheckTopicName) is an error wrapping wire.ErrInvalidTopicException,
// and a negative partition one wrapping ErrInvalidPartition; a partition the topic does not
// have (yet) is looked up until it appears, as in Kafka.
func (c *Consumer) Assign(tps []TopicPartition) error {
	for _, tp := range tps {
		if err := wire.CheckTopicName(tp.Topic); err != nil {
			// No such topic can ever exist: refuse it rather than look it up forever.
			return fmt.Errorf("client: assign %.300q: %w: %w", tp.Topic, wire.ErrInvalidTopicException, err)
		}
		if tp.Partition < 0 {
			// Nor such a partition (PartitionAny is the producer's, not a partition).
			return fmt.Errorf("client: assign %s: %w: partitions are numbered from 0", tp, ErrInvalidPartition)
		}
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrConsumerClosed
	}
	if c.mu.group != nil {
		c.mu.Unlock()
		return ErrSubscribed
	}
	c.mu.manual = true
	c.mu.Unlock()
	if c.cfg.autoCommit() {
		c.CommitAsync(nil)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replaceAssignmentLocked(tps)
	return nil
}

// replaceAssignmentLocked makes tps the assigned partitions: those already assigned keep their
// positions, new ones look up the group's committed offset (with a GroupID) or reset.
func (c *Consumer) replaceAssignmentLocked(tps []TopicPartition) {
	keep := make(map[TopicPartition]bool, len(tps))
	for _, tp := range tps {
		keep[tp] = true
		if c.mu.parts[tp] != nil {
			continue
		}
		ps := &partState{tp: tp, leader: -1, leaderEpoch: -1, currentLeaderEpoch: -1, committed: -1, epoch: c.nextEpochLocked()}
		if c.cfg.GroupID != "" {
			ps.needCommitted = true
		} else {
			c.setResetLocked(ps, c.cfg.AutoOffsetReset)
		}
		c.mu.parts[tp] = ps
	}
	for tp, ps := range c.mu.parts {
		if !keep[tp] {
			delete(c.mu.parts, tp)
			c.dropQueuedLocked(ps)
			// Its span's file is closed now: its fetcher may have nothing else to wake it up,
			// and the file would stay open (a segment deleted since kept on disk) until Close.
			for _, f := range c.mu.fetchers {
				f.dropSpan(tp)
			}
		}
	}
	c.signal()
}

// Assignment returns the assigned partitions, sorted.
func (c *Consumer) Assignment() []TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TopicPartition, 0, len(c.mu.parts))
	for tp := range c.mu.parts {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}

func sortTPs(tps []TopicPartition) {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition) - int(b.Partition)
	})
}

// setResetLocked makes ps wait for a position from policy; for "none" it fails the partition.
func (c *Consumer) setResetLocked(ps *partState, policy string) {
	switch policy {
	case OffsetResetEarliest:
		c.resetToLocked(ps, wire.EarliestTimestamp)
	case OffsetResetLatest:
		c.resetToLocked(ps, wire.LatestTimestamp)
	default:
		c.invalidateLocked(ps)
		ps.err = fmt.Errorf("client: %s: %w", ps.tp, ErrNoOffset)
	}
}

// invalidateLocked forgets ps's position and everything fetched for it.
func (c *Consumer) invalidateLocked(ps *partState) {
	c.dropQueuedLocked(ps)
	ps.hasPos, ps.needCommitted, ps.needReset, ps.err = false, false, false, nil
	ps.buffered, ps.stopAhead = 0, false
	ps.epoch = c.nextEpochLocked()
	c.cancelFetchLocked(ps)
}

// dropQueuedLocked takes ps's responses out of the queue, stale once its position moved or it
// was unassigned. Left there, they would wait for a Poll to drop them, and seeks without one
// in between would pile them up (with their buffers). The queue holds only responses of their
// partition's current epoch (handle drops older ones), so ps.buffered counts ps's.
func (c *Consumer) dropQueuedLocked(ps *partState) {
	if ps.buffered == 0 {
		return
	}
	kept := c.mu.queue[:0]
	for _, ch := range c.mu.queue {
		if ch.tp != ps.tp {
			kept = append(kept, ch)
			continue
		}
		c.discardQueuedLocked(ch)
	}
	clear(c.mu.queue[len(kept):])
	c.mu.queue = kept
}

// discardQueuedLocked gives back a response taken out of the queue unused.
func (c *Consumer) discardQueuedLocked(ch *chunk) {
	if ch.buf != nil { // no Poll returned its records: reuse at once
		c.unrefLocked(ch.buf)
		ch.buf = nil
	}
	c.freeChunkLocked(ch)
}

func (c *Consumer) resetToLocked(ps *partState, ts int64) {
	c.invalidateLocked(ps)
	ps.needReset, ps.resetTs = true, ts
}

// setPositionLocked moves ps to offset, dropping anything fetched for another position.
func (c *Consumer) setPositionLocked(ps *partState, offset int64) {
	c.invalidateLocked(ps)
	ps.hasPos, ps.position, ps.fetchOffset, ps.leaderEpoch = true, offset, offset, -1
	c.wakeFetcherLocked(ps)
}

// partsLocked resolves tps (nil or empty: every assigned partition).
func (c *Consumer) partsLocked(tps []TopicPartition) ([]*partState, error) {
	if c.mu.closed {
		return nil, ErrConsumerClosed
	}
	if len(tps) == 0 {
		out := make([]*partState, 0, len(c.mu.parts))
		for _, ps := range c.mu.parts {
			out = append(out, ps)
		}
		return out, nil
	}
	out := make([]*partState, 0, len(tps))
	for _, tp := range tps {
		ps := c.mu.parts[tp]
		if ps == nil {
			return nil, fmt.Errorf("%w: %s", ErrNotAssigned, tp)
		}
		out = append(out, ps)
	}
	return out, nil
}

// Seek sets the offset of the next record Poll returns from tp. An offset outside the log is
// handled by AutoOffsetReset when it is fetched.
func (c *Consumer) Seek(tp TopicPartition, offset int64) error {
	if offset < 0 {
		return fmt.Errorf("client: seek %s: negative offset %d", tp, offset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.partsLocked([]TopicPartition{tp})
	if err != nil {
		return err
	}
	c.setPositionLocked(ps[0], offset)
	c.signal()
	return nil
}

// SeekToBeginning moves tps (nil: every assigned partition) to their log start offsets. Like
// Kafka's, it is lazy: the next Poll or Position looks the offsets up.
func (c *Consumer) SeekToBeginning(tps []TopicPartition) error {
	return c.seekTo(tps, wire.EarliestTimestamp)
}

// SeekToEnd moves tps (nil: every assigned partition) to their ends (the high watermark), so
// that Poll returns only records produced from now on. Lazy, as SeekToBeginning.
func (c *Consumer) SeekToEnd(tps []TopicPartition) error {
	return c.seekTo(tps, wire.LatestTimestamp)
}

// SeekToTimestamp moves tps (nil: every assigned partition) to the first record whose
// timestamp is at or after ts (ListOffsets by time), or to the end if there is none. Lazy, as
// SeekToBeginning.
func (c *Consumer) SeekToTimestamp(tps []TopicPartition, ts time.Time) error {
	ms := ts.UnixMilli()
	if ms < 0 {
		return fmt.Errorf("client: seek to timestamp %v: before 1970", ts)
	}
	return c.seekTo(tps, ms)
}

func (c *Consumer) seekTo(tps []TopicPartition, ts int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts, err := c.partsLocked(tps)
	if err != nil {
		return err
	}
	for _, ps := range parts {
		c.resetToLocked(ps, ts)
	}
	c.signal()
	return nil
}

// Position returns the offset of the next record Poll will return from tp, first resolving a
// pending committed-offset lookup or seek (which is why it takes a context; one without a
// deadline is bounded by DefaultAPITimeout).
func (c *Consumer) Position(ctx context.Context, tp TopicPartition) (int64, error) {
	ctx, cancel := c.apiContext(ctx)
	defer cancel()
	for {
		c.mu.Lock()
		ps, err := c.partsLocked([]TopicPartition{tp})
		if err != nil {
			c.mu.Unlock()
			return -1, err
		}
		if ps[0].err != nil {
			err := ps[0].err
			c.mu.Unlock()
			return -1, err
		}
		if ps[0].hasPos {
			pos := ps[0].position
			c.mu.Unlock()
			return pos, nil
		}
		c.mu.Unlock()
		retry, err := c.maintain(ctx)
		if err != nil {
			return -1, err
		}
		if retry {
			if err := c.backoff(ctx); err != nil {
				return -1, err
			}
		}
	}
}

// retryDelay is the wait before retrying after failures failures in a row (at least one):
// RetryBackoff doubled per failure after the first, at most RetryBackoffMax, with ±20 %
// jitter (retryBackoff).
func (cfg *ConsumerConfig) retryDelay(failures int) time.Duration {
	return retryBackoff(cfg.RetryBackoff, cfg.RetryBackoffMax, failures, rand.Float64())
}

func (c *Consumer) backoff(ctx context.Context) error {
	return c.backoffFor(ctx, int(c.maintFailures.Load()))
}

// backoffFor waits retryDelay(failures), or until ctx or the consumer ends.
func (c *Consumer) backoffFor(ctx context.Context, failures int) error {
	t := time.NewTimer(c.cfg.retryDelay(failures))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrConsumerClosed
	}
}

// Poll returns the next records of the assigned partitions, decompressed and decoded, in
// offset order within each partition, and at most MaxPollRecords of them. It blocks until
// there is at least one record, a partition fails, or ctx is done (then it returns ctx's
// error). Records below a partition's position, control records and compaction gaps are
// skipped.
//
// The positions of the returned records count as consumed: the next CommitSync, CommitAsync
// or auto-commit commits them, whether or not the application has processed them (see
// CONSUMER.md for what that means for loss and duplicates).
//
// A partition error (AutoOffsetReset "none" with no valid offset, a corrupt batch, an error
// code the consumer cannot handle) is returned naming the partition, after the records that
// came before it, and again on every Poll until the partition is Seeked or unassigned.
//
// A subscribed consumer whose group.instance.id another consumer has taken is fenced: Poll
// tells the listener its partitions are lost, then returns an error wrapping
// wire.ErrFencedInstanceID, on every Poll from then on.
//
// The records stay valid for as long as the application keeps them, unless
// ReuseRecordBuffers is set: then they are valid until the next Poll or Close.
func (c *Consumer) Poll(ctx context.Context) ([]Record, error) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	if c.bufs != nil {
		c.recycle() // the previous Poll's records are dead
	}
	for {
		c.mu.Lock()
		closed, n, g := c.mu.closed, len(c.mu.parts), c.mu.group
		c.mu.Unlock()
		if closed {
			return nil, ErrConsumerClosed
		}
		if g != nil {
			// Rebalances, and their listeners, run here on the caller's goroutine.
			if err := g.poll(ctx); err != nil {
				if errors.Is(err, wire.ErrFencedInstanceID) {
					// Another consumer is this instance now: what this one owned is lost, and
					// the listener hears it before the error (a no-op once nothing is owned).
					c.losePartitions(ctx, c.Assignment())
				}
				return nil, err
			}
			c.mu.Lock()
			n = len(c.mu.parts)
			c.mu.Unlock()
			if n == 0 {
				if err := c.wait(ctx, false); err != nil {
					return nil, err
				}
				continue
			}
		} else if n == 0 {
			return nil, ErrNoAssignment
		}
		retry, err := c.maintain(ctx)
		if err != nil {
			return nil, err
		}
		if err := c.stickyErr(); err != nil {
			return nil, err
		}
		recs := c.drain()
		if len(recs) > 0 {
			return recs, nil
		}
		if err := c.stickyErr(); err != nil {
			return nil, err
		}
		if c.readFiles() {
			continue
		}
		if err := c.wait(ctx, retry); err != nil {
			return nil, err
		}
	}
}

// wait blocks until a fetcher signals, ctx is done, or (retry) RetryBackoff has passed.
func (c *Consumer) wait(ctx context.Context, retry bool) error {
	var retryC <-chan time.Time
	if retry {
		t := time.NewTimer(c.cfg.retryDelay(int(c.maintFailures.Load())))
		defer t.Stop()
		retryC = t.C
	}
	select {
	case <-c.ready:
		return nil
	case <-retryC:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrConsumerClosed
	}
}

// stickyErr returns the first failed partition's error, in partition order.
func (c *Consumer) stickyErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first *partState
	for _, ps := range c.mu.parts {
		if ps.err == nil {
			continue
		}
		if first == nil || ps.tp.Topic < first.tp.Topic || (ps.tp.Topic == first.tp.Topic && ps.tp.Partition < first.tp.Partition) {
			first = ps
		}
	}
	if first == nil {
		return nil
	}
	return first.err
}

// drain decodes up to MaxPollRecords records from the queued responses. It holds mu only to
// take responses and to publish positions.
func (c *Consumer) drain() []Record {
	var out []Record
	if c.bufs != nil {
		out = c.bufs.recs[:0]
		defer func() { c.bufs.recs = out[:0] }()
	}
	for len(out) < c.cfg.MaxPollRecords {
		if c.cur == nil && !c.nextChunk() {
			break
		}
		ch := c.cur
		if cap(out) == 0 {
			out = make([]Record, 0, c.estimateRecords())
		}
		start := len(out)
		var done bool
		var err error
		out, done, err = c.decode(ch, out, c.cfg.MaxPollRecords)
		c.mu.Lock()
		ps := c.mu.parts[ch.tp]
		if ps == nil || ps.epoch != ch.epoch {
			// Seeked or unassigned while we decoded: these records are not the position's.
			out = out[:start]
			c.retire(ch)
			c.freeChunkLocked(ch)
			c.cur = nil
			c.mu.Unlock()
			continue
		}
		if len(out) > start {
			last := &out[len(out)-1]
			ps.position, ps.leaderEpoch = last.Offset+1, last.LeaderEpoch
		}
		if err != nil {
			at := ps.position
			ps.err = fmt.Errorf("client: %s at offset %d: %w", ch.tp, at, err)
			c.retire(ch)
			c.freeChunkLocked(ch)
			c.cur = nil
			c.mu.Unlock()
			break
		}
		if done {
			// Past the response's last batch, including skipped control records and gaps.
			ps.position = max(ps.position, ch.nextOffset)
			c.retire(ch)
			c.freeChunkLocked(ch)
			c.cur = nil
		}
		c.mu.Unlock()
	}
	return out
}

// estimateRecords bounds the slice Poll allocates by the records actually waiting.
func (c *Consumer) estimateRecords() int {
	n := c.cur.count
	c.mu.Lock()
	for _, ch := range c.mu.queue {
		if n >= c.cfg.MaxPollRecords {
			break
		}
		n += ch.count
	}
	c.mu.Unlock()
	return max(min(n, c.cfg.MaxPollRecords), 1)
}

// nextChunk makes the oldest current queued response c.cur, dropping stale ones and applying
// queued partition errors. It reports whether c.cur is set.
func (c *Consumer) nextChunk() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.mu.queue) > 0 {
		// A short queue (a few partitions' responses) is popped by moving the rest down, so
		// that its array is reused: slicing off the front made every append after a drain
		// allocate a new one. A long one is sliced, not to copy it at every pop.
		q := c.mu.queue
		ch := q[0]
		if len(q) <= 16 {
			n := copy(q, q[1:])
			q[n] = nil
			c.mu.queue = q[:n]
		} else {
			q[0] = nil
			c.mu.queue = q[1:]
		}
		ps := c.mu.parts[ch.tp]
		if ps == nil || ps.epoch != ch.epoch {
			// Not expected: dropQueuedLocked takes a partition's responses out when its epoch
			// changes or it is unassigned. Kept so that a stale response is never delivered.
			c.discardQueuedLocked(ch)
			continue
		}
		if ps.buffered--; ps.buffered == 0 && ch.err == nil {
			ps.stopAhead = false // see partState.stopAhead
		}
		if ps.spanAhead == 0 || ps.buffered <= ps.spanAhead/2 {
			// Prefetch: the next response is fetched while this one is used. A partition read
			// from the broker's files wakes its fetcher once for several pieces: on a virtual
			// machine a sleeping thread's wake-up can take longer than reading a piece.
			c.wakeFetcherLocked(ps)
		}
		switch {
		case ch.reset:
			c.setResetLocked(ps, c.cfg.AutoOffsetReset)
			if ps.err != nil {
				held := fmt.Sprintf("the log holds offsets [%d, %d)", ch.logStart, ch.highWatermark)
				if ch.logStart == ch.highWatermark {
					held = fmt.Sprintf("the log is empty, at offset %d", ch.logStart)
				}
				ps.err = fmt.Errorf("client: fetch %s at offset %d: %w: %s (auto.offset.reset is none)",
					ch.tp, ch.fetchOffset, wire.ErrOffsetOutOfRange, held)
			}
			c.signal()
		case ch.err != nil && len(ch.records) == 0:
			ps.err = ch.err
		default:
			c.cur = ch
			return true
		}
	}
	return false
}

// decode appends ch's records from where it stopped, up to max in all. done means ch is
// exhausted.
func (c *Consumer) decode(ch *chunk, out []Record, limit int) (_ []Record, done bool, err error) {
	r := &c.scratch
	for len(out) < limit {
		if !ch.inBatch {
			if len(ch.rest) == 0 {
				return out, true, ch.err
			}
			pos := len(ch.records) - len(ch.rest)
			b, rest, err := batch.Next(ch.rest)
			if err != nil {
				return out, true, err
			}
			ch.rest = rest
			// Checked before it is skipped: a damaged batch is reported wherever it lies, as
			// its header (which says where it lies) is part of what may be damaged.
			if pos+len(b) > ch.validated {
				if err := b.Validate(); err != nil {
					return out, true, fmt.Errorf("batch at offset %d: %w", b.BaseOffset(), err)
				}
			}
			if int64(b.NextOffset()) <= ch.fetchOffset || b.IsControl() {
				continue
			}
			opts := c.iterOpts
			if c.bufs != nil && b.Compression() != batch.None {
				ch.dec = c.bufs.decompressor(len(b))
				opts.Decompressor = ch.dec
			}
			ch.it.Reset(b, opts)
			ch.inBatch, ch.batchEpoch = true, b.PartitionLeaderEpoch()
		}
		if !ch.it.Next(r) {
			if err := ch.it.Err(); err != nil {
				return out, true, err
			}
			ch.inBatch, ch.dec = false, nil
			continue
		}
		if int64(r.Offset) < ch.fetchOffset {
			continue
		}
		rec := Record{
			Topic:        ch.tp.Topic,
			Partition:    ch.tp.Partition,
			PartitionSet: true,
			Offset:       int64(r.Offset),
			Timestamp:    time.UnixMilli(r.Timestamp),
			Key:          r.Key,
			Value:        r.Value,
			LeaderEpoch:  ch.batchEpoch,
		}
		if len(r.Headers) > 0 {
			rec.Headers = c.appendHeaders(r.Headers)
		}
		out = append(out, rec)
		// Offsets only grow: a response whose batches overlap or go back (a broken broker)
		// must not deliver a record twice or move the position back.
		ch.fetchOffset = int64(r.Offset) + 1
	}
	return out, !ch.inBatch && len(ch.rest) == 0 && ch.err == nil, nil
}

// appendHeaders returns a record's headers, carved from c.headers so that a Poll allocates
// per few dozen headers rather than per record. By default the records keep what they were
// given: a full array is replaced, never reused. With ReuseRecordBuffers the array is refilled
// by every Poll (recycle), and grows when a Poll needs more.
func (c *Consumer) appendHeaders(src []batch.Header) []Header {
	hs := c.headers
	if c.bufs == nil && cap(hs)-len(hs) < len(src) {
		hs = make([]Header, 0, max(64, len(src)))
	}
	start := len(hs)
	for _, h := range src {
		hs = append(hs, Header{Key: c.headerKey(h.Key), Value: h.Value})
	}
	c.headers = hs
	return hs[start:len(hs):len(hs)]
}

// defaultCloseTimeout bounds Close when its context has no deadline.
var defaultCloseTimeout = 30 * time.Second // a variable for tests

// Close commits the positions of what Poll returned (with auto-commit enabled, as Kafka's
// close does), waits for pending asynchronous commits, stops every goroutine and closes the
// connections. ctx bounds the final commit, and a ctx without a deadline gets 30 s (Kafka's
// close timeout): a commit that cannot succeed (the broker is gone) is retried until then and
// reported. The goroutines are stopped and waited for whatever happens. Close is idempotent;
// later calls return the first call's result.
func (c *Consumer) Close(ctx context.Context) error {
	c.closeOnce.Do(func() { c.closeErr = c.shutdown(ctx, true) })
	return c.closeErr
}

// shutdown stops the consumer. graceful=false is a crash: nothing more is committed, queued
// commits are dropped (their callbacks get ErrConsumerClosed).
func (c *Consumer) shutdown(ctx context.Context, graceful bool) error {
	if _, ok := ctx.Deadline(); !ok && graceful {
		// A final commit that cannot succeed (the broker is gone, the topic deleted) is
		// retried until ctx ends: without a deadline Close would never return. Kafka's
		// close() waits 30 s by default.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCloseTimeout)
		defer cancel()
	}
	var err error
	if graceful && c.cfg.autoCommit() {
		err = c.CommitSync(ctx)
	}
	c.mu.Lock()
	g := c.mu.group
	c.mu.Unlock()
	if g != nil && graceful {
		g.close(ctx)
	}
	c.mu.Lock()
	c.mu.closed = true
	c.mu.Unlock()
	if graceful {
		c.commits.drain(ctx)
	}
	c.cancel()
	_ = c.cl.Close() // fails whatever is still in flight
	c.commits.stop()
	c.wg.Wait()
	if err != nil {
		return fmt.Errorf("client: consumer close: final commit: %w", err)
	}
	return nil
}
