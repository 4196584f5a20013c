package client

// # Idempotence
//
// An idempotent producer (ProducerConfig.EnableIdempotence, on by default) has a producer id
// and epoch from InitProducerId, asked of any broker before its first batch goes, and numbers
// each partition's records: a batch is given the partition's next sequence when it is first
// drained, and its header carries id, epoch and base sequence (inside the CRC). The broker
// remembers each producer's last 5 runs of batches per partition (producerstate.Window: the
// batches of one request are one run), so a batch sent again (its answer
// was lost, the connection failed) is not appended twice, and a batch that arrives after a
// gap is refused (OUT_OF_ORDER_SEQUENCE_NUMBER) rather than appended out of order. The rules
// the client keeps, as Kafka's Sender and TransactionManager do:
//
//   - At most 5 requests carrying newly sequenced batches of a partition go from the one
//     that carried its first unacknowledged batch on, acknowledged ones after it included
//     (the broker's window of runs: a retry of that batch must find it there), and at most 5
//     requests are in flight per broker. A request carries every ready batch of the
//     partition: the broker appends them as one run.
//   - A batch sent again is sent only as its partition's first unacknowledged batch, and
//     alone in its request for the partition: then a batch the broker already has is answered
//     with success and the offset it got, and nothing behind it can overtake it.
//   - DUPLICATE_SEQUENCE_NUMBER for a batch sent alone is success (offset unknown, -1). In a
//     request shared with other batches of its partition every batch is sent again alone
//     (the broker refused the whole append, so each needs its own verdict).
//   - OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID for a batch that is not the first
//     unacknowledged one of its partition is retried (a batch before it failed); for the
//     first, the partition must start over: once nothing of it is in flight, the producer's
//     epoch is bumped (KIP-360; at epoch 32767 a new id is asked for) and the partition's
//     unacknowledged batches are stamped again from sequence 0, in order, before any goes.
//   - A sequenced batch that fails (any error, or delivery.timeout.ms in flight, when its
//     outcome is unknown) leaves a hole or an unknown: the partition sequences no new batch
//     until every earlier one has completed, and then starts over (as above) unless a later
//     batch was acknowledged (which proves the failed one was written).
//   - INVALID_PRODUCER_EPOCH fails the batch (not retriable).
//   - A partition whose sequences belong to an older epoch (another partition bumped it)
//     moves to the new one, from sequence 0, once nothing of it is in flight: a batch of the
//     old epoch never follows one of the new epoch on a partition.
//
// Lock order: Producer.pidMu is a leaf, taken under accPartition.mu.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

// producerID is a producer id and epoch; immutable. Partitions compare them by pointer: a
// bump makes a new one.
type producerID struct {
	id    int64
	epoch int16
}

// initProducerIDTimeout is the transaction timeout InitProducerId carries (Kafka's
// transaction.timeout.ms default; an idempotent producer has no transactions).
const initProducerIDTimeout = 60 * time.Second

// partitionSequences is a partition's idempotence state, guarded by accPartition.mu.
type partitionSequences struct {
	// stamp is the id and epoch of the partition's sequences (nil before its first batch),
	// next the sequence of its next batch. Invariant: every batch in unacked has stamp.
	stamp *producerID
	next  int64
	// unacked are the sequenced batches not completed, in sequence order.
	unacked []*accBatch
	// batches numbers the partition's requests that carried newly sequenced batches
	// (accBatch.ordinal: the batches of one request share it), a split batch's halves as two:
	// batches - unacked[0].ordinal bounds how many runs the broker may have appended
	// from the first unacknowledged one on, acknowledged ones included, which must stay
	// within its window for a retry of that batch to be recognized.
	batches int64
	// acked is the end of the highest acknowledged batch's sequences.
	acked int64
	// holeEnd > 0: a batch with sequences before holeEnd failed or expired (its outcome
	// unknown or a hole in the sequence): no new batch is sequenced until every earlier
	// one completed, and then the partition starts over unless acked reached holeEnd.
	holeEnd int64
	// reset: the first unacknowledged batch was refused for its sequence (out of order,
	// unknown producer): once nothing is in flight the partition starts over.
	reset bool
}

// wireSequence is a sequence count as the header carries it: Kafka's sequences wrap from
// MaxInt32 to 0.
func wireSequence(n int64) int32 { return int32(n % (math.MaxInt32 + 1)) }

// doneLocked takes a completed batch out of the unacknowledged ones: acknowledged, or failed
// (or expired) with its outcome unknown.
func (ps *partitionSequences) doneLocked(b *accBatch, acked bool) {
	if i := slices.Index(ps.unacked, b); i >= 0 {
		ps.unacked = slices.Delete(ps.unacked, i, i+1) // clears the vacated slot
	}
	if b.stamp != ps.stamp {
		return // of an epoch the partition has left
	}
	if acked {
		ps.acked = max(ps.acked, b.seqEnd)
		if ps.holeEnd > 0 && ps.acked >= ps.holeEnd {
			ps.holeEnd = 0 // a later batch was appended: the failed one was too
		}
		return
	}
	ps.holeEnd = max(ps.holeEnd, b.seqEnd)
}

// firstUnacked reports whether b is its partition's first unacknowledged batch.
func (ps *partitionSequences) firstUnacked(b *accBatch) bool {
	return len(ps.unacked) > 0 && ps.unacked[0] == b
}

// idemReadyLocked reports whether b, at the head of ap (taken of its batches already in this
// request), may go now, applying first a start over the partition owes when nothing of it is
// in flight. Called by drain with ap.mu held.
func (p *Producer) idemReadyLocked(ap *accPartition, b *accBatch, taken int) bool {
	ps := &ap.mu.idem
	if b.sequenced {
		if ps.reset {
			if ap.mu.inflight > 0 || !p.startOverLocked(ap) {
				return false
			}
		}
		if b.sent {
			// A retry: the first unacknowledged batch, alone (drain sends nothing of the
			// partition after a batch marked alone).
			b.alone = true
			return taken == 0 && ps.firstUnacked(b)
		}
		return true
	}
	cur := p.pid.Load()
	if ps.stamp != cur || ps.reset || ps.holeEnd > 0 {
		if ap.mu.inflight > 0 {
			return false // b is the first of new sequences: what is in flight ends first
		}
		// Every sequenced batch of the partition has completed (b, unsequenced, is its head).
		if ps.reset || ps.holeEnd > 0 {
			if !p.startOverLocked(ap) {
				return false
			}
			cur = ps.stamp
		} else if cur != nil {
			ps.stamp, ps.next, ps.acked, ps.batches = cur, 0, 0, 0
		}
		if cur == nil {
			return false // waiting for a producer id
		}
	}
	// A batch after others of the partition in this request joins their run (sequenceLocked).
	return ps.stamp != nil && (taken > 0 || len(ps.unacked) == 0 || ps.batches-ps.unacked[0].ordinal < idempotentWindow)
}

// startOverLocked moves the partition, with nothing of it in flight, to a new epoch (bumping
// the producer's, unless another partition did already) and stamps its unacknowledged
// batches again from sequence 0. It reports false if the producer is waiting for a new id.
func (p *Producer) startOverLocked(ap *accPartition) bool {
	ps := &ap.mu.idem
	cur := p.pid.Load()
	if ps.stamp != nil && ps.stamp == cur {
		cur = p.bumpEpoch(cur)
	}
	if cur == nil {
		return false
	}
	var n int64
	for i, b := range ps.unacked {
		b.restamp(cur, n)
		b.ordinal = int64(i)
		n = b.seqEnd
	}
	ps.stamp, ps.next, ps.acked, ps.holeEnd, ps.reset = cur, n, 0, 0, false
	ps.batches = int64(len(ps.unacked))
	return true
}

// sequenceLocked gives b, drained for the first time, the partition's next sequences. joins:
// b goes in a request that carries other batches of the partition before it, which the broker
// appends with it, in one run (producerstate.Window): it takes their request's place in the
// window rather than one of its own.
func (ps *partitionSequences) sequenceLocked(b *accBatch, joins bool) {
	n := int64(b.builder.NumRecords())
	b.sequenced, b.stamp, b.seqStart, b.seqEnd = true, ps.stamp, ps.next, ps.next+n
	ps.next += n
	if joins && ps.batches > 0 {
		b.ordinal = ps.batches - 1
	} else {
		b.ordinal = ps.batches
		ps.batches++
	}
	b.builder.SetProducerState(b.stamp.id, b.stamp.epoch, wireSequence(b.seqStart))
	ps.unacked = append(ps.unacked, b)
}

// restamp gives b, not in flight, the id and epoch of id and sequences from start; it is
// no longer a retry (the broker has never seen that stamp).
func (b *accBatch) restamp(id *producerID, start int64) {
	n := b.seqEnd - b.seqStart
	b.stamp, b.seqStart, b.seqEnd, b.sent = id, start, start+n, false
	if b.built != nil {
		if err := b.built.SetProducerState(id.id, id.epoch, wireSequence(start)); err == nil {
			return
		}
	}
	b.builder.SetProducerState(id.id, id.epoch, wireSequence(start))
	b.built = nil
}

// sequenceRefused reports whether a batch's error is about its sequence: retried by an
// idempotent producer, and for the partition's first unacknowledged batch a start over.
func sequenceRefused(err error) bool {
	var code wire.ErrorCode
	return errors.As(err, &code) && (code == wire.ErrOutOfOrderSequenceNumber || code == wire.ErrUnknownProducerID)
}

// bumpEpoch moves the producer from from, its current id and epoch, to the next epoch, or at
// the last epoch asks for a new id (returning nil meanwhile). If another partition bumped it
// already it returns the current one.
func (p *Producer) bumpEpoch(from *producerID) *producerID {
	p.pidMu.Lock()
	defer p.pidMu.Unlock()
	cur := p.pid.Load()
	if cur != from {
		return cur
	}
	p.epochBumps.Add(1)
	if cur.epoch == math.MaxInt16 {
		p.pid.Store(nil)
		select {
		case p.pidWake <- struct{}{}:
		default:
		}
		return nil
	}
	next := &producerID{id: cur.id, epoch: cur.epoch + 1}
	p.pid.Store(next)
	p.cfg.Logger.Info("sluice producer: producer epoch bumped", "producer_id", next.id, "epoch", next.epoch)
	return next
}

// pidLoop is the producer-id goroutine of an idempotent producer: it gets an id at start, and
// again when the epoch runs out, retrying retriable failures with backoff until Close.
func (p *Producer) pidLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.pidWake:
		case <-p.stop:
			return
		}
		for tries := 1; p.pid.Load() == nil; tries++ {
			id, err := p.initProducerID()
			if err == nil {
				p.pidErr.Store(nil)
				p.pid.Store(id)
				p.limbo.signal()
				for _, s := range *p.senders.Load() {
					s.signal()
				}
				break
			}
			p.pidErr.Store(&err)
			level := slog.LevelDebug
			if tries == 1 || tries%10 == 0 {
				level = slog.LevelWarn
			}
			p.cfg.Logger.Log(p.ctx, level, "sluice producer: no producer id yet, retrying", "attempt", tries, "err", err)
			timer := time.NewTimer(max(p.cfg.retryDelay(tries, rand.Float64()), time.Millisecond))
			select {
			case <-timer.C:
			case <-p.stop:
				timer.Stop()
				return
			}
		}
	}
}

// initProducerID asks any broker for a producer id.
func (p *Producer) initProducerID() (*producerID, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RequestTimeout)
	defer cancel()
	req := wire.InitProducerIDRequest{TransactionTimeoutMs: int32(initProducerIDTimeout.Milliseconds()),
		ProducerID: batch.NoProducerID, ProducerEpoch: batch.NoProducerEpoch}
	var resp wire.InitProducerIDResponse
	if err := p.client.Call(ctx, &req, &resp); err != nil {
		return nil, fmt.Errorf("client: init producer id: %w", err)
	}
	if resp.ErrorCode != wire.NoError {
		return nil, fmt.Errorf("client: init producer id: %w", resp.ErrorCode)
	}
	if resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
		return nil, fmt.Errorf("client: init producer id: the broker gave id %d, epoch %d", resp.ProducerID, resp.ProducerEpoch)
	}
	p.cfg.Logger.Debug("sluice producer: producer id", "producer_id", resp.ProducerID, "epoch", resp.ProducerEpoch)
	return &producerID{id: resp.ProducerID, epoch: resp.ProducerEpoch}, nil
}
