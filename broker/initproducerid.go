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
// finds no id at hand waits on the controller, and the requests that arrive meanwhile wait for
// that same allocation: one raft round trip per ProducerIDBlockSize producers, made ahead of
// need once a block is 90% given, so that in steady state no request waits. A block's ids
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

// producerIDs is a broker's producer-id allocator: the unused rest of its current block, the
// next block when it was fetched ahead, and the allocation in flight, if any. Once a block is 90%
// given (Kafka's ProducerIdManager), the next is fetched in the background, so that in steady
// state no request waits on the controller. The zero value is an allocator with no block: its
// first take allocates.
type producerIDs struct {
	mu struct {
		sync.Mutex
		// [next, end) are the current block's ids not given yet, of a block of size ids.
		// Invariant: next ≤ end.
		next, end, size int64
		// ahead is a block fetched before the current one was used up, or nil.
		ahead *cluster.ProducerIDBlock
		// inflight is the allocation under way, nil when none: a take that finds no id waits
		// for it rather than starting another. Invariant: inflight == nil or ahead == nil.
		inflight *pidAllocation
	}
}

// pidAllocation is one call to the controller; done closes once err (and, on success, the
// allocator's block) is set.
type pidAllocation struct {
	done chan struct{}
	err  error
}

// pidSource is where an allocator gets its blocks: alloc asks the controller under a context of
// allocCtx (not the caller's, so that the waiters' allocation survives its caller going away),
// and spawn runs a fetch ahead on a goroutine its owner waits for (false: closing, not run).
type pidSource struct {
	alloc    func(context.Context) (cluster.ProducerIDBlock, error)
	allocCtx func() (context.Context, context.CancelFunc)
	spawn    func(func()) bool
}

// tryTake returns the next id, or false when none is at hand (the caller then takes with a
// wait); a take that brings the block to 90% starts fetching the next.
func (p *producerIDs) tryTake(src pidSource) (int64, bool) {
	p.mu.Lock()
	id, ok := p.takeLocked()
	a := p.aheadLocked()
	p.mu.Unlock()
	p.fetchAhead(src, a)
	return id, ok
}

// takeLocked gives the current block's next id, moving to the block fetched ahead when the
// current one is used up.
func (p *producerIDs) takeLocked() (int64, bool) {
	if p.mu.next >= p.mu.end && p.mu.ahead != nil {
		p.mu.next, p.mu.end, p.mu.size = p.mu.ahead.First, p.mu.ahead.First+p.mu.ahead.Size, p.mu.ahead.Size
		p.mu.ahead = nil
	}
	if p.mu.next >= p.mu.end {
		return 0, false
	}
	id := p.mu.next
	p.mu.next++
	return id, true
}

// aheadLocked starts an allocation to fetch ahead, when the current block is 90% given and none
// is fetched or in flight; the caller runs it with fetchAhead once the lock is released.
func (p *producerIDs) aheadLocked() *pidAllocation {
	if p.mu.ahead != nil || p.mu.inflight != nil || p.mu.next >= p.mu.end || 10*(p.mu.end-p.mu.next) > p.mu.size {
		return nil
	}
	p.mu.inflight = &pidAllocation{done: make(chan struct{})}
	return p.mu.inflight
}

func (p *producerIDs) fetchAhead(src pidSource, a *pidAllocation) {
	if a == nil {
		return
	}
	if !src.spawn(func() { p.allocate(src, a) }) {
		p.finish(a, cluster.ProducerIDBlock{}, ErrClosed)
	}
}

// take returns a producer id no other take, on any broker, ever returns. When no id is at hand,
// the first caller runs the allocation and the others wait for it (or for the one fetching
// ahead); a failed allocation fails every waiter, and the next take tries again. A take that
// finds the new block used up by the others waiting tries again, until ctx ends.
func (p *producerIDs) take(ctx context.Context, src pidSource) (int64, error) {
	for {
		p.mu.Lock()
		if id, ok := p.takeLocked(); ok {
			ahead := p.aheadLocked()
			p.mu.Unlock()
			p.fetchAhead(src, ahead)
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
			p.allocate(src, a)
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
}

// allocate runs a and finishes it.
func (p *producerIDs) allocate(src pidSource, a *pidAllocation) {
	ctx, cancel := src.allocCtx()
	blk, err := src.alloc(ctx)
	cancel()
	if err == nil && (blk.Size <= 0 || blk.First < 0 || blk.First > blk.First+blk.Size) {
		err = fmt.Errorf("the controller answered a bad block %+v", blk)
	}
	p.finish(a, blk, err)
}

// finish installs the block a got (as the current block when that is used up, else as the one
// ahead) or its error, and wakes its waiters.
func (p *producerIDs) finish(a *pidAllocation, blk cluster.ProducerIDBlock, err error) {
	p.mu.Lock()
	switch {
	case err != nil:
		a.err = fmt.Errorf("%w: %v", ErrProducerIDsUnavailable, err)
	case p.mu.next < p.mu.end:
		p.mu.ahead = &blk
	default:
		p.mu.next, p.mu.end, p.mu.size = blk.First, blk.First+blk.Size, blk.Size
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

// pidSource is this broker's controller, under producerIDAllocTimeout, with fetches ahead on
// b.wg's goroutines.
func (b *Broker) pidSource() pidSource {
	return pidSource{
		alloc: b.allocateProducerIDs,
		allocCtx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(b.ctx, producerIDAllocTimeout)
		},
		spawn: func(f func()) bool {
			if b.ctx.Err() != nil {
				return false
			}
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				f()
			}()
			return true
		},
	}
}

func (b *Broker) handleInitProducerID(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.InitProducerIDRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	if req.TransactionalID != nil {
		return respond(c, h, initProducerIDError(ErrTransactionsUnsupported))
	}
	src := b.pidSource()
	if id, ok := b.pids.tryTake(src); ok {
		return respond(c, h, &wire.InitProducerIDResponse{ProducerID: id})
	}
	return b.async(c, h, func() wire.Encoder {
		ctx, cancel := context.WithTimeout(b.ctx, producerIDAllocTimeout)
		defer cancel()
		id, err := b.pids.take(ctx, src)
		if err != nil {
			return initProducerIDError(err)
		}
		return &wire.InitProducerIDResponse{ProducerID: id}
	})
}

func initProducerIDError(err error) *wire.InitProducerIDResponse {
	return &wire.InitProducerIDResponse{ErrorCode: errorCode(err), ProducerID: -1, ProducerEpoch: -1}
}
