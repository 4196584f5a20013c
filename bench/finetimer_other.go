//go:build !linux

package bench

import "errors"

// newAlarm: there is no alarm here; the pacer relies on Go's timers alone.
func newAlarm() (alarm, error) { return nil, errors.New("bench: no alarm on this system") }
