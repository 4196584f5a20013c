package broker

import (
	"os"

	"golang.org/x/sys/unix"
)

// checkSharedRegion reports whether f is a memfd of size bytes sealed against shrinking. The
// broker reads spans with pread, so nothing the client does to the file can fault the broker
// (a hole reads as zeros, a short read is an error); the seal keeps every span the broker
// accepted against the size readable, and the memfd check keeps a connection's reads off
// disks and devices.
func checkSharedRegion(f *os.File, size int64) error {
	fd := int(f.Fd())
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return errNotSealedMemfd
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size {
		return errSharedMemSize
	}
	return nil
}
