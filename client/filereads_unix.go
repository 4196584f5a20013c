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
