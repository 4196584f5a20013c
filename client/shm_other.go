//go:build !linux

package client

import (
	"errors"
	"os"
)

func newSharedMemfd(int) (*os.File, []byte, error) {
	return nil, nil, errors.New("shared memory needs Linux memfds")
}

func unmapSharedMemfd([]byte) {}

// unixRights is never called without a region, which only Linux has.
func unixRights(*os.File) []byte { return nil }
