// Package vfs is the small file-system interface through which segment and index do every file
// operation, so that tests can swap the operating system for an in-memory file system that
// simulates crashes (MemFS) or one that injects errors (ErrorFS).
//
// Three implementations:
//
//   - Default: the operating system, with mmap through edsrzf/mmap-go and fdatasync for Sync.
//     Tuned for Linux (os_linux.go); elsewhere Sync is a full fsync (F_FULLFSYNC on darwin) and
//     the writeback and block-reserve advice does nothing (os_other.go).
//   - MemFS: files in memory that remember what was last synced; Crash returns the file system a
//     machine would find after power loss (unsynced writes and unsynced directory entries gone,
//     optionally a prefix of the unsynced bytes kept with its last page torn).
//   - ErrorFS: wraps another FS and fails chosen operations (EIO, ENOSPC, ...).
//
// Contract shared by all three: a File is safe for concurrent ReadAt and WriteAt on disjoint
// ranges; Truncate must not be called while a Mapping of the file is live; a Mapping's bytes
// alias the file (MAP_SHARED semantics) and reach stable storage on Mapping.Flush. While someone
// writes through a mapping, make it durable with Mapping.Flush of the finished range, not
// File.Sync (MemFS's Sync copies the whole file, which would race with the writer).
package vfs

import (
	"errors"
	"io"
	"os"
)

// File is an open file. Positional reads and writes only: there is no shared file position, so
// concurrent readers never race on one (the reason sendfile is called with an explicit offset).
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes the file's data and size durable (fdatasync; a full fsync where there is none).
	Sync() error
	// Truncate changes the file's size; growing fills with zeros.
	Truncate(size int64) error
	// Size reports the file's current size.
	Size() (int64, error)
	// Map maps the first length bytes of the file read-write and shared. The file must already
	// be at least length bytes long.
	Map(length int) (Mapping, error)
}

// Mapping is a memory mapping of a file.
type Mapping interface {
	// Bytes returns the mapped memory. It is invalid after Unmap.
	Bytes() []byte
	// Flush writes back the dirty pages of bytes [off, off+n) and waits for them (msync
	// MS_SYNC). A range, not the whole mapping, because the owner knows which bytes it finished
	// writing; flushing only those never reads memory that a writer is filling concurrently.
	Flush(off, n int) error
	// Unmap releases the mapping. It does not flush.
	Unmap() error
}

// Fder is implemented by files backed by an operating-system descriptor; the network layer uses
// it to sendfile from a segment. Files of MemFS do not implement it.
type Fder interface {
	Fd() uintptr
}

// FdOf returns the operating-system descriptor behind f, looking through wrappers that have an
// Unwrap() File method; ok is false for files without one (MemFS).
func FdOf(f File) (fd uintptr, ok bool) {
	if d, ok := as[Fder](f); ok {
		return d.Fd(), true
	}
	return 0, false
}

// as returns f, or the first file it wraps (through Unwrap() File methods), that implements T.
func as[T any](f File) (T, bool) {
	for {
		if t, ok := f.(T); ok {
			return t, true
		}
		u, isWrapper := f.(interface{ Unwrap() File })
		if !isWrapper {
			var zero T
			return zero, false
		}
		f = u.Unwrap()
	}
}

// WriteBacker is a File that can start writing a range of its dirty pages to the disk without
// waiting for them (sync_file_range). It makes nothing durable: that is Sync's job.
type WriteBacker interface {
	WriteBack(off, n int64) error
}

// WriteBack asks f to start writeback of bytes [off, off+n), if f can (WriteBacker, through
// wrappers); otherwise it does nothing. A log calls it as it grows so that dirty pages go to
// the disk steadily instead of all at once at the next fsync: a 1 GiB fsync at a segment roll
// saturates the disk and stalls the appends that come meanwhile.
func WriteBack(f File, off, n int64) error {
	if w, ok := as[WriteBacker](f); ok {
		return w.WriteBack(off, n)
	}
	return nil
}

// Preallocater is a File that can reserve disk blocks ahead of its end without changing its
// size (fallocate with FALLOC_FL_KEEP_SIZE).
type Preallocater interface {
	Preallocate(off, n int64) error
}

// Preallocate asks f to reserve blocks for bytes [off, off+n), if f can (Preallocater, through
// wrappers); otherwise it does nothing. On ext4 an appended file whose blocks are reserved
// ahead needs no block allocation when its pages are written back; without it, writeback
// allocates under the inode's lock, reads block bitmaps from the disk now and then, and
// appends wait behind it.
func Preallocate(f File, off, n int64) error {
	if p, ok := as[Preallocater](f); ok {
		return p.Preallocate(off, n)
	}
	return nil
}

// DataEnder is a File that can say where its first hole begins (lseek SEEK_HOLE): the bytes
// from there on, up to the next data, were never written and read as zeros.
type DataEnder interface {
	DataEnd() (int64, error)
}

// DataEnd returns the offset of f's first hole, if f can tell (DataEnder, through wrappers);
// ok is false otherwise (the caller treats the whole file as data). An index opened after an
// unclean stop is preallocated to megabytes of which a few pages hold entries: searching it
// for its last entry through a mapping faults in (and caches) zero pages of the holes, most
// of a restart's memory with 10,000 partitions, where searching below its first hole touches
// only pages that hold data.
func DataEnd(f File) (end int64, ok bool) {
	d, isDataEnder := as[DataEnder](f)
	if !isDataEnder {
		return 0, false
	}
	end, err := d.DataEnd()
	return end, err == nil
}

// Populater is a Mapping that can make a range of its pages present and writable ahead of the
// writes to them (MADV_POPULATE_WRITE), without changing their contents.
type Populater interface {
	Populate(off, n int) error
}

// Populate asks m to fault in the pages of bytes [off, off+n) for writing now, if it can
// (Populater); otherwise it does nothing. A writer through a shared file mapping otherwise takes
// a page fault at the first write to each page; on a virtual machine that shadows page tables
// such a fault costs tens of microseconds and, one time in a hundred, milliseconds
// (BENCHMARKS.md, End-to-end latency), so an appender whose index pages were faulted in ahead by
// another goroutine does not wait for them. It is advice: a system without it (Linux before
// 5.14, other systems) reports no error; an error means that a store to those pages would
// fault fatally (SIGBUS), for the caller to act on first.
func Populate(m Mapping, off, n int) error {
	if p, ok := m.(Populater); ok {
		return p.Populate(off, n)
	}
	return nil
}

// FS is a file system.
type FS interface {
	// Create creates or truncates the named file for reading and writing.
	Create(name string) (File, error)
	// Open opens the named file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens the named file for reading and writing, creating it if needed.
	OpenReadWrite(name string) (File, error)
	Remove(name string) error
	RemoveAll(dir string) error
	// Rename replaces newname with oldname atomically; it is durable after SyncDir.
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists the names in dir, sorted.
	ReadDir(dir string) ([]string, error)
	// SyncDir makes the directory's entries (creates, renames, removes) durable.
	SyncDir(dir string) error
}

// ErrMapped is returned by MemFS when a file is resized while mapped, which on a real system
// would fault (SIGBUS) on the next access to the mapping.
var ErrMapped = errors.New("vfs: file resized while mapped")

// ErrCrashed is returned by every operation on a MemFS (and its files) after Crash.
var ErrCrashed = errors.New("vfs: file system crashed")
