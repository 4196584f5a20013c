package broker

import (
	"os"

	"golang.org/x/sys/unix"
)

func unmapSharedRegion(mem []byte) error { return unix.Munmap(mem) }

// mapSharedRegion maps f if it is a memfd on tmpfs of size bytes, sealed against shrinking.
// A mapping can fault (SIGBUS) where the file no longer has pages: past its end, which the
// seal rules out, or in a hole punched in a hugetlb file with no huge page left to fill it,
// which tmpfs rules out (a hole in a tmpfs file reads as a fresh page). copyOut still turns
// any fault into an error rather than a crash.
//
// The broker reads the mapping rather than the file: pread of a memfd ran at 2.5 GB/s on the
// benchmark VM, a quarter of a copy from the mapping (BENCHMARKS.md, Unix socket and shared
// memory).
func mapSharedRegion(f *os.File, size int64) (*sharedRegion, error) {
	fd := int(f.Fd())
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, errNotSealedMemfd
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		return nil, errNotSealedMemfd
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size {
		return nil, errSharedMemSize
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &sharedRegion{mem: mem}, nil
}
