package broker

// Behavior: AttachMemory and ProduceShared.
//
// A producer on the broker's host may attach a memfd to its unix-socket connection and then send
// Produce request bodies through it: the socket carries only ProduceShared's offset and length.
// The region is checked once, when attached (a memfd of the size claimed, sealed against
// shrinking so that no read of it can fault, no larger than Config.SharedMemoryBytes), and
// mapped read-only until the connection ends. Each ProduceShared span is copied out of the region
// before anything in it is decoded or checked, so a client that rewrites the region afterwards
// changes nothing the broker does; from there the request is a Produce request like any other.
// The copy replaces the socket's two (the client's write and the broker's read) and their
// system calls and wake-ups.

import (
	"errors"
	"fmt"
	"sync"

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
)

// sharedRegionKey is the server.Conn value key of a connection's attached region.
type sharedRegionKey struct{}

// sharedBodies holds the buffers ProduceShared copies request bodies into; handleProduce is
// done with a body when it returns, so a buffer is back in the pool before the next request.
var sharedBodies = sync.Pool{New: func() any { return new([]byte) }}

func (b *Broker) handleAttachMemory(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.AttachMemoryRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.AttachMemoryResponse{}
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

// attachRegion maps the descriptor passed with an AttachMemory request.
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

func (b *Broker) handleProduceShared(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.ProduceSharedRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	region, _ := c.Value(sharedRegionKey{}).(*sharedRegion)
	if region == nil {
		return b.malformed(c, h, errNoRegion)
	}
	mem := region.mem
	if req.Offset < 0 || req.Length <= 0 || req.Offset > int64(len(mem))-int64(req.Length) {
		return b.malformed(c, h, fmt.Errorf("%w: [%d, +%d) of %d bytes", errSpan, req.Offset, req.Length, len(mem)))
	}
	bp := sharedBodies.Get().(*[]byte)
	defer sharedBodies.Put(bp)
	if cap(*bp) < int(req.Length) {
		*bp = make([]byte, req.Length)
	}
	copied := (*bp)[:req.Length]
	copy(copied, mem[req.Offset:])
	return b.handleProduce(c, h, copied)
}
