package client

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// newSharedMemfd creates a memfd of size bytes sealed against shrinking and growing (the broker
// refuses one it could fault on) and maps it.
func newSharedMemfd(size int) (*os.File, []byte, error) {
	if size <= 0 {
		return nil, nil, fmt.Errorf("region of %d bytes", size)
	}
	fd, err := unix.MemfdCreate("sluice-produce", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("memfd_create: %w", err)
	}
	file := os.NewFile(uintptr(fd), "sluice-produce")
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("size memfd: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("seal memfd: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("map memfd: %w", err)
	}
	return file, mem, nil
}

func unmapSharedMemfd(mem []byte) { _ = unix.Munmap(mem) }

// unixRights is the ancillary data that passes f over a unix socket.
func unixRights(f *os.File) []byte { return unix.UnixRights(int(f.Fd())) }
