package broker

// The driver of a partition's replication state machine (replication.Replica), leader side.
//
// Every call on p.rep is made under p.repMu and followed, before the lock is let go, by
// applyReady with what rep asks for (rep.Ready()). applyReady never blocks on the network: it
// publishes the high watermark and rep.AcceptsAcksAll to atomics the request path reads in one
// load, wakes parked consumer fetches, answers released acks=all waits (their responses are
// completed, not written, here), starts ISR proposals on goroutines, and queues the
// leader-epoch checkpoint for the epoch writer (epochwriter.go): the cache changes at a leader
// change, at a follower's first batch of a new epoch, at a truncation and when retention moves
// the log start, and its file is a few lines, but its write ends in fsyncs, and a disk that
// stalls must stall neither the reconciler (which applies every partition's leadership) nor the
// produce path (which takes repMu after each append).
//
// Lock order: reconcileMu, then repMu; waitMu (wake) and an ackRequest's mu (answering a wait)
// are taken under repMu and never the other way round.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// alterPartitionTimeout bounds one ISR proposal to the controller: a proposal unanswered by
// then is reported failed to the replica, whose next tick may propose again.
const alterPartitionTimeout = 10 * time.Second

// replicaConfig is the replica's config for the topic config c.
func (b *Broker) replicaConfig(c *cluster.TopicConfig) replication.Config {
	return replication.Config{
		ReplicaID:    b.cfg.NodeID,
		LagTimeMax:   b.cfg.ReplicaLagTimeMax,
		MinInsync:    int(c.MinInsyncReplicas),
		WriteCaching: c.WriteCaching,
		Eligible:     b.isrEligible,
	}
}

// isrEligible is replication.Config.Eligible: whether the controller's metadata, as this
// broker last saw it, lets broker id join an ISR (alive: registered, unfenced, not shutting
// down). The controller checks again when it commits the change.
func (b *Broker) isrEligible(id int32) bool {
	if b.ctrl == nil {
		return true
	}
	return b.ctrl.Metadata().Eligible(id)
}

// logState is what a replica of log l starts from: the log's bounds, the high watermark from
// the data directory's replication-offset-checkpoint (read at Open), and the leader-epoch cache
// from the partition's leader-epoch-checkpoint, or, for a data directory made before them, read
// from the log's batches. replicas is the partition's replica count.
//
// A partition with no checkpointed high watermark starts at its log start, so that a restarted
// replica never claims a high watermark above what the ISR had (the leader's fetch responses
// teach it the real one), except a single-replica partition, whose log is the partition: every
// record in it after recovery is its own to count, and a restart of a data directory made
// before the checkpoint must not hide its records from consumers. The checkpointed value is
// clamped to the log's bounds (a log recovered shorter than its checkpoint, or whose start
// retention moved past it).
func (b *Broker) logState(p *partition, l *segment.Log, replicas int) replication.LogState {
	s := replication.LogState{StartOffset: l.StartOffset(), EndOffset: l.EndOffset(), DurableOffset: l.SyncedOffset()}
	s.DurableOffset = min(s.DurableOffset, s.EndOffset)
	hw, ok := b.checkpointedHW(p.tp)
	switch {
	case ok:
	case replicas <= 1:
		hw = s.EndOffset
	default:
		hw = s.StartOffset
	}
	s.HighWatermark = min(max(hw, s.StartOffset), s.EndOffset)
	epochs, found, err := b.readLeaderEpochs(l)
	if err != nil {
		b.logger.Warn("leader-epoch-checkpoint unreadable; rebuilding it from the log", "partition", p.tp.String(), "err", err)
	}
	// After an unclean stop the file may lack the last epoch change (it is written behind the
	// appends), and a leader answering OffsetForLeaderEpoch from a cache missing an epoch would
	// tell a follower that an older epoch ends at its log end, so the follower would keep a
	// divergent tail: the batches' headers are the truth, and reading them costs a header read
	// per batch, next to recovery's scan.
	if !found || err != nil || b.uncleanStart {
		if scanned := b.scanLeaderEpochs(p, l); scanned != nil || !found {
			epochs = scanned
		}
	}
	s.Epochs = epochs
	return s
}

// applyReady acts on what a partition's replication state machine asks for: publish a new high
// watermark and wake the consumer fetches parked on it, answer released acks=all produce waits,
// send an ISR proposal to the controller, write the leader-epoch checkpoint. A truncation is
// the follower's fetcher's to carry out before it calls applyReady (stream D2): one found here
// is an error in the driver, logged. Called with p.repMu held; it does not block on the network.
func (b *Broker) applyReady(p *partition, rd replication.Ready) {
	p.acksAll.Store(p.rep.AcceptsAcksAll())
	if rd.Empty() {
		return
	}
	if rd.EpochsChanged {
		b.queueEpochs(p, rd.Epochs)
	}
	if rd.HighWatermarkChanged {
		p.hw.Store(int64(rd.HighWatermark))
		p.wake() // consumers read up to the high watermark: an advance is new data to them
	}
	for _, r := range rd.Released {
		w := p.waits[r.ID]
		if w == nil {
			continue // cancelled (timed out) or answered otherwise meanwhile
		}
		delete(p.waits, r.ID)
		w.resolve(waitError(p, r.Result))
	}
	if rd.Propose != nil {
		b.proposeISR(p, *rd.Propose)
	}
	if rd.Truncate != nil {
		b.logger.Error("replica asked the leader-side driver for a truncation; the follower's fetcher carries them out",
			"partition", p.tp.String(), "to", int64(rd.Truncate.To), "fully", rd.Truncate.Fully)
	}
}

// waitError is the answer of an acks=all wait released with res (nil: acknowledged).
func waitError(p *partition, res replication.WaitResult) error {
	switch res {
	case replication.WaitDone:
		return nil
	case replication.WaitNotEnoughISR:
		return fmt.Errorf("%w: %s", ErrNotEnoughReplicasAfterAppend, p.tp)
	default:
		return fmt.Errorf("%w: %s: leadership changed before the write was committed", ErrNotLeaderOrFollower, p.tp)
	}
}

// proposeISR sends prop to the controller on its own goroutine (bounded by the broker's ctx and
// alterPartitionTimeout). A refusal or no answer is reported back with rep.ProposalFailed; a
// commit comes back through the metadata, which reconcile hands to rep (setLeadership).
func (b *Broker) proposeISR(p *partition, prop replication.ISRProposal) {
	if b.member == nil || b.ctx.Err() != nil {
		// No membership (a controller-only node cannot lead) or closing: nothing to send.
		p.rep.ProposalFailed(time.Now())
		return
	}
	req := cluster.AlterPartitionRequest{
		Topic: p.tp.topic, Partition: p.tp.partition,
		BrokerID: b.cfg.NodeID, BrokerEpoch: b.member.Epoch(),
		LeaderEpoch: prop.LeaderEpoch, PartitionEpoch: prop.PartitionEpoch,
		ISR: append([]int32(nil), prop.ISR...),
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, alterPartitionTimeout)
		_, err := b.ctrl.AlterPartition(ctx, req)
		cancel()
		if err == nil {
			return
		}
		if b.ctx.Err() == nil {
			b.logger.Info("ISR change refused or unanswered", "partition", p.tp.String(), "isr", req.ISR,
				"leader_epoch", req.LeaderEpoch, "partition_epoch", req.PartitionEpoch, "err", err)
		}
		b.proposalFailed(p, req)
	}()
}

// proposalFailed reports req refused or unanswered to p's replica, if it is still the outstanding
// proposal: it may have been settled meanwhile (a committed change at a newer partition epoch, a
// new leadership, a reopened log's new replica) and another proposed, whose members already
// count toward the high watermark; clearing that one would let it commit with a member the high
// watermark no longer waited for.
func (b *Broker) proposalFailed(p *partition, req cluster.AlterPartitionRequest) {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	now := time.Now()
	if st := p.rep.Status(now); st.LeaderEpoch == req.LeaderEpoch && st.PartitionEpoch == req.PartitionEpoch && slices.Equal(st.PendingISR, req.ISR) {
		p.rep.ProposalFailed(now)
		b.applyReady(p, p.rep.Ready())
	}
}

// replicaAppended reports an append as leader to p's replica (its end read under repMu, so
// that successive reports are monotone whatever order concurrent appends' callers get here).
func (b *Broker) replicaAppended(p *partition, l *segment.Log) {
	p.repMu.Lock()
	p.rep.Appended(l.EndOffset(), nil, time.Now())
	b.applyReady(p, p.rep.Ready())
	p.repMu.Unlock()
}

// logSynced is the group-commit callback of p's appends on a write.caching=false topic: the
// leader's own offset counts toward the high watermark only once fsynced. A failed sync (the
// log stopped) answers the acks=all waits on the stopped log with its error: the supervisor
// (heal.go) reopens the log and rebuilds the replica.
func (b *Broker) logSynced(p *partition, err error) {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if err != nil {
		for id, w := range p.waits {
			if w.log.Err() != nil {
				delete(p.waits, id)
				p.rep.Cancel(id)
				w.resolve(err)
			}
		}
		b.applyReady(p, p.rep.Ready())
		return
	}
	l := p.log()
	p.rep.Synced(min(l.SyncedOffset(), l.EndOffset()), time.Now())
	b.applyReady(p, p.rep.Ready())
}

// retireReplica stops p's replication (deleted or closing): its fetcher stops, and its acks=all
// waits are answered with err.
func (b *Broker) retireReplica(p *partition, err error) {
	b.fetchers.unfollow(p)
	p.repMu.Lock()
	defer p.repMu.Unlock()
	for id, w := range p.waits {
		delete(p.waits, id)
		p.rep.Cancel(id)
		w.resolve(err)
	}
	b.applyReady(p, p.rep.Ready())
}

// resetReplica rebuilds p's replica for the log l the supervisor swapped in (heal.go, under
// reconcileMu): the waits on the stopped log are answered with its error, the high watermark is
// kept (clamped to the new log, which recovery may have cut back to its fsynced end), the
// leader-epoch cache is the old one less what the new log no longer holds, and the partition's
// committed leadership is applied again so that the new replica leads or follows as the old one
// did.
func (b *Broker) resetReplica(p *partition, old, l *segment.Log) {
	md := b.ctrl.Metadata()
	pm, ok := partitionMeta(md, p.tp)
	p.repMu.Lock()
	for id, w := range p.waits {
		delete(p.waits, id)
		w.resolve(fmt.Errorf("%w: %s: the log stopped before the write was committed: %w", segment.ErrFailed, p.tp, old.Err()))
	}
	prev := p.rep
	s := replication.LogState{StartOffset: l.StartOffset(), EndOffset: l.EndOffset(), DurableOffset: min(l.SyncedOffset(), l.EndOffset())}
	s.HighWatermark = min(max(prev.HighWatermark(), s.StartOffset), s.EndOffset)
	for _, e := range prev.Epochs() {
		if e.StartOffset < s.EndOffset {
			s.Epochs = append(s.Epochs, e)
		}
	}
	p.rep = replication.New(b.replicaConfig(p.cfg.Load()), s)
	p.hw.Store(int64(p.rep.HighWatermark()))
	p.appliedSet = false
	// The new state machine takes the leadership in the same critical section: were it
	// published first as a replica that leads nothing, an acks=all produce meanwhile would be
	// refused NOT_ENOUGH_REPLICAS by a partition whose ISR never changed.
	var lead uint64
	if ok {
		lead, _, _ = b.leadershipLocked(p, pm)
	} else {
		b.applyReady(p, p.rep.Ready())
	}
	p.repMu.Unlock()
	if ok {
		b.leadershipApplied(p, pm, lead, true)
	}
}

// partitionMeta is tp's committed metadata.
func partitionMeta(md *cluster.Metadata, tp topicPartition) (cluster.PartitionMeta, bool) {
	t, ok := md.Topic(tp.topic)
	if !ok {
		return cluster.PartitionMeta{}, false
	}
	return t.Partition(tp.partition)
}

// tickInterval is how often the ticker checks the led partitions' followers against
// replica.lag.time.max.ms: half of it (Kafka's isr-expiration period), at most a second so that
// an ISR proposal the controller refused is tried again soon, and at least 10 ms.
func tickInterval(lag time.Duration) time.Duration {
	return min(max(lag/2, 10*time.Millisecond), time.Second)
}

func (b *Broker) tickReplicas(now time.Time) {
	self := b.cfg.NodeID
	for _, p := range b.partitionList() {
		if leader, _ := p.leadership(); leader != self {
			continue
		}
		p.repMu.Lock()
		p.rep.Tick(now)
		b.applyReady(p, p.rep.Ready())
		p.repMu.Unlock()
	}
}

// highWatermarkBound is the offset a read of p's records for the broker's own use (the offsets
// replay) stops at.
func (p *partition) highWatermarkBound() batch.Offset {
	return min(p.highWatermark(), p.log().EndOffset())
}
