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
// because the leader's log starts above everything this one holds.
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
	// The replication stream fills this in.
}

// New returns a replica of a log in state s, Offline until BecomeLeader or BecomeFollower.
func New(cfg Config, s LogState) *Replica { return &Replica{cfg: cfg} }

// SetConfig applies a topic config change (min.insync.replicas, write.caching). A lower
// requirement may release waits and move the high watermark; see Ready.
func (r *Replica) SetConfig(cfg Config) {}

// BecomeLeader makes the replica the leader at u.LeaderEpoch, or, at the epoch it already leads,
// applies a committed ISR change. A new epoch adds an epoch cache entry (u.LeaderEpoch, log
// end), forgets every follower's progress (each must fetch again at this epoch to count) and
// keeps the high watermark where it was.
func (r *Replica) BecomeLeader(u LeaderUpdate, now time.Time) {}

// BecomeFollower makes the replica a follower of u.Leader at u.LeaderEpoch (Offline when
// u.Leader is NoLeader). Waits still parked are released WaitNotLeader. The next fetch is an
// epoch query (FetchEpochQuery) when the local log holds any epoch, else a fetch from the log
// end. An update at the epoch it already follows changes nothing.
func (r *Replica) BecomeFollower(u FollowerUpdate, now time.Time) {}

// Appended reports records appended to the local log: its end is now end. epochs lists the
// leader epochs of the appended batches where they start a new epoch (a follower copies them;
// a leader's appends are all at its epoch and may pass nil).
func (r *Replica) Appended(end batch.Offset, epochs []EpochEntry, now time.Time) {}

// Synced reports the local log fsynced up to durable.
func (r *Replica) Synced(durable batch.Offset, now time.Time) {}

// LogStartMoved reports the local log's start offset moved up (retention, or a leader's log
// start learnt by a follower): the epoch cache drops what is below it.
func (r *Replica) LogStartMoved(start batch.Offset) {}

// FollowerFetched records a follower's fetch (leader only). It reports false, changing nothing,
// when f.ReplicaID is not a replica of the partition or this replica is not the leader.
func (r *Replica) FollowerFetched(f FollowerFetch, now time.Time) bool { return false }

// Tick checks the followers' lag against LagTimeMax and proposes an ISR shrink or expansion.
func (r *Replica) Tick(now time.Time) {}

// ProposalFailed reports the outstanding ISR proposal refused or unanswered: the next Tick may
// propose again from the committed state.
func (r *Replica) ProposalFailed(now time.Time) {}

// AcceptsAcksAll reports whether an acks=all produce may be appended now: this replica leads
// and the committed ISR has at least MinInsync members.
func (r *Replica) AcceptsAcksAll() bool { return false }

// Await parks an acks=all produce whose last offset is last (its batch ends at last+1); it is
// released in a later Ready. A wait the high watermark has already passed is released in the
// next Ready too.
func (r *Replica) Await(id WaitID, last batch.Offset) {}

// Cancel withdraws a wait (the request timed out); it is not released.
func (r *Replica) Cancel(id WaitID) {}

// EpochAnswered is the leader's OffsetForLeaderEpoch answer for the plan's Epoch (follower
// only; an answer for another epoch or at another leader epoch is ignored). It leads to a
// Truncation in Ready (possibly to the log end, which the driver then need not carry out but
// must still report), or, when the leader's epoch is older than the one asked, to another
// query (KIP-279).
func (r *Replica) EpochAnswered(leaderEpoch int32, epoch int32, endOffset batch.Offset) {}

// Truncated reports the truncation asked for was made: the log end is now end (and, after a
// full truncation, the start too). The epoch cache drops entries at or above end.
func (r *Replica) Truncated(start, end batch.Offset) {}

// FetchAnswered reports a fetch response's partition from the leader (follower only): the
// leader's high watermark and log start. The follower's high watermark is min(leaderHW, log
// end). Appends it carried are reported with Appended first.
func (r *Replica) FetchAnswered(leaderEpoch int32, leaderHW, leaderLogStart batch.Offset, now time.Time) {
}

// OutOfRange reports the leader answered OFFSET_OUT_OF_RANGE with its log bounds: below the
// leader's start, the log restarts at it (a full Truncation); above its end, the follower asks
// for its epoch's end again.
func (r *Replica) OutOfRange(leaderStart, leaderEnd batch.Offset) {}

// NextFetch is the follower's next request for this partition.
func (r *Replica) NextFetch() FetchPlan { return FetchPlan{} }

// EndOffsetFor answers OffsetForLeaderEpoch: the largest epoch ≤ epoch the local log holds and
// the offset where it ends (the start of the next epoch, or the log end for the latest); for an
// epoch below every entry, UndefinedEpoch and UndefinedOffset.
func (r *Replica) EndOffsetFor(epoch int32) (int32, batch.Offset) {
	return UndefinedEpoch, UndefinedOffset
}

// Ready returns what the driver must do and clears it.
func (r *Replica) Ready() Ready { return Ready{} }

// Role is the replica's current role.
func (r *Replica) Role() Role { return Offline }

// HighWatermark is the replica's high watermark.
func (r *Replica) HighWatermark() batch.Offset { return 0 }

// LeaderEpoch is the epoch the replica leads or follows at.
func (r *Replica) LeaderEpoch() int32 { return 0 }

// Epochs is a copy of the leader-epoch cache.
func (r *Replica) Epochs() []EpochEntry { return nil }

// Status is a snapshot for describe.
func (r *Replica) Status(now time.Time) Status { return Status{} }
