package broker

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// allocate gives f size bytes of disk blocks with fallocate (no data written), or zeros on a
// filesystem without it.
func allocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return writeZeros(f, size)
	}
	return err
}
