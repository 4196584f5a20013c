package broker

import (
	"os"

	"golang.org/x/sys/unix"
)

// sharedRegion is a client's memfd, mapped read-only. It is a server.Conn value: the connection
// unmaps it after serving its last request, and only its handlers read it.
type sharedRegion struct {
	mem []byte
}

func (r *sharedRegion) Close() error { return unix.Munmap(r.mem) }

// mapSharedRegion maps f if it is a memfd of size bytes sealed against shrinking. The seal is
// what makes reading the mapping safe: a file that shrank under it would fault (SIGBUS) on the
// pages past its new end, and the client could shrink an unsealed memfd at any time.
func mapSharedRegion(f *os.File, size int64) (*sharedRegion, error) {
	fd := int(f.Fd())
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
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
