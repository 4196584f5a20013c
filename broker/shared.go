package broker

// Behavior: AttachMemory and ProduceShared.
//
// A producer on the broker's host may attach a memfd to its unix-socket connection and then send
// Produce request bodies through it: the socket carries only ProduceShared's offset and length.
// The region is checked once, when attached (a memfd of the size claimed, sealed against
// shrinking, no larger than Config.SharedMemoryBytes), and its descriptor kept until the
// connection ends. Each ProduceShared span is read out of it with pread before anything in it is
// decoded or checked, so a client that rewrites the region afterwards changes nothing the broker
// does; from there the request is a Produce request like any other. Reading with pread rather
// than through a mapping means nothing the client does to its memfd can fault the broker (a hole
// reads as zeros without allocating; a short read is an error), and there is no mapping to
// leak. The copy replaces the socket's two (the client's write and the broker's read) and their
// system calls and wake-ups.
//
// An AttachMemory request drops the connection's region before it checks the new one, so a
// refused second region leaves none, as the client assumes from the moment it sends one.

import (
	"errors"
	"fmt"
	"os"
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
	errSpanRead       = errors.New("ProduceShared span not readable")
)

// sharedRegion is a client's memfd, attached to a connection as a server.Conn value: the
// connection closes it after serving its last request, and only its handlers read it.
type sharedRegion struct {
	f    *os.File
	size int64
}

func (r *sharedRegion) Close() error { return r.f.Close() }

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
	err := func() error {
		limit := b.cfg.SharedMemoryBytes
		if limit <= 0 {
			return errSharedMemOff
		}
		if size <= 0 || size > limit {
			return fmt.Errorf("%w: %d bytes, limit %d", errSharedMemSize, size, limit)
		}
		return checkSharedRegion(f, size)
	}()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sharedRegion{f: f, size: size}, nil
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
	// A body through the region is bounded as one through the socket (socket.request.max.bytes).
	if req.Offset < 0 || req.Length <= 0 || int(req.Length) > b.cfg.SocketRequestMaxBytes || req.Offset > region.size-int64(req.Length) {
		return b.malformed(c, h, fmt.Errorf("%w: [%d, +%d) of %d bytes", errSpan, req.Offset, req.Length, region.size))
	}
	bp := sharedBodies.Get().(*[]byte)
	defer sharedBodies.Put(bp)
	if cap(*bp) < int(req.Length) {
		*bp = make([]byte, req.Length)
	}
	copied := (*bp)[:req.Length]
	if _, err := region.f.ReadAt(copied, req.Offset); err != nil {
		return b.malformed(c, h, fmt.Errorf("%w: %w", errSpanRead, err))
	}
	return b.handleProduce(c, h, copied)
}
