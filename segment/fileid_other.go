//go:build !unix

package segment

import "errors"

func statID(uintptr) (dev, ino uint64, err error) {
	return 0, 0, errors.New("segment: no inode numbers on this system")
}
