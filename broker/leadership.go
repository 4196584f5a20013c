package broker

// Leadership on the request path.
//
// A broker hosts a log for every partition it is a replica of, but only the partition's leader,
// as the committed metadata names it, takes produce and fetch (and answers ListOffsets from its
// log). The leader and its epoch live in partition.lead, one word the reconciler swaps
// (setLeadership) and a request reads in one atomic load (servesAt), so the check costs the
// produce path a load and a compare. A request the broker does not serve is refused, in Kafka's
// order (Partition.getLocalLog): a CurrentLeaderEpoch older than the partition's gets
// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; then a partition with no leader gets
// LEADER_NOT_AVAILABLE and one led elsewhere NOT_LEADER_OR_FOLLOWER. The refusals of the last
// kind (and of FENCED_LEADER_EPOCH, for fetch) name the leader, its epoch and its endpoint
// (KIP-951), so a client reroutes without a metadata round trip (hints.go).
//
// A broker that loses a leadership stops accepting at once (the swap is what the next request
// reads), wakes its parked fetches, which answer NOT_LEADER_OR_FOLLOWER, and answers the acks=all
// produce waits on the partition with NOT_LEADER_OR_FOLLOWER: a write the broker took as leader
// and has not acknowledged is not acknowledged once another broker leads, as the new leader's
// log defines the partition; the replica then follows the new leader (the fetchers, fetcher.go),
// truncating what the new leader does not have. A broker that gains a leadership serves the log
// it has, which holds every record the ISR had committed (the controller elects from the ISR).

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// packLead packs a leader id and a leader epoch into partition.lead's word.
func packLead(leader, epoch int32) uint64 { return uint64(uint32(leader))<<32 | uint64(uint32(epoch)) }

func unpackLead(v uint64) (leader, epoch int32) { return int32(v >> 32), int32(uint32(v)) }

// leadership is p's leader (or cluster.NoLeader) and leader epoch, read together.
func (p *partition) leadership() (leader, epoch int32) { return unpackLead(p.lead.Load()) }

// leaderEpoch is p's leader epoch: what an append as leader stamps on its batches.
func (p *partition) leaderEpoch() int32 {
	_, epoch := p.leadership()
	return epoch
}

// servesAt reports whether broker id leads p at epoch, the request's CurrentLeaderEpoch (-1:
// unknown, any epoch): the request path's check, one atomic load.
func (p *partition) servesAt(id, epoch int32) bool {
	v := p.lead.Load()
	if epoch < 0 {
		return int32(v>>32) == id
	}
	return v == packLead(id, epoch)
}

// leaderHint names the partition's leader in a refusal (Kafka's KIP-951 CurrentLeader). The zero
// value is no hint.
type leaderHint struct {
	set       bool
	id, epoch int32
}

// refuse is why a request for topic-partition is not served here, p being the partition as
// hosted (nil if this broker has no open log for it) and epoch the request's CurrentLeaderEpoch
// (-1: none), with the leader to name in the answer. The caller has found that this broker does
// not serve it at that epoch (p nil or !p.servesAt): this is the slow path, it may allocate.
func (b *Broker) refuse(topic string, part int32, p *partition, epoch int32) (leaderHint, error) {
	var leader, current int32
	if p != nil {
		leader, current = p.leadership()
		switch {
		case epoch >= 0 && epoch < current:
			return hintFor(leader, current), fmt.Errorf("%w: %s-%d: request's epoch %d, the partition's %d", ErrFencedLeaderEpoch, topic, part, epoch, current)
		case epoch > current:
			return leaderHint{}, fmt.Errorf("%w: %s-%d: request's epoch %d, the partition's %d", ErrUnknownLeaderEpoch, topic, part, epoch, current)
		}
	} else {
		t, ok := b.ctrl.Metadata().Topic(topic)
		pm, ok2 := t.Partition(part)
		if !ok || !ok2 {
			return leaderHint{}, b.missingPartitionErr(topic, part)
		}
		leader, current = pm.Leader, pm.LeaderEpoch
	}
	switch {
	case leader == cluster.NoLeader:
		return leaderHint{}, fmt.Errorf("%w: %s-%d (leader epoch %d)", ErrLeaderNotAvailable, topic, part, current)
	case leader != b.cfg.NodeID:
		return hintFor(leader, current), fmt.Errorf("%w: %s-%d is led by broker %d (leader epoch %d)", ErrNotLeaderOrFollower, topic, part, leader, current)
	case p == nil:
		return leaderHint{}, b.missingPartitionErr(topic, part) // this broker leads it: its log is opening, failed or not opened yet
	}
	// Served after all: leadership came back between the caller's check and this one. The
	// request is refused (retriable): it was checked against the leadership it saw.
	return hintFor(leader, current), fmt.Errorf("%w: %s-%d: leadership changed during the request", ErrNotLeaderOrFollower, topic, part)
}

func hintFor(leader, epoch int32) leaderHint {
	if leader == cluster.NoLeader {
		return leaderHint{}
	}
	return leaderHint{set: true, id: leader, epoch: epoch}
}

// setLeadership applies pm's leadership and ISR to p (the reconciler, under reconcileMu): its
// replica becomes the leader (BecomeLeader with the committed ISR, also at an unchanged leader
// epoch when only the ISR or the partition epoch moved) and stops following, or becomes a
// follower of pm.Leader and starts fetching from it (stops, when the partition has no leader).
// A leadership gained is handed to the replica before the lead word lets produce in at the new
// epoch, so that the epoch cache entry of the new epoch starts at the log end before anything
// is appended at it; a leadership lost is swapped out of the lead word first, so that produce
// stops at once, then the replica answers its parked acks=all waits NOT_LEADER_OR_FOLLOWER.
// Parked fetches are woken on every leadership change (those naming the old epoch are fenced).
func (b *Broker) setLeadership(p *partition, pm cluster.PartitionMeta) {
	p.repMu.Lock()
	old, first, changed := b.leadershipLocked(p, pm)
	p.repMu.Unlock()
	if changed {
		b.leadershipApplied(p, pm, old, first)
	}
}

// leadershipLocked is setLeadership's part under p.repMu: the replica leads or follows as pm
// says. It returns the leadership published before (packLead), whether pm is the first
// applied to this replica, and whether anything changed.
func (b *Broker) leadershipLocked(p *partition, pm cluster.PartitionMeta) (old uint64, first, changed bool) {
	self := b.cfg.NodeID
	replicas := append([]int32(nil), pm.Replicas...)
	p.replicas.Store(&replicas)
	if len(pm.AddingReplicas) > 0 {
		adding := slices.Clone(pm.AddingReplicas)
		p.adding.Store(&adding)
	} else {
		p.adding.Store(nil)
	}
	v := packLead(pm.Leader, pm.LeaderEpoch)
	first = !p.appliedSet
	if !first && p.applied.Leader == pm.Leader && p.applied.LeaderEpoch == pm.LeaderEpoch &&
		p.applied.PartitionEpoch == pm.PartitionEpoch && slices.Equal(p.applied.ISR, pm.ISR) && slices.Equal(p.applied.Replicas, pm.Replicas) {
		return p.lead.Load(), false, false
	}
	p.applied = cluster.PartitionMeta{Leader: pm.Leader, LeaderEpoch: pm.LeaderEpoch, PartitionEpoch: pm.PartitionEpoch,
		ISR: slices.Clone(pm.ISR), Replicas: replicas}
	p.appliedSet = true
	now := time.Now()
	if pm.Leader == self {
		p.rep.BecomeLeader(replication.LeaderUpdate{LeaderEpoch: pm.LeaderEpoch, PartitionEpoch: pm.PartitionEpoch,
			Replicas: replicas, ISR: slices.Clone(pm.ISR)}, now)
		b.applyReady(p, p.rep.Ready())
		old = p.lead.Swap(v)
	} else {
		old = p.lead.Swap(v)
		p.rep.BecomeFollower(replication.FollowerUpdate{Leader: pm.Leader, LeaderEpoch: pm.LeaderEpoch,
			PartitionEpoch: pm.PartitionEpoch, Replicas: replicas}, now)
		b.applyReady(p, p.rep.Ready())
		// The replica releases its waits as it stops leading; any left (a wait registered as
		// the leadership went) is answered here: this broker acknowledges nothing it no
		// longer leads.
		for id, w := range p.waits {
			delete(p.waits, id)
			w.resolve(fmt.Errorf("%w: %s-%d is now led by broker %d (leader epoch %d)", ErrNotLeaderOrFollower, p.tp.topic, p.tp.partition, pm.Leader, pm.LeaderEpoch))
		}
	}
	return old, first, true
}

// leadershipApplied is setLeadership's part after p.repMu: the fetchers, the group
// coordinator's shards, the log line, the parked fetches.
func (b *Broker) leadershipApplied(p *partition, pm cluster.PartitionMeta, old uint64, first bool) {
	self := b.cfg.NodeID
	v := packLead(pm.Leader, pm.LeaderEpoch)
	switch {
	case pm.Leader == self:
		b.fetchers.unfollow(p)
	case pm.Leader == cluster.NoLeader:
		b.fetchers.unfollow(p)
	default:
		b.fetchers.follow(p)
	}
	if old == v {
		return // an ISR change at the same leadership
	}
	if p.tp.topic == OffsetsTopic && b.groups != nil {
		b.groups.leadershipChanged(p) // a coordinator's shard loads or unloads
	}
	oldLeader, oldEpoch := unpackLead(old)
	switch {
	case first:
	case oldLeader == self && pm.Leader != self:
		b.logger.Info("partition leadership lost", "partition", p.tp.String(), "leader", pm.Leader, "epoch", pm.LeaderEpoch, "previous_epoch", oldEpoch)
	case oldLeader != self && pm.Leader == self:
		b.logger.Info("partition leadership gained", "partition", p.tp.String(), "epoch", pm.LeaderEpoch, "previous_leader", oldLeader,
			"log_end_offset", int64(p.log().EndOffset()), "high_watermark", int64(p.highWatermark()))
	}
	p.wake()
}

// ackWait is one partition's share of an acks=all produce: parked in the partition's replica
// (rep.Await) until the high watermark passes last, the ISR shrinks below min.insync.replicas,
// the broker stops leading the partition at epoch, the log that took the append (log: heal.go
// may swap another in) stops, or the request times out, whichever comes first (done).
type ackWait struct {
	p     *partition
	log   *segment.Log
	last  batch.Offset
	epoch int32 // the leader epoch the append was taken at
	id    replication.WaitID
	out   *wire.ProduceResponsePartition
	req   *ackRequest
	done  atomic.Bool
}

// ackRequest is an acks=all produce's state shared by its partitions' waits.
type ackRequest struct {
	mu     sync.Mutex // guards the response against the waits, the timer and finish's encoding
	left   atomic.Int32
	once   sync.Once
	finish func()      // encodes and completes the response (once); called with mu held
	timer  *time.Timer // the request's timeout, guarded by mu
}

// resolve answers w with err (nil: committed): its code is set in the response, and the last of
// the request's waits completes it. The caller has taken w out of its partition's waits.
func (w *ackWait) resolve(err error) {
	if !w.done.CompareAndSwap(false, true) {
		return
	}
	if err != nil {
		w.req.mu.Lock()
		w.out.ErrorCode = errorCode(err)
		w.req.mu.Unlock()
	}
	if w.req.left.Add(-1) == 0 {
		w.req.mu.Lock()
		defer w.req.mu.Unlock()
		if w.req.timer != nil { // nil: answered before the timeout started (handleProduce)
			w.req.timer.Stop()
		}
		w.req.finish()
	}
}

// addAck parks w in p's replica, and reports whether p's replica still leads at the epoch w's
// append was taken at: if not, nothing is parked and the caller refuses w itself (a loss
// between the append and the registration would otherwise leave it to be released by a
// replica that no longer leads it).
func (b *Broker) addAck(w *ackWait) bool {
	p := w.p
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.rep.Role() != replication.Leader || p.rep.LeaderEpoch() != w.epoch || !p.servesAt(b.cfg.NodeID, w.epoch) {
		return false
	}
	if p.waits == nil {
		p.waits = map[replication.WaitID]*ackWait{}
	}
	p.nextWait++
	w.id = p.nextWait
	p.waits[w.id] = w
	p.rep.Await(w.id, w.last)
	b.applyReady(p, p.rep.Ready()) // a wait the high watermark has passed already is released now
	return true
}

// cancelAck withdraws w from p's replica (its request timed out) and reports whether it was
// still parked.
func (p *partition) cancelAck(w *ackWait) bool {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.waits[w.id] != w {
		return false
	}
	delete(p.waits, w.id)
	p.rep.Cancel(w.id)
	return true
}

// pendingAcks is the number of acks=all waits parked on p (tests).
func (p *partition) pendingAcks() int {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	return len(p.waits)
}
