package broker

// Behavior: AttachMemory and ProduceShared.
//
// A producer on the broker's host may attach a memfd to its unix-socket connection, build its
// record batches in it, and send Produce requests that point to them: the socket carries only
// ProduceShared's inline parts (the request's small fields) and the batches' offsets and lengths.
// The region is checked once, when attached (a memfd on tmpfs of the size claimed, sealed
// against shrinking, no larger than Config.SharedMemoryBytes), and mapped read-only until the
// connection ends. Each ProduceShared body (inline parts and spans, in order) is copied out
// before anything in it is decoded or checked, so a client that rewrites the region afterwards
// changes nothing the broker does; and a span's guard word (wire.SharedPart) must hold its
// value from before the span is copied until every span has been, so a request the client gave
// up on and whose memory it has reused is refused, not served with other records. From there
// the request is a Produce request like any other (the connection's reader loads the body as
// it reads a request from the socket: server.BodyLoader). The seal and tmpfs leave the client
// no way to make the mapping fault, and the copy runs with the runtime's panic-on-fault set
// anyway, so that a fault would close the connection rather than crash the
// broker. A client can make the broker fault in at most the region's pages (holes it punched),
// which stay charged to the broker while mapped: bounded by the region's size. The one copy
// replaces the socket's two (the client's write and the broker's read) and their system calls
// and wake-ups.
//
// An AttachMemory request drops the connection's region before it checks the new one, so a
// refused second region leaves none, as the client assumes from the moment it sends one.

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

// Errors of the shared-memory path; the client sees their text in AttachMemory's errorMessage.
var (
	errNoDescriptor   = errors.New("no descriptor came with the request")
	errSharedMemOff   = errors.New("shared memory is off on this broker")
	errSharedMemSize  = errors.New("region size out of bounds")
	errNotSealedMemfd = errors.New("not a memfd sealed against shrinking")
	errNoRegion       = errors.New("ProduceShared on a connection with no attached region")
	errSpan           = errors.New("ProduceShared span outside the attached region")
	errSpanRead       = errors.New("ProduceShared span not readable")
	errGuard          = errors.New("ProduceShared guard changed: the client reused the memory")
)

// sharedRegion is a client's memfd, mapped (mapSharedRegion) and attached to a connection as a
// server.Conn value, which the connection closes after serving its last request. Its reader
// copies from it (LoadBody); Close, when AttachMemory replaces it, normally runs on the same
// goroutine, but would run on the overlap goroutine for an AttachMemory frame of
// server.Config.OverlapBytes or more, so mu keeps an unmap from ever meeting a copy.
type sharedRegion struct {
	mu    sync.RWMutex  // read: a copy in progress; write: Close
	mem   []byte        // nil once closed
	fence atomic.Uint64 // see copyParts
	// req is the connection's ProduceShared request being loaded, decoded again by
	// BodyLength and LoadBody into the same slices (no allocation per request). Reader only.
	req wire.ProduceSharedRequest
}

func (r *sharedRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return nil
	}
	err := unmapSharedRegion(r.mem)
	r.mem = nil
	return err
}

// sharedRegionKey is the server.Conn value key of a connection's attached region.
type sharedRegionKey struct{}

func (b *Broker) handleAttachMemory(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.AttachMemoryRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.AttachMemoryResponse{}
	c.SetValue(sharedRegionKey{}, nil) // whatever happens next, the old region is gone
	region, err := b.attachRegion(c, req.Bytes)
	if err != nil {
		msg := err.Error()
		resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, &msg
		b.logger.Debug("refused a shared-memory region", "conn", c.ID(), "bytes", req.Bytes, "err", err)
	} else {
		c.SetValue(sharedRegionKey{}, region)
	}
	return respond(c, h, resp)
}

// attachRegion checks the descriptor passed with an AttachMemory request.
func (b *Broker) attachRegion(c *server.Conn, size int64) (*sharedRegion, error) {
	f := c.TakeFile()
	if f == nil {
		return nil, errNoDescriptor
	}
	defer f.Close() // the mapping keeps the memory
	limit := b.cfg.SharedMemoryBytes
	if limit <= 0 {
		return nil, errSharedMemOff
	}
	if size <= 0 || size > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errSharedMemSize, size, limit)
	}
	return mapSharedRegion(f, size)
}

// BodyLength implements server.BodyLoader: a ProduceShared request stands for the Produce body
// its inline parts and region spans make up, which the connection's reader loads (LoadBody) as it
// would read one from the socket, so that a large one is checked and appended on the overlap
// goroutine while the reader loads the next. The server bounds the length by
// socket.request.max.bytes, as for a request through the socket.
func (b *Broker) BodyLength(c *server.Conn, h wire.RequestHeader, small []byte) (int, error) {
	if h.APIKey != wire.ProduceShared {
		return -1, nil
	}
	req, _, err := sharedParts(c, h, small)
	if err != nil {
		return 0, err
	}
	n, _ := req.BodyLength() // checked by sharedParts
	return n, nil
}

// LoadBody implements server.BodyLoader: it copies the inline parts and the spans, in order.
func (b *Broker) LoadBody(c *server.Conn, h wire.RequestHeader, small, dst []byte) error {
	req, region, err := sharedParts(c, h, small)
	if err != nil {
		return err
	}
	region.mu.RLock()
	defer region.mu.RUnlock()
	if len(region.mem) == 0 {
		return errNoRegion // replaced since sharedParts looked
	}
	return region.copyParts(req.Parts, dst, b.hooks.Load())
}

// copyParts copies the parts into dst, each span between two readings of its guard (a
// seqlock read): the guard must hold its value before the span is copied and again after
// every span has been, or the request is refused (errGuard), since the client may have reused
// the memory meanwhile (hooks, nil outside tests, may step in between the copies and the
// second readings). It runs with the runtime's panic-on-fault set, so that a fault
// (SIGBUS, should the memfd lose pages after all) is an error for this connection, not the
// end of the broker. Called with mu held for reading.
func (r *sharedRegion) copyParts(parts []wire.SharedPart, dst []byte, hooks *testHooks) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v", errSpanRead, v)
		}
	}()
	for i := range parts {
		part := &parts[i]
		dst = dst[copy(dst, part.Inline):]
		if part.Length == 0 {
			continue
		}
		if err := r.checkGuard(part); err != nil {
			return err
		}
		dst = dst[copy(dst[:part.Length], r.mem[part.Offset:]):]
	}
	if hooks != nil && hooks.sharedCopied != nil {
		hooks.sharedCopied()
	}
	// The copies' loads must be done before the guards are read again: a client that changes
	// a guard and then the memory behind it must not have its new bytes copied while the old
	// guard value is still seen. x86 keeps loads in order; on arm64 an acquire load alone
	// lets earlier loads pass it, and this read-modify-write (acquire and release) does not.
	r.fence.Add(1)
	for i := range parts {
		if parts[i].Length > 0 {
			if err := r.checkGuard(&parts[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkGuard reports whether part's guard, if it names one, holds its value. sharedParts
// checked that the word lies in the region, 8-aligned (the mapping is page-aligned).
func (r *sharedRegion) checkGuard(part *wire.SharedPart) error {
	if part.GuardOffset < 0 {
		return nil
	}
	if v := (*atomic.Uint64)(unsafe.Pointer(&r.mem[part.GuardOffset])).Load(); v != part.Guard {
		return fmt.Errorf("%w: word at %d holds %d, not %d", errGuard, part.GuardOffset, v, part.Guard)
	}
	return nil
}

// sharedParts decodes a ProduceShared request and checks its spans against the connection's
// region.
func sharedParts(c *server.Conn, h wire.RequestHeader, small []byte) (*wire.ProduceSharedRequest, *sharedRegion, error) {
	if err := wire.CheckVersion(h.APIKey, h.APIVersion); err != nil {
		return nil, nil, err
	}
	region, _ := c.Value(sharedRegionKey{}).(*sharedRegion)
	if region == nil {
		return nil, nil, errNoRegion
	}
	req := &region.req
	if err := req.ReadFrom(small); err != nil {
		return nil, nil, err
	}
	if _, ok := req.BodyLength(); !ok {
		return nil, nil, fmt.Errorf("%w: lengths out of range", errSpan)
	}
	region.mu.RLock()
	defer region.mu.RUnlock()
	size := int64(len(region.mem))
	var spans int64
	for _, part := range req.Parts {
		if g := part.GuardOffset; g != -1 && (g < 0 || g > size-8 || g%8 != 0) {
			return nil, nil, fmt.Errorf("%w: guard at %d of %d bytes", errSpan, g, size)
		}
		if part.Length == 0 {
			continue
		}
		if part.Offset < 0 || part.Offset > size-int64(part.Length) {
			return nil, nil, fmt.Errorf("%w: [%d, +%d) of %d bytes", errSpan, part.Offset, part.Length, size)
		}
		spans += int64(part.Length)
	}
	if spans > size {
		// Spans that repeat or overlap: a few bytes of socket traffic would make the broker
		// allocate and copy far more than the client ever shared.
		return nil, nil, fmt.Errorf("%w: %d bytes of spans in a region of %d", errSpan, spans, size)
	}
	return req, region, nil
}
