//go:build unix

package client

import (
	"os"
	"syscall"
)

// unlinked reports whether file's last name is gone (retention deleted its segment, or a
// compaction renamed another file over it). One fstat: no allocation.
func unlinked(file *os.File) bool {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(file.Fd()), &st); err != nil {
		return true
	}
	return st.Nlink == 0
}
