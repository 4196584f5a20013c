package vfs

import (
	"errors"
	"syscall"
)

// The two kinds of error that say nothing is wrong with the data on the disk: the operation
// that got one wrote nothing it promised, and may succeed if tried again later. Every other
// error from a write or a sync is an I/O error of the data, for the caller to treat as such
// (segment stops the log; see its package doc).

// IsResource reports whether err is the process or the system running short of something it
// holds rather than of the disk: file descriptors (EMFILE: this process's limit; ENFILE: the
// system's) or memory and mappings (ENOMEM, which mmap also returns past vm.max_map_count).
// Closing connections or segments frees them, so the operation is retried later; it is never
// a reason to distrust data already written.
func IsResource(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM)
}

// IsNoSpace reports whether err is the file system out of space (ENOSPC) or the user out of
// quota (EDQUOT). Where it is safe to retry depends on the operation: a write that failed
// wrote nothing the caller relies on, but a failed fsync (which also reports ENOSPC, when
// delayed allocation finds no block at writeback) may have lost pages written earlier and is
// an I/O error like any other.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// IsTransient reports IsResource or IsNoSpace: an error after which an operation that
// changes nothing until it succeeds (opening a file, writing a new file that replaces an old
// one only by a rename, mapping an index) may simply be tried again later.
func IsTransient(err error) bool { return IsResource(err) || IsNoSpace(err) }
