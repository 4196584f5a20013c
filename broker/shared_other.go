//go:build !linux

package broker

import (
	"errors"
	"os"
	"sync"
)

// sharedRegion is a client's shared memory; only Linux has memfds to attach.
type sharedRegion struct {
	mu  sync.RWMutex
	mem []byte
}

func (r *sharedRegion) Close() error { return nil }

func mapSharedRegion(*os.File, int64) (*sharedRegion, error) {
	return nil, errors.New("shared memory needs Linux memfds")
}
