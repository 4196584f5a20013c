package replication

import (
	"time"

	"github.com/sluicemq/sluice/batch"
)

// followerPhase is where a follower is in its cycle with the leader at this epoch:
//
//	BecomeFollower ─▶ query ─(EpochAnswered)─▶ truncating ─(Truncated)─▶ fetching
//	                    ▲  └─(older epoch)─┘                               │
//	                    └──────────────(OutOfRange above the leader's end)─┘
type followerPhase uint8

const (
	phaseNone       followerPhase = iota // not a follower
	phaseQuery                           // OffsetForLeaderEpoch for queryEpoch
	phaseTruncating                      // waiting for Truncated
	phaseFetching                        // Fetch from the log end
)

// followerState is what a follower keeps about its leader at this epoch.
type followerState struct {
	phase      followerPhase
	queryEpoch int32       // phaseQuery: the epoch asked
	truncation *Truncation // phaseTruncating: the truncation asked for
}

// BecomeFollower makes the replica a follower of u.Leader at u.LeaderEpoch (Offline when
// u.Leader is NoLeader). Waits still parked are released WaitNotLeader. The next fetch is an
// epoch query (FetchEpochQuery) when the local log holds any epoch, else a fetch from the log
// end. An update at the epoch it already follows (same leader) changes nothing but the
// partition epoch and assignment; one at an older leader epoch is ignored.
func (r *Replica) BecomeFollower(u FollowerUpdate, now time.Time) {
	if u.LeaderEpoch < r.leaderEpoch {
		return
	}
	role := Follower
	if u.Leader == NoLeader {
		role = Offline
	}
	if u.LeaderEpoch == r.leaderEpoch && r.role == role && r.leader == u.Leader {
		r.partitionEpoch = max(r.partitionEpoch, u.PartitionEpoch)
		r.replicas = append(r.replicas[:0], u.Replicas...)
		return
	}
	r.releaseAll(WaitNotLeader)
	r.lead = leaderState{waits: r.lead.waits[:0]}
	r.role = role
	r.leader = u.Leader
	r.leaderEpoch = u.LeaderEpoch
	r.partitionEpoch = u.PartitionEpoch
	r.replicas = append(r.replicas[:0], u.Replicas...)
	r.rd.HighWatermarkChanged = true // set anew on a role change
	r.follow = followerState{}
	if role == Follower {
		r.startQuery()
	}
}

// startQuery asks for the latest local epoch's end, or fetches from the log end when the
// cache is empty (nothing to check).
func (r *Replica) startQuery() {
	if e := r.epochs.latest(); e != UndefinedEpoch {
		r.follow = followerState{phase: phaseQuery, queryEpoch: e}
		return
	}
	r.follow = followerState{phase: phaseFetching}
}

// EpochAnswered is the leader's OffsetForLeaderEpoch answer to the plan's query (follower
// only): leaderEpoch and endOffset are the answer's LeaderEpoch and EndOffset (the largest
// epoch ≤ epoch the leader's log holds, and where it ends), epoch is the epoch asked. An answer
// for another epoch than the plan's, or when no query is outstanding, is ignored; the driver
// drops answers to requests it sent at another leader epoch. It leads to a Truncation in
// Ready (possibly to the log end, which the driver then need not carry out but must still
// report), or, when the leader's epoch is older than the one asked and the local log does not
// hold it, to another query for the latest local epoch below it (KIP-279).
//
// The rules (Kafka's AbstractFetcherThread.getOffsetTruncationState, KIP-279):
//   - the leader holds the epoch asked, or an older one the local log holds too: truncate to
//     min(endOffset, the local end of that epoch) (the log end for the latest local epoch);
//   - it holds an older one the local log does not: ask for the latest local epoch below it;
//   - it holds nothing at or below the epoch (UndefinedEpoch): nothing local can be checked,
//     so truncate to the local log start; the fetch from there gets OFFSET_OUT_OF_RANGE if the
//     leader's log starts above it, and OutOfRange restarts the log at the leader's start.
//     (Kafka truncates to its high watermark here, which may keep records the leader does not
//     have; this never keeps an unchecked record.)
func (r *Replica) EpochAnswered(leaderEpoch int32, epoch int32, endOffset batch.Offset) {
	if r.role != Follower || r.follow.phase != phaseQuery || epoch != r.follow.queryEpoch || leaderEpoch > epoch {
		return
	}
	if leaderEpoch == UndefinedEpoch || endOffset < 0 {
		r.truncateTo(r.logStart, false)
		return
	}
	// The local end of the leader's epoch: the log end for the latest local epoch (the first
	// query), else where the next local epoch starts (after a query below it).
	localEpoch, localEnd := r.epochs.endOffsetFor(leaderEpoch, r.logEnd)
	switch {
	case localEpoch == leaderEpoch:
		r.truncateTo(min(endOffset, localEnd), false)
	case localEpoch == UndefinedEpoch:
		r.truncateTo(r.logStart, false)
	default:
		r.follow.queryEpoch = localEpoch
	}
}

// truncateTo asks the driver for a truncation of the local log to `to`. Below the log start it
// is a full truncation (the log restarts empty at `to`, as Kafka's UnifiedLog.truncateTo below
// the log start): clamped to the start instead, the follower would fetch from above the
// leader's end and be sent back here forever.
func (r *Replica) truncateTo(to batch.Offset, fully bool) {
	if to < r.logStart {
		fully = true
	}
	if !fully {
		to = min(to, r.logEnd)
	}
	t := Truncation{To: to, Fully: fully}
	r.follow = followerState{phase: phaseTruncating, truncation: &t}
	r.rd.Truncate = &Truncation{To: to, Fully: fully}
}

// Truncated reports the truncation asked for was made: the log end is now end (and, after a
// full truncation, the start too). The epoch cache drops entries at or above end (all of them
// after a full truncation). A report when no truncation is outstanding is applied to the log
// bounds and the cache but does not change the fetch plan.
func (r *Replica) Truncated(start, end batch.Offset) {
	fully := r.follow.phase == phaseTruncating && r.follow.truncation.Fully
	moved := start > r.logStart
	if fully || moved {
		r.logStart = start
	}
	r.logEnd = max(end, r.logStart)
	r.durable = clamp(r.durable, r.logStart, r.logEnd)
	switch {
	case fully:
		if len(r.epochs) > 0 {
			r.epochs = r.epochs[:0]
			r.rd.EpochsChanged = true
		}
	default:
		if r.epochs.truncateFromEnd(r.logEnd) {
			r.rd.EpochsChanged = true
		}
		if moved && r.epochs.truncateFromStart(r.logStart) {
			r.rd.EpochsChanged = true
		}
	}
	if hw := clamp(r.hw, r.logStart, r.logEnd); hw != r.hw {
		r.setHW(hw)
	}
	switch {
	case r.role != Follower:
	case r.follow.phase == phaseTruncating:
		r.follow = followerState{phase: phaseFetching}
	case r.follow.phase == phaseQuery:
		// A truncation asked for at an earlier epoch, reported late: the epoch to ask for
		// may be gone.
		r.startQuery()
	}
}

// FetchAnswered reports a fetch response's partition from the leader (follower only): the
// leader's high watermark and log start. The follower's high watermark is min(leaderHW, log
// end), and never moves back (only a truncation below it does). Appends it carried are
// reported with Appended first; the leader's log start is the driver's to apply (deleting
// segments, then LogStartMoved). An answer at another leader epoch is ignored.
func (r *Replica) FetchAnswered(leaderEpoch int32, leaderHW, leaderLogStart batch.Offset, now time.Time) {
	if r.role != Follower || leaderEpoch != r.leaderEpoch || r.follow.phase != phaseFetching {
		return
	}
	if hw := min(leaderHW, r.logEnd); hw > r.hw {
		r.setHW(hw)
	}
}

// OutOfRange reports the leader answered OFFSET_OUT_OF_RANGE with its log bounds: below the
// leader's start, the log restarts at it (a full Truncation); above its end, the follower asks
// for its epoch's end again (or, with an empty epoch cache, truncates to the leader's end).
func (r *Replica) OutOfRange(leaderStart, leaderEnd batch.Offset) {
	if r.role != Follower || r.follow.phase != phaseFetching {
		return
	}
	switch {
	case r.logEnd < leaderStart:
		r.truncateTo(leaderStart, true)
	case r.logEnd > leaderEnd:
		if r.epochs.latest() == UndefinedEpoch {
			r.truncateTo(leaderEnd, false)
			return
		}
		r.startQuery()
	}
}

// NextFetch is the follower's next request for this partition.
func (r *Replica) NextFetch() FetchPlan {
	if r.role != Follower {
		return FetchPlan{Kind: FetchNone, Leader: r.leader, LeaderEpoch: r.leaderEpoch}
	}
	p := FetchPlan{Leader: r.leader, LeaderEpoch: r.leaderEpoch, LogStartOffset: r.logStart}
	switch r.follow.phase {
	case phaseQuery:
		p.Kind = FetchEpochQuery
		p.Epoch = r.follow.queryEpoch
	case phaseFetching:
		p.Kind = FetchRecords
		p.Offset = r.logEnd
		p.DurableOffset = r.durable
	default:
		p.Kind = FetchNone
	}
	return p
}
