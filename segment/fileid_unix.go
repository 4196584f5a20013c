//go:build unix

package segment

import "golang.org/x/sys/unix"

// statID returns the device and inode numbers of the file open as fd.
func statID(fd uintptr) (dev, ino uint64, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Dev), uint64(st.Ino), nil //nolint:unconvert // Dev is int32 on darwin
}
