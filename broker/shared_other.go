//go:build !linux

package broker

import (
	"errors"
	"os"
)

func checkSharedRegion(*os.File, int64) error {
	return errors.New("shared memory needs Linux memfds")
}
