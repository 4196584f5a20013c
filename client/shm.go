package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sluicemq/sluice/net/wire"
)

// ErrSharedMemory is returned when a connection cannot attach a shared-memory region: the system
// has no memfds, the connection is not over a unix socket, or the broker refused it.
var ErrSharedMemory = errors.New("client: shared memory not attached")

// SharedRegion is memory a client on a broker's host shares with the broker (wire.AttachMemory):
// a memfd, sealed against shrinking and growing, mapped read-write. Record batches built in it
// and sent on a connection that has it attached (Conn.AttachSharedMemory) travel as pointers:
// the broker copies them out of its own mapping. A Producer over a unix socket keeps its batch
// buffers in one (Config.SharedMemoryBytes).
//
// Bytes written into the region must not change until the response to the request that
// carried them has arrived: the broker reads them when it serves the request, not before. The
// producer's buffers each have a guard word that it changes before reusing the buffer, so that
// it can reuse the buffers of a request that got no response (wire.SharedPart).
type SharedRegion struct {
	file *os.File // the memfd: passed to each connection that attaches the region
	mem  []byte

	// mu is held for reading by whoever writes into the region outside the producer's
	// locks (a batch's warm-up) and for writing by Close, so that Close never unmaps memory
	// being written.
	mu     sync.RWMutex
	closed bool

	slotMu sync.Mutex // guards free
	free   [][]byte   // batch buffers not in use (carve)
	stride int64      // carve's buffer spacing, guard word included (0: not carved); set once
}

// slotGuardBytes precede each buffer carve makes: the buffer's guard word (wire.SharedPart),
// then padding to keep the buffers cache-line aligned.
const slotGuardBytes = 64

// NewSharedRegion creates a region of size bytes (Linux only).
func NewSharedRegion(size int) (*SharedRegion, error) {
	file, mem, err := newSharedMemfd(size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSharedMemory, err)
	}
	return &SharedRegion{file: file, mem: mem}, nil
}

// Bytes is the region's memory.
func (r *SharedRegion) Bytes() []byte { return r.mem }

// Close unmaps the region and closes its memfd. Connections that have it attached must no
// longer send requests that point into it; the brokers keep their own mappings until those
// connections end.
func (r *SharedRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	unmapSharedMemfd(r.mem)
	return r.file.Close()
}

// offsetOf returns where b lies in the region, if it lies wholly in it.
func (r *SharedRegion) offsetOf(b []byte) (int64, bool) {
	if len(b) == 0 || len(r.mem) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p-base > uintptr(len(r.mem)-len(b)) {
		return 0, false
	}
	return int64(p - base), true
}

// carve splits the region into buffers of size bytes for takeSlot, each after its guard word.
// Called once, before the region is shared.
func (r *SharedRegion) carve(size int) {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	if size <= 0 {
		return
	}
	stride := slotStride(size)
	for off := 0; off+stride <= len(r.mem); off += stride {
		buf := off + slotGuardBytes
		r.free = append(r.free, r.mem[buf:buf+size:buf+size])
	}
	r.stride = int64(stride)
}

// slotStride is the spacing carve gives buffers of size bytes: a cache line for the guard
// word, then the buffer rounded up to whole cache lines.
func slotStride(size int) int {
	return slotGuardBytes + (size+slotGuardBytes-1)/slotGuardBytes*slotGuardBytes
}

// guardOf returns the guard word of the carved buffer (with its padding) that bytes
// [off, off+n) of the region lie in, or -1 and nil if they are not wholly in one.
func (r *SharedRegion) guardOf(off int64, n int) (guardOff int64, guard *atomic.Uint64) {
	if r.stride == 0 || off < 0 {
		return -1, nil
	}
	g := off / r.stride * r.stride
	if off-g < slotGuardBytes || off+int64(n) > g+r.stride {
		return -1, nil
	}
	return g, (*atomic.Uint64)(unsafe.Pointer(&r.mem[g]))
}

// renew changes the guard word of slot, a buffer from takeSlot, before anything else in it is
// written for new records: a request that still points into the slot, one that got no
// response and that a broker may yet read, is then refused by that broker rather than served
// with the new bytes. The guard's new value must be visible before any of those writes: x86
// keeps stores in order; on arm64 without LSE atomics the add is a load-acquire and
// store-release pair, which lets later stores pass the store, so a load-acquire follows it
// (never reordered before an earlier store-release, and never passed by later accesses).
// Called with mu held for reading (write).
func (r *SharedRegion) renew(slot []byte) {
	off, ok := r.offsetOf(slot)
	if !ok {
		return
	}
	if _, guard := r.guardOf(off, len(slot)); guard != nil {
		guard.Add(1)
		_ = guard.Load()
	}
}

// takeSlot returns a free buffer from carve, or nil.
func (r *SharedRegion) takeSlot() []byte {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	n := len(r.free)
	if n == 0 {
		return nil
	}
	s := r.free[n-1]
	r.free = r.free[:n-1]
	return s
}

// putSlot gives back a buffer from takeSlot.
func (r *SharedRegion) putSlot(s []byte) {
	r.slotMu.Lock()
	r.free = append(r.free, s)
	r.slotMu.Unlock()
}

// write runs fn, which writes into the region, unless the region is closed; it reports whether
// fn ran.
func (r *SharedRegion) write(fn func()) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return false
	}
	fn()
	return true
}

// sharedRequestLocked turns req into a ProduceShared request if any of its batches lie in the
// connection's region: batches in the region become spans, everything else (the request's
// fields, batches elsewhere) goes inline. It reports false when no batch is in the region.
// Called with wmu held; the request aliases the connection's scratch buffers.
func (c *Conn) sharedRequestLocked(req *wire.ProduceRequest) (*wire.ProduceSharedRequest, bool) {
	if !c.anyInRegionLocked(req) {
		return nil, false // before any copying: the request goes out by writev as it is
	}
	if c.versions != nil && c.Version(wire.ProduceShared) < req.Version {
		return nil, false // its answer must be in the Produce request's version
	}
	enc, cuts, _ := req.AppendSegments(c.buf[:0], c.cuts[:0])
	c.buf, c.cuts = enc, cuts
	inline := c.inline[:0]
	spans := c.spans[:0] // inline[from:to], then the span
	from, shared := 0, false
	forProduceParts(req, enc, cuts, func(b []byte) {
		if off, ok := c.shm.offsetOf(b); ok {
			s := sharedSpan{from: from, to: len(inline), off: off, n: int32(len(b)), guardOff: -1}
			g, guard := c.shm.guardOf(off, len(b))
			if guard != nil {
				s.guardOff, s.guard = g, guard.Load()
			}
			// In a region carved into guarded buffers, a span without a guard could be read
			// by a broker after its memory was reused: such bytes go inline. (The producer
			// never makes one: a batch stays within its buffer.)
			if guard != nil || c.shm.stride == 0 {
				spans = append(spans, s)
				from, shared = len(inline), true
				return
			}
		}
		inline = append(inline, b...)
	})
	spans = append(spans, sharedSpan{from: from, to: len(inline), guardOff: -1})
	c.inline, c.spans = inline, spans
	if !shared {
		return nil, false
	}
	parts := c.shared.Parts[:0]
	for _, s := range spans {
		parts = append(parts, wire.SharedPart{Inline: inline[s.from:s.to], Offset: s.off, Length: s.n, GuardOffset: s.guardOff, Guard: s.guard})
	}
	c.shared.Parts, c.shared.Version = parts, req.Version
	return &c.shared, true
}

// anyInRegionLocked reports whether some batch of req lies in the connection's region.
func (c *Conn) anyInRegionLocked(req *wire.ProduceRequest) bool {
	for t := range req.Topics {
		for _, p := range req.Topics[t].Partitions {
			if _, ok := c.shm.offsetOf(p.Records); ok {
				return true
			}
			for _, b := range p.Batches {
				if _, ok := c.shm.offsetOf(b); ok {
					return true
				}
			}
		}
	}
	return false
}

// sharedSpan is a part of a ProduceShared request under construction: inline bytes by index,
// then a span of the region.
type sharedSpan struct {
	from, to int
	off      int64
	n        int32
	guardOff int64 // -1: none
	guard    uint64
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

// AttachSharedMemory attaches r to the connection (wire.AttachMemory): from then on, a Produce
// request that expects a response and has batches in r sends them as pointers into r. It needs
// a unix socket to a broker on this host, and Linux. On an error the connection goes on without
// a region (an error wrapping ErrSharedMemory says why); it is still usable unless the broker
// closed it (one that does not know AttachMemory does). r must stay open while the connection
// may use it.
func (c *Conn) AttachSharedMemory(ctx context.Context, r *SharedRegion) error {
	if c.unix == nil {
		return fmt.Errorf("%w: not a unix socket", ErrSharedMemory)
	}
	var resp wire.AttachMemoryResponse
	ch := make(chan []byte, 1)
	id, _, err := c.sendCall(&wire.AttachMemoryRequest{Bytes: int64(len(r.mem))}, pendingCall{ch: ch}, r.file)
	if err != nil {
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
		err = ctx.Err() // the broker may still attach it: harmless, no request will point into it
	}
	if err == nil && resp.ErrorCode != wire.NoError {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		err = fmt.Errorf("%w: broker: %w: %s", ErrSharedMemory, resp.ErrorCode, msg)
	}
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	switch {
	case c.shmClosed:
		return c.closedErr()
	case c.shmAttach != id:
		return fmt.Errorf("%w: replaced by a later region", ErrSharedMemory)
	}
	c.shm = r
	return nil
}
