package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluicemq/sluice/net/wire"
)

// ErrSharedMemory is returned when a connection cannot attach a shared-memory region: the system
// has no memfds, the connection is not over a unix socket, or the broker refused it.
var ErrSharedMemory = errors.New("client: shared memory not attached")

// shmRing is a connection's shared-memory region (wire.AttachMemory), used as a ring of spans,
// one per ProduceShared request in flight. Spans are taken in request order and given back in
// response order, which is request order (a broker answers a connection in order), so the ring
// needs only a head and a tail: logical byte counts that only grow, positions modulo the size.
//
// head is guarded by the connection's wmu (writers take spans one at a time); tail is advanced
// by the connection's reader as responses arrive and read by writers, hence atomic.
type shmRing struct {
	mem  []byte // the client's read-write mapping of the memfd
	head int64
	tail atomic.Int64
}

// take returns the region's position of a free span of n bytes and the logical end to give back
// when its response arrives, or false when the ring has no room (the request then goes through
// the socket instead of waiting). A span never wraps: if it would, the ring's last bytes are
// skipped. Called with wmu held.
func (r *shmRing) take(n int) (pos int, end int64, ok bool) {
	size := int64(len(r.mem))
	if n <= 0 || int64(n) > size {
		return 0, 0, false
	}
	start := r.head
	if p := start % size; p+int64(n) > size {
		start += size - p // skip to the ring's start
	}
	end = start + int64(n)
	// The span must end before the oldest span not given back starts again, one lap later;
	// with every span given back (tail == head), nothing is in its way.
	if tail := r.tail.Load(); end-tail > size && tail != r.head {
		return 0, 0, false
	}
	r.head = end
	return int(start % size), end, true
}

// give returns every span up to end (the response to the request that took it has arrived).
func (r *shmRing) give(end int64) {
	if end > r.tail.Load() {
		r.tail.Store(end)
	}
}

// placeProduce copies req's body (wire.ProduceRequest's encoding, records inline) into a span
// of the ring and returns the ProduceShared request that points at it, or false when the ring
// has no room. Called with wmu held; prefix is scratch for the encoding without the records.
func (r *shmRing) placeProduce(req *wire.ProduceRequest, prefix []byte, cuts []int) (ps wire.ProduceSharedRequest, end int64, prefixOut []byte, cutsOut []int, ok bool) {
	prefix, cuts, recordBytes := req.AppendSegments(prefix[:0], cuts[:0])
	n := int64(len(prefix)) + recordBytes
	if n > int64(len(r.mem)) || n > 1<<31-1 {
		return ps, 0, prefix, cuts, false
	}
	pos, end, ok := r.take(int(n))
	if !ok {
		return ps, 0, prefix, cuts, false
	}
	dst := r.mem[pos : pos+int(n)]
	forProduceParts(req, prefix, cuts, func(b []byte) {
		dst = dst[copy(dst, b):]
	})
	return wire.ProduceSharedRequest{Offset: int64(pos), Length: int32(n)}, end, prefix, cuts, true
}

// forProduceParts calls fn with each piece of req's encoding in order: the encoded parts of
// enc (from AppendSegments, cut at cuts) and the records or batches between them.
func forProduceParts(req *wire.ProduceRequest, enc []byte, cuts []int, fn func([]byte)) {
	prev, i := 0, 0
	for t := range req.Topics {
		for _, p := range req.Topics[t].Partitions {
			fn(enc[prev:cuts[i]])
			if len(p.Records) > 0 && len(p.Batches) == 0 { // as AppendSegments: Batches, if any, are the records
				fn(p.Records)
			}
			for _, b := range p.Batches {
				if len(b) > 0 {
					fn(b)
				}
			}
			prev = cuts[i]
			i++
		}
	}
	fn(enc[prev:])
}

// AttachSharedMemory gives the connection a shared-memory region of size bytes for its Produce
// requests (wire.AttachMemory): from then on, a Produce request that expects a response and fits
// in the free part of the region is copied there and the socket carries only where it is. It
// needs a unix socket to a broker on this host, and Linux. On an error the connection goes on
// without a region (an error wrapping ErrSharedMemory says why); it is still usable.
func (c *Conn) AttachSharedMemory(ctx context.Context, size int) error {
	if c.unix == nil {
		return fmt.Errorf("%w: not a unix socket", ErrSharedMemory)
	}
	ring, file, err := newSharedRegion(size)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSharedMemory, err)
	}
	defer file.Close() // the broker has its own reference once it has the request
	var resp wire.AttachMemoryResponse
	ch := make(chan []byte, 1)
	id, _, err := c.sendCall(&wire.AttachMemoryRequest{Bytes: int64(size)}, pendingCall{ch: ch}, file)
	if err != nil {
		ring.unmap()
		return err
	}
	select {
	case body, ok := <-ch:
		if !ok {
			err = c.closedErr()
		} else {
			err = resp.ReadFrom(body)
		}
	case <-ctx.Done():
		err = ctx.Err() // the broker may still attach it: harmless, no request will name it
	}
	if err == nil && resp.ErrorCode != wire.NoError {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		err = fmt.Errorf("%w: broker: %w: %s", ErrSharedMemory, resp.ErrorCode, msg)
	}
	if err != nil {
		ring.unmap()
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	switch {
	case c.shmClosed:
		ring.unmap()
		return c.closedErr()
	case c.shmAttach != id:
		ring.unmap() // a later AttachMemory replaced this region on the broker
		return fmt.Errorf("%w: replaced by a later region", ErrSharedMemory)
	}
	c.shm = ring
	return nil
}
