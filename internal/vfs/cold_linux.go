package vfs

import "golang.org/x/sys/unix"

// ReadCold first reads with preadv2(RWF_NOWAIT), which returns only what the page cache holds
// (a short count, or EAGAIN for none) without going to the disk. The rest is read with pread,
// and then posix_fadvise(POSIX_FADV_DONTNEED) drops that rest from the cache: the pages were
// cold before this read, and the scrubber will not read them again for a long time. A kernel
// or file system without RWF_NOWAIT (EOPNOTSUPP, EINVAL, ENOSYS) is read with pread and
// nothing is dropped: without knowing what was cached, dropping could evict hot pages.
func (f osFile) ReadCold(p []byte, off int64) (int, error) {
	fd := int(f.File.Fd())
	n := 0
	for n < len(p) {
		m, err := unix.Preadv2(fd, [][]byte{p[n:]}, off+int64(n), unix.RWF_NOWAIT)
		if err == unix.EINTR {
			continue
		}
		if err != nil || m == 0 {
			if err != nil && err != unix.EAGAIN {
				// No RWF_NOWAIT here: a plain read, nothing dropped.
				m, rerr := f.File.ReadAt(p[n:], off+int64(n))
				return n + m, rerr
			}
			break // the rest is not cached (or the file ends: ReadAt says which)
		}
		n += m
	}
	if n == len(p) {
		return n, nil
	}
	m, err := f.File.ReadAt(p[n:], off+int64(n))
	if m > 0 {
		// Advice only: an error changes nothing the reader sees.
		_ = unix.Fadvise(fd, off+int64(n), int64(m), unix.FADV_DONTNEED)
	}
	return n + m, err
}
