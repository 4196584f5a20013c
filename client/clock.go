package client

import (
	"sync/atomic"
	"time"
)

// recordClock is the wall clock Send stamps records with when they carry no timestamp, read
// for the price of the monotonic clock alone. time.Now reads two clocks (wall and monotonic:
// two vDSO calls, 58-67 ns on this project's VM); here a record's time is a base reading
// plus the monotonic time elapsed since it (48 ns). NTP's slewing moves both clocks alike; a
// step of the wall clock (settimeofday) shows once the base is read again, at most
// recordClockRefresh later. Safe for concurrent use; the zero value reads the clock afresh on
// first use.
type recordClock struct {
	base atomic.Pointer[time.Time]
}

// recordClockRefresh bounds how long a step of the wall clock goes unnoticed.
const recordClockRefresh = time.Second

// now returns the current wall time, with a monotonic reading.
func (c *recordClock) now() time.Time {
	if b := c.base.Load(); b != nil {
		if el := time.Since(*b); el >= 0 && el < recordClockRefresh {
			return b.Add(el)
		}
	}
	t := time.Now()
	c.base.Store(&t)
	return t
}
