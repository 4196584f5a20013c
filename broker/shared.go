package broker

// Behavior: AttachMemory and ProduceShared.
//
// A producer on the broker's host may attach a memfd to its unix-socket connection and then send
// Produce request bodies through it: the socket carries only ProduceShared's offset and length.
// The region is checked once, when attached (a memfd of the size claimed, sealed against
// shrinking, no larger than Config.SharedMemoryBytes), and its descriptor kept until the
// connection ends. Each ProduceShared span is read out of it with pread before anything in it is
// decoded or checked, so a client that rewrites the region afterwards changes nothing the broker
// does; from there the request is a Produce request like any other (the connection's reader
// loads the span, as it reads a request from the socket: server.BodyLoader). Reading with pread rather
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

// BodyLength implements server.BodyLoader: a ProduceShared request stands for the Produce body
// in its span of the connection's region, which the connection's reader loads (LoadBody) as it
// would read one from the socket, so that a large one is checked and appended on the overlap
// goroutine while the reader loads the next. The server bounds the length by
// socket.request.max.bytes, as for a request through the socket.
func (b *Broker) BodyLength(c *server.Conn, h wire.RequestHeader, small []byte) (int, error) {
	if h.APIKey != wire.ProduceShared {
		return -1, nil
	}
	span, _, err := sharedSpan(c, h, small)
	if err != nil {
		return 0, err
	}
	return int(span.Length), nil
}

// LoadBody implements server.BodyLoader: it reads the span with pread.
func (b *Broker) LoadBody(c *server.Conn, h wire.RequestHeader, small, dst []byte) error {
	span, region, err := sharedSpan(c, h, small)
	if err != nil {
		return err
	}
	if _, err := region.f.ReadAt(dst[:span.Length], span.Offset); err != nil {
		return fmt.Errorf("%w: %w", errSpanRead, err)
	}
	return nil
}

// sharedSpan decodes a ProduceShared request and checks its span against the connection's
// region.
func sharedSpan(c *server.Conn, h wire.RequestHeader, small []byte) (wire.ProduceSharedRequest, *sharedRegion, error) {
	var req wire.ProduceSharedRequest
	if err := wire.CheckVersion(h.APIKey, h.APIVersion); err != nil {
		return req, nil, err
	}
	if err := req.ReadFrom(small); err != nil {
		return req, nil, err
	}
	region, _ := c.Value(sharedRegionKey{}).(*sharedRegion)
	if region == nil {
		return req, nil, errNoRegion
	}
	if req.Offset < 0 || req.Length <= 0 || req.Offset > region.size-int64(req.Length) {
		return req, nil, fmt.Errorf("%w: [%d, +%d) of %d bytes", errSpan, req.Offset, req.Length, region.size)
	}
	return req, region, nil
}
