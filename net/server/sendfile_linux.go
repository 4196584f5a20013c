package server

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

const sendfileSupported = true

// directWriteSupported: the reader may write a response itself (see Conn),
// since non-blocking flushes (writevStep) exist on this system.
const directWriteSupported = true

// sendfileStep is the RawConn.Write callback for one file part: it calls
// sendfile until the part is sent, returning false to wait for the socket
// to become writable (EAGAIN) and true when done or failed. In non-blocking
// mode EAGAIN ends it with errWouldBlock instead. Short writes just loop.
func (w *writer) sendfileStep(fd uintptr) bool {
	sf := &w.sf
	for sf.remain > 0 {
		n, err := unix.Sendfile(int(fd), sf.in, &sf.off, min(sf.remain, maxSendfileChunk))
		if n > 0 {
			sf.remain -= n
			sf.sent += n
			w.stats.sendfile.Add(int64(n))
		}
		switch {
		case err == unix.EAGAIN && w.nonblock:
			sf.err = errWouldBlock
			return true
		case err == unix.EAGAIN:
			return false
		case err == unix.EINTR:
		case err != nil:
			sf.err = err
			return true
		case n == 0:
			sf.err = errShortFile // end of file before the part's end
			return true
		}
	}
	return true
}

// iovecs is the writev argument built from writer.iov, which never holds
// more than maxIov entries.
type iovecs [maxIov]unix.Iovec

// writevStep is the RawConn.Write callback of a non-blocking flush: it
// writes iov with writev(2) until it is empty or the socket is full
// (EAGAIN), dropping what was written from iov. It never waits.
func (w *writer) writevStep(fd uintptr) bool {
	for len(w.iov) > 0 {
		v := &w.iovecs // iov has no empty entries and at most maxIov
		for i, b := range w.iov {
			v[i].Base = &b[0]
			v[i].SetLen(len(b))
		}
		k := len(w.iov)
		r, _, errno := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&v[0])), uintptr(k))
		clear(v[:k]) // keep no pointers to the parts
		n := int(r)
		if errno != 0 {
			n = 0
		}
		if n > 0 {
			w.stats.bytesWritten.Add(int64(n))
			w.consume(n)
		}
		switch {
		case errno == unix.EAGAIN:
			return true
		case errno == unix.EINTR:
		case errno != 0:
			w.wv.err = errno
			return true
		case n == 0:
			w.wv.err = unix.EIO // writev took nothing yet reported no error
			return true
		}
	}
	return true
}

// sendfileUnsupported reports errors meaning sendfile cannot be used for
// this pair of descriptors, as opposed to a failed connection.
func sendfileUnsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}
