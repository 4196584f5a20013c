package server

import (
	"sync"
	"sync/atomic"
)

// budget bounds the bytes held in request frames, server-wide
// (queued.max.request.bytes): a frame is charged when its size has been read,
// before its buffer is taken, and the charge is given back when the buffer is
// (after the response has been written, or the connection has died). A
// connection that cannot be charged waits in acquire, reading nothing, so TCP
// flow control holds its peer back; no byte is dropped and nothing spins.
//
// A frame is charged its whole declared size up front (its final buffer's
// capacity), not byte by byte as it arrives: a frame that has been admitted
// can always be read to its end, whereas charging as bytes arrive lets many
// half-read frames share out the whole budget and wait on each other until
// the request timeout closes them all. The memory behind a charge still
// grows as bytes arrive (readFrame), so a frame declared large and sent
// slowly is charged more than it holds, never less.
//
// A frame larger than the whole budget is charged the whole budget: it is
// admitted alone, once every other frame has given its charge back, so any
// frame up to socket.request.max.bytes can be served whatever the budget.
//
// Waiters are served in arrival order, and a frame that could be charged at
// once waits behind any waiter: a large frame waiting for room is not
// starved by a stream of small ones.
//
// The fast path (nobody waiting, room left) is one compare-and-swap to
// charge and one add to give back, per frame: nothing per record.
type budget struct {
	limit int64
	// Invariant: 0 <= used <= limit.
	used atomic.Int64
	// waiting counts the waiters queued or about to queue; while it is above
	// zero, charges go through mu so that they keep the queue's order.
	waiting atomic.Int32
	// waits counts the charges that had to wait (Stats.BudgetWaits).
	waits atomic.Int64

	mu struct {
		sync.Mutex
		queue []*budgetWaiter // FIFO
	}
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once n has been charged for this waiter
}

// newBudget returns a budget of limit bytes, or nil (no bound) if limit <= 0.
func newBudget(limit int64) *budget {
	if limit <= 0 {
		return nil
	}
	return &budget{limit: limit}
}

// charge is what a frame whose buffer holds n bytes is charged: n, or the
// whole budget for a larger one. A nil budget charges nothing.
func (b *budget) charge(n int) int64 {
	if b == nil {
		return 0
	}
	return min(int64(n), b.limit)
}

// cas charges n if there is room.
func (b *budget) cas(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// acquire charges n (from charge), waiting for room in arrival order. It
// reports whether it waited, and gives up with errStopped, charging nothing,
// when any of the cancel channels is closed.
func (b *budget) acquire(n int64, cancel1, cancel2, cancel3 <-chan struct{}) (waited bool, err error) {
	if b == nil || n == 0 {
		return false, nil
	}
	if b.waiting.Load() == 0 && b.cas(n) {
		return false, nil
	}
	b.mu.Lock()
	// Raised before the check below: a release that reads waiting as 0 has
	// already lowered used, and the check sees it.
	b.waiting.Add(1)
	if len(b.mu.queue) == 0 && b.cas(n) {
		b.waiting.Add(-1)
		b.mu.Unlock()
		return false, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.mu.queue = append(b.mu.queue, w)
	b.mu.Unlock()
	b.waits.Add(1)

	select {
	case <-w.ready:
		return true, nil
	case <-cancel1:
	case <-cancel2:
	case <-cancel3:
	}
	b.mu.Lock()
	select {
	case <-w.ready: // granted meanwhile: give it back
		b.mu.Unlock()
		b.release(n)
	default:
		for i, q := range b.mu.queue {
			if q == w {
				b.mu.queue = append(b.mu.queue[:i], b.mu.queue[i+1:]...)
				break
			}
		}
		b.waiting.Add(-1)
		b.grantLocked() // w may have been the head holding the others back
		b.mu.Unlock()
	}
	return true, errStopped
}

// release gives back n charged by acquire.
func (b *budget) release(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.used.Add(-n)
	if b.waiting.Load() != 0 {
		b.mu.Lock()
		b.grantLocked()
		b.mu.Unlock()
	}
}

// grantLocked charges the waiters at the head of the queue while there is
// room, and wakes them. b.mu is held.
func (b *budget) grantLocked() {
	for len(b.mu.queue) > 0 {
		w := b.mu.queue[0]
		if !b.cas(w.n) {
			return
		}
		b.mu.queue[0] = nil
		b.mu.queue = b.mu.queue[1:]
		b.waiting.Add(-1)
		close(w.ready)
	}
	b.mu.queue = nil // let a grown backing array go
}

// waitCount returns how many charges have waited.
func (b *budget) waitCount() int64 {
	if b == nil {
		return 0
	}
	return b.waits.Load()
}

// inUse returns the bytes charged now.
func (b *budget) inUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}
