package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// Handler serves requests. A broker implements it; the server knows nothing
// of what requests mean.
type Handler interface {
	// Serve is called once per request, in request order, one call at a time
	// per connection: on the connection's reader goroutine, or for a request of
	// Config.OverlapBytes or more on its overlap goroutine (see Conn), each
	// call returning before the next starts (happens-before).
	// It must not block on I/O or waits: it starts the work and returns a
	// Pending from c.NewPending, completed now or later, or nil for no
	// response (acks=0 produce).
	//
	// body aliases the frame buffer. It stays valid until the returned
	// Pending has been written (after Complete), so a handler can keep
	// sub-slices such as produce records without copying; with a nil Pending
	// it is valid only until Serve returns. ctx is cancelled when the
	// connection closes, so long polls can give up.
	//
	// Unknown api keys and unsupported versions are the handler's to answer
	// (or to close the connection with c.Close).
	Serve(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending
}

// BodyLoader is a Handler some of whose requests carry only where their body
// is (a span of a shared-memory region the connection attached): the
// connection's reader loads such a body before it decides who serves the
// request, as it would read one from the socket, so a large loaded body is
// served on the overlap goroutine while the reader loads the next (see Conn).
// Both methods are called on the reader, in request order, before the Serve
// call of their request and after the Serve calls of the requests before it
// that the reader served itself; a request before it handed to the overlap
// goroutine may still be being served. Whatever they read that a Serve call
// may change needs its own synchronization.
type BodyLoader interface {
	Handler
	// BodyLength returns the length of the body that request h, whose own
	// body is small, stands for, or -1 if h is served as it is. An error
	// closes the connection as a malformed frame does.
	BodyLength(c *Conn, h wire.RequestHeader, small []byte) (int, error)
	// LoadBody fills dst, of the length BodyLength returned, with that body.
	// An error closes the connection as a malformed frame does.
	LoadBody(c *Conn, h wire.RequestHeader, small, dst []byte) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending

// Serve calls f.
func (f HandlerFunc) Serve(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
	return f(ctx, c, h, body)
}

// Config configures a Server. The zero value of each field means its
// default.
type Config struct {
	// TCPAddr is the TCP address to listen on ("127.0.0.1:0" in tests); ""
	// for none.
	TCPAddr string
	// UnixPath is the unix socket to listen on; "" for none. A stale socket
	// file (nobody listening) is removed first; a live one is an error
	// (ErrUnixSocketInUse).
	UnixPath string
	// MaxRequestBytes bounds a request frame's size field
	// (socket.request.max.bytes). Default wire.MaxRequestBytes (100 MiB).
	MaxRequestBytes int
	// IdleTimeout closes a connection with no request read and no response
	// outstanding for this long (connections.max.idle.ms). Default 10
	// minutes; negative disables it.
	IdleTimeout time.Duration
	// SendBufferBytes is each connection's SO_SNDBUF (Kafka's socket.send.buffer.bytes).
	// Default DefaultSendBufferBytes; negative keeps the operating system's default. The kernel
	// caps it at net.core.wmem_max.
	SendBufferBytes int
	// MaxInFlight bounds the requests a connection may have read ahead of
	// their responses; beyond it the server stops reading that connection.
	// Default 16.
	MaxInFlight int
	// OverlapBytes: a request frame of at least this many bytes is served on
	// a second goroutine of its connection, so that the reader reads the next
	// request while the handler checks and appends this one (a large produce
	// spends most of its time there; on the 2-core test VM, produce over the
	// unix socket gained 7-29 % in the median of alternated runs, over TCP,
	// where the client's side costs more, nothing: BENCHMARKS.md, Produce, 1 KiB records).
	// Smaller requests are served by the reader, after every request before
	// them. Default DefaultOverlapBytes; negative: every request on the
	// reader.
	OverlapBytes int
	// MaxConnections bounds the connections open at once over both listeners
	// (max.connections); one more is closed at accept. Default unlimited; the
	// broker derives its own from the open-file limit.
	MaxConnections int
	// MaxConnectionsPerIP bounds the TCP connections from one IP address
	// (max.connections.per.ip). Default unlimited. Unix-socket peers have no
	// address and are not counted.
	MaxConnectionsPerIP int
	// ListenerMaxConnections bounds one listener's connections
	// (listener.name.<listener>.max.connections), by listener name:
	// ListenerTCP or ListenerUnix. Default: only MaxConnections.
	ListenerMaxConnections map[string]int
	// RefusedLogInterval: a connection refused at a limit is logged at most
	// once per interval per address, the line counting the refusals since
	// the previous one. Default DefaultRefusedLogInterval.
	RefusedLogInterval time.Duration
	// RequestTimeout bounds the time from a request frame's first byte to its
	// last (request.timeout.ms): a frame sent slower is not waited for, its
	// connection is closed. Time spent waiting for QueuedMaxRequestBytes does
	// not count. It also bounds a response's write: a peer that takes none of
	// its bytes for that long is closed, as the requests queued behind the
	// response hold QueuedMaxRequestBytes (see armWrite). Default
	// DefaultRequestTimeout; negative disables it.
	RequestTimeout time.Duration
	// QueuedMaxRequestBytes bounds the bytes held in request frames read or
	// being read and not yet answered, server-wide (queued.max.request.bytes):
	// at the bound, connections stop reading until responses are written.
	// A frame larger than the bound is read alone. Default
	// DefaultQueuedMaxRequestBytes; negative: unbounded.
	QueuedMaxRequestBytes int64
	// Logger gets connection and listener events. Default slog.Default().
	Logger *slog.Logger
	// Listen opens the listeners. Default net.Listen; tests inject their
	// own to simulate network faults.
	Listen func(network, addr string) (net.Listener, error)
}

// Defaults for Config's zero fields.
const (
	DefaultIdleTimeout = 10 * time.Minute
	DefaultMaxInFlight = 16
	// DefaultOverlapBytes leaves small requests (a fetch, a produce of a few
	// records, where latency is made of goroutine wake-ups) on the reader.
	DefaultOverlapBytes = 64 << 10
	// DefaultSendBufferBytes holds a 1 MiB fetch (Kafka's max.partition.fetch.bytes) several
	// times over.
	DefaultSendBufferBytes = 4 << 20
	// DefaultRequestTimeout is Kafka's client default request.timeout.ms: a client has given
	// up on a request still arriving after it, so waiting longer only holds its memory.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultQueuedMaxRequestBytes is one largest request (wire.MaxRequestBytes).
	DefaultQueuedMaxRequestBytes = 100 << 20
	// DefaultRefusedLogInterval: a peer retrying in a loop costs one log line per 10 s.
	DefaultRefusedLogInterval = 10 * time.Second
)

// maxIdleTimeout is the longest idle timeout kept as such; a longer one means never.
const maxIdleTimeout = 100 * 365 * 24 * time.Hour

func (cfg Config) withDefaults() Config {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = wire.MaxRequestBytes
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.IdleTimeout > maxIdleTimeout {
		// "Never" spelt as a huge duration (connections.max.idle.ms=-1 becomes the largest
		// Duration): the idle arithmetic would overflow into the past and close connections.
		cfg.IdleTimeout = -1
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.OverlapBytes == 0 {
		cfg.OverlapBytes = DefaultOverlapBytes
	}
	if cfg.SendBufferBytes == 0 {
		cfg.SendBufferBytes = DefaultSendBufferBytes
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.RequestTimeout > maxIdleTimeout {
		cfg.RequestTimeout = -1 // "never" as a huge duration: the deadline arithmetic would overflow
	}
	if cfg.QueuedMaxRequestBytes == 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if cfg.RefusedLogInterval <= 0 {
		cfg.RefusedLogInterval = DefaultRefusedLogInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	return cfg
}

// Server accepts connections on its listeners and serves their requests
// with a Handler. It starts serving in New and stops in Close.
type Server struct {
	cfg     Config
	handler Handler
	loader  BodyLoader // handler, if it loads bodies; else nil
	log     *slog.Logger
	epoch   time.Time     // origin of the monotonic timestamps in Conn.lastActive
	closing chan struct{} // closed when Close starts

	tcp, unix net.Listener // nil if not configured
	nextID    atomic.Uint64
	stats     counters
	// loaned is the capacity of the chunks all writers hold for inlined file parts
	// (serverLoanBudget).
	loaned atomic.Int64
	// budget bounds the bytes of request frames held (QueuedMaxRequestBytes); nil: unbounded.
	budget *budget
	// listenerMax is ListenerMaxConnections by listenerIndex (0: no limit of its own).
	listenerMax [2]int
	refusals    refusalLog

	acceptWG sync.WaitGroup // accept loops and the scavenger
	scavenge chan struct{}  // asks the scavenger to return free memory (noteAbandoned)
	connWG   sync.WaitGroup // connection readers and writers

	mu struct {
		sync.Mutex
		closed bool
		conns  map[*Conn]struct{}
		// Connection counts for the limits, from admit to leave (see limits.go).
		admitted    int
		perListener [2]int
		perIP       map[string]int
	}
}

// Stats are the server's counters since New. They let tests and operators
// see where bytes went: SendfileBytes never entered user space,
// CopiedFileBytes and InlinedFileBytes did.
type Stats struct {
	Accepted        int64 // connections accepted
	Open            int64 // connections open now
	Requests        int64 // requests read and passed to the handler
	LoadedBytes     int64 // bodies loaded by a BodyLoader (not read from the socket)
	Overlapped      int64 // of those, served on the overlap goroutine (Config.OverlapBytes)
	Responses       int64 // responses written, empty ones included
	DirectWrites    int64 // responses written whole by the connection's reader (see Conn)
	HandedOff       int64 // direct writes that would have waited (full socket buffer, file part to copy), finished by the writer
	Malformed       int64 // connections closed for a malformed frame
	BytesRead       int64 // request bytes read, size fields included
	BytesWritten    int64 // response bytes written from memory (byte parts and inlined file parts)
	CopiedFileBytes int64 // file-part bytes read into user space and written apart (no descriptor, or sendfile refused)
	SendfileBytes   int64 // file-part bytes sent with sendfile(2)
	// InlinedFileBytes are the bytes of small file parts read into memory and written with the
	// bytes around them (also counted in BytesWritten).
	InlinedFileBytes int64

	Refused    int64 // connections closed at accept for a connection limit
	SlowFrames int64 // connections closed for a frame not arrived within RequestTimeout
	// QueuedRequestBytes is what request frames hold of QueuedMaxRequestBytes now (their
	// declared sizes, rounded up to their buffers'), and BudgetWaits how many times a
	// connection waited for it.
	QueuedRequestBytes int64
	BudgetWaits        int64
	// FrameBufferBytes is the capacity of the frame buffers held now, by frames being read
	// and requests not yet answered (a frame sent slowly holds less than its declared size).
	FrameBufferBytes int64
	// MemoryReturns counts the returns of free memory to the operating system asked for
	// after connections died with a large frame half read (see noteAbandoned).
	MemoryReturns int64
}

type counters struct {
	accepted, open, requests, overlapped, responses, malformed atomic.Int64
	direct, handedOff                                          atomic.Int64
	bytesRead, bytesWritten, copiedFile, sendfile, loaded      atomic.Int64
	inlinedFile                                                atomic.Int64
	refused, slowFrames, frameBytes, memoryReturns             atomic.Int64
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	return Stats{
		Accepted:         c.accepted.Load(),
		Open:             c.open.Load(),
		Requests:         c.requests.Load(),
		Overlapped:       c.overlapped.Load(),
		Responses:        c.responses.Load(),
		DirectWrites:     c.direct.Load(),
		HandedOff:        c.handedOff.Load(),
		Malformed:        c.malformed.Load(),
		BytesRead:        c.bytesRead.Load(),
		LoadedBytes:      c.loaded.Load(),
		BytesWritten:     c.bytesWritten.Load(),
		CopiedFileBytes:  c.copiedFile.Load(),
		SendfileBytes:    c.sendfile.Load(),
		InlinedFileBytes: c.inlinedFile.Load(),

		Refused:            c.refused.Load(),
		SlowFrames:         c.slowFrames.Load(),
		QueuedRequestBytes: s.budget.inUse(),
		BudgetWaits:        s.budget.waitCount(),
		FrameBufferBytes:   c.frameBytes.Load(),
		MemoryReturns:      c.memoryReturns.Load(),
	}
}

// New binds the configured listeners and starts serving them with h.
func New(cfg Config, h Handler) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.TCPAddr == "" && cfg.UnixPath == "" {
		return nil, ErrNoListener
	}
	s := &Server{cfg: cfg, handler: h, log: cfg.Logger, epoch: time.Now(), closing: make(chan struct{}), scavenge: make(chan struct{}, 1)}
	s.loader, _ = h.(BodyLoader)
	s.mu.conns = make(map[*Conn]struct{})
	s.mu.perIP = make(map[string]int)
	s.budget = newBudget(cfg.QueuedMaxRequestBytes)
	s.refusals.interval = cfg.RefusedLogInterval
	for name, n := range cfg.ListenerMaxConnections {
		switch name {
		case ListenerTCP:
			s.listenerMax[0] = n
		case ListenerUnix:
			s.listenerMax[1] = n
		default:
			return nil, fmt.Errorf("%w: %q (listeners are %q and %q)", ErrUnknownListener, name, ListenerTCP, ListenerUnix)
		}
	}
	if cfg.TCPAddr != "" {
		ln, err := cfg.Listen("tcp", cfg.TCPAddr)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err) // net.OpError names the address
		}
		s.tcp = ln
	}
	if cfg.UnixPath != "" {
		ln, err := listenUnix(cfg.Listen, cfg.UnixPath)
		if err != nil {
			if s.tcp != nil {
				s.tcp.Close()
			}
			return nil, err
		}
		s.unix = ln
	}
	for _, l := range []struct {
		ln        net.Listener
		transport string
	}{{s.tcp, "tcp"}, {s.unix, "unix"}} {
		if l.ln != nil {
			s.acceptWG.Add(1)
			go s.acceptLoop(l.ln, l.transport)
		}
	}
	s.acceptWG.Add(1)
	go s.scavengeLoop()
	return s, nil
}

// listenUnix listens on path after removing a stale socket file left by a
// process that died. A socket is stale if dialling it is refused; a live
// one is never removed, nor is anything that is not a socket.
func listenUnix(listen func(network, addr string) (net.Listener, error), path string) (net.Listener, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("server: stat %s: %w", path, err)
	case fi.Mode()&fs.ModeSocket == 0:
		return nil, fmt.Errorf("%w: %s", ErrNotSocket, path)
	default:
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("%w: %s", ErrUnixSocketInUse, path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("server: probe unix socket %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("server: remove stale unix socket: %w", err)
		}
	}
	ln, err := listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err) // net.OpError names the path
	}
	return ln, nil
}

// Addr returns the TCP listener's address, or nil if there is none.
func (s *Server) Addr() net.Addr {
	if s.tcp == nil {
		return nil
	}
	return s.tcp.Addr()
}

// UnixAddr returns the unix socket listener's address, or nil if there is
// none.
func (s *Server) UnixAddr() net.Addr {
	if s.unix == nil {
		return nil
	}
	return s.unix.Addr()
}

// acceptLoop accepts connections until the listener closes. When accept fails for want of
// descriptors or memory (EMFILE, ENFILE, ENOMEM, ENOBUFS), the connection waiting stays in
// the listen queue and the listener stays readable, so retrying at once would spin: the loop
// backs off from acceptBackoffMin, doubling to acceptBackoffMax, and logs once per episode
// (when it starts, and when accept works again, with the count of failures).
func (s *Server) acceptLoop(ln net.Listener, transport string) {
	defer s.acceptWG.Done()
	var backoff time.Duration
	failures := 0
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			if !retryableAccept(err) {
				s.log.Error("server: accept failed; listener stopped", "transport", transport, "err", err)
				return
			}
			if failures == 0 {
				s.log.Warn("server: accept failed; retrying with backoff", "transport", transport, "err", err)
			}
			failures++
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			if !s.sleep(backoff) {
				return
			}
			continue
		}
		if failures > 0 {
			s.log.Info("server: accepting again", "transport", transport, "failures", failures)
		}
		backoff, failures = 0, 0
		s.stats.accepted.Add(1)
		s.startConn(nc, transport)
	}
}

// The accept loop's backoff bounds: the first retry comes soon (a descriptor may free at
// once), later ones at most once a second.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

func retryableAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sleep waits d, or less if the server closes. It reports false if the
// server closed.
func (s *Server) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closing:
		return false
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}

func (s *Server) startConn(nc net.Conn, transport string) {
	ip := peerIP(nc)
	if limit, max := s.admit(ip, transport); limit != "" {
		s.refuse(nc, ip, transport, limit, max)
		return
	}
	if b, ok := nc.(interface{ SetWriteBuffer(int) error }); ok && s.cfg.SendBufferBytes > 0 {
		// A send buffer that holds a whole fetch lets sendfile finish in one call instead of
		// parking on EAGAIN every 200 KiB: +40 % fetch throughput over unix sockets (BENCHMARKS.md, Broker micro-benchmarks).
		if err := b.SetWriteBuffer(s.cfg.SendBufferBytes); err != nil {
			s.cfg.Logger.Debug("socket send buffer", "err", err)
		}
	}
	c := newConn(s, nc, transport)
	c.ip = ip
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.leave(ip, transport)
		nc.Close()
		return
	}
	s.mu.conns[c] = struct{}{}
	s.stats.open.Add(1)
	s.connWG.Add(2)
	s.mu.Unlock()
	go c.readLoop()
	go c.writeLoop()
}

// forget removes a finished connection.
func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	s.leave(c.ip, c.transport)
	s.stats.open.Add(-1)
}

func (s *Server) snapshot() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := make([]*Conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	return conns
}

// Close shuts the server down gracefully: it stops accepting, stops reading
// requests, lets the requests already read complete and their responses be
// written, and then closes the connections. When ctx ends first, the
// connections still open are closed hard (unwritten responses are dropped,
// their OnDone hooks still run once they complete) and Close returns
// ctx.Err(). Either way every goroutine of the server has stopped when
// Close returns.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.mu.closed = true
	s.mu.Unlock()
	close(s.closing)

	var errs []error
	for _, ln := range []net.Listener{s.tcp, s.unix} {
		if ln != nil {
			if err := ln.Close(); err != nil {
				errs = append(errs, fmt.Errorf("server: close listener: %w", err))
			}
		}
	}
	s.acceptWG.Wait() // no connection is added after this

	for _, c := range s.snapshot() {
		c.Close()
	}
	done := make(chan struct{})
	go func() { // ends with the connections, which the hard close below guarantees
		s.connWG.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		for _, c := range s.snapshot() {
			c.closeHard()
		}
		<-done
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}
