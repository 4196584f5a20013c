package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// readBufSize is the reader's buffer: one read syscall picks up many small
// pipelined requests. Frames larger than what is buffered are read straight
// into their frame buffer.
const readBufSize = 16 << 10

// Conn is one client connection. The handler sees it in Serve; its methods
// are safe for concurrent use.
//
// # Who writes to the socket
//
// The socket's write side (nc's writes and the writer state w) has one
// owner at a time. It is the writer goroutine's, except during a direct
// write by the reader goroutine:
//
//   - The reader may take it when a request's Pending is already completed
//     when Serve returns and raising outstanding takes it from 0 to 1. Only
//     the reader raises outstanding, and the writer lowers it (in finish) as
//     the last thing it does with w after writing a response. So 0 means
//     every response queued so far has been written and released, the queue
//     is empty, and the writer is waiting on the queue: it touches nothing
//     until the reader sends it a Pending. (Or the writer has stopped on an
//     error and set writer.failed; then the reader queues the Pending, to be
//     abandoned, and writes nothing.)
//   - The reader writes without waiting (writer.nonblock): when the socket
//     takes the whole response, it releases the Pending itself, which lowers
//     outstanding and gives the write side back. When the socket buffer is
//     full it sends the partly written Pending on the queue, handing over the
//     write side with the rest of the response (in w and in Pending.next);
//     the writer goroutine finishes it, waiting on the socket as usual.
//
// The trade-off: a direct write saves the wake-up of the writer goroutine
// (and, on a busy machine, its migration to another core) per response,
// but delays reading the next request by one write system call (and the
// preads of small file parts it inlines, up to maxLoanedBytes): at most
// a socket buffer's worth of bytes (SendBufferBytes), never a wait for the
// client, so a slow client still stalls only itself and the reader keeps
// reading pipelined requests. Only the reader writes directly: a Pending
// completed later (a long poll, a produce waiting for its fsync) goes to
// the writer goroutine, so no other goroutine, such as a log's flusher, is
// ever held up by a socket. The reader also leaves a response to the writer
// when it has more requests buffered, so that the writer batches a
// pipelined run of small responses into one write.
//
// # Who serves a request
//
// A request of Config.OverlapBytes or more is handed to the overlap
// goroutine (started with the first one), which serves such requests in
// the order handed and queues their Pendings for the writer; it never
// writes to the socket. Meanwhile the reader reads the next request: the
// copy out of the socket overlaps the handler's work (a large produce's
// CRC check and append). Before serving a smaller request itself, the
// reader waits until the overlap goroutine has served everything handed to
// it, so Serve is called in request order, one call at a time, and the
// queue stays in request order. Once a handler has closed the connection
// (Close), the requests read behind it are dropped unserved, as the reader
// would not have read them without the overlap goroutine. The reader raises outstanding when it
// hands a request off, as for one it serves, so only the reader raises it;
// the overlap goroutine lowers it for a request without a response.
type Conn struct {
	id        uint64
	transport string
	srv       *Server
	nc        net.Conn
	// ctx is passed to Serve. It is cancelled when the connection ends: as soon as the reader
	// stops on end of file or an error and the requests it read before are served (the peer
	// is gone: a parked long poll answers now rather than at its maxWait), and after the
	// queued responses are written when the connection is closed gracefully.
	ctx    context.Context
	cancel context.CancelFunc

	// queue holds the Pendings read and not yet taken by the writer, in
	// request order. The reader closes it when it stops. Its capacity is
	// MaxInFlight, so with slots the send never blocks.
	queue chan *Pending
	// slots is the in-flight semaphore: the reader takes a slot before
	// reading a request and gives it back once the response is written
	// (the writer, or the reader after a direct write), so at most
	// MaxInFlight requests are unanswered.
	slots chan struct{}
	// wakeCh tells the writer that some Pending completed (capacity 1:
	// wake-ups coalesce; the writer re-checks the head of the queue).
	wakeCh chan struct{}
	// direct: the reader may write responses itself (a socket with a
	// descriptor, on a system with non-blocking writev).
	direct bool

	stop       chan struct{} // closed by Close: read no more requests
	stopOnce   sync.Once
	hard       chan struct{} // closed by closeHard: drop everything
	hardOnce   sync.Once
	writerDone chan struct{} // closed when the writer has exited

	// Invariant: outstanding counts the Pendings read and not yet written
	// (queued, being written by the writer, or being written directly);
	// the idle timer never fires while it is above zero. Only the reader
	// raises it, which makes 0 -> 1 the handover of the write side above.
	outstanding atomic.Int32
	// lastActive is the time of the last read or written byte, as
	// nanoseconds since srv.epoch (monotonic).
	lastActive atomic.Int64

	// overlapCh carries requests from the reader to the overlap goroutine
	// (nil until the first large request; capacity MaxInFlight, so with
	// slots the send never blocks). The reader sends and closes it; overlapping
	// counts the requests sent and not yet served, and overlapDone is closed
	// when the overlap goroutine has exited.
	overlapCh   chan overlapReq
	overlapping sync.WaitGroup
	overlapDone chan struct{}

	// unix is nc when it is a unix socket (descriptors may be passed), else nil.
	unix *net.UnixConn

	// attachMu guards files, values and attachClosed: descriptors the peer
	// passed and no handler has taken yet, values handlers keep for the
	// connection's life (TakeFile, SetValue), and whether closeAttached ran.
	attachMu     sync.Mutex
	files        []*os.File
	values       map[any]io.Closer
	attachClosed bool

	// Reader goroutine only.
	oob     []byte // ancillary data of a read on a unix socket
	br      *bufio.Reader
	sizeBuf [wire.FrameSizeLen]byte
	hdr     wire.RequestHeader // reused so the client id decodes without allocating
	// inFrame: a frame's first byte has arrived and the frame is not read whole yet; it must
	// be within RequestTimeout of frameStart (nanoseconds since srv.epoch, the read that
	// brought the first byte or the end of a wait for budget). frameArmed: readDeadline has
	// been brought forward for it. readDeadline is the socket's read deadline as the reader
	// last set it (Close sets its own, to wake the reader).
	inFrame, frameArmed bool
	frameStart          int64
	readDeadline        time.Time
	// chunks hold the first half of a large frame while it arrives (readFrame).
	chunks []*[]byte
	// ip is the peer's address as the per-address limits count it ("" on a unix socket).
	ip string

	// Owner of the write side only (see above).
	w writer
}

func newConn(s *Server, nc net.Conn, transport string) *Conn {
	c := &Conn{
		id:         s.nextID.Add(1),
		transport:  transport,
		srv:        s,
		nc:         nc,
		queue:      make(chan *Pending, s.cfg.MaxInFlight),
		slots:      make(chan struct{}, s.cfg.MaxInFlight),
		wakeCh:     make(chan struct{}, 1),
		stop:       make(chan struct{}),
		hard:       make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if uc, ok := nc.(*net.UnixConn); ok {
		c.unix, c.oob = uc, make([]byte, oobBytes)
	}
	c.br = bufio.NewReaderSize((*connReader)(c), readBufSize)
	c.w.init(c)
	c.direct = directWriteSupported && c.w.rc != nil
	c.touch()
	if s.cfg.IdleTimeout > 0 {
		c.readDeadline = time.Now().Add(s.cfg.IdleTimeout)
		nc.SetReadDeadline(c.readDeadline)
	}
	return c
}

// ID returns the connection's id, unique within its Server, for logs.
func (c *Conn) ID() uint64 { return c.id }

// Transport returns "tcp" or "unix".
func (c *Conn) Transport() string { return c.transport }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr returns the listener-side address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// NewPending returns an empty Pending for the request being served. Call
// it inside Serve and return the result.
func (c *Conn) NewPending() *Pending {
	p := pendingPool.Get().(*Pending)
	p.conn = c
	return p
}

// Close closes the connection gracefully: no further request is read (a
// Serve in progress finishes), the responses already queued are written,
// then the socket is closed. It does not wait. A handler uses it for
// requests the protocol says end the connection (unknown api key).
func (c *Conn) Close() {
	c.stopOnce.Do(func() { close(c.stop) })
	// Wake a reader blocked in Read: the deadline error makes connReader
	// look at stop. An error means the socket is already closed.
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
}

// closeHard drops the queued responses and closes the socket now.
func (c *Conn) closeHard() {
	c.hardOnce.Do(func() { close(c.hard) })
	c.cancel()
	c.nc.Close()
}

// hardClosed reports whether closeHard has run.
func (c *Conn) hardClosed() bool {
	select {
	case <-c.hard:
		return true
	default:
		return false
	}
}

func (c *Conn) stopping() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// wake tells the writer a Pending completed.
func (c *Conn) wake() {
	select {
	case c.wakeCh <- struct{}{}:
	default: // a wake-up is already pending; the writer will re-check
	}
}

func (c *Conn) touch() { c.lastActive.Store(int64(time.Since(c.srv.epoch))) }

// readLoop is the reader goroutine. It finishes last: after the writer has
// exited it abandons whatever the writer left in the queue, so that every
// Pending is released exactly once.
func (c *Conn) readLoop() {
	defer c.srv.connWG.Done()
	err := c.readRequests()
	if c.overlapCh != nil {
		// It finishes the requests handed to it, with the context they were
		// read under; its Pendings go on the queue before the queue closes.
		close(c.overlapCh)
		<-c.overlapDone
	}
	if !errors.Is(err, errStopped) {
		c.cancel()
	}
	close(c.queue)
	<-c.writerDone
	for p := range c.queue {
		p.abandon()
	}
	c.w.resetIov() // no one writes any more: the chunks of inlined file parts go back
	c.closeAttached()
	c.cancel()
	c.srv.forget(c)
	c.logEnd(err)
}

func (c *Conn) logEnd(err error) {
	attrs := []any{"conn", c.id, "transport", c.transport, "remote", c.nc.RemoteAddr()}
	var mf *malformedError
	switch {
	case errors.As(err, &mf):
		c.srv.log.Info("server: closing connection on malformed frame", append(attrs, "err", err)...)
	case errors.Is(err, errSlowFrame):
		c.srv.stats.slowFrames.Add(1)
		c.srv.log.Info("server: closing connection: a request frame did not arrive whole within request.timeout.ms",
			append(attrs, "timeout", c.srv.cfg.RequestTimeout)...)
	case err == nil || errors.Is(err, io.EOF) || errors.Is(err, errStopped) || errors.Is(err, errIdle):
		c.srv.log.Debug("server: connection closed", append(attrs, "reason", err)...)
	default:
		c.srv.log.Debug("server: connection closed", append(attrs, "err", err)...)
	}
}

func (c *Conn) readRequests() error {
	s := c.srv
	for {
		select {
		case c.slots <- struct{}{}:
		case <-c.stop:
			return errStopped
		case <-c.writerDone:
			return errWriterGone
		}
		if c.stopping() { // when both are ready select picks at random
			return errStopped
		}
		// Waiting for the next frame's first byte is idle time; from that byte on, the frame
		// must arrive whole within RequestTimeout.
		if c.br.Buffered() == 0 {
			if _, err := c.br.Peek(1); err != nil {
				return err
			}
		}
		c.frameStart = c.lastActive.Load()
		if c.br.Buffered() < wire.FrameSizeLen {
			c.armFrameDeadline()
		}
		if _, err := io.ReadFull(c.br, c.sizeBuf[:]); err != nil {
			return err
		}
		// Check the size before allocating anything for it.
		n, err := wire.ReadFrameSize(c.sizeBuf, s.cfg.MaxRequestBytes)
		if err != nil {
			s.stats.malformed.Add(1)
			return &malformedError{err}
		}
		f, err := c.readFrame(n)
		c.frameDone()
		if err != nil {
			return err
		}
		body, err := c.hdr.ReadFrom(*f.buf)
		if err != nil {
			s.putFrame(f)
			s.stats.malformed.Add(1)
			return &malformedError{fmt.Errorf("request header: %w", err)}
		}
		s.stats.requests.Add(1)
		s.stats.bytesRead.Add(int64(wire.FrameSizeLen + n))
		if s.loader != nil {
			if f, body, n, err = c.load(f, body, n); err != nil {
				if errors.Is(err, errStopped) { // while waiting for budget
					return err
				}
				s.stats.malformed.Add(1)
				return &malformedError{err}
			}
		}

		if s.cfg.OverlapBytes > 0 && n >= s.cfg.OverlapBytes {
			c.overlap(overlapReq{hdr: c.hdr, body: body, frame: f})
			continue
		}
		c.overlapping.Wait() // Serve in request order
		if c.stopping() {
			// A request served on the overlap goroutine closed the connection:
			// nothing after it is served, as if never read.
			s.putFrame(f)
			<-c.slots
			return errStopped
		}
		p := s.handler.Serve(c.ctx, c, c.hdr, body)
		if p == nil {
			s.putFrame(f)
			<-c.slots
			continue
		}
		if p.conn != c {
			panic("server: Handler.Serve returned a Pending not from this Conn's NewPending")
		}
		p.attachFrame(f)
		if c.outstanding.Add(1) == 1 && c.direct && p.completed() && c.br.Buffered() == 0 && !c.w.failed {
			// The writer is idle and has nothing queued: write p here.
			if err := c.writeDirect(p); err != nil {
				return err
			}
			continue
		}
		c.queue <- p
	}
}

// load asks the server's BodyLoader whether the request just read stands for a
// body elsewhere and, if so, loads it into a buffer of its own, charged against
// the budget as a frame is, which replaces the frame: the request is then served,
// and the buffer released, as one read from the socket. n becomes the loaded
// body's length. On an error the frame is released. Reader only.
func (c *Conn) load(f frame, body []byte, n int) (frame, []byte, int, error) {
	s := c.srv
	m, err := s.loader.BodyLength(c, c.hdr, body)
	switch {
	case err != nil:
	case m < 0:
		return f, body, n, nil
	case m > s.cfg.MaxRequestBytes:
		err = fmt.Errorf("%w: a body of %d bytes", wire.ErrFrameTooLarge, m)
	}
	if err != nil {
		s.putFrame(f)
		return frame{}, nil, 0, fmt.Errorf("load %v body: %w", c.hdr.APIKey, err)
	}
	// The small frame's charge goes back first: holding it while waiting for the loaded
	// body's could leave the two waiting on each other with a budget of one large frame.
	s.budget.release(f.charge)
	f.charge = 0
	charge, err := c.charge(m)
	if err != nil {
		s.putFrame(f)
		return frame{}, nil, 0, err
	}
	loaded := frame{buf: s.takeBuf(m), charge: charge}
	if err := s.loader.LoadBody(c, c.hdr, body, *loaded.buf); err != nil {
		s.putFrame(loaded)
		s.putFrame(f)
		return frame{}, nil, 0, fmt.Errorf("load %v body: %w", c.hdr.APIKey, err)
	}
	s.putFrame(f)
	s.stats.loaded.Add(int64(m))
	return loaded, *loaded.buf, m, nil
}

// overlapReq is a request handed to the overlap goroutine.
type overlapReq struct {
	hdr   wire.RequestHeader // a copy: the reader decodes the next one into c.hdr
	body  []byte
	frame frame
}

// overlap hands r to the overlap goroutine, starting it if need be. Reader
// only.
func (c *Conn) overlap(r overlapReq) {
	if c.overlapCh == nil {
		c.overlapCh = make(chan overlapReq, c.srv.cfg.MaxInFlight)
		c.overlapDone = make(chan struct{})
		go c.overlapLoop()
	}
	c.srv.stats.overlapped.Add(1)
	c.outstanding.Add(1)
	c.overlapping.Add(1)
	c.overlapCh <- r
}

// overlapLoop is the overlap goroutine: it serves the requests handed to it,
// in order, until the reader closes overlapCh. readLoop waits for it.
func (c *Conn) overlapLoop() {
	defer close(c.overlapDone)
	for r := range c.overlapCh {
		// Once the connection is closing (Conn.Close, from an earlier request's
		// Serve or the server's Close, or a hard close), requests already read
		// are dropped unserved, as the reader would not have read them.
		var p *Pending
		if !c.stopping() && !c.hardClosed() {
			p = c.srv.handler.Serve(c.ctx, c, r.hdr, r.body)
		}
		if p == nil {
			c.srv.putFrame(r.frame)
			c.touch() // before outstanding falls, as the writer does
			c.outstanding.Add(-1)
			<-c.slots
		} else {
			if p.conn != c {
				panic("server: Handler.Serve returned a Pending not from this Conn's NewPending")
			}
			p.attachFrame(r.frame)
			c.queue <- p
		}
		c.overlapping.Done()
	}
}

// writeDirect writes p on the reader goroutine, which owns the write side
// (see Conn), as far as the socket takes it without waiting. The rest goes
// to the writer goroutine with p. An error is a failed write: the
// connection must end.
func (c *Conn) writeDirect(p *Pending) error {
	w := &c.w
	w.nonblock = true
	err := w.writeResponse(p)
	if err == nil {
		err = w.flush()
	}
	w.nonblock = false
	if err == errWouldBlock {
		c.srv.stats.handedOff.Add(1)
		c.queue <- p // hands the write side to the writer
		return nil
	}
	if err == nil {
		c.srv.stats.direct.Add(1)
	}
	w.done = append(w.done, p)
	w.finish() // gives the write side back
	return err
}

// connReader is the Conn seen as the bufio.Reader's source. It turns read
// deadlines into the idle timeout and into stop requests: the deadline is
// moved only when it fires, not per request, which keeps timers off the hot
// path.
type connReader Conn

func (r *connReader) Read(b []byte) (int, error) {
	c := (*Conn)(r)
	for {
		n, err := c.read(b)
		if n > 0 {
			// Hand over the bytes; a deadline error resurfaces on the next
			// call. Returning it now would make bufio fail mid-frame.
			c.touch()
			return n, nil
		}
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if c.stopping() {
			return 0, errStopped
		}
		var frameBy time.Time
		if c.inFrame && c.srv.cfg.RequestTimeout > 0 {
			if frameBy = c.frameDeadline(); !time.Now().Before(frameBy) {
				return 0, errSlowFrame
			}
		}
		next, ok := c.idleDeadline()
		if !ok {
			return 0, errIdle
		}
		if !frameBy.IsZero() && (next.IsZero() || frameBy.Before(next)) {
			next = frameBy
		}
		if err := c.setReadDeadline(next); err != nil {
			return 0, err
		}
		if c.stopping() {
			return 0, errStopped
		}
	}
}

// setReadDeadline sets the socket's read deadline to d (zero: none). Close may set its own
// deadline, to wake the reader, between the reader's check of stop and this call: d would
// then hide it, so a stop seen after setting d brings the deadline back to the past. Reader
// only.
func (c *Conn) setReadDeadline(d time.Time) error {
	c.readDeadline = d
	if err := c.nc.SetReadDeadline(d); err != nil {
		return err
	}
	if c.stopping() {
		c.readDeadline = time.Unix(1, 0)
		return c.nc.SetReadDeadline(c.readDeadline)
	}
	return nil
}

// read reads from the socket; on a unix socket it also keeps the descriptors
// passed with the bytes read (a plain read would have the kernel close them).
func (c *Conn) read(b []byte) (int, error) {
	if c.unix == nil {
		return c.nc.Read(b)
	}
	n, oobn, _, _, err := c.unix.ReadMsgUnix(b, c.oob)
	if oobn > 0 {
		c.keepPassedFiles(c.oob[:oobn])
	}
	return max(n, 0), err // n is -1 on some errors, which bufio.Reader does not accept
}

// idleDeadline returns when the idle timer should next fire, or false if
// the connection has been idle for IdleTimeout.
func (c *Conn) idleDeadline() (time.Time, bool) {
	idle := c.srv.cfg.IdleTimeout
	if idle <= 0 || idle > maxIdleTimeout {
		return time.Time{}, true // no deadline (withDefaults maps a huge one to none too)
	}
	now := time.Now()
	// The writer touches before it decrements outstanding, so reading
	// outstanding first sees a fresh lastActive when it reads zero.
	if c.outstanding.Load() > 0 {
		return now.Add(idle), true
	}
	d := c.srv.epoch.Add(time.Duration(c.lastActive.Load()) + idle)
	return d, d.After(now)
}

// rawConn returns the socket's RawConn for sendfile, or nil if nc is not a
// socket with a descriptor (an injected virtual network).
func rawConn(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
