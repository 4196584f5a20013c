//go:build !linux

package bench

import "os"

// fdatasync falls back to os.File.Sync, as the broker's log does on systems without
// fdatasync (internal/vfs): fsync, or fcntl(F_FULLFSYNC) on darwin, which flushes the drive's
// cache as well and so measures slower than a Linux fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }
