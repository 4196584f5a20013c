package replication

import (
	"time"

	"github.com/sluicemq/sluice/batch"
)

// The API below is the contract of issue #23's streams (see /work/notes/issue23.md). Its
// bodies are the replication stream's to write; the driver in broker/ is written against these
// signatures and docs.

// NoLeader is a partition without a leader (the controller's cluster.NoLeader).
const NoLeader int32 = -1

// UndefinedEpoch is the epoch answered for an epoch the log holds nothing at or below (Kafka's
// UNDEFINED_EPOCH, -1), with UndefinedOffset (-1).
const (
	UndefinedEpoch  int32        = -1
	UndefinedOffset batch.Offset = -1
)

// Config is a replica's fixed settings. The driver passes new ones with SetConfig when the
// topic's config changes.
type Config struct {
	ReplicaID    int32         // this broker's id
	LagTimeMax   time.Duration // replica.lag.time.max.ms: 30 s
	MinInsync    int           // the topic's min.insync.replicas
	WriteCaching bool          // the topic's write.caching: count log ends rather than durable ends
	// Eligible reports whether the controller would let broker id join an ISR now: it is
	// registered, not fenced and not shutting down (KIP-841's check, which Kafka's leader makes
	// against its metadata before it proposes an expansion). A proposed addition counts in the
	// high watermark until the controller answers, so proposing one the controller must refuse
	// (a follower in controlled shutdown that was caught up as it left, a restarted one not yet
	// unfenced) would hold every acks=all write for the round trip, again at each retry. It is
	// read at each expansion check, so a broker that becomes eligible is proposed at its next
	// fetch. nil: every broker is.
	Eligible func(id int32) bool
}

// EpochEntry is one leader-epoch cache entry: the first offset written at Epoch.
type EpochEntry struct {
	Epoch       int32
	StartOffset batch.Offset
}

// LogState is what the local log holds when the replica is created (the driver reads it from
// the opened log and its checkpoint files).
type LogState struct {
	StartOffset   batch.Offset // the log start offset
	EndOffset     batch.Offset // the log end offset (LEO)
	DurableOffset batch.Offset // the fsynced end offset (≤ EndOffset)
	HighWatermark batch.Offset // the checkpointed high watermark (clamped to [start, end])
	Epochs        []EpochEntry // the leader-epoch cache, ascending by epoch and offset
}

// Role is what a replica is at its current epoch.
type Role uint8

const (
	// Offline: created, or told the partition has no leader; it serves nothing and fetches
	// nothing.
	Offline Role = iota
	Leader
	Follower
)

// LeaderUpdate is the committed metadata of a partition this replica leads: BecomeLeader takes
// it at a new leader epoch and again at the same epoch for every committed ISR change.
type LeaderUpdate struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32 // the assignment, in preference order
	ISR            []int32 // the committed ISR (contains ReplicaID)
}

// FollowerUpdate is the committed metadata of a partition led elsewhere (Leader may be
// NoLeader: the replica then goes Offline).
type FollowerUpdate struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
}

// FollowerFetch is one partition's part of a follower's fetch, as the leader received it.
type FollowerFetch struct {
	ReplicaID      int32
	FetchOffset    batch.Offset // the follower's log end
	DurableOffset  batch.Offset // the follower's fsynced end (-1: unknown, counted as FetchOffset only with write caching)
	LogStartOffset batch.Offset
}

// WaitID names one acks=all produce wait (the driver's choice, unique per replica).
type WaitID uint64

// WaitResult is how a produce wait ended.
type WaitResult uint8

const (
	WaitDone         WaitResult = iota // the high watermark passed the batch
	WaitNotEnoughISR                   // NOT_ENOUGH_REPLICAS_AFTER_APPEND: the ISR shrank below min.insync.replicas
	WaitNotLeader                      // NOT_LEADER_OR_FOLLOWER: this replica stopped leading at the wait's epoch
)

// Released is one produce wait answered.
type Released struct {
	ID     WaitID
	Result WaitResult
}

// ISRProposal is an AlterPartition for the driver to send to the controller. Its result comes
// back as BecomeLeader (committed) or ProposalFailed (refused, or no answer).
type ISRProposal struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// Truncation is a truncation of the local log for the driver to make, then report with
// Truncated. Fully set: the log must restart empty at To (segment.Log.TruncateFullyAndStartAt),
// because the leader's log starts above everything this one holds, or ends below this one's
// start.
type Truncation struct {
	To    batch.Offset
	Fully bool
}

// FetchKind is what a follower must send its leader next.
type FetchKind uint8

const (
	FetchNone       FetchKind = iota // not a follower, or waiting for a truncation to be reported
	FetchEpochQuery                  // OffsetForLeaderEpoch for Epoch (the latest epoch the local log holds)
	FetchRecords                     // Fetch from Offset, reporting DurableOffset
)

// FetchPlan is a follower's next request to its leader for this partition.
type FetchPlan struct {
	Kind           FetchKind
	Leader         int32
	LeaderEpoch    int32        // the CurrentLeaderEpoch to send
	Epoch          int32        // FetchEpochQuery: the epoch to ask the end offset of
	Offset         batch.Offset // FetchRecords: the fetch offset (the local log end)
	DurableOffset  batch.Offset // FetchRecords: the local fsynced end
	LogStartOffset batch.Offset
}

// Ready is what the driver must act on after a call. Taken with Replica.Ready, which clears it.
type Ready struct {
	// HighWatermarkChanged says HighWatermark moved (up; or set anew on a role change): the
	// driver publishes it, wakes parked consumer fetches, and checkpoints it in time.
	HighWatermarkChanged bool
	HighWatermark        batch.Offset
	Released             []Released   // produce waits to answer
	Propose              *ISRProposal // an ISR change to send to the controller
	Truncate             *Truncation  // a truncation to make (followers)
	// EpochsChanged says the leader-epoch cache changed: the driver writes Epochs to the
	// partition's leader-epoch-checkpoint before it acknowledges anything past the change.
	EpochsChanged bool
	Epochs        []EpochEntry
}

// Empty reports whether there is nothing to do.
func (rd *Ready) Empty() bool {
	return !rd.HighWatermarkChanged && len(rd.Released) == 0 && rd.Propose == nil && rd.Truncate == nil && !rd.EpochsChanged
}

// FollowerStatus is one follower's progress as the leader sees it.
type FollowerStatus struct {
	ReplicaID     int32
	LogEndOffset  batch.Offset // -1 until it has fetched at this epoch
	DurableOffset batch.Offset
	LastCaughtUp  time.Time // zero: never at this epoch
	LastFetch     time.Time
	InISR         bool
}

// Status is a replica's state for describe and metrics.
type Status struct {
	Role           Role
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	HighWatermark  batch.Offset
	LogStartOffset batch.Offset
	LogEndOffset   batch.Offset
	DurableOffset  batch.Offset
	ISR            []int32 // the committed ISR (leader)
	PendingISR     []int32 // an outstanding proposal's ISR, nil if none
	Followers      []FollowerStatus
}

// Replica is one hosted partition replica's replication state. Not safe for concurrent use: the
// driver serializes calls (one mutex per partition).
type Replica struct {
	cfg Config

	role           Role
	leader         int32 // NoLeader when Offline
	leaderEpoch    int32 // -1 before the first BecomeLeader or BecomeFollower
	partitionEpoch int32
	replicas       []int32

	// The local log. Invariant: logStart <= hw <= logEnd and logStart <= durable <= logEnd.
	logStart batch.Offset
	logEnd   batch.Offset
	durable  batch.Offset
	hw       batch.Offset
	epochs   epochCache

	lead   leaderState
	follow followerState

	rd Ready
}

// New returns a replica of a log in state s, Offline until BecomeLeader or BecomeFollower.
func New(cfg Config, s LogState) *Replica {
	r := &Replica{
		cfg:         cfg,
		role:        Offline,
		leader:      NoLeader,
		leaderEpoch: -1,
		logStart:    s.StartOffset,
		logEnd:      max(s.EndOffset, s.StartOffset),
	}
	r.durable = clamp(s.DurableOffset, r.logStart, r.logEnd)
	r.hw = clamp(s.HighWatermark, r.logStart, r.logEnd)
	r.epochs = append(epochCache(nil), s.Epochs...)
	// An entry past the log end names nothing; one below the start is gone. The driver
	// rewrites the checkpoint if either was there.
	cut := r.epochs.truncateFromEnd(r.logEnd + 1)
	if r.epochs.truncateFromStart(r.logStart) || cut {
		r.rd.EpochsChanged = true
	}
	return r
}

func clamp(v, lo, hi batch.Offset) batch.Offset {
	return min(max(v, lo), hi)
}

// SetConfig applies a topic config change (min.insync.replicas, write.caching). A lower
// requirement may release waits and move the high watermark; see Ready. A higher
// min.insync.replicas than the committed ISR releases the parked waits WaitNotEnoughISR.
func (r *Replica) SetConfig(cfg Config) {
	cfg.ReplicaID = r.cfg.ReplicaID
	r.cfg = cfg
	if r.role == Leader {
		r.maybeAdvanceHW()
		r.checkMinInsync()
	}
}

// Appended reports records appended to the local log: its end is now end. epochs lists the
// leader epochs of the appended batches where they start a new epoch (a follower copies them;
// a leader's appends are all at its epoch and may pass nil). Entries at or below the latest
// epoch the cache holds are ignored.
func (r *Replica) Appended(end batch.Offset, epochs []EpochEntry, now time.Time) {
	if end > r.logEnd {
		r.logEnd = end
	}
	for _, e := range epochs {
		if e.StartOffset <= r.logEnd && r.epochs.assign(e) {
			r.rd.EpochsChanged = true
		}
	}
	if r.role == Leader && r.cfg.WriteCaching {
		r.maybeAdvanceHW()
	}
}

// Synced reports the local log fsynced up to durable.
func (r *Replica) Synced(durable batch.Offset, now time.Time) {
	durable = min(durable, r.logEnd)
	if durable <= r.durable {
		return
	}
	r.durable = durable
	if r.role == Leader && !r.cfg.WriteCaching {
		r.maybeAdvanceHW()
	}
}

// LogStartMoved reports the local log's start offset moved up (retention, or a leader's log
// start learnt by a follower): the epoch cache drops what is below it, and the high watermark
// is lifted to it if below.
func (r *Replica) LogStartMoved(start batch.Offset) {
	if start <= r.logStart {
		return
	}
	r.logStart = start
	r.logEnd = max(r.logEnd, start)
	r.durable = max(r.durable, start)
	if r.hw < start {
		r.setHW(start)
	}
	if r.epochs.truncateFromStart(start) {
		r.rd.EpochsChanged = true
	}
}

// EndOffsetFor answers OffsetForLeaderEpoch as Kafka's LeaderEpochFileCache.endOffsetFor: the
// largest epoch ≤ epoch the local log holds and the offset where it ends (the start of the next
// epoch, or the log end for the latest). For an epoch below every entry, the epoch asked and the
// first entry's start (the log below it is gone); for UndefinedEpoch, an epoch above the latest,
// or an empty cache, UndefinedEpoch and UndefinedOffset.
func (r *Replica) EndOffsetFor(epoch int32) (int32, batch.Offset) {
	return r.epochs.endOffsetFor(epoch, r.logEnd)
}

// Ready returns what the driver must do and clears it.
func (r *Replica) Ready() Ready {
	rd := r.rd
	r.rd = Ready{}
	if rd.HighWatermarkChanged {
		rd.HighWatermark = r.hw
	}
	if rd.EpochsChanged {
		rd.Epochs = r.Epochs()
	}
	return rd
}

// setHW sets the high watermark and marks it changed.
func (r *Replica) setHW(hw batch.Offset) {
	r.hw = hw
	r.rd.HighWatermarkChanged = true
}

// Role is the replica's current role.
func (r *Replica) Role() Role { return r.role }

// HighWatermark is the replica's high watermark.
func (r *Replica) HighWatermark() batch.Offset { return r.hw }

// LeaderEpoch is the epoch the replica leads or follows at (-1 before the first role change).
func (r *Replica) LeaderEpoch() int32 { return r.leaderEpoch }

// Epochs is a copy of the leader-epoch cache.
func (r *Replica) Epochs() []EpochEntry {
	if len(r.epochs) == 0 {
		return nil
	}
	return append([]EpochEntry(nil), r.epochs...)
}

// Status is a snapshot for describe.
func (r *Replica) Status(now time.Time) Status {
	s := Status{
		Role:           r.role,
		Leader:         r.leader,
		LeaderEpoch:    r.leaderEpoch,
		PartitionEpoch: r.partitionEpoch,
		HighWatermark:  r.hw,
		LogStartOffset: r.logStart,
		LogEndOffset:   r.logEnd,
		DurableOffset:  r.durable,
	}
	if r.role != Leader {
		return s
	}
	s.ISR = append([]int32(nil), r.lead.isr...)
	if r.lead.pending != nil {
		s.PendingISR = append([]int32(nil), r.lead.pending.ISR...)
	}
	for i := range r.lead.followers {
		f := &r.lead.followers[i]
		s.Followers = append(s.Followers, FollowerStatus{
			ReplicaID:     f.id,
			LogEndOffset:  f.leo,
			DurableOffset: f.durable,
			LastCaughtUp:  f.lastCaughtUp,
			LastFetch:     f.lastFetch,
			InISR:         f.inISR,
		})
	}
	return s
}
