package vfs

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sync uses fdatasync: the data and the size are what recovery needs, not the timestamps.
func (f osFile) Sync() error {
	for {
		err := unix.Fdatasync(int(f.File.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// DataEnd is lseek(SEEK_HOLE) from 0: the file's size where the file system does not track
// holes, and 0 for an empty file (ENXIO: offset 0 is at its end).
func (f osFile) DataEnd() (int64, error) {
	for {
		off, err := unix.Seek(int(f.File.Fd()), 0, unix.SEEK_HOLE)
		if err != unix.EINTR {
			if err == unix.ENXIO {
				return 0, nil
			}
			if err != nil {
				return 0, &os.PathError{Op: "lseek SEEK_HOLE", Path: f.Name(), Err: err}
			}
			return off, nil
		}
	}
}

// WriteBack starts writeback of bytes [off, off+n) with sync_file_range(SYNC_FILE_RANGE_WRITE):
// the kernel queues the dirty pages for the disk and returns without waiting for them.
func (f osFile) WriteBack(off, n int64) error {
	for {
		err := unix.SyncFileRange(int(f.File.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// Preallocate reserves disk blocks for bytes [off, off+n) without changing the file's size
// (fallocate with FALLOC_FL_KEEP_SIZE). A file system that cannot is not an error: this is
// advice.
func (f osFile) Preallocate(off, n int64) error {
	for {
		err := unix.Fallocate(int(f.File.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
		switch err {
		case unix.EINTR:
			continue
		case nil, unix.EOPNOTSUPP, unix.ENOSYS:
			return nil
		}
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
}

// Populate faults in the pages of [off, off+n) writable (madvise MADV_POPULATE_WRITE, Linux
// 5.14 and later) without changing their contents, so concurrent writers to the same pages are
// unaffected. A kernel without it (EINVAL, ENOSYS) is not an error: this is advice. EFAULT is:
// a store to those pages would raise SIGBUS (the file system has no block for a page, an I/O
// error), and the caller can still stop before that happens. The error says which (populateFault):
// on a full disk it wraps ENOSPC, not the bare "bad address" the kernel gives.
func (m osMapping) Populate(off, n int) error {
	if off < 0 || n < 0 || off+n > len(m.m) {
		return fmt.Errorf("vfs: populate [%d, %d) of a %d-byte mapping", off, off+n, len(m.m))
	}
	if n == 0 {
		return nil
	}
	page := os.Getpagesize()
	start := off &^ (page - 1)
	for {
		err := unix.Madvise(m.m[start:off+n], unix.MADV_POPULATE_WRITE)
		switch err {
		case unix.EINTR:
			continue
		case nil, unix.EINVAL, unix.ENOSYS:
			return nil
		case unix.EFAULT:
			return populateFault(m.name, off, n, err)
		}
		return fmt.Errorf("vfs: populate [%d, %d): %w", off, off+n, err)
	}
}

// populateFault explains an EFAULT from MADV_POPULATE_WRITE: the file system could not back a
// page of the mapping. Its usual cause is a full disk (tmpfs and ext4 both fail the fault of a
// page they have no block for), and then the error wraps ENOSPC, so that callers and operators
// see "no space left on device", not "bad address"; otherwise it names the other causes.
func populateFault(name string, off, n int, err error) error {
	if free, serr := freeBytes(name); serr == nil && free < uint64(os.Getpagesize()) {
		return fmt.Errorf("vfs: populate [%d, %d): no disk space for the pages: %w (%w)", off, off+n, syscall.ENOSPC, err)
	}
	return fmt.Errorf("vfs: populate [%d, %d): the file system could not back the pages (disk full, over quota, an I/O error, or the file is shorter than its mapping): %w",
		off, off+n, err)
}

// freeBytes is the space available to unprivileged users on the file system holding path
// (statfs). A variable: tests fake a full disk.
var freeBytes = func(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
