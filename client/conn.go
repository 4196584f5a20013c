package client

import (
	"bufio"
	"context"

	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// Errors of the transport.
var (
	ErrClosed     = errors.New("client: connection closed")
	ErrBadAddress = errors.New("client: bad broker address")
)

// MaxResponseBytes bounds a response frame the client will accept (a fetch response is at most
// fetch.max.bytes plus a little).
const MaxResponseBytes = 1 << 30

// ParseAddress maps a broker address to a network and address for net.Dial: "host:port" is
// TCP; "unix:///path/to.sock", "unix:path" and any address starting with "/" or "." are unix
// sockets.
func ParseAddress(addr string) (network, address string, err error) {
	switch {
	case strings.HasPrefix(addr, "unix://"):
		address = strings.TrimPrefix(addr, "unix://")
	case strings.HasPrefix(addr, "unix:"):
		address = strings.TrimPrefix(addr, "unix:")
	case strings.HasPrefix(addr, "/"), strings.HasPrefix(addr, "."):
		address = addr
	default:
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("%w: %q: %w", ErrBadAddress, addr, err)
		}
		return "tcp", addr, nil
	}
	if address == "" {
		return "", "", fmt.Errorf("%w: %q: empty socket path", ErrBadAddress, addr)
	}
	return "unix", address, nil
}

// Conn is one connection to a broker.
type Conn struct {
	nc       net.Conn
	clientID string

	wmu    sync.Mutex // guards w, nextID, buf, cuts, parts: request order on the wire
	w      *bufio.Writer
	nextID int32
	buf    []byte
	cuts   []int
	parts  [][]byte

	mu      sync.Mutex // guards pending and err
	pending map[int32]chan []byte
	err     error

	done chan struct{}
}

// Dial connects to addr (see ParseAddress).
func Dial(ctx context.Context, addr, clientID string) (*Conn, error) {
	network, address, err := ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", addr, err)
	}
	c := &Conn{
		nc:       nc,
		clientID: clientID,
		w:        bufio.NewWriterSize(nc, 64<<10),
		pending:  map[int32]chan []byte{},
		done:     make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

// Call sends req and decodes the response into resp. Calls from several goroutines are
// pipelined on the connection.
func (c *Conn) Call(ctx context.Context, req wire.Request, resp wire.Response) error {
	ch := make(chan []byte, 1)
	if err := c.send(req, ch); err != nil {
		return err
	}
	select {
	case frame, ok := <-ch:
		if !ok {
			return c.closedErr()
		}
		return resp.ReadFrom(frame)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Send sends a request that gets no response (a produce with acks=0).
func (c *Conn) Send(req wire.Request) error { return c.send(req, nil) }

func (c *Conn) send(req wire.Request, ch chan []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nextID++
	id := c.nextID
	if ch != nil {
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return c.err
		}
		c.pending[id] = ch
		c.mu.Unlock()
	}
	h := wire.RequestHeader{APIKey: req.Key(), CorrelationID: id, ClientID: c.clientID}
	var err error
	if pr, ok := req.(*wire.ProduceRequest); ok {
		err = c.writeProduceLocked(&h, pr)
	} else {
		c.buf = wire.AppendRequestFrame(c.buf[:0], &h, req)
		if _, err = c.w.Write(c.buf); err == nil {
			err = c.w.Flush()
		}
	}
	if err != nil {
		c.fail(fmt.Errorf("client: write: %w", err))
		return c.closedErr()
	}
	return nil
}

// writeProduceLocked writes a Produce request without copying its records: the encoded parts
// and the batches' own bytes go out together in one writev. Records are most of a Produce
// request, so this saves a copy of every produced byte. Called with wmu held.
func (c *Conn) writeProduceLocked(h *wire.RequestHeader, req *wire.ProduceRequest) error {
	buf, start := wire.BeginFrame(c.buf[:0])
	buf = h.AppendTo(buf)
	buf, cuts, recordBytes := req.AppendSegments(buf, c.cuts[:0])
	c.buf, c.cuts = buf, cuts
	if err := wire.FinishFrame(buf, start, recordBytes); err != nil {
		return err
	}
	parts := c.parts[:0]
	prev, i := 0, 0
	for t := range req.Topics {
		for _, p := range req.Topics[t].Partitions {
			parts = append(parts, buf[prev:cuts[i]])
			if len(p.Records) > 0 {
				parts = append(parts, p.Records)
			}
			prev = cuts[i]
			i++
		}
	}
	parts = append(parts, buf[prev:])
	c.parts = parts
	if err := c.w.Flush(); err != nil { // nothing is buffered between requests; keep it so
		return err
	}
	bufs := net.Buffers(parts) // WriteTo consumes its receiver, not c.parts' backing array
	_, err := bufs.WriteTo(c.nc)
	clear(c.parts) // drop references to the batches until the next request
	return err
}

func (c *Conn) readLoop() {
	defer close(c.done)
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var hdr [wire.FrameSizeLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
			return
		}
		n, err := wire.ReadResponseFrameSize(hdr, MaxResponseBytes)
		if err != nil {
			c.fail(fmt.Errorf("client: response frame: %w", err))
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(r, frame); err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
			return
		}
		var rh wire.ResponseHeader
		body, err := rh.ReadFrom(frame)
		if err != nil {
			c.fail(fmt.Errorf("client: response header: %w", err))
			return
		}
		c.mu.Lock()
		ch := c.pending[rh.CorrelationID]
		delete(c.pending, rh.CorrelationID)
		c.mu.Unlock()
		if ch == nil {
			c.fail(fmt.Errorf("client: response to unknown correlation id %d", rh.CorrelationID))
			return
		}
		ch <- body
	}
}

// fail records the connection's first error, closes the socket and fails every waiting call.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	pending := c.pending
	c.pending = map[int32]chan []byte{}
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, ch := range pending {
		close(ch)
	}
}

func (c *Conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return ErrClosed
	}
	return c.err
}

// Close closes the connection, fails outstanding calls, and waits for the reader to stop.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	<-c.done
	return nil
}

// SetDeadline bounds every read and write on the connection (tests).
func (c *Conn) SetDeadline(t time.Time) error { return c.nc.SetDeadline(t) }

// isClosed reports whether the connection has failed or been closed.
func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}
