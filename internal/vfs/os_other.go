//go:build !linux

package vfs

// Fallbacks for systems without Linux's fdatasync, sync_file_range and fallocate (macOS, the
// BSDs). Sync keeps its durability promise; the writeback and block-reserve advice, which only
// smooths the disk's load, does nothing. Sluice runs correctly here and is tuned for Linux.

// Sync is os.File.Sync, the system's full file sync, since there is no fdatasync to leave the
// timestamps out. On darwin fsync(2) only hands the data to the drive, whose cache a power
// loss empties, so os.File.Sync uses fcntl(F_FULLFSYNC), which flushes the drive's cache too,
// and falls back to fsync(2) only where the file system refuses it with ENOTSUP (SMB mounts,
// for one; see the standard library's internal/poll/fd_fsync_darwin.go). Not on other errors:
// after a failed flush (EIO) a second sync may find the pages clean and report success for
// data that never reached the disk. Elsewhere os.File.Sync is fsync(2).
func (f osFile) Sync() error { return f.File.Sync() }

// WriteBack does nothing: there is no sync_file_range to start writeback of a range without
// waiting for it, and an fsync would wait. The pages are written at the next Sync or when the
// kernel chooses.
func (f osFile) WriteBack(off, n int64) error { return nil }

// Preallocate does nothing: FALLOC_FL_KEEP_SIZE is Linux's, and posix_fallocate changes the
// file's size, which recovery reads as the end of the log. darwin's fcntl(F_PREALLOCATE) is
// not used: nothing here can test when it releases blocks past the end. Blocks are allocated
// as pages are written back, as they are on Linux with the reserve turned off.
func (f osFile) Preallocate(off, n int64) error { return nil }
