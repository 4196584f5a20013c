package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

// InitProducerId (key 22).
//
// Behavior: an idempotent producer (TransactionalID nil) gets a new producer id, unique in the
// cluster, and epoch 0, whatever ProducerID and ProducerEpoch it sent (Kafka's answer without a
// transactional id). The id comes from this broker's block of ids, which the controller hands
// out (cluster.AllocateProducerIDs, through raft, so a block is never given twice, across
// controller failovers and restarts of the controller or of this broker). Only the request that
// finds the block used up waits on the controller, and the requests that arrive meanwhile wait
// for that same allocation: one raft round trip per ProducerIDBlockSize producers. A block's ids
// left unused when the broker stops are never given again (the next run takes a new block).
//
// Errors: while the controller hands no block (no active controller within
// producerIDAllocTimeout, or this broker's registration is stale and being renewed),
// COORDINATOR_NOT_AVAILABLE, retriable, with ProducerID and ProducerEpoch -1. A TransactionalID
// is INVALID_REQUEST: transactions are not built.
//
// Single-node mode (`sluice serve` without controller.quorum.voters) runs the same path: the
// node's controller is a one-voter raft, which leads alone, so the next id is in its raft log
// and snapshot like any cluster's.

// producerIDAllocTimeout bounds one allocation: the controller is retried within it across a
// failover; past it, the requests waiting are answered COORDINATOR_NOT_AVAILABLE and the
// producer asks again.
const producerIDAllocTimeout = 5 * time.Second

// producerIDs is a broker's producer-id allocator: the unused rest of its current block, and the
// allocation of the next block when one is in flight. The zero value is an allocator with no
// block: its first take allocates.
type producerIDs struct {
	mu struct {
		sync.Mutex
		// [next, end) are the current block's ids not given yet. Invariant: next ≤ end.
		next, end int64
		// inflight is the allocation under way, nil when none: every take that finds the
		// block used up waits for it rather than starting another.
		inflight *pidAllocation
	}
}

// pidAllocation is one call to the controller; done closes once err (and, on success, the
// allocator's block) is set.
type pidAllocation struct {
	done chan struct{}
	err  error
}

// allocFunc asks the controller for the next block.
type allocFunc func(context.Context) (cluster.ProducerIDBlock, error)

// tryTake returns the next id of the current block, or false when it is used up.
func (p *producerIDs) tryTake() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeLocked()
}

func (p *producerIDs) takeLocked() (int64, bool) {
	if p.mu.next >= p.mu.end {
		return 0, false
	}
	id := p.mu.next
	p.mu.next++
	return id, true
}

// take returns a producer id no other take, on any broker, ever returns. When the block is used
// up, the first caller runs alloc (bounded by allocCtx, not by its own ctx, so that the waiters'
// allocation survives its caller going away) and the others wait for it; a failed allocation
// fails every waiter, and the next take tries again.
func (p *producerIDs) take(ctx, allocCtx context.Context, alloc allocFunc) (int64, error) {
	for range 3 { // a new block has 1000 ids: losing the race for them thrice is not bad luck
		p.mu.Lock()
		if id, ok := p.takeLocked(); ok {
			p.mu.Unlock()
			return id, nil
		}
		a := p.mu.inflight
		owner := a == nil
		if owner {
			a = &pidAllocation{done: make(chan struct{})}
			p.mu.inflight = a
		}
		p.mu.Unlock()
		if owner {
			p.allocate(allocCtx, alloc, a)
		}
		select {
		case <-a.done:
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %w", ErrProducerIDsUnavailable, ctx.Err())
		}
		if a.err != nil {
			return 0, a.err
		}
	}
	return 0, fmt.Errorf("%w: every new block was used up by other requests first", ErrProducerIDsUnavailable)
}

// allocate runs a, installs the block it got, and wakes its waiters.
func (p *producerIDs) allocate(ctx context.Context, alloc allocFunc, a *pidAllocation) {
	blk, err := alloc(ctx)
	if err == nil && (blk.Size <= 0 || blk.First < 0 || blk.First > blk.First+blk.Size) {
		err = fmt.Errorf("the controller answered a bad block %+v", blk)
	}
	p.mu.Lock()
	if err != nil {
		a.err = fmt.Errorf("%w: %v", ErrProducerIDsUnavailable, err)
	} else {
		p.mu.next, p.mu.end = blk.First, blk.First+blk.Size
	}
	p.mu.inflight = nil
	p.mu.Unlock()
	close(a.done)
}

// allocateProducerIDs asks the controller for this broker's next block, at its registration
// epoch (a controller-only node has none and serves no producer).
func (b *Broker) allocateProducerIDs(ctx context.Context) (cluster.ProducerIDBlock, error) {
	if b.member == nil {
		return cluster.ProducerIDBlock{}, fmt.Errorf("node %d is not a broker", b.cfg.NodeID)
	}
	blk, err := b.ctrl.AllocateProducerIDs(ctx, b.cfg.NodeID, b.member.Epoch())
	if err != nil {
		b.logger.Info("no producer-id block from the controller", "err", err)
		return blk, err
	}
	b.logger.Debug("producer-id block allocated", "first", blk.First, "last", blk.Last())
	return blk, nil
}

// nextProducerID is take with this broker's controller and timeouts.
func (b *Broker) nextProducerID(ctx context.Context) (int64, error) {
	allocCtx, cancel := context.WithTimeout(b.ctx, producerIDAllocTimeout)
	defer cancel()
	return b.pids.take(ctx, allocCtx, b.allocateProducerIDs)
}

func (b *Broker) handleInitProducerID(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.InitProducerIDRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	if req.TransactionalID != nil {
		return respond(c, h, initProducerIDError(ErrTransactionsUnsupported))
	}
	if id, ok := b.pids.tryTake(); ok {
		return respond(c, h, &wire.InitProducerIDResponse{ProducerID: id})
	}
	return b.async(c, h, func() wire.Encoder {
		ctx, cancel := context.WithTimeout(b.ctx, producerIDAllocTimeout)
		defer cancel()
		id, err := b.nextProducerID(ctx)
		if err != nil {
			return initProducerIDError(err)
		}
		return &wire.InitProducerIDResponse{ProducerID: id}
	})
}

func initProducerIDError(err error) *wire.InitProducerIDResponse {
	return &wire.InitProducerIDResponse{ErrorCode: errorCode(err), ProducerID: -1, ProducerEpoch: -1}
}
