package replication

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// leaderState is what a leader keeps: each follower's progress, the committed ISR, the one
// outstanding ISR proposal and the parked acks=all waits.
type leaderState struct {
	since     time.Time // BecomeLeader at this epoch: the lag of a follower that never fetched counts from here
	isr       []int32   // the committed ISR
	followers []followerProgress
	// pending is the outstanding AlterPartition, nil if none. Invariant: at most one.
	pending *ISRProposal
	// waits are the parked acks=all produces, ascending by last (then by arrival).
	waits []wait
}

// followerProgress is one follower as the leader sees it at this leader epoch.
type followerProgress struct {
	id           int32
	leo          batch.Offset // -1 until it fetches at this epoch
	durable      batch.Offset // -1 until it reports one at this epoch
	lastFetch    time.Time    // zero until it fetches at this epoch
	lastCaughtUp time.Time    // zero until it is caught up at this epoch
	// lastFetchLeaderLEO is the leader's LEO as of lastFetch (Kafka's
	// lastFetchLeaderLogEndOffset): a fetch reaching it shows the follower was caught up at
	// lastFetch.
	lastFetchLeaderLEO batch.Offset
	inISR              bool // in the committed ISR
	pendingAdd         bool // added by the outstanding proposal (counts toward the HW already)
}

// counted is the offset the follower counts toward the high watermark with, -1 if unknown.
func (f *followerProgress) counted(writeCaching bool) batch.Offset {
	if writeCaching {
		return f.leo
	}
	return f.durable
}

type wait struct {
	id   WaitID
	last batch.Offset
}

// BecomeLeader makes the replica the leader at u.LeaderEpoch, or, at the epoch it already leads,
// applies a committed ISR change. A new epoch adds an epoch cache entry (u.LeaderEpoch, log
// end), forgets every follower's progress (each must fetch again at this epoch to count) and
// keeps the high watermark where it was. At the led epoch, an update with a newer partition
// epoch settles the outstanding proposal, if any (the committed ISR is the controller's answer,
// whether or not it is the one proposed); one at an older leader epoch, or at the led epoch
// without a newer partition epoch, is ignored.
func (r *Replica) BecomeLeader(u LeaderUpdate, now time.Time) {
	if u.LeaderEpoch < r.leaderEpoch {
		return
	}
	if r.role == Leader && u.LeaderEpoch == r.leaderEpoch {
		if u.PartitionEpoch <= r.partitionEpoch {
			return // stale, or the committed state again: the outstanding proposal still stands
		}
		r.partitionEpoch = u.PartitionEpoch
		r.setReplicas(u.Replicas, now)
		r.commitISR(u.ISR)
		r.maybeAdvanceHW()
		r.checkMinInsync()
		return
	}
	// A new leadership: what the replica was doing before ends here.
	r.releaseAll(WaitNotLeader)
	r.follow = followerState{}
	r.role = Leader
	r.leader = r.cfg.ReplicaID
	r.leaderEpoch = u.LeaderEpoch
	r.partitionEpoch = u.PartitionEpoch
	r.lead.since = now
	r.lead.pending = nil
	r.lead.followers = r.lead.followers[:0]
	r.replicas = nil
	r.setReplicas(u.Replicas, now)
	r.commitISR(u.ISR)
	if r.epochs.assign(EpochEntry{Epoch: u.LeaderEpoch, StartOffset: r.logEnd}) {
		r.rd.EpochsChanged = true
	}
	r.rd.HighWatermarkChanged = true // set anew on a role change
	r.maybeAdvanceHW()
	r.checkMinInsync()
}

// setReplicas makes the follower list match the assignment: new replicas start unknown, the
// progress of kept ones stays.
func (r *Replica) setReplicas(replicas []int32, now time.Time) {
	if slices.Equal(r.replicas, replicas) {
		return
	}
	r.replicas = append(r.replicas[:0], replicas...)
	kept := r.lead.followers[:0]
	for _, f := range r.lead.followers {
		if slices.Contains(replicas, f.id) {
			kept = append(kept, f)
		}
	}
	r.lead.followers = kept
	for _, id := range replicas {
		if id != r.cfg.ReplicaID && r.followerIndex(id) < 0 {
			r.lead.followers = append(r.lead.followers, followerProgress{id: id, leo: -1, durable: -1, lastFetchLeaderLEO: -1})
		}
	}
}

// commitISR takes the committed ISR and drops the outstanding proposal.
func (r *Replica) commitISR(isr []int32) {
	r.lead.isr = append(r.lead.isr[:0], isr...)
	r.lead.pending = nil
	for i := range r.lead.followers {
		f := &r.lead.followers[i]
		f.inISR = slices.Contains(isr, f.id)
		f.pendingAdd = false
	}
}

func (r *Replica) followerIndex(id int32) int {
	for i := range r.lead.followers {
		if r.lead.followers[i].id == id {
			return i
		}
	}
	return -1
}

// FollowerFetched records a follower's fetch (leader only). It reports false, changing nothing,
// when f.ReplicaID is not a replica of the partition or this replica is not the leader. The
// driver answers a fetch beyond the leader's log end OFFSET_OUT_OF_RANGE without calling it.
//
// As Kafka's Replica.updateFetchState: a fetch at the leader's log end makes the follower caught
// up now; a fetch reaching the leader's log end as of the follower's previous fetch makes it
// caught up as of that fetch. A follower out of the ISR that qualifies is proposed for
// expansion at once (shrinks wait for Tick).
func (r *Replica) FollowerFetched(f FollowerFetch, now time.Time) bool {
	if r.role != Leader || f.ReplicaID == r.cfg.ReplicaID {
		return false
	}
	i := r.followerIndex(f.ReplicaID)
	if i < 0 {
		return false
	}
	p := &r.lead.followers[i]
	switch {
	case f.FetchOffset >= r.logEnd:
		p.lastCaughtUp = now
	case !p.lastFetch.IsZero() && f.FetchOffset >= p.lastFetchLeaderLEO && p.lastFetch.After(p.lastCaughtUp):
		p.lastCaughtUp = p.lastFetch
	}
	p.lastFetch = now
	p.lastFetchLeaderLEO = r.logEnd
	p.leo = f.FetchOffset
	p.durable = min(f.DurableOffset, f.FetchOffset)
	if f.DurableOffset < 0 {
		p.durable = -1
	}
	// Kafka's order (Partition.updateFollowerFetchState): the expansion first, so that a
	// proposed member counts toward the high watermark this fetch moves.
	if r.lead.pending == nil && !p.inISR && r.canJoinISR(p) {
		r.propose(append(slices.Clone(r.lead.isr), p.id))
	}
	r.maybeAdvanceHW()
	return true
}

// canJoinISR is Kafka's isFollowerInSync for expansion: the follower fetched at this epoch and
// its log end reached both the high watermark and the start of the leader's current epoch (so
// it holds nothing of an older epoch the leader does not have). Without write caching it is
// its durable end that must reach the high watermark: an ISR member, electable, holds every
// acknowledged record on disk. A broker the controller would refuse (Config.Eligible) never
// qualifies.
func (r *Replica) canJoinISR(p *followerProgress) bool {
	if p.leo < 0 || p.counted(r.cfg.WriteCaching) < r.hw {
		return false
	}
	if r.cfg.Eligible != nil && !r.cfg.Eligible(p.id) {
		return false
	}
	start := r.logEnd
	if n := len(r.epochs); n > 0 && r.epochs[n-1].Epoch == r.leaderEpoch {
		start = r.epochs[n-1].StartOffset
	}
	return p.leo >= start
}

// Tick checks the followers' lag against LagTimeMax and proposes an ISR shrink or expansion.
//
// A member is out of sync when it has not been caught up for more than LagTimeMax (counted from
// BecomeLeader if it never was at this epoch), unless its log end is the leader's (Kafka's
// Replica.isCaughtUp: an idle partition does not shrink). A shrink goes first; nothing is
// proposed while a proposal is outstanding.
func (r *Replica) Tick(now time.Time) {
	if r.role != Leader || r.lead.pending != nil {
		return
	}
	var shrink bool
	for i := range r.lead.followers {
		if p := &r.lead.followers[i]; p.inISR && r.outOfSync(p, now) {
			shrink = true
			break
		}
	}
	if shrink {
		isr := make([]int32, 0, len(r.lead.isr))
		for _, id := range r.lead.isr {
			if j := r.followerIndex(id); j < 0 || !r.outOfSync(&r.lead.followers[j], now) {
				isr = append(isr, id)
			}
		}
		r.propose(isr)
		return
	}
	var isr []int32
	for i := range r.lead.followers {
		if p := &r.lead.followers[i]; !p.inISR && r.canJoinISR(p) {
			if isr == nil {
				isr = slices.Clone(r.lead.isr)
			}
			isr = append(isr, p.id)
		}
	}
	if isr != nil {
		r.propose(isr)
	}
}

func (r *Replica) outOfSync(p *followerProgress, now time.Time) bool {
	if p.leo >= 0 && p.leo == r.logEnd {
		return false
	}
	since := p.lastCaughtUp
	if since.IsZero() {
		since = r.lead.since
	}
	return now.Sub(since) > r.cfg.LagTimeMax
}

// propose makes isr the outstanding proposal and hands it to the driver.
func (r *Replica) propose(isr []int32) {
	p := &ISRProposal{LeaderEpoch: r.leaderEpoch, PartitionEpoch: r.partitionEpoch, ISR: isr}
	r.lead.pending = p
	for i := range r.lead.followers {
		f := &r.lead.followers[i]
		f.pendingAdd = !f.inISR && slices.Contains(isr, f.id)
	}
	r.rd.Propose = &ISRProposal{LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: slices.Clone(isr)}
}

// ProposalFailed reports the outstanding ISR proposal refused or unanswered: the next Tick may
// propose again from the committed state.
func (r *Replica) ProposalFailed(now time.Time) {
	if r.role != Leader || r.lead.pending == nil {
		return
	}
	r.lead.pending = nil
	for i := range r.lead.followers {
		r.lead.followers[i].pendingAdd = false
	}
}

// maybeAdvanceHW moves the high watermark up to the smallest counted offset over the maximal
// ISR (the committed ISR and the proposed additions), bounded by the log end. A member whose
// progress is unknown at this epoch holds it.
func (r *Replica) maybeAdvanceHW() {
	hw := r.durable
	if r.cfg.WriteCaching {
		hw = r.logEnd
	}
	for i := range r.lead.followers {
		p := &r.lead.followers[i]
		if !p.inISR && !p.pendingAdd {
			continue
		}
		c := p.counted(r.cfg.WriteCaching)
		if c < 0 {
			return
		}
		hw = min(hw, c)
	}
	hw = min(hw, r.logEnd)
	if hw > r.hw {
		r.setHW(hw)
		r.releasePassed()
	}
}

// AcceptsAcksAll reports whether an acks=all produce may be appended now: this replica leads
// and the committed ISR has at least MinInsync members.
func (r *Replica) AcceptsAcksAll() bool {
	return r.role == Leader && len(r.lead.isr) >= r.cfg.MinInsync
}
