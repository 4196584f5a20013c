package server

import (
	"errors"

	"golang.org/x/sys/unix"
)

const sendfileSupported = true

// sendfileStep is the RawConn.Write callback for one file part: it calls
// sendfile until the part is sent, returning false to wait for the socket
// to become writable (EAGAIN) and true when done or failed. Short writes
// just loop.
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

// sendfileUnsupported reports errors meaning sendfile cannot be used for
// this pair of descriptors, as opposed to a failed connection.
func sendfileUnsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}
