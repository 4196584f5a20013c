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
// log defines the partition. A broker that gains a leadership serves the log it has. Until
// replication lands, that is only what it had itself: records acknowledged by the previous
// leader are not on it.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
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

// setLeadership applies pm's leader and epoch to p (the reconciler, under reconcileMu). Parked
// fetches are woken on every change (those naming the old epoch are fenced now); a leadership
// lost also answers the acks=all waits on p.
func (b *Broker) setLeadership(p *partition, pm cluster.PartitionMeta) {
	v := packLead(pm.Leader, pm.LeaderEpoch)
	old := p.lead.Swap(v)
	if old == v {
		return
	}
	self := b.cfg.NodeID
	oldLeader, oldEpoch := unpackLead(old)
	switch {
	case oldLeader == self && pm.Leader != self:
		b.logger.Info("partition leadership lost", "partition", p.tp.String(), "leader", pm.Leader, "epoch", pm.LeaderEpoch, "previous_epoch", oldEpoch)
		p.failAcks(fmt.Errorf("%w: %s-%d is now led by broker %d (leader epoch %d)", ErrNotLeaderOrFollower, p.tp.topic, p.tp.partition, pm.Leader, pm.LeaderEpoch))
	case oldLeader != self && pm.Leader == self:
		// The log served from now on is the one this broker has: until replication lands, a
		// new leader holds only what it wrote itself while it led before.
		b.logger.Info("partition leadership gained", "partition", p.tp.String(), "epoch", pm.LeaderEpoch, "previous_leader", oldLeader,
			"log_end_offset", int64(p.log().EndOffset()))
	}
	p.wake()
}

// ackWait is one partition's share of an acks=all produce: answered when the append at last is
// durable on log (the log that took it: heal.go may swap another in), or refused when the
// broker loses the partition's leadership first, whichever comes first (done).
type ackWait struct {
	p     *partition
	log   *segment.Log
	last  batch.Offset
	epoch int32 // the leader epoch the append was taken at
	out   *wire.ProduceResponsePartition
	req   *ackRequest
	done  atomic.Bool
}

// ackRequest is an acks=all produce's state shared by its partitions' waits.
type ackRequest struct {
	mu     sync.Mutex // guards the response against the waits, the timer and finish's encoding
	left   atomic.Int32
	once   sync.Once
	finish func() // encodes and completes the response (once); called with mu held
	timer  *time.Timer
}

// resolve answers w with err (nil: durable): its code is set in the response, and the last of
// the request's waits completes it.
func (w *ackWait) resolve(err error) {
	if !w.done.CompareAndSwap(false, true) {
		return
	}
	w.p.dropAck(w)
	if err != nil {
		w.req.mu.Lock()
		w.out.ErrorCode = errorCode(err)
		w.req.mu.Unlock()
	}
	if w.req.left.Add(-1) == 0 {
		w.req.timer.Stop()
		w.req.mu.Lock()
		defer w.req.mu.Unlock()
		w.req.finish()
	}
}

// addAck registers w so that a leadership lost answers it, and reports whether p is still led
// by self at the epoch w's append was taken at: if not, the caller refuses w itself (a loss
// between the append and the registration swept the waits before w was among them).
func (p *partition) addAck(w *ackWait, self int32) bool {
	p.ackMu.Lock()
	if p.acks == nil {
		p.acks = map[*ackWait]struct{}{}
	}
	p.acks[w] = struct{}{}
	p.ackMu.Unlock()
	return p.servesAt(self, w.epoch)
}

func (p *partition) dropAck(w *ackWait) {
	p.ackMu.Lock()
	delete(p.acks, w)
	p.ackMu.Unlock()
}

// failAcks answers every acks=all wait registered on p with err.
func (p *partition) failAcks(err error) {
	p.ackMu.Lock()
	ws := make([]*ackWait, 0, len(p.acks))
	for w := range p.acks {
		ws = append(ws, w)
	}
	p.ackMu.Unlock()
	for _, w := range ws {
		w.resolve(err)
	}
}

// pendingAcks is the number of acks=all waits registered on p (tests).
func (p *partition) pendingAcks() int {
	p.ackMu.Lock()
	defer p.ackMu.Unlock()
	return len(p.acks)
}
