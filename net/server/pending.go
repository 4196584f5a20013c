package server

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/sluicemq/sluice/internal/vfs"
)

// Pending is the response to one request: a sequence of parts (bytes from
// memory and ranges of files) that the connection's writer sends in order,
// then hooks that run once it has been sent. A Handler gets one from
// Conn.NewPending inside Serve, returns it, fills it now or later from any
// goroutine, and calls Complete exactly once. Responses are written in
// request order whatever order their Pendings complete in.
//
// A Pending completed with no parts writes nothing: a handler uses that to
// keep the request's body (which aliases the frame buffer) alive until
// asynchronous work finishes, when the request gets no response (acks=0).
//
// Pendings are pooled: after Complete the handler must not touch it again.
type Pending struct {
	// Buf is scratch storage that stays with the Pending when it is reused,
	// so that encoding a response costs no allocation in steady state:
	// encode into Buf[:0], assign the result back, and append it (or
	// sub-slices of it) with AppendBytes.
	//
	//	p.Buf = wire.AppendResponseFrame(p.Buf[:0], h.CorrelationID, resp)
	//	p.AppendBytes(p.Buf)
	//	p.Complete()
	Buf []byte

	conn   *Conn
	state  atomic.Uint32 // stateCompleted | stateAbandoned bits
	parts  []part
	next   int // index of the first part not yet taken by the writer (a direct write may stop early)
	onDone []func()
	frame  frame // the request's frame buffer, returned to its pool (and its budget) on release
	// requestDone: the handler keeps no reference to the request's bytes (RequestDone); set
	// during Serve, read by the goroutine that called it once Serve returns.
	requestDone bool
}

// RequestDone tells the server that the handler keeps no reference to the bytes of the request
// this Pending answers (it has decoded what it needs into memory of its own): the request's
// frame buffer, and its share of queued.max.request.bytes, go back as soon as Serve returns
// rather than once the response has been written. A handler that may keep a request waiting
// long (a long-poll fetch, whose maxWait the client chooses) calls it, so that waiting
// requests do not hold the budget every connection's reading needs: with their frames
// charged, a frame larger than what they leave would wait, at the head of the queue, behind
// them all, and every other connection behind it. Call it within Serve only.
func (p *Pending) RequestDone() { p.requestDone = true }

// attachFrame gives p the frame of the request it answers, to hold until release, or returns
// the frame at once after RequestDone. The goroutine that called Serve, after it returned.
func (p *Pending) attachFrame(f frame) {
	if p.requestDone {
		p.conn.srv.putFrame(f)
		return
	}
	p.frame = f
}

// part is one piece of a response: b if file is nil, else n bytes of file
// at pos.
type part struct {
	b    []byte
	file vfs.File
	pos  int64
	n    int
}

const (
	// stateCompleted: the handler has called Complete; the response is ready.
	stateCompleted uint32 = 1 << iota
	// stateAbandoned: the connection died before the response was written.
	stateAbandoned
)

// Bounds on what a pooled Pending keeps, so one huge response does not pin
// its memory in the pool forever.
const (
	maxKeptBuf   = 1 << 20
	maxKeptParts = 256
)

var pendingPool = sync.Pool{New: func() any { return new(Pending) }}

// AppendBytes adds b to the response. b is not copied: it must stay
// unchanged until the response has been written, i.e. until the OnDone
// hooks run. Empty slices are ignored.
func (p *Pending) AppendBytes(b []byte) {
	if len(b) > 0 {
		p.parts = append(p.parts, part{b: b})
	}
}

// AppendFile adds n bytes of f starting at pos to the response, sent with
// sendfile(2) at that explicit offset when f has a descriptor (vfs.FdOf) and
// the connection is a socket, and otherwise read with ReadAt and written. f
// must stay open until the OnDone hooks run (a segment.Slice holds its
// segment until Release). If the file turns out shorter than pos+n the
// connection is closed: the frame size has already promised the bytes.
// n <= 0 adds nothing.
func (p *Pending) AppendFile(f vfs.File, pos int64, n int) {
	if n > 0 {
		p.parts = append(p.parts, part{file: f, pos: pos, n: n})
	}
}

// OnDone registers fn to run once the response has been written, or has
// been dropped because the connection died (e.g. segment.Slice.Release,
// returning an encode buffer to a pool). Hooks run in registration order,
// on the connection's writer or reader goroutine (whichever wrote the
// response), or inside Complete if the connection was already gone.
func (p *Pending) OnDone(fn func()) {
	p.onDone = append(p.onDone, fn)
}

// Complete marks the response ready. It must be called exactly once, after
// the parts have been appended; the Pending must not be used afterwards.
func (p *Pending) Complete() {
	c := p.conn // read before publishing: the writer may recycle p at once
	old := p.state.Or(stateCompleted)
	switch {
	case old&stateCompleted != 0:
		panic("server: Pending completed twice")
	case old&stateAbandoned != 0:
		p.release() // the connection is gone; nobody else will
	default:
		c.wake()
	}
}

func (p *Pending) completed() bool { return p.state.Load()&stateCompleted != 0 }

// abandon drops a response whose connection died. Whichever of abandon and
// Complete comes second releases p, so the hooks run exactly once.
func (p *Pending) abandon() {
	if p.state.Or(stateAbandoned)&stateCompleted != 0 {
		p.release()
	}
}

// release runs the hooks, returns the frame buffer and puts p back in the
// pool. The caller owns p exclusively.
func (p *Pending) release() {
	for i, fn := range p.onDone {
		p.onDone[i] = nil
		fn()
	}
	p.onDone = p.onDone[:0]
	if p.frame != (frame{}) {
		p.conn.srv.putFrame(p.frame)
		p.frame = frame{}
	}
	clear(p.parts) // drop references to files and buffers
	p.parts = p.parts[:0]
	p.next = 0
	if cap(p.parts) > maxKeptParts {
		p.parts = nil
	}
	if cap(p.Buf) > maxKeptBuf {
		p.Buf = nil
	}
	p.conn = nil
	p.requestDone = false
	p.state.Store(0)
	pendingPool.Put(p)
}

// Frame buffers come from pools by power-of-two size class, so that reading
// a request allocates nothing in steady state. Larger frames (big produce
// requests) are allocated exactly and left to the GC: pooling them would pin
// up to MaxRequestBytes per pooled buffer.
const (
	minBufClass = 8  // 256 B
	maxBufClass = 22 // 4 MiB
)

var bufPools [maxBufClass - minBufClass + 1]sync.Pool

// bufClass returns the pool index for a buffer of n bytes, or -1 if n is
// above the largest class.
func bufClass(n int) int {
	c := bits.Len(uint(n-1)) - minBufClass
	switch {
	case n <= 1<<minBufClass:
		return 0
	case c > maxBufClass-minBufClass:
		return -1
	}
	return c
}

// bufCap is the capacity of the buffer getBuf(n) returns.
func bufCap(n int) int {
	if c := bufClass(n); c >= 0 {
		return 1 << (c + minBufClass)
	}
	return n
}

// getBuf returns a buffer of length n. Only call it after n has been
// checked against a limit.
func getBuf(n int) *[]byte {
	c := bufClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if v := bufPools[c].Get(); v != nil {
		b := v.(*[]byte)
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(c+minBufClass))
	return &b
}

func putBuf(b *[]byte) {
	n := cap(*b)
	if c := bufClass(n); c >= 0 && n == 1<<(c+minBufClass) {
		bufPools[c].Put(b)
	}
}
