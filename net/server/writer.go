package server

import (
	"io"
	"net"
	"syscall"

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
	// maxSendfileChunk keeps one sendfile call from monopolising the
	// socket; the kernel caps a call at 0x7ffff000 bytes anyway.
	maxSendfileChunk = 1 << 30
)

// writer is a connection's output side, used by its writer goroutine only.
type writer struct {
	c     *Conn
	stats *counters
	rc    syscall.RawConn // nil: no descriptor, file parts are copied

	buf  []byte      // copied small parts; fixed capacity, never reallocated
	iov  net.Buffers // what the next flush writes, in order: slices of buf and large parts
	bufs net.Buffers // WriteTo's receiver, which it consumes
	tail int         // start in buf of the last iov entry if it is in buf, else -1

	// done holds the responses written into buf/iov but not yet flushed:
	// their bytes may still be referenced, so they are released after the
	// flush.
	done []*Pending

	sf         sendfileState
	sendfileFn func(fd uintptr) bool // w.sendfileStep, bound once so each call is allocation-free
}

// sendfileState is the state of one file part across RawConn.Write
// callbacks.
type sendfileState struct {
	in     int   // source descriptor
	off    int64 // next file offset; sendfile advances it, never the file's own position
	remain int
	sent   int
	err    error
}

func (w *writer) init(c *Conn) {
	w.c = c
	w.stats = &c.srv.stats
	w.rc = rawConn(c.nc)
	w.buf = make([]byte, 0, writeBufSize)
	w.tail = -1
	w.sendfileFn = w.sendfileStep
}

// writeLoop is the writer goroutine: it takes Pendings in request order,
// waits for each to complete, and writes it. Consecutive responses that are
// already complete are coalesced into one write.
func (c *Conn) writeLoop() {
	defer c.srv.connWG.Done()
	err := c.writeResponses()
	if err != nil {
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
			w.finish()
			return errHardClosed
		}
		if err := w.writeResponse(p); err != nil {
			w.done = append(w.done, p)
			w.finish()
			return err
		}
		w.done = append(w.done, p)
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
				w.finish()
				return err
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

// finish releases the responses in done, written or not: their hooks run
// and their slots go back to the reader.
func (w *writer) finish() {
	c := w.c
	if len(w.done) > 0 {
		c.touch() // before outstanding drops: see idleDeadline
	}
	for i, p := range w.done {
		w.done[i] = nil
		p.release()
		w.stats.responses.Add(1)
		c.outstanding.Add(-1)
		<-c.slots
	}
	w.done = w.done[:0]
}

// writeResponse writes p's parts. Byte parts may stay buffered until the
// next flush; file parts flush what is buffered and go out at once.
func (w *writer) writeResponse(p *Pending) error {
	for i := range p.parts {
		pt := &p.parts[i]
		if pt.file == nil {
			if err := w.addBytes(pt.b); err != nil {
				return err
			}
			continue
		}
		if err := w.flush(); err != nil {
			return err
		}
		if err := w.sendFile(pt.file, pt.pos, pt.n); err != nil {
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
	if len(w.buf)+len(b) > cap(w.buf) || (w.tail < 0 && len(w.iov) >= maxIov) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	start := len(w.buf)
	w.buf = append(w.buf, b...) // within capacity: earlier iov entries stay valid
	if w.tail >= 0 {
		w.iov[len(w.iov)-1] = w.buf[w.tail:]
	} else {
		w.tail = start
		w.iov = append(w.iov, w.buf[start:])
	}
	return nil
}

// flush writes the buffered parts with one writev (net.Buffers uses writev
// on TCP and unix sockets, and loops over Write elsewhere).
func (w *writer) flush() error {
	if len(w.iov) == 0 {
		return nil
	}
	w.bufs = w.iov
	n, err := w.bufs.WriteTo(w.c.nc)
	w.stats.bytesWritten.Add(n)
	clear(w.iov)
	w.iov = w.iov[:0]
	w.buf = w.buf[:0]
	w.tail = -1
	return err
}

// sendFile sends n bytes of f at pos. With a descriptor on both sides it is
// sendfile(2) at an explicit offset: the bytes never enter user space and
// the file's shared position is untouched, so concurrent fetches of one
// segment cannot race. Otherwise (MemFS, a non-socket connection, a file
// system whose files sendfile refuses) the bytes are read with ReadAt and
// written.
func (w *writer) sendFile(f vfs.File, pos int64, n int) error {
	if fd, ok := vfs.FdOf(f); ok && w.rc != nil && sendfileSupported {
		w.sf = sendfileState{in: int(fd), off: pos, remain: n}
		err := w.rc.Write(w.sendfileFn)
		if err == nil {
			err = w.sf.err
		}
		if err == nil || w.sf.sent > 0 || !sendfileUnsupported(err) {
			return err
		}
		// Nothing was sent: fall back to copying, as net's own sendfile does.
	}
	return w.copyFile(f, pos, n)
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
		m, err = w.c.nc.Write(chunk)
		w.stats.copiedFile.Add(int64(m))
		if err != nil {
			return err
		}
		pos += int64(m)
		n -= m
	}
	return nil
}
