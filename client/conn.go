package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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

// receiveBufferBytes is SO_RCVBUF of TCP connections to brokers (see Dial).
const receiveBufferBytes = 4 << 20

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

// DialFunc opens a network connection, as net.Dialer.DialContext does: network is "tcp" or
// "unix" (ParseAddress). Config.Dial takes one, so that tests can cut, delay or drop links.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Conn is one connection to a broker.
type Conn struct {
	addr     string // the broker address it was dialled at, for errors
	nc       net.Conn
	unix     *net.UnixConn // nc, when it is a unix socket
	clientID string

	// wmu guards w, nextID, the scratch buffers (buf, cuts, parts, inline, spans, shared),
	// shm, shmAttach and shmClosed: request order on the wire, and the shared-memory region in
	// use, which the reader drops (under wmu) when it stops.
	wmu       sync.Mutex
	w         *bufio.Writer
	nextID    int32
	buf       []byte
	cuts      []int
	parts     [][]byte
	inline    []byte
	spans     []sharedSpan
	shared    wire.ProduceSharedRequest
	shm       *SharedRegion // nil until AttachSharedMemory succeeds
	shmAttach int32         // correlation id of the last AttachMemory sent
	shmClosed bool

	// versions are the api ranges the broker advertised (negotiate), nil if it was not asked:
	// set before the connection is shared, read-only after.
	versions map[wire.APIKey]wire.APIVersionRange

	mu      sync.Mutex // guards pending and err
	pending map[int32]pendingCall
	err     error

	done chan struct{}
}

// Dial connects to addr (see ParseAddress).
func Dial(ctx context.Context, addr, clientID string) (*Conn, error) {
	return DialWith(ctx, nil, addr, clientID)
}

// DialWith is Dial through dial (nil: a net.Dialer).
func DialWith(ctx context.Context, dial DialFunc, addr, clientID string) (*Conn, error) {
	network, address, err := ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		// A large receive buffer lets a 1 MiB fetch response arrive in fewer reads, each
		// of which may otherwise park the reader on the poller: +10 % consumer throughput
		// over loopback TCP (BenchmarkConsumer/none/tcp/reuse, 881 -> 969 MB/s). Kafka's
		// receive.buffer.bytes; fixed here, and it turns off the kernel's autotuning for the
		// connection, so it must stay well above what one response needs.
		_ = tc.SetReadBuffer(receiveBufferBytes)
	}
	uc, _ := nc.(*net.UnixConn)
	c := &Conn{
		addr:     addr,
		nc:       nc,
		unix:     uc,
		clientID: clientID,
		w:        bufio.NewWriterSize(nc, 64<<10),
		pending:  map[int32]pendingCall{},
		done:     make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

// negotiate asks the broker which api versions it speaks (ApiVersions), within timeout, for
// Version and supports. Called once, before the connection is shared.
func (c *Conn) negotiate(ctx context.Context, timeout time.Duration) error {
	var resp wire.APIVersionsResponse
	if err := c.callWithin(ctx, timeout, &wire.APIVersionsRequest{}, &resp); err != nil {
		return err
	}
	if resp.ErrorCode != wire.NoError {
		return fmt.Errorf("broker %s: api versions: %w", c.addr, codeErr(resp.ErrorCode, nil))
	}
	c.versions = make(map[wire.APIKey]wire.APIVersionRange, len(resp.APIKeys))
	for _, r := range resp.APIKeys {
		c.versions[r.APIKey] = r
	}
	return nil
}

// Version is the highest version of k that both this package and the broker speak, 0 if the
// connection did not ask the broker (negotiate) or they share none above it.
func (c *Conn) Version(k wire.APIKey) int16 {
	r, ok := c.versions[k]
	_, hi, known := k.Versions()
	if !ok || !known {
		return 0
	}
	v := min(hi, r.MaxVersion)
	if v < r.MinVersion || v < 0 {
		return 0
	}
	return v
}

// supports reports whether the broker advertised k; true if it was not asked (the caller
// finds out by trying, as before negotiation existed).
func (c *Conn) supports(k wire.APIKey) bool {
	if c.versions == nil {
		return true
	}
	_, ok := c.versions[k]
	return ok
}

// Addr is the broker address the connection was dialled at.
func (c *Conn) Addr() string { return c.addr }

// pendingCall is a request waiting for its response.
type pendingCall struct {
	// ch receives the response body, and is closed if the connection fails first. Capacity 1:
	// the reader never waits for a caller that gave up.
	ch chan []byte
	// into: read the body into buf if it fits, else into a new buffer with room to spare, for
	// the caller to reuse (CallInto). Otherwise the body gets a buffer of its exact size.
	into bool
	buf  []byte
}

// Call sends req and decodes the response into resp. Calls from several goroutines are
// pipelined on the connection. The response is read into a buffer of its own, which resp may
// alias (a fetch response's records do) for as long as it likes.
func (c *Conn) Call(ctx context.Context, req wire.Request, resp wire.Response) error {
	ch := make(chan []byte, 1)
	if _, err := c.send(req, ch); err != nil {
		return err
	}
	select {
	case body, ok := <-ch:
		if !ok {
			return c.closedErr()
		}
		return resp.ReadFrom(body)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CallInto is Call with the response read into buf: straight from the socket, without
// zeroing, so that a caller can reuse one buffer for response after response (a consumer's
// fetches). If the response does not fit in cap(buf), a larger buffer is allocated instead.
// CallInto returns the buffer that holds the response body (buf or its replacement, to pass
// again next time), which resp may alias; on an error it returns buf unchanged.
//
// When CallInto returns, the connection no longer writes to buf, whatever happened: if ctx is
// done before the response arrives, the response is read into a fresh buffer and dropped; if
// ctx is done while the response is being read into buf, the connection is closed (the rest
// of that frame cannot be skipped without reading it somewhere) and CallInto waits for its
// reader to let go of buf. Other calls pipelined on the connection are unaffected in the first
// case and fail with the connection in the second.
func (c *Conn) CallInto(ctx context.Context, req wire.Request, resp wire.Response, buf []byte) ([]byte, error) {
	return c.callInto(ctx, req, resp, buf, make(chan []byte, 1))
}

// callInto is CallInto with the channel the response comes back on (capacity 1, empty), so
// that a caller making one call at a time can reuse it: after a call that returned no error
// the channel is empty and the connection holds no reference to it; after an error it may
// still receive a late response or be closed, and must not be used again.
func (c *Conn) callInto(ctx context.Context, req wire.Request, resp wire.Response, buf []byte, ch chan []byte) ([]byte, error) {
	id, _, err := c.sendCall(req, pendingCall{ch: ch, into: true, buf: buf}, nil)
	if err != nil {
		return buf, err
	}
	select {
	case body, ok := <-ch:
		if !ok {
			return buf, c.closedErr()
		}
		return body, resp.ReadFrom(body)
	case <-ctx.Done():
	}
	c.mu.Lock()
	if p, ok := c.pending[id]; ok {
		// Not started: let the reader read the response into a buffer of its own and drop it.
		p.into, p.buf = false, nil
		c.pending[id] = p
		c.mu.Unlock()
		return buf, ctx.Err()
	}
	c.mu.Unlock()
	// The reader has taken the call: it is reading the response into buf, or has done so.
	select {
	case body, ok := <-ch:
		if ok {
			return body, resp.ReadFrom(body)
		}
	default:
		c.fail(fmt.Errorf("%w: call abandoned while its response was being read: %w", ErrClosed, ctx.Err()))
		<-ch // sent or closed once the reader stops reading into buf
	}
	return buf, ctx.Err()
}

// Send sends a request that gets no response (a produce with acks=0).
func (c *Conn) Send(req wire.Request) error {
	_, err := c.send(req, nil)
	return err
}

// send writes req and, if ch is not nil, registers ch to receive the response body (in a
// fresh buffer) or to be closed if the connection fails first. ch needs capacity 1. It reports
// whether the request pointed into the shared-memory region, even when the write failed (the
// broker may have it whole).
func (c *Conn) send(req wire.Request, ch chan []byte) (shared bool, err error) {
	_, shared, err = c.sendCall(req, pendingCall{ch: ch}, nil)
	return shared, err
}

// sendCall writes req and, if p.ch is set, registers p to receive the response. It returns
// the request's correlation id and whether the request pointed into the shared-memory region:
// a Produce request that expects a response does, as ProduceShared, when the connection has a
// region attached and some of its batches lie in it. file, if not nil, is passed with the
// request (SCM_RIGHTS; unix sockets only).
func (c *Conn) sendCall(req wire.Request, p pendingCall, file *os.File) (int32, bool, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nextID++
	id := c.nextID
	if _, ok := req.(*wire.AttachMemoryRequest); ok {
		// The broker drops the connection's region when it serves this, before the answer:
		// requests sent from now on must not name a span of it.
		c.dropSharedLocked()
		c.shmAttach = id
	}
	pr, isProduce := req.(*wire.ProduceRequest)
	var shared *wire.ProduceSharedRequest
	if isProduce && p.ch != nil && c.shm != nil {
		// Only with a response to come: the batches must not change until the broker has
		// copied them, and the response is what says it has.
		shared, _ = c.sharedRequestLocked(pr)
	}
	if p.ch != nil {
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return id, false, c.err
		}
		c.pending[id] = p
		c.mu.Unlock()
	}
	h := wire.RequestHeader{APIKey: req.Key(), APIVersion: wire.VersionOf(req), CorrelationID: id, ClientID: c.clientID}
	err := c.encodeAndWriteLocked(&h, req, pr, shared, file)
	if _, ok := errors.AsType[*wire.EncodeError](err); ok {
		// A field too long for the protocol (a 40,000-byte topic name): refused before a byte
		// was written, so the connection and the other calls on it are fine.
		if p.ch != nil {
			c.mu.Lock()
			delete(c.pending, id)
			c.mu.Unlock()
		}
		return id, false, fmt.Errorf("client: %s: %w", req.Key(), err)
	}
	if err != nil {
		c.fail(fmt.Errorf("client: write: %w", err))
		return id, shared != nil, c.closedErr() // it may have reached the broker whole
	}
	return id, shared != nil, nil
}

// encodeAndWriteLocked writes the request as sendCall chose to send it. Every writer encodes
// the whole frame before it writes, so an EncodeError (returned, not panicked) means nothing
// was written. Called with wmu held.
func (c *Conn) encodeAndWriteLocked(h *wire.RequestHeader, req wire.Request, pr *wire.ProduceRequest,
	shared *wire.ProduceSharedRequest, file *os.File) (err error) {
	defer wire.CatchEncodeError(&err)
	switch {
	case shared != nil:
		h.APIKey = wire.ProduceShared
		defer clear(c.shared.Parts) // drop references to the inline bytes' buffer
		return c.writeLocked(h, shared, nil)
	case pr != nil:
		return c.writeProduceLocked(h, pr)
	default:
		return c.writeLocked(h, req, file)
	}
}

// writeLocked writes one request frame, with file passed alongside if not nil. Called with wmu
// held.
func (c *Conn) writeLocked(h *wire.RequestHeader, req wire.Request, file *os.File) error {
	c.buf = wire.AppendRequestFrame(c.buf[:0], h, req)
	if file == nil {
		if _, err := c.w.Write(c.buf); err != nil {
			return err
		}
		return c.w.Flush()
	}
	if c.unix == nil {
		return fmt.Errorf("%w: passing a descriptor needs a unix socket", ErrSharedMemory)
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	// The descriptor goes with the frame's first byte; the rest, if the socket took only part,
	// follows without it.
	n, _, err := c.unix.WriteMsgUnix(c.buf, unixRights(file), nil)
	if err == nil && n < len(c.buf) {
		_, err = c.nc.Write(c.buf[n:])
	}
	return err
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
	forProduceParts(req, buf, cuts, func(b []byte) { parts = append(parts, b) })
	c.parts = parts
	if err := c.w.Flush(); err != nil { // nothing is buffered between requests; keep it so
		return err
	}
	bufs := net.Buffers(parts) // WriteTo consumes its receiver, not c.parts' backing array
	_, err := bufs.WriteTo(c.nc)
	clear(c.parts) // drop references to the batches until the next request
	return err
}

// readLoop reads response after response. It reads a frame's size and correlation id first,
// so that it knows the waiting call, and then the body straight into the call's buffer
// (CallInto) or a fresh one (Call). bufio.Reader hands reads of at least its size straight to
// the socket, so of a large body only what was already buffered is copied.
func (c *Conn) readLoop() {
	defer close(c.done)
	defer c.stopShared()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var hdr [wire.FrameSizeLen + wire.ResponseHeaderLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
			return
		}
		n, err := wire.ReadResponseFrameSize([wire.FrameSizeLen]byte(hdr[:wire.FrameSizeLen]), MaxResponseBytes)
		if err != nil {
			c.fail(fmt.Errorf("client: response frame: %w", err))
			return
		}
		var rh wire.ResponseHeader
		if _, err := rh.ReadFrom(hdr[wire.FrameSizeLen:]); err != nil {
			c.fail(fmt.Errorf("client: response header: %w", err))
			return
		}
		c.mu.Lock()
		p, ok := c.pending[rh.CorrelationID]
		delete(c.pending, rh.CorrelationID)
		c.mu.Unlock()
		if !ok {
			c.fail(fmt.Errorf("client: response to unknown correlation id %d", rh.CorrelationID))
			return
		}
		n -= wire.ResponseHeaderLen
		var body []byte
		switch {
		case !p.into:
			body = make([]byte, n)
		case cap(p.buf) >= n:
			body = p.buf[:n]
		default:
			body = make([]byte, n, n+n/8) // room for a slightly larger response next time
		}
		if _, err := io.ReadFull(r, body); err != nil {
			close(p.ch) // the call is no longer pending: fail would not close it
			c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
			return
		}
		p.ch <- body
	}
}

// stopShared drops the shared-memory region once the connection has failed, for good.
func (c *Conn) stopShared() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.dropSharedLocked()
	c.shmClosed = true
}

// dropSharedLocked stops using the shared-memory region: later requests send their batches
// through the socket. Called with wmu held.
func (c *Conn) dropSharedLocked() { c.shm = nil }

// fail records the connection's first error, closes the socket and fails every waiting call.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	pending := c.pending
	c.pending = map[int32]pendingCall{}
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, p := range pending {
		close(p.ch)
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
