package server

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

// Writer tuning. Small parts are copied into one buffer so that a run of
// small responses (and the prefixes of a Fetch response) leave in one
// syscall; larger parts are written in place with writev, never copied.
const (
	writeBufSize  = 16 << 10
	copyMax       = 4 << 10  // parts up to this size are copied into the buffer
	maxIov        = 64       // iovec entries per writev before flushing
	copyChunkSize = 64 << 10 // ReadAt chunk for files without a descriptor
	// inlineFileMax: file parts up to this size are read (pread) into the write buffer, or
	// into a pooled chunk, and leave in the same writev as the response's other bytes. A
	// fetch at the log's tail (a caught-up consumer, a follower) is a few KiB: one pread and
	// the writev it shares with its prefix are two system calls where sendfile needs three
	// (prefix, file, rest), and on a virtual machine a system call is microseconds.
	inlineFileMax = 64 << 10
	// maxLoanedBytes bounds the chunks (their capacity) one writer holds for inlined file
	// parts, and serverLoanBudget those of all the server's writers: a connection whose
	// client stopped reading keeps its chunks until the idle timeout, so past the budget
	// parts go with sendfile again, which pins no memory.
	maxLoanedBytes   = 256 << 10
	serverLoanBudget = 32 << 20
	// maxSendfileChunk keeps one sendfile call from monopolising the
	// socket; the kernel caps a call at 0x7ffff000 bytes anyway.
	maxSendfileChunk = 1 << 30
)

// writer is a connection's output side. It belongs to whichever goroutine
// owns the socket's write side (see Conn): the writer goroutine, or the
// reader during a direct write.
type writer struct {
	c     *Conn
	stats *counters
	rc    syscall.RawConn // nil: no descriptor, file parts are copied

	// nonblock is set during a direct write: flush and sendfile stop with
	// errWouldBlock when the socket buffer is full instead of waiting for
	// it to drain. What is left stays in iov and sf (and the Pending's
	// next), and a blocking writeResponse of the same Pending picks it up.
	nonblock bool
	// failed: the writer goroutine stopped on an error (its state may be
	// half way through a response); nothing more may be written.
	failed bool

	buf  []byte      // copied small parts; fixed capacity, never reallocated
	iov  net.Buffers // what the next flush writes, in order: slices of buf and large parts
	bufs net.Buffers // WriteTo's receiver, which it consumes
	tail int         // start in buf of the last iov entry if it is in buf, else -1
	// loans are pooled chunks holding inlined file parts that iov refers to; they go back to
	// the pool when iov is empty again. loaned is their total capacity (also counted in the
	// server's loaned), inlined the inlined file bytes in iov, counted once written.
	loans   []*[]byte
	loaned  int
	inlined int

	// done holds the responses written into buf/iov but not yet flushed:
	// their bytes may still be referenced, so they are released after the
	// flush.
	done []*Pending

	// sf is the file part being sent. Invariant: iov is empty while
	// sf.remain > 0 (a file part starts after a flush).
	sf         sendfileState
	sendfileFn func(fd uintptr) bool // w.sendfileStep, bound once so each call is allocation-free

	wv       writevState           // a non-blocking flush's state
	writevFn func(fd uintptr) bool // w.writevStep, bound like sendfileFn
	iovecs   iovecs                // writevStep's system-call argument

	// writeBy is the socket's write deadline as armWrite last set it (see armWrite).
	writeBy time.Time
}

// sendfileState is what is left of one file part, across RawConn.Write
// callbacks and across a direct write handed to the writer goroutine.
type sendfileState struct {
	f      vfs.File
	in     int   // f's descriptor
	off    int64 // next file offset; sendfile advances it, never the file's own position
	remain int
	sent   int // bytes sent by the current sendRest
	err    error
}

func (w *writer) init(c *Conn) {
	w.c = c
	w.stats = &c.srv.stats
	w.rc = rawConn(c.nc)
	w.buf = make([]byte, 0, writeBufSize)
	w.tail = -1
	w.sendfileFn = w.sendfileStep
	w.writevFn = w.writevStep
}

// writeLoop is the writer goroutine: it takes Pendings in request order,
// waits for each to complete, and writes it. Consecutive responses that are
// already complete are coalesced into one write.
func (c *Conn) writeLoop() {
	defer c.srv.connWG.Done()
	err := c.writeResponses()
	if errors.Is(err, errSlowWrite) {
		c.srv.log.Info("server: closing connection: the peer took no response bytes within request.timeout.ms",
			"conn", c.id, "transport", c.transport, "remote", c.nc.RemoteAddr(), "timeout", c.srv.cfg.RequestTimeout)
	} else if err != nil {
		c.srv.log.Debug("server: write failed", "conn", c.id, "transport", c.transport, "err", err)
	}
	// Closing the socket also wakes a reader blocked in Read.
	c.nc.Close()
	c.cancel()
	close(c.writerDone)
}

func (c *Conn) writeResponses() error {
	w := &c.w
	var next *Pending
	open := true // the queue is not closed
	for {
		p := next
		next = nil
		if p == nil {
			if !open {
				return nil
			}
			select {
			case q, ok := <-c.queue:
				if !ok {
					return nil
				}
				p = q
			case <-c.hard:
				return errHardClosed
			}
		}
		if !c.await(p) {
			p.abandon()
			return w.fail(errHardClosed)
		}
		w.done = append(w.done, p)
		if err := w.writeResponse(p); err != nil {
			return w.fail(err)
		}
		// Look ahead: if the next response is ready too, batch it into the
		// same write instead of flushing now.
		if open {
			select {
			case q, ok := <-c.queue:
				if ok {
					next = q
				} else {
					open = false
				}
			default:
			}
		}
		if next == nil || !next.completed() {
			if err := w.flush(); err != nil {
				if next != nil {
					next.abandon()
				}
				return w.fail(err)
			}
			w.finish()
		}
	}
}

// await waits until p is completed, or reports false on a hard close.
func (c *Conn) await(p *Pending) bool {
	for !p.completed() {
		select {
		case <-c.wakeCh:
		case <-c.hard:
			return false
		}
	}
	return true
}

// fail ends the writer goroutine's work on a write error or a hard close:
// it marks the write side failed, so that the reader, which may own it
// again once finish lowers outstanding, writes nothing more, and releases
// the responses in done.
func (w *writer) fail(err error) error {
	w.failed = true
	w.finish()
	return err
}

// finish releases the responses in done, written or not: their hooks run
// and their slots go back to the reader. Lowering outstanding is the last
// thing it does with the writer's state: once it reaches zero the reader may
// take the write side for a direct write (see Conn).
func (w *writer) finish() {
	c := w.c
	n := len(w.done)
	if n == 0 {
		return
	}
	c.touch() // before outstanding drops: see idleDeadline
	for i, p := range w.done {
		w.done[i] = nil
		p.release()
	}
	w.done = w.done[:0]
	c.outstanding.Add(-int32(n))
	w.stats.responses.Add(int64(n)) // after: a client that saw it may count on a direct write
	for range n {
		<-c.slots
	}
}

// writeResponse writes p's parts from p.next on. Byte parts may stay
// buffered until the next flush; file parts flush what is buffered and go
// out at once. In non-blocking mode it returns errWouldBlock when the socket
// is full, and a later call in blocking mode carries on from where it
// stopped: the rest of a file part is in sf, unflushed bytes in iov, the
// parts not yet taken from p.next on.
func (w *writer) writeResponse(p *Pending) error {
	if w.sf.remain > 0 { // iov is empty: see sf
		if err := w.sendRest(); err != nil {
			return err
		}
	}
	for p.next < len(p.parts) {
		pt := &p.parts[p.next]
		if pt.file == nil {
			if err := w.addBytes(pt.b); err != nil {
				return err
			}
			p.next++
			continue
		}
		if pt.n <= inlineFileMax && w.inlineFile(pt.file, pt.pos, pt.n) {
			p.next++
			continue
		}
		if err := w.flush(); err != nil {
			return err
		}
		p.next++ // from here on what is left of the part is in sf
		w.sf = sendfileState{f: pt.file, off: pt.pos, remain: pt.n}
		if err := w.sendRest(); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) addBytes(b []byte) error {
	if len(b) > copyMax {
		if len(w.iov) >= maxIov {
			if err := w.flush(); err != nil {
				return err
			}
		}
		w.iov = append(w.iov, b)
		w.tail = -1
		return nil
	}
	dst, err := w.grow(len(b))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

// grow makes n more bytes (at most copyMax) part of what the next flush writes, at the end of
// buf, flushing first if they do not fit, and returns them to be filled.
func (w *writer) grow(n int) ([]byte, error) {
	if len(w.buf)+n > cap(w.buf) || (w.tail < 0 && len(w.iov) >= maxIov) {
		if err := w.flush(); err != nil {
			return nil, err
		}
	}
	start := len(w.buf)
	w.buf = w.buf[:start+n] // within capacity: earlier iov entries stay valid
	if w.tail >= 0 {
		w.iov[len(w.iov)-1] = w.buf[w.tail:]
	} else {
		w.tail = start
		w.iov = append(w.iov, w.buf[start:])
	}
	return w.buf[start:], nil
}

// inlineFile reads a small file part into memory and queues it like a byte part, so that it
// leaves with the bytes around it in one writev (see inlineFileMax). It reports false, having
// queued nothing, when the part should be sent as usual instead: it needs a chunk and the
// writer's or the server's chunks are all loaned (maxLoanedBytes, serverLoanBudget), or the
// read fails or comes up short (sendRest then fails the same way, closing the connection).
func (w *writer) inlineFile(f vfs.File, pos int64, n int) bool {
	if n <= copyMax && len(w.buf)+n <= cap(w.buf) && (w.tail >= 0 || len(w.iov) < maxIov) {
		start, tail := len(w.buf), w.tail
		dst, _ := w.grow(n) // fits: no flush
		if m, _ := f.ReadAt(dst, pos); m < n {
			w.unGrow(start, tail)
			return false
		}
		w.inlined += n
		return true
	}
	size := bufCap(n)
	if len(w.iov) >= maxIov || w.loaned+size > maxLoanedBytes {
		return false
	}
	if w.c.srv.loaned.Add(int64(size)) > serverLoanBudget {
		w.c.srv.loaned.Add(-int64(size))
		return false
	}
	cb := getBuf(n)
	if m, _ := f.ReadAt(*cb, pos); m < n {
		putBuf(cb)
		w.c.srv.loaned.Add(-int64(size))
		return false
	}
	w.loans = append(w.loans, cb)
	w.loaned += size
	w.iov = append(w.iov, *cb)
	w.tail = -1
	w.inlined += n
	return true
}

// unGrow takes back what the last grow added, given buf's length and tail before it.
func (w *writer) unGrow(start, tail int) {
	w.buf = w.buf[:start]
	if tail >= 0 {
		w.iov[len(w.iov)-1] = w.buf[tail:]
	} else {
		w.iov[len(w.iov)-1] = nil
		w.iov = w.iov[:len(w.iov)-1]
	}
	w.tail = tail
}

// flush writes the buffered parts with one writev (net.Buffers uses writev
// on TCP and unix sockets, and loops over Write elsewhere). In non-blocking
// mode it stops at a full socket buffer, leaving the rest in iov.
func (w *writer) flush() error {
	if len(w.iov) == 0 {
		return nil
	}
	if w.nonblock {
		return w.tryFlush()
	}
	w.bufs = w.iov
	var n int64
	var err error
	for {
		if err = w.armWrite(); err != nil {
			break
		}
		var m int64
		m, err = w.bufs.WriteTo(w.c.nc)
		n += m
		if !w.stalled(&err, m > 0 && len(w.bufs) > 0) {
			break
		}
	}
	w.stats.bytesWritten.Add(n)
	if err == nil {
		w.stats.inlinedFile.Add(int64(w.inlined))
	}
	w.resetIov()
	return err
}

func (w *writer) resetIov() {
	clear(w.iov)
	w.iov = w.iov[:0]
	w.buf = w.buf[:0]
	w.tail = -1
	for i, cb := range w.loans {
		putBuf(cb)
		w.loans[i] = nil
	}
	if w.loaned > 0 {
		w.c.srv.loaned.Add(-int64(w.loaned))
	}
	w.loans, w.loaned, w.inlined = w.loans[:0], 0, 0
}

// writevState is a non-blocking flush's outcome.
type writevState struct {
	err error
}

// tryFlush writes what the socket takes at once of iov, with writev on the
// descriptor (only called when rc is set). Written bytes are dropped from
// iov; if some are left it reports errWouldBlock.
func (w *writer) tryFlush() error {
	w.wv = writevState{}
	if err := w.armWrite(); err != nil {
		return err
	}
	err := w.rc.Write(w.writevFn)
	if err == nil {
		err = w.wv.err
	}
	switch {
	case len(w.iov) == 0:
		w.stats.inlinedFile.Add(int64(w.inlined))
		w.resetIov()
	case err == nil:
		// The first entry may be cut: never extend it again (see addBytes).
		w.tail = -1
		err = errWouldBlock
	}
	return err
}

// consume drops the first n bytes from iov.
func (w *writer) consume(n int) {
	k := 0
	for k < len(w.iov) && n >= len(w.iov[k]) {
		n -= len(w.iov[k])
		k++
	}
	if k < len(w.iov) {
		w.iov[k] = w.iov[k][n:]
	}
	m := copy(w.iov, w.iov[k:])
	clear(w.iov[m:])
	w.iov = w.iov[:m]
}

// sendRest sends what is left of the file part in sf. With a descriptor on
// both sides it is sendfile(2) at an explicit offset: the bytes never enter
// user space and the file's shared position is untouched, so concurrent
// fetches of one segment cannot race. Otherwise (MemFS, a non-socket
// connection, a file system whose files sendfile refuses) the bytes are read
// with ReadAt and written, on the writer goroutine only: in non-blocking
// mode that reports errWouldBlock.
func (w *writer) sendRest() error {
	sf := &w.sf
	if fd, ok := vfs.FdOf(sf.f); ok && w.rc != nil && sendfileSupported {
		sent := 0
		var err error
		for {
			sf.in, sf.sent, sf.err = int(fd), 0, nil
			if err = w.armWrite(); err != nil {
				break
			}
			err = w.rc.Write(w.sendfileFn)
			if err == nil {
				err = sf.err
			}
			sent += sf.sent
			if !w.stalled(&err, sf.sent > 0 && sf.remain > 0) {
				break
			}
		}
		sf.sent = sent
		if err == nil {
			*sf = sendfileState{}
		}
		if err == nil || sf.sent > 0 || !sendfileUnsupported(err) {
			return err
		}
		// Nothing was sent: fall back to copying, as net's own sendfile does.
	}
	if w.nonblock {
		return errWouldBlock
	}
	err := w.copyFile(sf.f, sf.off, sf.remain)
	*sf = sendfileState{}
	return err
}

func (w *writer) copyFile(f vfs.File, pos int64, n int) error {
	cb := getBuf(copyChunkSize)
	defer putBuf(cb)
	for n > 0 {
		chunk := (*cb)[:min(n, len(*cb))]
		m, err := f.ReadAt(chunk, pos)
		if m < len(chunk) {
			if err == nil || err == io.EOF {
				err = errShortFile
			}
			return err
		}
		for len(chunk) > 0 {
			m = 0
			if err = w.armWrite(); err == nil {
				m, err = w.c.nc.Write(chunk)
			}
			w.stats.copiedFile.Add(int64(m))
			chunk = chunk[m:]
			pos += int64(m)
			n -= m
			if !w.stalled(&err, m > 0 && len(chunk) > 0) {
				break
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// A response the peer does not take is not waited for forever: the frames of the requests
// queued behind it hold their share of queued.max.request.bytes until it is written, so one
// connection that sends requests and never reads its responses could otherwise hold the whole
// budget and stop every other connection's reading. The socket's write deadline is kept at
// least half a RequestTimeout ahead of every write; when it fires, a write that has made
// progress since it was armed carries on, and one that has not ends the connection
// (errSlowWrite). The deadline is moved only when half of it has gone, so a write costs a
// clock read, not a timer change. It is never cleared: a write after a stall of its own would
// find it past, so every write, non-blocking ones included (RawConn.Write checks the deadline
// first), goes through armWrite.

// armWrite makes the socket's write deadline at least half a RequestTimeout away. Owner of
// the write side only.
func (w *writer) armWrite() error {
	rt := w.c.srv.cfg.RequestTimeout
	if rt <= 0 {
		return nil
	}
	now := time.Now()
	if w.writeBy.Sub(now) >= rt/2 {
		return nil
	}
	w.writeBy = now.Add(rt)
	return w.c.nc.SetWriteDeadline(w.writeBy)
}

// stalled reports whether a write that ended with *err should be retried: its write deadline
// fired after it made progress. A deadline that fired with no progress becomes errSlowWrite.
func (w *writer) stalled(err *error, progress bool) bool {
	if *err == nil || !errors.Is(*err, os.ErrDeadlineExceeded) {
		return false
	}
	if progress {
		w.writeBy = time.Time{} // re-armed by the retry
		return true
	}
	*err = errSlowWrite
	return false
}
