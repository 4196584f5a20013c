//go:build unix

package client

import (
	"os"
	"syscall"
)

// unlinked reports whether file's last name is gone (retention deleted its segment, or a
// compaction renamed another file over it), or the file was closed. One fstat, through
// SyscallConn: the span's file may be closed by another goroutine meanwhile (its partition
// was sought or unassigned), and Fd would read the descriptor without holding it, so that
// the fstat could reach whatever file was opened on the same number since.
func unlinked(file *os.File) bool {
	raw, err := file.SyscallConn()
	if err != nil {
		return true
	}
	var st syscall.Stat_t
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.Fstat(int(fd), &st) }); err != nil || serr != nil {
		return true
	}
	return st.Nlink == 0
}

// spanOpenFlags are added to O_RDONLY to open a span's file: no wait for a FIFO's writer, and
// no controlling terminal, should the path lead to something else than the broker's file
// (openSpan closes it at once then).
const spanOpenFlags = syscall.O_NONBLOCK | syscall.O_NOCTTY

// setBlocking clears the O_NONBLOCK that spanOpenFlags set, once the file is known to be a
// regular file (where it makes no difference on a local file system, but might on others).
func setBlocking(file *os.File) error {
	rc, err := file.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}
