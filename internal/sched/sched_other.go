//go:build !linux

package sched

import (
	"fmt"
	"time"
)

// SetSlice returns ErrUnsupported: custom slices are Linux's.
func SetSlice(d time.Duration) (int, error) {
	if d != 0 && (d < MinSlice || d > MaxSlice) {
		return 0, fmt.Errorf("%w: %v", ErrRange, d)
	}
	return 0, ErrUnsupported
}

// Slice returns ErrUnsupported.
func Slice() (time.Duration, error) { return 0, ErrUnsupported }
