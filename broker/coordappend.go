package broker

// Writes of the group coordinator to __consumer_offsets.
//
// A commit, a group's membership snapshot and a deletion are appended by the offsets
// partition's leader as an acks=all produce is: the leader appends, reports the append to the
// partition's replica, and answers once the high watermark has passed the batch, so that a
// coordinator elected after a failover (from the ISR) has every record it acknowledged. The
// errors a client sees are Kafka's for coordinator writes (coordinatorWriteError), not the
// produce errors underneath.

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

// appendAcksAll appends records to p, which this broker leads at epoch, and calls done once:
// with nil when the high watermark has passed them, otherwise with why not (a coordinator
// write error, see coordinatorWriteError). done runs on a goroutine of its own, never under a
// lock of the caller's or of p: the caller may hold its shard's lock while it appends.
func (b *Broker) appendAcksAll(p *partition, epoch int32, records []*batch.Record, timeout time.Duration, done func(error)) {
	finish := func(err error) {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			done(err)
		}()
	}
	if !p.servesAt(b.cfg.NodeID, epoch) {
		finish(fmt.Errorf("%w: %s is no longer led here at epoch %d", ErrNotCoordinator, p.tp, epoch))
		return
	}
	if !p.acksAll.Load() {
		finish(fmt.Errorf("%w: %s has fewer in-sync replicas than min.insync.replicas", ErrCoordinatorNotAvailable, p.tp))
		return
	}
	builder := batch.NewBuilder(batch.DefaultBuilderOptions())
	for _, r := range records {
		builder.Append(r)
	}
	bt, err := builder.Build()
	if err != nil {
		finish(coordinatorWriteError(err))
		return
	}
	if err := b.disk.admit(); err != nil {
		finish(coordinatorWriteError(err))
		return
	}
	l := p.log()
	info, err := l.Append(bt, epoch)
	b.disk.appended(int64(len(bt)))
	if err != nil {
		finish(coordinatorWriteError(err))
		return
	}
	p.wake() // the followers' parked fetches take the records now, not at their max wait
	b.replicaAppended(p, l)
	if !p.cfg.Load().WriteCaching {
		l.OnSynced(info.LastOffset, p.syncedFn)
	}
	var out wire.ProduceResponsePartition
	ar := &ackRequest{}
	ar.left.Store(1)
	ar.finish = func() {
		ar.once.Do(func() {
			if out.ErrorCode != wire.NoError {
				finish(coordinatorWriteError(out.ErrorCode))
				return
			}
			finish(nil)
		})
	}
	w := &ackWait{p: p, log: l, last: info.LastOffset, epoch: epoch, out: &out, req: ar}
	if !b.addAck(w) {
		w.resolve(fmt.Errorf("%w: %s: leadership changed after the append", ErrNotLeaderOrFollower, p.tp))
		return
	}
	ar.mu.Lock()
	if ar.left.Load() > 0 {
		ar.timer = time.AfterFunc(timeout, func() {
			if p.cancelAck(w) {
				w.resolve(fmt.Errorf("%w: %s: not replicated within %v", ErrRequestTimedOut, p.tp, timeout))
			}
		})
	}
	ar.mu.Unlock()
}

// coordinatorWriteError is the error a group request answers when its write to
// __consumer_offsets failed: Kafka's mapping (GroupMetadataManager), so that a client retries
// against the right coordinator.
func coordinatorWriteError(err error) error {
	code := errorCode(err)
	var mapped wire.ErrorCode
	switch code {
	case wire.ErrUnknownTopicOrPartition, wire.ErrNotEnoughReplicas, wire.ErrNotEnoughReplicasAfterAppend,
		wire.ErrCoordinatorNotAvailable:
		mapped = wire.ErrCoordinatorNotAvailable
	case wire.ErrNotLeaderOrFollower, wire.ErrKafkaStorageError, wire.ErrNotCoordinator, wire.ErrFencedLeaderEpoch:
		mapped = wire.ErrNotCoordinator
	case wire.ErrMessageTooLarge, wire.ErrRecordListTooLarge, wire.ErrInvalidFetchSize:
		mapped = wire.ErrInvalidCommitOffsetSize
	case wire.ErrRequestTimedOut:
		mapped = wire.ErrRequestTimedOut
	default:
		mapped = wire.ErrUnknownServerError
	}
	if errors.Is(err, mapped) {
		return err
	}
	return fmt.Errorf("%w: %v", mapped, err)
}
