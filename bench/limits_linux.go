package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync is the call the broker's log makes at each flush (internal/vfs), so that the disk
// probe measures the same thing.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
