//go:build !linux

package broker

import (
	"errors"
	"os"
)

func unmapSharedRegion([]byte) error { return nil }

func mapSharedRegion(*os.File, int64) (*sharedRegion, error) {
	return nil, errors.New("shared memory needs Linux memfds")
}
